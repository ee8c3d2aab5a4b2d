"""gpu_monitoring's plan checks and autoscalers, and the adapter's rules (plugin_utils/gpu_monitoring.py)."""
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpuops.platform.plugins.filter import gpu_monitoring as filters
from ansible_collections.gpuops.platform.plugins.plugin_utils import gpu_alerts
from ansible_collections.gpuops.platform.plugins.plugin_utils import gpu_monitoring as plan

ROLE = Path(__file__).resolve().parents[4] / "roles" / "gpu_monitoring"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
ALERTS = VARS["gpu_monitoring__alert_names"]
TENANTS = [{"name": "team-a"}, {"name": "team-b", "namespace": "b-inference"}]


def settings(**changes):
    out = dict((name, DEFAULTS[name]) for name in plan.SETTINGS)
    out.update(changes)
    return out


def scaler(**changes):
    out = {"tenant": "team-a", "deployment": "web", "max_replicas": 4, "target": 70}
    out.update(changes)
    return plan.autoscalers([out], TENANTS)


def test_the_role_defaults_and_good_autoscalers_are_valid():
    good = plan.autoscalers([{"tenant": "team-a", "deployment": "web", "max_replicas": 4, "target": 70},
                             {"namespace": "shared", "deployment": "ocr", "min_replicas": 2, "max_replicas": 2, "target": "20Gi"},
                             {"tenant": "team-b", "deployment": "emb", "max_replicas": 3, "target": "500m",
                              "metric": "gpu_memory_used_bytes"}], TENANTS)
    assert plan.errors(settings(), ALERTS, good, True) == []
    assert filters.gpu_monitoring_errors(settings(), ALERTS, [], False) == []


def test_every_setting_checked_is_a_variable_of_the_role_and_the_role_hands_each_over():
    assert set(plan.SETTINGS) <= set(DEFAULTS)
    assert sorted(VARS["gpu_monitoring__checked"]) == sorted(plan.SETTINGS)


@pytest.mark.parametrize("changes, message", [
    ({"gpu_monitoring_rules": "maybe"}, "gpu_monitoring_rules must be auto, true or false, got 'maybe'"),
    ({"gpu_monitoring_namespace": "Monitoring"}, "gpu_monitoring_namespace 'Monitoring' is not a DNS label"),
    ({"gpu_monitoring_counters_configmap": "-x"}, "gpu_monitoring_counters_configmap '-x' is not a DNS-1123 subdomain"),
    ({"gpu_monitoring_node_label": 'Hostname"} or vector(1) #'},
     "gpu_monitoring_node_label 'Hostname\"} or vector(1) #' is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"),
    ({"gpu_monitoring_exporter_job": 'x"}'}, "gpu_monitoring_exporter_job 'x\"}' may hold only letters, digits and _.:/-"),
    ({"gpu_monitoring_idle_for": "an hour"}, "gpu_monitoring_idle_for 'an hour' is not a Prometheus duration such as 5m or 1h"),
    ({"gpu_monitoring_throttle_ratio": 2}, "gpu_monitoring_throttle_ratio must be a number above 0 and at most 1, got 2"),
    ({"gpu_monitoring_gpu_temp_threshold": True}, "gpu_monitoring_gpu_temp_threshold must be a number above 0 and at most 150, got True"),
    ({"gpu_monitoring_idle_threshold": "5%"}, "gpu_monitoring_idle_threshold must be a number above 0 and at most 100, got '5%'"),
    ({"gpu_monitoring_idle_threshold": 0}, "gpu_monitoring_idle_threshold must be a number above 0 and at most 100, got 0"),
    ({"gpu_monitoring_alerts_disabled": ["GPUOnFire", "DCGMExporterDown"]},
     "gpu_monitoring_alerts_disabled names unknown alerts GPUOnFire; the alerts are " + ", ".join(ALERTS)),
    ({"gpu_monitoring_xid_classes": [{"xid": 48, "severity": "critical", "meaning": "bad; meaning"}]},
     "gpu_monitoring_xid_classes entry {'xid': 48, 'severity': 'critical', 'meaning': 'bad; meaning'} needs xid"),
    ({"gpu_monitoring_xid_classes": [{"xid": True, "severity": "critical", "meaning": "DBE"}]}, "gpu_monitoring_xid_classes entry"),
    ({"gpu_monitoring_xid_other_severity": "loud"}, "gpu_monitoring_xid_other_severity must be critical, warning or info"),
    ({"gpu_monitoring_runbook_url": "https://x/{alert}/{alert}"}, "gpu_monitoring_runbook_url 'https://x/{alert}/{alert}' must be"),
    ({"gpu_monitoring_selector_labels": {"release": 1}},
     "gpu_monitoring_selector_labels: 'release': 1 is not a valid Kubernetes label (values are strings; quote \"1\")"),
    ({"gpu_monitoring_dashboard_labels": {}}, "gpu_monitoring_dashboard_labels must be the one label the Grafana sidecar selects"),
    ({"gpu_monitoring_extra_counters": [{"name": "DCGM_FI_DEV_FAN_SPEED", "type": "gauge", "help": "fan, speed"}]},
     "gpu_monitoring_extra_counters entry"),
    ({"gpu_monitoring_extra_counters": [{"name": "FAN", "type": "gauge"}]},
     "gpu_monitoring_extra_counters entry {'name': 'FAN', 'type': 'gauge'} needs name (DCGM_FI_*)"),
])
def test_each_bad_setting_is_named_alone(changes, message):
    found = plan.errors(settings(**changes), ALERTS, [], False)
    assert len(found) == 1 and found[0].startswith("gpu_monitoring: " + message), found


@pytest.mark.parametrize("changes, message", [
    ({"tenant": "team-z"}, "autoscaler for team-z/web: set namespace, or tenant to a name in gpu_tenants_list (got tenant 'team-z')"),
    ({"tenant": None, "namespace": "Bad"}, "autoscaler for Bad/web: namespace is not a DNS label"),
    ({"deployment": "Web!"}, "autoscaler for team-a/Web!: deployment must be a Deployment name"),
    ({"metric": "gpu_temp"}, "metric 'gpu_temp' is not one the adapter exposes (gpu_utilization, gpu_memory_used_bytes)"),
    ({"min_replicas": 3, "max_replicas": 2}, "team-a/web: min_replicas (default 1) and max_replicas must be integers"),
    ({"max_replicas": True}, "team-a/web: min_replicas (default 1) and max_replicas must be integers"),
    ({"target": "-1"}, "team-a/web: target must be a positive quantity (average per pod, e.g. 60 or 20Gi), got '-1'"),
    ({"target": "0.0"}, "team-a/web: target must be a positive quantity"),
    ({"target": True}, "team-a/web: target must be a positive quantity"),
])
def test_each_bad_autoscaler_is_named(changes, message):
    found = plan.errors(settings(), ALERTS, scaler(**changes), True)
    assert len(found) == 1 and message in found[0] and found[0].startswith("gpu_monitoring: autoscaler for "), found


def test_a_deployment_listed_twice_and_a_missing_adapter_are_reported():
    twice = scaler() + scaler(target="2Gi")
    assert plan.errors(settings(), ALERTS, twice, True) == ["gpu_monitoring: autoscaler for team-a/web: listed twice"]
    (found,) = plan.errors(settings(), ALERTS, scaler(), False)
    assert "set prometheus_adapter_enabled: true" in found


def test_problems_are_all_reported_in_the_order_of_the_settings():
    found = plan.errors(settings(gpu_monitoring_rules="x", gpu_monitoring_idle_for="1 h"), ALERTS, scaler(tenant="nobody"), False)
    assert [f.split(" ")[1] for f in found] == ["gpu_monitoring_rules", "gpu_monitoring_idle_for", "autoscaler",
                                                "gpu_monitoring_autoscalers"]


def test_autoscalers_resolve_tenants_and_fill_in_defaults():
    got = filters.gpu_monitoring_autoscalers([{"tenant": "team-b", "deployment": "a", "max_replicas": 2, "target": 1},
                                              {"namespace": "ns", "tenant": "team-a", "deployment": "b", "metric": "x",
                                               "min_replicas": 2, "max_replicas": 3, "target": 1},
                                              {"tenant": "nobody", "deployment": "c", "max_replicas": 1, "target": 1}], TENANTS)
    assert [(a["namespace"], a["metric"], a["min_replicas"]) for a in got] == [
        ("b-inference", "gpu_utilization", 1), ("ns", "x", 2), ("", "gpu_utilization", 1)]
    assert got[0]["tenant"] == "team-b" and plan.autoscalers(None, None) == []


def test_adapter_rules_expose_each_recording_rule_per_pod():
    rules = filters.prometheus_adapter_rules()
    assert [r["seriesQuery"] for r in rules] == [
        'pod:dcgm_gpu_utilization:avg{namespace!="",pod!=""}', 'pod:dcgm_gpu_memory_used_bytes:sum{namespace!="",pod!=""}']
    assert [r["name"] for r in rules] == [
        {"matches": "^pod:dcgm_(.+):avg$", "as": "${1}"}, {"matches": "^pod:dcgm_(.+):sum$", "as": "${1}"}]
    assert filters.prometheus_adapter_rules([["x", "max"]])[0]["seriesQuery"].startswith("pod:dcgm_x:max{")
    assert [name for name, dummy in plan.ADAPTER_METRICS] == ["gpu_utilization", "gpu_memory_used_bytes"]


def test_the_alerts_checked_are_the_alerts_written():
    names = [a["alert"] for a in gpu_alerts.alerts(settings())]
    assert sorted(set(names)) == sorted(ALERTS)


def test_disabling_every_alert_leaves_only_the_recording_rules():
    groups = filters.gpu_monitoring_rule_groups(settings(gpu_monitoring_alerts_disabled=ALERTS))
    assert [g["name"] for g in groups] == ["gpuops-gpu-recording"]


def test_alerts_follow_the_settings_and_carry_their_runbook():
    groups = filters.gpu_monitoring_rule_groups(settings(gpu_monitoring_node_label="node_name", gpu_monitoring_gpu_temp_threshold=80,
                                                         gpu_monitoring_alerts_disabled=["GPUAllocatedIdle"],
                                                         gpu_monitoring_runbook_url="https://rb.example/{alert}"))
    rules = dict((r["alert"] + r["labels"].get("xid", ""), r) for r in groups[1]["rules"])
    assert "GPUAllocatedIdle" not in rules
    temp = rules["GPUTemperatureHigh"]
    assert temp["expr"] == "DCGM_FI_DEV_GPU_TEMP > 80" and temp["for"] == DEFAULTS["gpu_monitoring_temp_for"]
    assert temp["annotations"]["runbook_url"] == "https://rb.example/gputemperaturehigh"
    assert temp["annotations"]["summary"].endswith("on node {{ $labels.node_name }}")
    classes = [c["xid"] for c in DEFAULTS["gpu_monitoring_xid_classes"]]
    assert rules["GPUXidError{{ $value }}"]["expr"] == " ".join(["DCGM_FI_DEV_XID_ERRORS > 0"] + ["!= %d" % x for x in classes])
    assert "for" not in rules["GPUFellOffTheBus"] and rules["GPUXidError%d" % classes[0]]["labels"]["severity"]
    recorded = [r["record"] for r in groups[0]["rules"]]
    assert ["pod:dcgm_%s:%s" % pair for pair in plan.ADAPTER_METRICS] == [r for r in recorded if r.startswith("pod:")]


def test_dashboards_lay_stats_over_two_time_series_a_row_and_name_the_node_label():
    boards = filters.gpu_monitoring_dashboards(VARS["gpu_monitoring__dashboard_names"], "node_name")
    assert sorted(boards) == sorted(VARS["gpu_monitoring__dashboard_names"])
    fleet = boards["gpu-fleet"]
    grid = [(p["type"], p["gridPos"]["x"], p["gridPos"]["y"], p["gridPos"]["w"]) for p in fleet["panels"]][:7]
    assert grid == [("stat", 0, 0, 6), ("stat", 6, 0, 6), ("stat", 12, 0, 6), ("stat", 18, 0, 6),
                    ("timeseries", 0, 4, 12), ("timeseries", 12, 4, 12), ("timeseries", 0, 12, 12)]
    assert [p["id"] for p in fleet["panels"]] == list(range(1, len(fleet["panels"]) + 1))
    node = boards["gpu-node"]
    assert node["panels"][0]["gridPos"]["y"] == 0 and node["uid"] == "gpuops-gpu-node"
    assert [v["name"] for v in node["templating"]["list"]] == ["datasource", "node", "gpu"]
    assert node["templating"]["list"][1]["query"]["query"] == "label_values(DCGM_FI_DEV_GPU_TEMP, node_name)"
    assert node["panels"][0]["targets"][0]["legendFormat"] == "{{node_name}} {{gpu}}"
    assert fleet["panels"][0]["targets"][0]["legendFormat"] == "__auto"
