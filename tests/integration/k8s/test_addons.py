"""The data-only add-on roles (kube_prometheus_stack, prometheus_adapter, dcgm_exporter): found and run by
k8s_addons, named nowhere in cluster.yml, rendered as their own layer with the
release their shared options describe, checked against the upstream chart
values, and refused with a clear error on a bad value."""
import pytest
import yaml

import fake_apiserver
import test_core_apply as core
from fake_apiserver import FakeAPIServer
from k8s_support import ROOT, check_helm_values, load_facts, render_cluster, validate_objects

pytestmark = pytest.mark.slow

NODES = {"gpu-a": {"facts": "hgx-h100"}}
# The files a data-only add-on is made of; the recipe in CONTRIBUTING.md adds no other. The template
# is left out by an add-on that is its chart alone.
SHAPE = {"defaults/main.yml", "meta/argument_specs.yml", "meta/main.yml", "templates/objects.yml.j2", "README.md"}
OBJECTS = "templates/objects.yml.j2"
DATA_ONLY = {"kube_prometheus_stack": SHAPE, "prometheus_adapter": SHAPE - {OBJECTS}, "dcgm_exporter": SHAPE}


@pytest.fixture(scope="module")
def stack(render):
    return render("addon-stack-on", nodes=NODES, extra_vars={
        "kube_prometheus_stack_enabled": True, "gpu_monitoring_enabled": True,
        "kube_prometheus_stack_values": {"alertmanager": {"enabled": False},
                                         "prometheus": {"prometheusSpec": {"retention": "30d"}}}})


@pytest.fixture(scope="module")
def stack_plain(render):
    """Every knob of the role off its default, and the monitoring layer off."""
    return render("addon-stack-plain", nodes=NODES, extra_vars={
        "kube_prometheus_stack_enabled": True, "kube_prometheus_stack_select_all": False,
        "kube_prometheus_stack_create_namespace": False, "kube_prometheus_stack_namespace": "observability",
        "kube_prometheus_stack_layer_order": 12})


@pytest.mark.parametrize("role", sorted(DATA_ONLY))
def test_a_data_only_add_on_is_only_the_recipes_files(role):
    base = ROOT / "roles" / role
    files = {str(p.relative_to(base)) for p in base.rglob("*") if p.is_file()}
    assert files == DATA_ONLY[role], role


def test_the_stack_is_its_own_layer_with_the_pinned_chart(stack, shared_reference):
    layer = stack.layers["kube_prometheus_stack"]
    assert layer["order"] == 83
    (entry,) = layer["releases"].values()
    release = entry["release"]
    pinned = yaml.safe_load((shared_reference / "kube-prometheus-stack" / "chart" / "Chart.yaml").read_text())["version"]
    assert (release["name"], release["namespace"], release["chart"]) == (
        "kube-prometheus-stack", "monitoring", "kube-prometheus-stack")
    assert release["version"] == str(pinned) and release["repoURL"].startswith("https://") and "chartPath" not in release
    values = entry["values"]
    assert check_helm_values(values, shared_reference / "kube-prometheus-stack" / "chart" / "values.yaml") == []
    spec = values["prometheus"]["prometheusSpec"]
    # The role's selectors (select every rule and monitor), then the site's values merged over them.
    assert spec == {"ruleSelectorNilUsesHelmValues": False, "serviceMonitorSelectorNilUsesHelmValues": False,
                    "podMonitorSelectorNilUsesHelmValues": False, "retention": "30d"}
    assert values["alertmanager"] == {"enabled": False}


def privileged_namespace(rendered, layer, name, shared_reference):
    """The one object of an add-on layer: a valid Namespace ``name`` that enforces, audits and warns at privileged."""
    (ns,) = rendered.layers[layer]["objects"]
    assert validate_objects([ns], shared_reference)["builtin"] == 1
    assert ns["kind"] == "Namespace" and ns["metadata"]["name"] == name
    labels = ns["metadata"]["labels"]
    assert {labels["pod-security.kubernetes.io/%s" % m] for m in ("enforce", "audit", "warn")} == {"privileged"}
    return ns


def test_the_stack_owns_the_shared_namespace_at_the_level_node_exporter_needs(stack, shared_reference):
    ns = privileged_namespace(stack, "kube_prometheus_stack", "monitoring", shared_reference)
    # One layer owns each object: gpu_monitoring leaves that namespace to the stack.
    assert stack.find("Namespace", "monitoring") == [ns]
    assert not [o for o in stack.layers["gpu_monitoring"]["objects"] if o["kind"] == "Namespace"]


def test_the_monitoring_and_the_operator_see_the_stack(stack):
    # gpu_monitoring_rules auto: the stack brings the PrometheusRule CRD in this run.
    (rule,) = stack.find("PrometheusRule")
    assert rule["metadata"]["namespace"] == "monitoring"
    operator = stack.releases["gpu-operator"]["values"]
    assert operator["dcgmExporter"]["serviceMonitor"]["enabled"] is True


def test_with_its_knobs_off_the_stack_sets_no_values_and_no_namespace(stack_plain):
    layer = stack_plain.layers["kube_prometheus_stack"]
    assert layer["order"] == 12 and layer["objects"] == []
    (entry,) = layer["releases"].values()
    assert entry["release"]["namespace"] == "observability" and entry["values"] == {}
    assert "gpu_monitoring" not in stack_plain.layers


@pytest.fixture(scope="module")
def adapter(render):
    """The adapter with HPAs on its metrics, pointed at a Prometheus of the site's own."""
    return render("addon-adapter-on", nodes=NODES, extra_vars={
        "prometheus_adapter_enabled": True, "gpu_monitoring_enabled": True,
        "prometheus_adapter_prometheus_url": "http://prometheus.observability.svc", "prometheus_adapter_prometheus_port": 80,
        "prometheus_adapter_values": {"replicas": 2},
        "gpu_tenants_list": [{"name": "team-a", "gpu_share": 0.5}],
        "gpu_monitoring_autoscalers": [{"tenant": "team-a", "deployment": "llm-server", "max_replicas": 4, "target": 70}],
        "gpuops_k8s_assume_api_kinds": ["monitoring.coreos.com/v1/PrometheusRule"]})


def test_the_adapter_is_its_own_layer_with_the_pinned_chart_and_the_gpu_rules(adapter, shared_reference):
    layer = adapter.layers["prometheus_adapter"]
    assert layer["order"] == 87 and layer["objects"] == []
    (entry,) = layer["releases"].values()
    release = entry["release"]
    pinned = yaml.safe_load((shared_reference / "prometheus-adapter" / "chart" / "Chart.yaml").read_text())["version"]
    # The namespace is gpu_monitoring's, created by that layer first: Helm creates it only when missing.
    assert (release["name"], release["namespace"], release["chart"]) == ("prometheus-adapter", "monitoring", "prometheus-adapter")
    assert release["version"] == str(pinned) and release["createNamespace"] is True
    assert adapter.one("Namespace", "monitoring") in adapter.layers["gpu_monitoring"]["objects"]
    values = entry["values"]
    assert check_helm_values(values, shared_reference / "prometheus-adapter" / "chart" / "values.yaml") == []
    assert values["prometheus"] == {"url": "http://prometheus.observability.svc", "port": 80}
    assert values["replicas"] == 2 and values["rules"]["default"] is False
    # One rule per recording rule of gpu_monitoring that the HPAs can name (test_monitoring_render.py checks the names).
    series = sorted(rule["seriesQuery"].split("{")[0] for rule in values["rules"]["custom"])
    assert series == ["pod:dcgm_gpu_memory_used_bytes:sum", "pod:dcgm_gpu_utilization:avg"]
    (rule,) = adapter.find("PrometheusRule")
    recorded = {r.get("record") for g in rule["spec"]["groups"] for r in g["rules"]}
    assert set(series) <= recorded


def test_autoscalers_without_the_adapter_stop_the_plan_naming_its_switch(render):
    failed = render("addon-adapter-off", nodes=NODES, expect_failure=True, extra_vars={
        "gpu_monitoring_enabled": True, "gpu_tenants_list": [{"name": "team-a", "gpu_share": 0.5}],
        "gpu_monitoring_autoscalers": [{"tenant": "team-a", "deployment": "llm-server", "max_replicas": 4, "target": 70}]})
    assert "set prometheus_adapter_enabled: true" in " ".join(failed.output.split())
    assert failed.layers == {}


def test_the_adapters_old_variable_stops_the_plan_naming_it(render):
    failed = render("addon-adapter-old-name", nodes=NODES, expect_failure=True,
                    extra_vars={"gpu_monitoring_enabled": True, "gpu_monitoring_adapter_enabled": True})
    said = " ".join(failed.output.split())
    assert "gpu_monitoring_adapter_enabled (2 hosts: localhost, gpu-a): no such variable in role gpu_monitoring" in said
    assert "it was renamed: set prometheus_adapter_enabled instead" in said and failed.layers == {}


def test_off_by_default_and_no_release_when_not_managed(render):
    plain = render("addon-release-unmanaged", nodes=NODES, extra_vars={
        "kube_prometheus_stack_enabled": True, "kube_prometheus_stack_manage_release": False})
    layer = plain.layers["kube_prometheus_stack"]
    assert layer["releases"] == {} and [o["kind"] for o in layer["objects"]] == ["Namespace"]


def test_a_bad_value_stops_the_plan_naming_the_option(render):
    failed = render("addon-bad-value", nodes=NODES, expect_failure=True,
                    extra_vars={"kube_prometheus_stack_enabled": True, "kube_prometheus_stack_pod_security": "open"})
    assert "kube_prometheus_stack_pod_security" in failed.output and "privileged, baseline, restricted" in failed.output
    assert failed.layers == {}


# The keys of NVIDIA/dcgm-exporter's deployment/values.yaml (chart 4.8.x) that the role or the tests set;
# ../shared/reference has the exporter's counters, not its chart. A list or scalar slot is None.
DCGM_EXPORTER_CHART_KEYS = {
    "arguments": None, "nodeSelector": {}, "tolerations": None, "affinity": {}, "resources": {"limits": {}, "requests": {}},
    "priorityClassName": None, "podLabels": {},
    "serviceMonitor": {"apiVersion": None, "enabled": None, "interval": None, "scrapeTimeout": None, "honorLabels": None,
                       "additionalLabels": {}, "relabelings": None, "metricRelabelings": None},
    "kubernetes": {"enablePodLabels": None, "enablePodUID": None, "podLabelAllowlistRegex": None, "rbac": {"create": None}},
}
GPU_TAINT_TOLERATION = {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def exporter(render):
    """The standalone exporter with the operator's off, the stack and the monitoring on."""
    return render("addon-exporter-on", nodes=NODES, extra_vars={
        "dcgm_exporter_enabled": True, "gpu_operator_dcgm_exporter_enabled": False,
        "kube_prometheus_stack_enabled": True, "gpu_monitoring_enabled": True,
        "dcgm_exporter_tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "dcgm_exporter_values": {"kubernetes": {"enablePodLabels": True}}})


def test_the_exporter_is_its_own_layer_on_the_gpu_nodes(exporter, shared_reference):
    layer = exporter.layers["dcgm_exporter"]
    assert layer["order"] == 84
    (entry,) = layer["releases"].values()
    release = entry["release"]
    # The pinned chart is the exporter release whose counters ../shared/reference holds (git describe <dcgm>-<exporter>).
    describe = (shared_reference / "dcgm-exporter" / "SOURCE.txt").read_text().split("git describe ")[1].split("-")[1]
    assert (release["name"], release["namespace"], release["chart"], release["version"]) == (
        "dcgm-exporter", "dcgm-exporter", "dcgm-exporter", describe)
    assert release["repoURL"] == "https://nvidia.github.io/dcgm-exporter/helm-charts"
    values = entry["values"]
    assert check_helm_values(values, DCGM_EXPORTER_CHART_KEYS) == []
    # The label gpu_nodes puts on the GPU nodes, and its taints tolerated before the site's own tolerations.
    assert values["nodeSelector"] == {"platform.gpuops.io/gpu": "true"}
    assert values["nodeSelector"].items() <= exporter.one("Node", "gpu-a")["metadata"]["labels"].items()
    assert values["tolerations"] == [GPU_TAINT_TOLERATION, {"key": "nvidia.com/gpu", "operator": "Exists"}]
    # The stack brings the ServiceMonitor CRD in this run; the monitor carries the Prometheus's selector labels.
    assert values["serviceMonitor"] == {"enabled": True, "additionalLabels": {"release": "kube-prometheus-stack"}}
    assert values["kubernetes"] == {"enablePodLabels": True}
    assert exporter.releases["gpu-operator"]["values"]["dcgmExporter"]["enabled"] is False


def test_the_exporter_owns_its_namespace_at_the_level_it_needs(exporter, shared_reference):
    ns = privileged_namespace(exporter, "dcgm_exporter", "dcgm-exporter", shared_reference)
    assert ns["metadata"]["labels"]["app.kubernetes.io/part-of"] == "dcgm-exporter"


def test_the_exporter_without_the_operator_and_without_monitoring(render):
    plain = render("addon-exporter-no-operator", nodes=NODES, extra_vars={
        "dcgm_exporter_enabled": True, "gpu_operator_enabled": False, "dcgm_exporter_create_namespace": False,
        "dcgm_exporter_node_selector": {"example.com/gpu": "yes"}, "gpu_nodes_taints": []})
    layer = plain.layers["dcgm_exporter"]
    assert layer["objects"] == [] and "gpu_operator" not in plain.layers
    (entry,) = layer["releases"].values()
    assert entry["values"] == {"nodeSelector": {"example.com/gpu": "yes"}, "tolerations": [],
                               "serviceMonitor": {"enabled": False, "additionalLabels": {}}}


def test_the_exporter_is_off_by_default(stack):
    assert "dcgm_exporter" not in stack.layers
    assert not [r for r in stack.releases.values() if r["release"]["chart"] == "dcgm-exporter"]


def test_the_exporter_beside_the_operators_stops_the_plan_naming_both_switches(render):
    failed = render("addon-exporter-twice", nodes=NODES, expect_failure=True, extra_vars={"dcgm_exporter_enabled": True})
    said = " ".join(failed.output.split())
    assert "dcgm_exporter: the GPU Operator runs its own DCGM exporter" in said
    assert "Set gpu_operator_dcgm_exporter_enabled: false to use this one, or dcgm_exporter_enabled: false" in said
    assert failed.layers == {}


PART_OF = "applyset.kubernetes.io/part-of"


def test_turning_the_stack_on_hands_the_namespace_over_and_then_changes_nothing(
        tmp_path, installed_collection, monkeypatch, helm):
    """gpu_monitoring created the namespace; once the stack creates it, the stack's layer owns it, and
    gpu_monitoring's prune must not delete it. No chart is here: the release is seeded as deployed, and the
    real helm finds it so."""
    monkeypatch.setitem(fake_apiserver.RESOURCES, "monitoring.coreos.com/v1", [
        ("prometheusrules", "PrometheusRule", True), ("servicemonitors", "ServiceMonitor", True),
        ("podmonitors", "PodMonitor", True)])
    monitoring = {"gpu_monitoring_enabled": True}
    stack = dict(monitoring, kube_prometheus_stack_enabled=True)
    planned = render_cluster(tmp_path / "render", extra_vars=dict(stack, gpu_sharing_configs=core.SHARING,
                                                                  gpu_tenants_list=core.TENANTS),
                             nodes=core.NODES, collections_path=installed_collection)
    entry = planned.releases["kube-prometheus-stack"]
    with FakeAPIServer() as api:
        core.seed(api, str(len(load_facts("hgx-h100")["gpus"]) * 4))
        core.run(tmp_path, api, "monitoring", collections=installed_collection, extra=monitoring)
        before = api.get("Namespace", "monitoring")["metadata"]["labels"][PART_OF]
        assert api.get("PrometheusRule", "gpuops-gpu", "monitoring") is not None

        core.helm_storage(api, entry["release"], entry["values"], 1, "deployed", entry["release"]["version"])
        del api.requests[:]
        core.run(tmp_path, api, "stack", collections=installed_collection, extra=stack, env=helm.env)
        ns = api.get("Namespace", "monitoring")
        assert ns is not None and not [r for r in api.requests if r[0] == "DELETE" and "monitoring" in r[1]]
        stack_set = api.get("Secret", "gpuops-kube-prometheus-stack", "gpuops-system")
        assert ns["metadata"]["labels"][PART_OF] == stack_set["metadata"]["labels"]["applyset.kubernetes.io/id"] != before
        assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
        assert api.get("PrometheusRule", "gpuops-gpu", "monitoring") is not None

        rv = {k: o["metadata"]["resourceVersion"] for k, o in api.objects.items()}
        helm.clear()
        again = core.run(tmp_path, api, "again", collections=installed_collection, extra=stack, env=helm.env)
        assert "changed=0" in core.recap(again), core.recap(again)
        assert [c[:2] for c in helm.calls()] == [["list", "--all"], ["get", "values"]]
        assert {k: o["metadata"]["resourceVersion"] for k, o in api.objects.items()} == rv
