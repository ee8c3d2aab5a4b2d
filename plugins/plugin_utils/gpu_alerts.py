# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The rule groups of gpu_monitoring's PrometheusRule: recording rules, then alerts.

Recording rules come first (the dashboards and prometheus-adapter read them),
then the alerts not in gpu_monitoring_alerts_disabled. Annotations carry
Prometheus templates (``{{ $labels.x }}``, ``{{ $value }}``) as plain text.
The settings are the ones plugin_utils/gpu_monitoring.py checks, so every value
written into PromQL here has passed those checks.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.platform.plugins.plugin_utils.jinja_tests import to_int


def _label(name):
    """A Prometheus template that prints a label of the alert."""
    return "{{ $labels.%s }}" % name


def _by_pod(metric, settings):
    """DCGM series of GPUs allocated to pods, with their pod attribution as namespace and pod."""
    return 'label_replace(label_replace(%s{%s!=""}, "namespace", "$1", "%s", "(.+)"), "pod", "$1", "%s", "(.+)")' % (
        metric, settings["gpu_monitoring_pod_label"], settings["gpu_monitoring_namespace_label"], settings["gpu_monitoring_pod_label"])


def recording_rules(settings):
    """The recording rules per namespace, pod and GPU model."""
    def by_pod(metric):
        return _by_pod(metric, settings)
    return [
        {"record": "namespace:dcgm_gpu_utilization:avg", "expr": "avg by (namespace) (" + by_pod("DCGM_FI_DEV_GPU_UTIL") + ")"},
        {"record": "namespace:dcgm_gpus_allocated:count", "expr": "count by (namespace) (" + by_pod("DCGM_FI_DEV_GPU_UTIL") + ")"},
        {"record": "namespace:dcgm_gpu_memory_used_bytes:sum",
         "expr": "sum by (namespace) (" + by_pod("DCGM_FI_DEV_FB_USED") + ") * 1048576"},
        {"record": "pod:dcgm_gpu_utilization:avg", "expr": "avg by (namespace, pod) (" + by_pod("DCGM_FI_DEV_GPU_UTIL") + ")"},
        {"record": "pod:dcgm_gpu_memory_used_bytes:sum",
         "expr": "sum by (namespace, pod) (" + by_pod("DCGM_FI_DEV_FB_USED") + ") * 1048576"},
        {"record": "model:dcgm_gpu_utilization:avg", "expr": "avg by (modelName) (DCGM_FI_DEV_GPU_UTIL)"},
        {"record": "model:dcgm_gpus:count", "expr": "count by (modelName) (DCGM_FI_DEV_GPU_UTIL)"},
    ]


def _xid_alerts(s, where):
    """One alert per XID class, then one for every other XID."""
    alerts = []
    classes = [to_int(c["xid"]) for c in s["gpu_monitoring_xid_classes"]]
    for c, xid in zip(s["gpu_monitoring_xid_classes"], classes):
        alerts.append({"alert": "GPUXidError", "expr": "DCGM_FI_DEV_XID_ERRORS == %d" % xid, "severity": c["severity"],
                       "labels": {"xid": "%d" % xid}, "summary": "XID %d (%s) on %s" % (xid, c["meaning"], where),
                       "description": "The last XID error of the GPU is %d: %s. Drain the node and follow the runbook for XID %d."
                       % (xid, c["meaning"], xid)})
    alerts.append({
        "alert": "GPUXidError", "severity": s["gpu_monitoring_xid_other_severity"], "labels": {"xid": "{{ $value }}"},
        "expr": " ".join(["DCGM_FI_DEV_XID_ERRORS > 0"] + ["!= %d" % xid for xid in classes]),
        "summary": "XID {{ $value }} on " + where,
        "description": "The last XID error of the GPU is {{ $value }}. Look it up in NVIDIA's XID catalogue and the runbook."})
    return alerts


def _health_alerts(s, where):
    """ECC, row remapping, temperature and throttling alerts."""
    temp_for, throttle_for, ratio = s["gpu_monitoring_temp_for"], s["gpu_monitoring_throttle_for"], s["gpu_monitoring_throttle_ratio"]
    gpu_temp, memory_temp = s["gpu_monitoring_gpu_temp_threshold"], s["gpu_monitoring_memory_temp_threshold"]
    return [
        {"alert": "GPUUncorrectableECCError", "severity": "critical", "expr": "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0",
         "summary": "Uncorrectable (double-bit) ECC errors on " + where,
         "description": "The volatile double-bit ECC counter of the GPU rose in the last 10 minutes. Drain the node and reset the GPU; "
                        "the failing row is remapped at reset."},
        {"alert": "GPURowRemapFailure", "severity": "critical", "expr": "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0",
         "summary": "Row remapping failed on " + where,
         "description": "The GPU has no spare memory rows left to remap a failing row. Take the GPU out of service and open an RMA."},
        {"alert": "GPURowRemapPending", "severity": "warning", "for": "5m", "expr": "DCGM_FI_DEV_ROW_REMAP_PENDING > 0",
         "summary": "Row remap pending on " + where,
         "description": "A memory row remap takes effect only after a GPU reset. Drain the node and reset the GPU."},
        {"alert": "GPUTemperatureHigh", "severity": "warning", "for": temp_for, "expr": "DCGM_FI_DEV_GPU_TEMP > %s" % gpu_temp,
         "summary": "GPU temperature {{ $value }} C on " + where,
         "description": "GPU temperature is over %s C for %s. Check cooling and airflow of the node." % (gpu_temp, temp_for)},
        {"alert": "GPUMemoryTemperatureHigh", "severity": "warning", "for": temp_for, "expr": "DCGM_FI_DEV_MEMORY_TEMP > %s" % memory_temp,
         "summary": "GPU memory temperature {{ $value }} C on " + where,
         "description": "GPU memory (HBM) temperature is over %s C for %s. Check cooling and airflow of the node." % (memory_temp, temp_for)},
        {"alert": "GPUPowerThrottling", "severity": "warning", "for": throttle_for,
         "expr": "rate(DCGM_FI_DEV_POWER_VIOLATION[5m]) / 1e9 > %s" % ratio, "summary": "Power throttling on " + where,
         "description": "The GPU is held below its clocks by its power limit {{ $value | humanizePercentage }} of the time. "
                        "Check the power limit and the PSUs."},
        {"alert": "GPUThermalThrottling", "severity": "warning", "for": throttle_for,
         "expr": "rate(DCGM_FI_DEV_THERMAL_VIOLATION[5m]) / 1e9 > %s" % ratio, "summary": "Thermal throttling on " + where,
         "description": "The GPU is held below its clocks by temperature {{ $value | humanizePercentage }} of the time. "
                        "Check cooling and airflow of the node."},
    ]


def _presence_alerts(s, where):
    """Lost GPUs and nodes, idle allocated GPUs and a silent exporter."""
    node = s["gpu_monitoring_node_label"]
    gpu_by = ", ".join([node, "gpu", "UUID", "modelName"])
    absent_for, idle_for, idle = s["gpu_monitoring_absent_for"], s["gpu_monitoring_idle_for"], s["gpu_monitoring_idle_threshold"]
    down_for = s["gpu_monitoring_exporter_down_for"]
    return [
        {"alert": "GPUFellOffTheBus", "severity": "critical",
         "expr": "(max by (%s) (max_over_time(DCGM_FI_DEV_GPU_TEMP[1h])) unless on (UUID) DCGM_FI_DEV_GPU_TEMP) "
                 "and on (%s) count by (%s) (DCGM_FI_DEV_GPU_TEMP)" % (gpu_by, node, node),
         "summary": where + " stopped reporting metrics",
         "description": "The DCGM exporter of the node still reports its other GPUs but not this one: the GPU is lost to the driver "
                        "(XID 79). Drain the node and reboot it."},
        {"alert": "GPUNodeMetricsAbsent", "severity": "critical", "for": absent_for,
         "expr": 'max by (node) (kube_node_status_capacity{resource=~"nvidia_com_gpu|nvidia_com_mig_.+"}) > 0 unless on (node) '
                 'label_replace(count by (%s) (DCGM_FI_DEV_GPU_TEMP), "node", "$1", "%s", "(.+)")' % (node, node),
         "summary": "No GPU metrics from node " + _label("node") + ", which has GPUs",
         "description": "Kubernetes counts GPUs on the node but no DCGM metrics arrive for it for %s: the exporter is not running "
                        "there or every GPU fell off the bus." % absent_for},
        {"alert": "GPUAllocatedIdle", "severity": "warning", "for": idle_for,
         "expr": _by_pod("DCGM_FI_DEV_GPU_UTIL", s) + " < %s" % idle,
         "summary": "GPU allocated to " + _label("namespace") + "/" + _label("pod") + " is idle",
         "description": "The pod holds " + where + " but has used under %s%% of it for %s. Free the GPU for others." % (idle, idle_for)},
        {"alert": "DCGMExporterDown", "severity": "critical", "for": down_for,
         "expr": 'up{job="%s"} == 0' % s["gpu_monitoring_exporter_job"],
         "summary": "DCGM exporter " + _label("instance") + " is down",
         "description": "Prometheus cannot scrape the DCGM exporter for %s: no GPU metrics, alerts or autoscaling for that node."
                        % down_for},
    ]


def alerts(settings):
    """Every alert, enabled or not, as ``{alert, expr, severity, labels, summary, description[, for]}``."""
    labels = [_label(name) for name in ("gpu", "modelName", "UUID", settings["gpu_monitoring_node_label"])]
    where = "GPU %s (%s, %s) on node %s" % tuple(labels)
    return _xid_alerts(settings, where) + _health_alerts(settings, where) + _presence_alerts(settings, where)


def rule_groups(settings):
    """The PrometheusRule's groups: the recording rules, then the enabled alerts (no group when none is)."""
    rules = []
    for a in alerts(settings):
        if a["alert"] in settings["gpu_monitoring_alerts_disabled"]:
            continue
        labels = dict({"severity": a["severity"]}, **a.get("labels", {}))
        rule = {"alert": a["alert"], "expr": a["expr"], "labels": labels,
                "annotations": {"summary": a["summary"], "description": a["description"],
                                "runbook_url": settings["gpu_monitoring_runbook_url"].replace("{alert}", a["alert"].lower())}}
        if "for" in a:
            rule["for"] = a["for"]
        rules.append(rule)
    return [{"name": "gpuops-gpu-recording", "rules": recording_rules(settings)}] + (
        [{"name": "gpuops-gpu-alerts", "rules": rules}] if rules else [])
