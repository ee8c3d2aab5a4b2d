"""The gpu_monitoring alerts and recording rules, proven with a real Prometheus:
``promtool check rules`` on the rendered PrometheusRule and ``promtool test rules``
feeding synthetic DCGM series. Every alert has cases that fire (when, with
which labels and annotations) and cases that must not fire."""
import subprocess

import pytest
import yaml

from monitoring_support import find_promtool, plan_monitoring

pytestmark = pytest.mark.slow

H100 = "NVIDIA H100 80GB HBM3"
RUNBOOK = "https://github.com/gpuops/platform/blob/main/docs/runbooks/gpu-alerts.md#"
# The exporter's labels as the GPU Operator's ServiceMonitor stores them: the
# target's namespace and pod, the exporter's pod attribution as exported_*.
TARGET = {"job": "nvidia-dcgm-exporter", "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x7k2p"}


def gpu(i, node="node-a", **extra):
    return dict(TARGET, Hostname=node, gpu=str(i), UUID="GPU-%s-%d" % (node, i), modelName=H100,
                instance="%s:9400" % node, **extra)


def where(labels):
    return "GPU %s (%s, %s) on node %s" % (labels["gpu"], labels["modelName"], labels["UUID"], labels["Hostname"])


def series(metric, labels, values):
    return {"series": "%s{%s}" % (metric, ",".join('%s="%s"' % kv for kv in sorted(labels.items()))), "values": values}


def alert(name, labels, summary, description, **extra_labels):
    out = dict(labels)
    out.update(extra_labels)
    return {"exp_labels": out, "exp_annotations": {"summary": summary, "description": description,
                                                   "runbook_url": RUNBOOK + name.lower()}}


def check(time, name, *alerts):
    return {"eval_time": time, "alertname": name, "exp_alerts": list(alerts)}


def _cases():
    """(input series, alert tests, expression tests) of one promtool unit test each."""
    g0, g1, g2, g3 = gpu(0), gpu(1), gpu(2), gpu(3)
    cases = {}
    cases["xid"] = ([series("DCGM_FI_DEV_XID_ERRORS", g0, "79x10"), series("DCGM_FI_DEV_XID_ERRORS", g1, "0x10"),
                     series("DCGM_FI_DEV_XID_ERRORS", g2, "13x10"), series("DCGM_FI_DEV_XID_ERRORS", g3, "63x10")],
                    [check("2m", "GPUXidError",
                           alert("GPUXidError", g0, "XID 79 (GPU has fallen off the bus) on " + where(g0),
                                 "The last XID error of the GPU is 79: GPU has fallen off the bus. "
                                 "Drain the node and follow the runbook for XID 79.", severity="critical", xid="79"),
                           alert("GPUXidError", g2, "XID 13 on " + where(g2),
                                 "The last XID error of the GPU is 13. Look it up in NVIDIA's XID catalogue and the runbook.",
                                 severity="warning", xid="13"),
                           alert("GPUXidError", g3, "XID 63 (ECC page retirement or row remap recorded) on " + where(g3),
                                 "The last XID error of the GPU is 63: ECC page retirement or row remap recorded. "
                                 "Drain the node and follow the runbook for XID 63.", severity="warning", xid="63"))], [])
    ecc = ("GPUUncorrectableECCError", "Uncorrectable (double-bit) ECC errors on " + where(g0),
           "The volatile double-bit ECC counter of the GPU rose in the last 10 minutes. Drain the node and reset "
           "the GPU; the failing row is remapped at reset.")
    # gpu0 gets one DBE at 3m; gpu2 had errors before the window and no new one.
    cases["ecc"] = ([series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", g0, "0 0 0 1x20"),
                     series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", g1, "0x23"),
                     series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", g2, "5x23")],
                    [check("2m", ecc[0]), check("5m", ecc[0], alert(ecc[0], g0, ecc[1], ecc[2], severity="critical")),
                     check("15m", ecc[0])], [])
    cases["row-remap"] = ([series("DCGM_FI_DEV_ROW_REMAP_FAILURE", g0, "0 0 1x10"),
                           series("DCGM_FI_DEV_ROW_REMAP_FAILURE", g1, "0x12"),
                           series("DCGM_FI_DEV_ROW_REMAP_PENDING", g0, "0 1x15"),
                           series("DCGM_FI_DEV_ROW_REMAP_PENDING", g1, "0x16")],
                          [check("1m", "GPURowRemapFailure"),
                           check("3m", "GPURowRemapFailure", alert(
                               "GPURowRemapFailure", g0, "Row remapping failed on " + where(g0),
                               "The GPU has no spare memory rows left to remap a failing row. Take the GPU out of service "
                               "and open an RMA.", severity="critical")),
                           check("4m", "GPURowRemapPending"),
                           check("7m", "GPURowRemapPending", alert(
                               "GPURowRemapPending", g0, "Row remap pending on " + where(g0),
                               "A memory row remap takes effect only after a GPU reset. Drain the node and reset the GPU.",
                               severity="warning"))], [])
    cases["temperature"] = ([series("DCGM_FI_DEV_GPU_TEMP", g0, "80 90x15"), series("DCGM_FI_DEV_GPU_TEMP", g1, "85x16"),
                             series("DCGM_FI_DEV_GPU_TEMP", g2, "90 90 90 70 90x12"),
                             series("DCGM_FI_DEV_MEMORY_TEMP", g0, "100x16"), series("DCGM_FI_DEV_MEMORY_TEMP", g1, "95x16")],
                            [check("4m", "GPUTemperatureHigh"),
                             check("7m", "GPUTemperatureHigh", alert(
                                 "GPUTemperatureHigh", g0, "GPU temperature 90 C on " + where(g0),
                                 "GPU temperature is over 85 C for 5m. Check cooling and airflow of the node.", severity="warning")),
                             check("4m", "GPUMemoryTemperatureHigh"),
                             check("6m", "GPUMemoryTemperatureHigh", alert(
                                 "GPUMemoryTemperatureHigh", g0, "GPU memory temperature 100 C on " + where(g0),
                                 "GPU memory (HBM) temperature is over 95 C for 5m. Check cooling and airflow of the node.",
                                 severity="warning"))], [])
    # Violation counters in ns: gpu0 throttled half of the time, gpu1 a tenth (under 0.2).
    throttle = []
    for metric, name, cause, advice in [
            ("DCGM_FI_DEV_POWER_VIOLATION", "GPUPowerThrottling", "its power limit", "Check the power limit and the PSUs."),
            ("DCGM_FI_DEV_THERMAL_VIOLATION", "GPUThermalThrottling", "temperature", "Check cooling and airflow of the node.")]:
        kind = "Power" if "POWER" in metric else "Thermal"
        throttle += [series(metric, g0, "0+30000000000x30"), series(metric, g1, "0+6000000000x30")]
        throttle_checks = [check("8m", name), check("14m", name, alert(
            name, g0, "%s throttling on %s" % (kind, where(g0)),
            "The GPU is held below its clocks by %s 50%% of the time. %s" % (cause, advice), severity="warning"))]
        cases.setdefault("throttling", (throttle, [], []))[1].extend(throttle_checks)
    # node-a loses gpu1 at 5m while gpu0 reports on; node-b's exporter stops
    # altogether (that is GPUNodeMetricsAbsent or DCGMExporterDown, not this).
    b0, b1 = gpu(0, "node-b"), gpu(1, "node-b")
    lost = {k: g1[k] for k in ("Hostname", "gpu", "UUID", "modelName")}
    cases["off-the-bus"] = ([series("DCGM_FI_DEV_GPU_TEMP", g0, "50x20"), series("DCGM_FI_DEV_GPU_TEMP", g1, "50x5"),
                             series("DCGM_FI_DEV_GPU_TEMP", b0, "50x5"), series("DCGM_FI_DEV_GPU_TEMP", b1, "50x5")],
                            [check("8m", "GPUFellOffTheBus"),
                             check("12m", "GPUFellOffTheBus", alert(
                                 "GPUFellOffTheBus", lost, where(g1) + " stopped reporting metrics",
                                 "The DCGM exporter of the node still reports its other GPUs but not this one: the GPU is "
                                 "lost to the driver (XID 79). Drain the node and reboot it.", severity="critical"))], [])
    cap = {"resource": "nvidia_com_gpu", "unit": "integer", "job": "kube-state-metrics"}
    cases["absent"] = ([series("kube_node_status_capacity", dict(cap, node="node-a"), "8x30"),
                        series("kube_node_status_capacity", dict(cap, node="node-c"), "8x30"),
                        series("kube_node_status_capacity", dict(cap, node="node-d"), "0x30"),
                        series("kube_node_status_capacity", dict(cap, node="node-e", resource="nvidia_com_mig_1g_10gb"), "7x30"),
                        series("DCGM_FI_DEV_GPU_TEMP", g0, "50x30"),
                        series("DCGM_FI_DEV_GPU_TEMP", gpu(0, "node-e"), "50x30")],
                       [check("9m", "GPUNodeMetricsAbsent"),
                        check("11m", "GPUNodeMetricsAbsent", alert(
                            "GPUNodeMetricsAbsent", {"node": "node-c"}, "No GPU metrics from node node-c, which has GPUs",
                            "Kubernetes counts GPUs on the node but no DCGM metrics arrive for it for 10m: the exporter is "
                            "not running there or every GPU fell off the bus.", severity="critical"))], [])
    train = gpu(0, exported_namespace="team-a", exported_pod="train-0", exported_container="main")
    infer = gpu(1, exported_namespace="team-a", exported_pod="infer-0", exported_container="main")
    other = gpu(3, exported_namespace="team-b", exported_pod="infer-1", exported_container="main")
    idle_labels = dict(train, namespace="team-a", pod="train-0")
    cases["idle"] = ([series("DCGM_FI_DEV_GPU_UTIL", train, "2x70"), series("DCGM_FI_DEV_GPU_UTIL", infer, "50x70"),
                      series("DCGM_FI_DEV_GPU_UTIL", gpu(2), "0x70"), series("DCGM_FI_DEV_GPU_UTIL", other, "90x70"),
                      series("DCGM_FI_DEV_FB_USED", train, "1024x70"), series("DCGM_FI_DEV_FB_USED", infer, "2048x70"),
                      series("DCGM_FI_DEV_FB_USED", gpu(2), "0x70")],
                     [check("59m", "GPUAllocatedIdle"),
                      check("61m", "GPUAllocatedIdle", alert(
                          "GPUAllocatedIdle", idle_labels, "GPU allocated to team-a/train-0 is idle",
                          "The pod holds %s but has used under 5%% of it for 1h. Free the GPU for others." % where(train),
                          severity="warning"))],
                     # The recording rules carry the pod attribution as namespace and pod.
                     [{"expr": "pod:dcgm_gpu_utilization:avg", "eval_time": "5m", "exp_samples": [
                         {"labels": 'pod:dcgm_gpu_utilization:avg{namespace="team-a",pod="train-0"}', "value": 2},
                         {"labels": 'pod:dcgm_gpu_utilization:avg{namespace="team-a",pod="infer-0"}', "value": 50},
                         {"labels": 'pod:dcgm_gpu_utilization:avg{namespace="team-b",pod="infer-1"}', "value": 90}]},
                      {"expr": "namespace:dcgm_gpus_allocated:count", "eval_time": "5m", "exp_samples": [
                          {"labels": 'namespace:dcgm_gpus_allocated:count{namespace="team-a"}', "value": 2},
                          {"labels": 'namespace:dcgm_gpus_allocated:count{namespace="team-b"}', "value": 1}]},
                      {"expr": "namespace:dcgm_gpu_utilization:avg", "eval_time": "5m", "exp_samples": [
                          {"labels": 'namespace:dcgm_gpu_utilization:avg{namespace="team-a"}', "value": 26},
                          {"labels": 'namespace:dcgm_gpu_utilization:avg{namespace="team-b"}', "value": 90}]},
                      {"expr": "pod:dcgm_gpu_memory_used_bytes:sum", "eval_time": "5m", "exp_samples": [
                          {"labels": 'pod:dcgm_gpu_memory_used_bytes:sum{namespace="team-a",pod="train-0"}', "value": 1073741824},
                          {"labels": 'pod:dcgm_gpu_memory_used_bytes:sum{namespace="team-a",pod="infer-0"}', "value": 2147483648}]},
                      {"expr": "namespace:dcgm_gpu_memory_used_bytes:sum", "eval_time": "5m", "exp_samples": [
                          {"labels": 'namespace:dcgm_gpu_memory_used_bytes:sum{namespace="team-a"}', "value": 3221225472}]},
                      {"expr": "model:dcgm_gpu_utilization:avg", "eval_time": "5m", "exp_samples": [
                          {"labels": 'model:dcgm_gpu_utilization:avg{modelName="%s"}' % H100, "value": 35.5}]},
                      {"expr": "model:dcgm_gpus:count", "eval_time": "5m", "exp_samples": [
                          {"labels": 'model:dcgm_gpus:count{modelName="%s"}' % H100, "value": 4}]}])
    up_a = {"job": "nvidia-dcgm-exporter", "instance": "node-a:9400"}
    cases["exporter-down"] = ([series("up", up_a, "1 1 0x10"),
                               series("up", {"job": "nvidia-dcgm-exporter", "instance": "node-b:9400"}, "1x12"),
                               series("up", {"job": "node-exporter", "instance": "node-a:9100"}, "0x12")],
                              [check("6m", "DCGMExporterDown"),
                               check("8m", "DCGMExporterDown", alert(
                                   "DCGMExporterDown", up_a, "DCGM exporter node-a:9400 is down",
                                   "Prometheus cannot scrape the DCGM exporter for 5m: no GPU metrics, alerts or autoscaling "
                                   "for that node.", severity="critical"))], [])
    return cases


@pytest.fixture(scope="module")
def rules_file(installed_collection, tmp_path_factory):
    """The rule groups of the rendered PrometheusRule, as a Prometheus rule file."""
    workdir = tmp_path_factory.mktemp("promtool")
    rc, output, data = plan_monitoring(workdir, {"gpu_monitoring_enabled": True, "gpu_monitoring_rules": True},
                                       installed_collection)
    assert rc == 0, output[-4000:]
    (rule,) = [o for o in data["objects"] if o["kind"] == "PrometheusRule"]
    path = workdir / "gpu-rules.yml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
    return path


def _promtool(*args):
    proc = subprocess.run([find_promtool()] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=120, check=False)
    return proc.returncode, proc.stdout


def test_promtool_accepts_the_rendered_rules(rules_file):
    rc, output = _promtool("check", "rules", str(rules_file))
    assert rc == 0, output
    assert "SUCCESS" in output


def test_every_alert_has_a_firing_and_a_quiet_case():
    cases = _cases()
    rules = {"GPUXidError", "GPUUncorrectableECCError", "GPURowRemapFailure", "GPURowRemapPending", "GPUTemperatureHigh",
             "GPUMemoryTemperatureHigh", "GPUPowerThrottling", "GPUThermalThrottling", "GPUFellOffTheBus",
             "GPUNodeMetricsAbsent", "GPUAllocatedIdle", "DCGMExporterDown"}
    checks = [c for case in cases.values() for c in case[1]]
    assert {c["alertname"] for c in checks if c["exp_alerts"]} == rules
    # Quiet: an evaluation that expects nothing, or inputs that fire for some GPUs and not for others.
    quiet = {c["alertname"] for c in checks if not c["exp_alerts"]} | {"GPUXidError"}
    assert quiet == rules


def test_promtool_unit_tests_fire_exactly_the_expected_alerts(rules_file):
    tests = [{"name": name, "interval": "1m", "input_series": inputs, "alert_rule_test": alerts,
              "promql_expr_test": exprs} for name, (inputs, alerts, exprs) in sorted(_cases().items())]
    test_file = rules_file.parent / "gpu-rules.test.yml"
    test_file.write_text(yaml.safe_dump({"rule_files": [rules_file.name], "evaluation_interval": "1m", "tests": tests},
                                        sort_keys=False, width=1000))
    rc, output = _promtool("test", "rules", str(test_file))
    assert rc == 0, output[-6000:]
    assert "SUCCESS" in output


def test_promtool_catches_a_wrong_expectation(rules_file):
    # The harness itself can fail: an alert expected where none fires.
    inputs = _cases()["row-remap"][0]
    test_file = rules_file.parent / "wrong.test.yml"
    test_file.write_text(yaml.safe_dump({"rule_files": [rules_file.name], "evaluation_interval": "1m", "tests": [
        {"interval": "1m", "input_series": inputs,
         "alert_rule_test": [check("1m", "GPURowRemapFailure",
                                   alert("GPURowRemapFailure", gpu(0), "x", "y", severity="critical"))]}]}))
    rc, output = _promtool("test", "rules", str(test_file))
    assert rc != 0 and "GPURowRemapFailure" in output, output
