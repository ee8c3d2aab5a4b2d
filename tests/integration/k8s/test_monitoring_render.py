"""The gpu_monitoring role planned and rendered without a cluster: objects
against the Kubernetes schemas and the upstream CRDs, chart values against the
upstream values files, every metric against the exporter's counters, the
dashboards as Grafana JSON, and the HPAs against the adapter's metrics."""
import json
import re
from collections import namedtuple
from pathlib import Path

import pytest
import yaml

from k8s_support import DEFAULT_K8S_VERSION, Rendered, check_helm_values, validate_builtin, validate_objects
from monitoring_support import counters, plan_monitoring, promql_metrics, reference_fields

pytestmark = pytest.mark.slow

# DCGM fields the collection exports that neither reference list names, with
# their field id in NVIDIA/DCGM dcgmlib/dcgm_fields.h.
DCGM_FIELDS_NOT_IN_THE_LISTS = {"DCGM_FI_DEV_ROW_REMAP_PENDING": 396}
# Metrics the alerts read besides DCGM's and the recording rules: Prometheus's
# own scrape health and kube-state-metrics' node capacity.
OTHER_METRICS = {"up", "kube_node_status_capacity"}
TENANTS = [{"name": "team-a"}, {"name": "team-b", "namespace": "b-inference"}]
CONFIGS = {
    # Nothing optional: no PrometheusRule without the CRD (auto), no dashboards, no counters.
    "minimal": {"gpu_monitoring_enabled": True, "gpu_monitoring_dashboards": False, "gpu_monitoring_counters_enabled": False},
    "rules-and-dashboards": {"gpu_monitoring_enabled": True, "gpu_monitoring_rules": "true"},
    # Every option on and off its default.
    "everything": {
        # The monitoring stack is the kube_prometheus_stack role (test_addons.py): on, it brings the rules' CRD.
        "gpu_monitoring_enabled": True, "kube_prometheus_stack_enabled": True, "prometheus_adapter_enabled": True,
        "gpu_monitoring_selector_labels": {"prometheus": "platform"},
        "gpu_monitoring_node_label": "node_name", "gpu_monitoring_namespace_label": "namespace",
        "gpu_monitoring_pod_label": "pod", "gpu_monitoring_gpu_temp_threshold": 80,
        "gpu_monitoring_alerts_disabled": ["GPUAllocatedIdle"],
        "gpu_monitoring_extra_counters": [{"name": "DCGM_FI_PROF_SM_ACTIVE", "type": "gauge",
                                           "help": "The ratio of cycles an SM has at least 1 warp assigned."}],
        "gpu_tenants_list": TENANTS,
        "gpu_monitoring_autoscalers": [
            {"tenant": "team-a", "deployment": "llm-server", "max_replicas": 8, "target": 70},
            {"tenant": "team-b", "deployment": "embedder", "min_replicas": 2, "max_replicas": 4,
             "metric": "gpu_memory_used_bytes", "target": "20Gi"},
            {"namespace": "shared", "deployment": "ocr", "max_replicas": 3, "target": 50}]},
}

Planned = namedtuple("Planned", "name extra data")


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def planned(request, installed_collection, tmp_path_factory):
    extra = CONFIGS[request.param]
    rc, output, data = plan_monitoring(tmp_path_factory.mktemp(request.param), extra, installed_collection)
    assert rc == 0, output[-6000:]
    return Planned(request.param, extra, data)


def _of(data, kind):
    return [o for o in data["objects"] if o["kind"] == kind]


def _counters(data):
    (cm,) = data["monitoring"]["objects"]
    return counters(cm["data"]["dcgm-metrics.csv"])


def _operator_values(data):
    return yaml.safe_load((data["render"] / "10-gpu_operator" / "helm" / "gpu-operator" / "values.yaml").read_text())


def _rules(data):
    (rule,) = _of(data, "PrometheusRule")
    return [r for g in rule["spec"]["groups"] for r in g["rules"]]


def _dashboards(data):
    return {name: json.loads(text) for cm in _of(data, "ConfigMap") for name, text in cm["data"].items()}


def _releases(data):
    """The prometheus_adapter layer's rendered releases by chart: {"release": release.yaml, "values": values.yaml}."""
    layer = Rendered(data["render"], "").layers.get("prometheus_adapter", {"releases": {}})
    return {entry["release"]["chart"]: entry for entry in layer["releases"].values()}


def test_objects_are_valid_kubernetes_or_match_their_upstream_crd(planned, shared_reference):
    objects = planned.data["objects"] + planned.data["monitoring"]["objects"]
    counts = validate_objects(objects, shared_reference, DEFAULT_K8S_VERSION)
    assert counts["builtin"] + counts["custom"] == len(objects)
    kinds = sorted(o["kind"] for o in planned.data["objects"])
    if planned.name == "minimal":
        assert kinds == ["Namespace"] and planned.data["monitoring"]["objects"] == []
    else:
        assert kinds.count("PrometheusRule") == 1 and kinds.count("ConfigMap") == 4


def _key(obj):
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def test_the_render_writes_what_the_plan_built(planned):
    render = planned.data["render"]
    manifests = [d for d in yaml.safe_load_all((render / "85-gpu_monitoring" / "manifests.yaml").read_text()) if d]
    assert sorted(map(_key, manifests)) == sorted(map(_key, planned.data["objects"]))
    operator = [d for d in yaml.safe_load_all((render / "10-gpu_operator" / "manifests.yaml").read_text()) if d]
    configmaps = [o for o in operator if o["kind"] == "ConfigMap"]
    # k8s_apply adds the layer's ApplySet membership label; the rest is what the plan built.
    for cm in configmaps:
        labels = cm["metadata"].get("labels", {})
        assert labels.pop("applyset.kubernetes.io/part-of", "").startswith("applyset-"), cm["metadata"]
        if not labels:
            cm["metadata"].pop("labels", None)
    assert configmaps == planned.data["monitoring"]["objects"]
    # The layer has no release of its own: prometheus-adapter is the prometheus_adapter layer's.
    assert not (render / "85-gpu_monitoring" / "helm").exists()
    adapter = sorted(p.name for p in (render / "87-prometheus_adapter" / "helm").glob("*"))
    assert adapter == (["prometheus-adapter"] if planned.extra.get("prometheus_adapter_enabled") else [])


def test_the_exporter_reads_the_counters_configmap(planned, shared_reference):
    data = planned.data
    dcgm = _operator_values(data)["dcgmExporter"]
    # dcgmExporter.config is documented in a comment of the chart's values.yaml; the ClusterPolicy CRD has it.
    assert check_helm_values(_operator_values(data), shared_reference / "gpu-operator" / "chart" / "values.yaml",
                             free_form=["dcgmExporter.config"]) == []
    crd = yaml.safe_load((shared_reference / "gpu-operator" / "crds" / "nvidia.com_clusterpolicies.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert "name" in spec["dcgmExporter"]["properties"]["config"]["properties"]
    if planned.name == "minimal":
        assert "config" not in dcgm
        return
    (cm,) = data["monitoring"]["objects"]
    assert dcgm["config"] == {"name": cm["metadata"]["name"]}
    assert cm["metadata"]["namespace"] == "gpu-operator" and list(cm["data"]) == ["dcgm-metrics.csv"]
    selector = planned.extra.get("gpu_monitoring_selector_labels", {"release": "kube-prometheus-stack"})
    assert dcgm["serviceMonitor"]["additionalLabels"] == selector


def test_counters_are_the_defaults_plus_what_is_used_and_all_exist(planned, shared_reference):
    if planned.name == "minimal":
        pytest.skip("no counters in this configuration")
    data = planned.data
    ours = _counters(data)
    ref = shared_reference / "dcgm-exporter"
    defaults = counters((ref / "default-counters.csv").read_text())
    assert set(defaults) <= set(ours), "default counters dropped: %s" % sorted(set(defaults) - set(ours))
    known = reference_fields(ref / "default-counters.csv") | reference_fields(ref / "dcp-metrics-included.csv") \
        | set(DCGM_FIELDS_NOT_IN_THE_LISTS)
    assert set(ours) - known == set(), "counters the exporter does not know"
    assert set(ours.values()) <= {"gauge", "counter", "label"}
    for extra in planned.extra.get("gpu_monitoring_extra_counters", []):
        assert ours[extra["name"]] == extra["type"]


def _used_metrics(data):
    """{where: metric names} of every rule, dashboard query and adapter rule."""
    used = {}
    if _of(data, "PrometheusRule"):
        for i, rule in enumerate(_rules(data)):
            used["rule %d %s" % (i, rule.get("alert") or rule["record"])] = promql_metrics(rule["expr"])
    for name, board in _dashboards(data).items():
        for panel in board["panels"]:
            for target in panel["targets"]:
                used["%s panel %s" % (name, panel["title"])] = promql_metrics(target["expr"])
        for var in board["templating"]["list"]:
            if var["type"] == "query":
                used["%s variable %s" % (name, var["name"])] = promql_metrics(var["definition"])
    adapter = _releases(data).get("prometheus-adapter")
    for rule in (adapter["values"]["rules"]["custom"] if adapter else []):
        used["adapter %s" % rule["seriesQuery"]] = promql_metrics(rule["seriesQuery"])
    return used


def test_every_metric_named_anywhere_is_exported_or_recorded(planned):
    data = planned.data
    if planned.name == "minimal":
        pytest.skip("nothing rendered that names a metric")
    exported = set(_counters(data))
    recorded = {r["record"] for r in _rules(data) if "record" in r} if _of(data, "PrometheusRule") else set()
    used = _used_metrics(data)
    assert len(used) > 40
    for where, names in used.items():
        assert names, "no metric found in %s" % where
        dcgm = {n for n in names if n.startswith("DCGM_")}
        assert dcgm <= exported, "%s uses %s, not in the counters" % (where, sorted(dcgm - exported))
        rest = names - dcgm
        allowed = recorded | (OTHER_METRICS if where.startswith("rule ") else set())
        assert rest <= allowed, "%s uses %s, neither exported nor recorded" % (where, sorted(rest - allowed))


def test_the_metric_reader_finds_names_and_only_names():
    # The check above is only as good as this parser.
    assert promql_metrics('max by (Hostname, gpu) (max_over_time(DCGM_FI_DEV_GPU_TEMP{gpu=~"$gpu"}[1h])) unless on (UUID) '
                          'rate(up{job="x"}[5m]) / 1e9 > 0.2') == {"DCGM_FI_DEV_GPU_TEMP", "up"}
    assert promql_metrics('label_values(DCGM_FI_DEV_GPU_TEMP{Hostname=~"$node"}, gpu)') == {"DCGM_FI_DEV_GPU_TEMP"}
    assert promql_metrics("namespace:dcgm_gpus_allocated:count * pod:x:avg") == {"namespace:dcgm_gpus_allocated:count", "pod:x:avg"}
    assert promql_metrics('label_replace(m, "node", "$1", "Hostname", "(.+)") and bool') == {"m"}


def test_alert_set_thresholds_and_labels_follow_the_variables(planned):
    data = planned.data
    if not _of(data, "PrometheusRule"):
        assert planned.name == "minimal"
        return
    (rule,) = _of(data, "PrometheusRule")
    extra = planned.extra
    selector = extra.get("gpu_monitoring_selector_labels", {"release": "kube-prometheus-stack"})
    assert rule["metadata"]["labels"].items() >= selector.items()
    alerts = [r for r in _rules(data) if "alert" in r]
    names = {a["alert"] for a in alerts}
    disabled = set(extra.get("gpu_monitoring_alerts_disabled", []))
    assert len(names) == 12 - len(disabled) and not names & disabled
    runbooks = (Path(__file__).resolve().parents[3] / "docs" / "runbooks" / "gpu-alerts.md").read_text()
    for a in alerts:
        assert "\n## %s\n" % a["alert"].lower() in runbooks, "no runbook section for %s" % a["alert"]
        assert a["labels"]["severity"] in ("critical", "warning", "info")
        assert set(a["annotations"]) == {"summary", "description", "runbook_url"}
        assert a["annotations"]["runbook_url"].endswith("#" + a["alert"].lower())
    (temp,) = [a for a in alerts if a["alert"] == "GPUTemperatureHigh"]
    assert temp["expr"] == "DCGM_FI_DEV_GPU_TEMP > %s" % extra.get("gpu_monitoring_gpu_temp_threshold", 85)
    xids = sorted(int(a["labels"]["xid"]) for a in alerts if a["alert"] == "GPUXidError" and a["labels"]["xid"].isdigit())
    assert xids == [48, 63, 64, 74, 79, 94, 95]
    node = extra.get("gpu_monitoring_node_label", "Hostname")
    (off,) = [a for a in alerts if a["alert"] == "GPUFellOffTheBus"]
    assert "on (%s)" % node in off["expr"] and "{{ $labels.%s }}" % node in off["annotations"]["summary"]
    pod = extra.get("gpu_monitoring_pod_label", "exported_pod")
    (record,) = [r for r in _rules(data) if r.get("record") == "pod:dcgm_gpu_utilization:avg"]
    assert '%s!=""' % pod in record["expr"]


def _overlaps(a, b):
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def test_dashboards_are_grafana_json_for_the_sidecar(planned, shared_reference):
    data = planned.data
    boards = _dashboards(data)
    if planned.name == "minimal":
        assert boards == {}
        return
    assert sorted(boards) == ["gpu-fleet.json", "gpu-mig.json", "gpu-node.json", "gpu-tenant.json"]
    sidecar = yaml.safe_load((shared_reference / "kube-prometheus-stack" / "chart" / "values.yaml").read_text())[
        "grafana"]["sidecar"]["dashboards"]
    for cm in _of(data, "ConfigMap"):
        assert cm["metadata"]["labels"][sidecar["label"]] == sidecar["labelValue"]
    assert len({b["uid"] for b in boards.values()}) == len(boards)
    for name, board in boards.items():
        assert isinstance(board["schemaVersion"], int) and board["schemaVersion"] >= 36, name
        assert board["title"] and board["uid"] and len(board["uid"]) <= 40
        variables = board["templating"]["list"]
        (ds,) = [v for v in variables if v["type"] == "datasource"]
        assert ds["query"] == "prometheus" and ds["name"] == "datasource"
        assert len({v["name"] for v in variables}) == len(variables)
        panels = board["panels"]
        assert panels and len({p["id"] for p in panels}) == len(panels), name
        for p in panels:
            assert p["type"] in ("stat", "timeseries") and p["title"]
            pos = p["gridPos"]
            assert set(pos) == {"x", "y", "w", "h"} and pos["x"] >= 0 and pos["x"] + pos["w"] <= 24 and pos["h"] > 0
            assert p["datasource"] == {"type": "prometheus", "uid": "${%s}" % ds["name"]}
            assert p["targets"] and all(t["expr"] and t["refId"] for t in p["targets"])
            # Variables a query uses are defined.
            for t in p["targets"]:
                for var in re.findall(r"\$(\w+)", t["expr"]):
                    assert var in {v["name"] for v in variables}, (name, p["title"], var)
        for i, a in enumerate(panels):
            for b in panels[i + 1:]:
                assert not _overlaps(a["gridPos"], b["gridPos"]), (name, a["title"], b["title"])


def test_chart_values_exist_upstream_and_versions_are_the_reference(planned, shared_reference):
    releases = _releases(planned.data)
    if planned.name != "everything":
        assert releases == {}
        return
    assert sorted(releases) == ["prometheus-adapter"]
    for chart in ("prometheus-adapter",):
        release = releases[chart]
        assert check_helm_values(release["values"], shared_reference / chart / "chart" / "values.yaml") == [], chart
        pinned = yaml.safe_load((shared_reference / chart / "chart" / "Chart.yaml").read_text())["version"]
        assert release["release"]["version"] == str(pinned) and release["release"]["repoURL"]
        assert "chartPath" not in release["release"]
    adapter = releases["prometheus-adapter"]["values"]
    assert adapter["rules"]["default"] is False


def _adapter_metrics(rules, recorded):
    """Names the adapter exposes: each rule's series renamed by name.matches/as (Go's ${1} expansion)."""
    out = set()
    for rule in rules:
        (series,) = promql_metrics(rule["seriesQuery"])
        assert series in recorded, series
        assert set(rule["resources"]["overrides"]) == {"namespace", "pod"}
        match = re.match(rule["name"]["matches"], series)
        assert match, (series, rule["name"])
        out.add(re.sub(r"\$\{(\d+)\}", lambda m: match.group(int(m.group(1))), rule["name"]["as"]))
    return out


def test_hpas_scale_on_metrics_the_adapter_exposes(planned):
    data = planned.data
    hpas = _of(data, "HorizontalPodAutoscaler")
    if planned.name != "everything":
        assert hpas == []
        return
    recorded = {r["record"]: r for r in _rules(data) if "record" in r}
    exposed = _adapter_metrics(_releases(data)["prometheus-adapter"]["values"]["rules"]["custom"], recorded)
    assert exposed == {"gpu_utilization", "gpu_memory_used_bytes"}
    for name in ("pod:dcgm_gpu_utilization:avg", "pod:dcgm_gpu_memory_used_bytes:sum"):
        assert "by (namespace, pod)" in recorded[name]["expr"]
    got = {}
    for hpa in hpas:
        assert validate_builtin(hpa)
        spec = hpa["spec"]
        (metric,) = spec["metrics"]
        assert metric["type"] == "Pods" and metric["pods"]["metric"]["name"] in exposed
        got[(hpa["metadata"]["namespace"], spec["scaleTargetRef"]["name"])] = (
            spec["scaleTargetRef"]["kind"], spec["minReplicas"], spec["maxReplicas"], metric["pods"]["metric"]["name"],
            metric["pods"]["target"])
    assert got == {
        ("team-a", "llm-server"): ("Deployment", 1, 8, "gpu_utilization", {"type": "AverageValue", "averageValue": "70"}),
        ("b-inference", "embedder"): ("Deployment", 2, 4, "gpu_memory_used_bytes",
                                      {"type": "AverageValue", "averageValue": "20Gi"}),
        ("shared", "ocr"): ("Deployment", 1, 3, "gpu_utilization", {"type": "AverageValue", "averageValue": "50"})}


def test_bad_values_fail_the_plan_naming_each_and_render_nothing(installed_collection, tmp_path):
    bad = {
        "gpu_monitoring_enabled": True, "gpu_monitoring_rules": "true",
        # PromQL injection through a label name and the exporter job.
        "gpu_monitoring_node_label": 'Hostname"} or vector(1) #',
        "gpu_monitoring_exporter_job": 'x"} or vector(1)',
        "gpu_monitoring_idle_for": "an hour",
        "gpu_monitoring_throttle_ratio": 2,
        "gpu_monitoring_alerts_disabled": ["GPUOnFire"],
        "gpu_monitoring_runbook_url": 'https://runbooks.example/"quoted" path',
        "gpu_monitoring_extra_counters": [{"name": "DCGM_FI_DEV_FAN_SPEED", "type": "gauge", "help": "fan, speed"}],
        "gpu_monitoring_dashboard_labels": {"grafana_dashboard": 1},
        "gpu_tenants_list": TENANTS,
        "gpu_monitoring_autoscalers": [{"tenant": "team-z", "deployment": "web", "max_replicas": 2, "target": 50},
                                       {"tenant": "team-a", "deployment": "web", "min_replicas": 3, "max_replicas": 2,
                                        "target": "-1"}],
    }
    rc, output, data = plan_monitoring(tmp_path, bad, installed_collection)
    assert rc != 0 and data is None
    # The callback wraps and quotes the message; compare it flat.
    flat = re.sub(r"\s+", " ", output).replace("''", "'")
    for expected in ["gpu_monitoring_node_label 'Hostname\"} or vector(1) #' is not a Prometheus label name",
                     "gpu_monitoring_exporter_job", "gpu_monitoring_idle_for 'an hour' is not a Prometheus duration",
                     "gpu_monitoring_throttle_ratio must be a number above 0 and at most 1, got 2",
                     "gpu_monitoring_alerts_disabled names unknown alerts GPUOnFire",
                     "gpu_monitoring_runbook_url", "gpu_monitoring_extra_counters entry",
                     "gpu_monitoring_dashboard_labels: 'grafana_dashboard': 1 is not a valid Kubernetes label",
                     "autoscaler for team-z/web: set namespace, or tenant to a name in gpu_tenants_list",
                     "team-a/web: min_replicas (default 1) and max_replicas must be integers",
                     "team-a/web: target must be a positive quantity",
                     "gpu_monitoring_autoscalers need the custom metrics of the prometheus-adapter release"]:
        assert expected in flat, expected
    assert not (tmp_path / "rendered").exists()
