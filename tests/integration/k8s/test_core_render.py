"""Render cluster.yml in several configurations and check what it would apply.

One ansible-playbook run per configuration (module-scoped fixtures), then many
checks on the rendered files: Kubernetes schemas, upstream CRDs and chart
values, apply order, and numbers that must follow from the replayed facts.
"""
import json
import math

import pytest
import yaml

from k8s_support import (DEFAULT_K8S_VERSION, check_helm_values, load_facts, render_cluster,
                         validate_objects)

pytestmark = pytest.mark.slow

SHARING = [
    {"name": "default", "mode": "none"},
    {"name": "ts4", "mode": "time-slicing", "replicas": 4, "fail_requests_greater_than_one": True},
    {"name": "mps2", "mode": "mps", "replicas": 2, "rename_by_default": True},
]
TENANTS = [
    {"name": "team-a", "gpu_share": 0.5, "kueue_cluster_queue": "gpu", "volcano_queue": "team-a",
     "admins": [{"kind": "Group", "name": "team-a-admins"}], "members": [{"kind": "User", "name": "alice"}],
     "ingress_from_namespaces": ["monitoring"], "egress_cidrs": ["10.20.0.0/16"], "pod_security": "restricted"},
    {"name": "team-b", "quota": {"requests.nvidia.com/gpu": 2, "requests.cpu": "64", "requests.memory": "512Gi"}},
]


def gpus(name):
    return len(load_facts(name)["gpus"])


@pytest.fixture(scope="module")
def time_slicing(render):
    """Host driver (the default), time-slicing on one node, MPS on another, Prometheus Operator present."""
    return render("time-slicing", extra_vars={
        "gpu_sharing_configs": SHARING,
        "gpu_tenants_list": TENANTS,
        "gpuops_k8s_assume_api_kinds": ["monitoring.coreos.com/v1/ServiceMonitor"],
    }, nodes={
        "gpu-a": {"facts": "hgx-h100", "vars": {"gpu_nodes_device_plugin_config": "ts4"}},
        "gpu-b": {"facts": "l40s", "vars": {"gpu_nodes_device_plugin_config": "mps2",
                                            "gpu_nodes_node_name": "gpu-b.k8s.example"}},
        "cpu-a": {"facts": "no-gpu"},
    })


@pytest.fixture(scope="module")
def mig_mixed(render):
    """Operator-managed driver and toolkit, MIG mixed, time-sliced MIG slices, air-gapped registry."""
    return render("mig-mixed", extra_vars={
        "gpuops_driver_source": "operator",
        "gpuops_toolkit_source": "operator",
        "gpuops_k8s_mig_strategy": "mixed",
        "gpu_sharing_configs": [{"name": "mig-ts", "mode": "time-slicing",
                                 "resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]}],
        "gpu_sharing_default_config": "mig-ts",
        "gpu_operator_image_registry": "registry.local/nvcr/",
        "gpu_operator_image_pull_secrets": ["nvcr-mirror"],
        "gpu_operator_chart_path": "/srv/charts/gpu-operator-v26.7.0.tgz",
        # Merged last and recursively: the driver stays enabled by the computed values.
        "gpu_operator_values": {"driver": {"version": "580.95.05"}, "operator": {"upgradeCRD": False}},
        "gpu_nodes_taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}, {"key": "dedicated", "value": "ml", "effect": "NoExecute"}],
        "gpu_tenants_list": [{"name": "research", "gpu_share": 0.5,
                              "quota": {"requests.nvidia.com/mig-3g.40gb": 1}}],
    }, nodes={"mig-a": {"facts": "h100-mig-mixed", "vars": {"gpu_nodes_mig_config": "custom-mixed"}}})


@pytest.fixture(scope="module")
def mig_single_plan(render):
    """MIG single strategy with the counts of the mig role's plan (mig_k8s_resources), and the recorded H200 MIG node."""
    return render("mig-single", extra_vars={
        "gpuops_k8s_mig_strategy": "single",
        "gpu_tenants_list": [{"name": "serving", "gpu_share": 0.25}],
    }, nodes={
        "mig-b": {"facts": "hgx-h100", "mig_k8s_resources": {
            "single": {"valid": True, "reason": None, "resources": {"nvidia.com/gpu": 56}, "profile": "1g.10gb"},
            "mixed": {"valid": True, "reason": None, "resources": {"nvidia.com/mig-1g.10gb": 56}}}},
        "mig-c": {"facts": "h200-mig", "vars": {"mig_k8s_node_name": "h200-node-c"}},
    })


@pytest.fixture(scope="module")
def dra_node(render):
    """gpu-c runs the DRA driver (gpu_nodes_dra), though its pool names a device-plugin config; ts4 by default."""
    result = render("dra-node", extra_vars={
        "gpu_sharing_configs": SHARING,
        "gpu_sharing_default_config": "ts4",
        "gpu_tenants_list": [{"name": "team-a", "gpu_share": 0.5}],
    }, nodes={
        "gpu-a": {"facts": "hgx-h100"},
        "gpu-b": {"facts": "l40s"},
        "gpu-c": {"facts": "hgx-h100", "vars": {"gpu_nodes_dra": True, "gpu_nodes_device_plugin_config": "mps2"}},
    }, playbook="tests/integration/k8s/cluster_capacity.yml")
    result.capacity = json.loads((result.dir.parent / "capacity.json").read_text())
    return result


CONFIGS = ["time_slicing", "mig_mixed", "mig_single_plan", "dra_node"]


@pytest.fixture(params=CONFIGS)
def rendered(request):
    return request.getfixturevalue(request.param)


def test_every_object_is_valid_for_kubernetes_and_the_upstream_crds(rendered, shared_reference):
    counts = validate_objects(rendered.objects, shared_reference, DEFAULT_K8S_VERSION)
    assert counts["builtin"] > 0
    assert counts["builtin"] + counts["custom"] == len(rendered.objects)


def test_helm_values_exist_in_the_upstream_chart(rendered, shared_reference):
    values = rendered.releases["gpu-operator"]["values"]
    assert check_helm_values(values, shared_reference / "gpu-operator" / "chart" / "values.yaml") == []


def test_layers_and_objects_are_in_apply_order(rendered):
    orders = [layer["order"] for layer in rendered.layers.values()]
    assert orders == sorted(orders)
    for name, layer in rendered.layers.items():
        kinds = [o["kind"] for o in layer["objects"]]
        namespaces = [i for i, k in enumerate(kinds) if k == "Namespace"]
        assert namespaces == list(range(len(namespaces))), "%s: namespaces must come first: %s" % (name, kinds)
        crds = [i for i, k in enumerate(kinds) if k == "CustomResourceDefinition"]
        custom = [i for i, o in enumerate(layer["objects"]) if "." in o["apiVersion"].split("/")[0]
                  and not o["apiVersion"].endswith("k8s.io/v1")]
        assert not crds or not custom or max(crds) < min(custom)
        # Cluster-scoped objects before namespaced ones.
        scoped = [bool(o["metadata"].get("namespace")) for o in layer["objects"]]
        assert scoped == sorted(scoped), "%s: cluster-scoped objects must precede namespaced ones" % name
    # The operator's namespace is rendered before anything is placed in it.
    first = rendered.objects.index(rendered.one("Namespace", "gpu-operator"))
    assert all(rendered.objects.index(o) > first for o in rendered.objects if o["metadata"].get("namespace") == "gpu-operator")


def test_operator_values_follow_variables_and_facts(time_slicing, mig_mixed):
    host = time_slicing.releases["gpu-operator"]
    assert host["release"] == {"name": "gpu-operator", "namespace": "gpu-operator", "chart": "gpu-operator",
                               "version": "v26.7.0", "repoURL": "https://helm.ngc.nvidia.com/nvidia",
                               "createNamespace": False, "valuesFile": "values.yaml"}
    v = host["values"]
    assert v["driver"] == {"enabled": False} and v["toolkit"] == {"enabled": False}
    assert v["mig"] == {"strategy": "single"}
    assert v["devicePlugin"]["config"] == {"name": "nvidia-device-plugin-config", "default": "default"}
    assert v["dcgmExporter"]["serviceMonitor"] == {"enabled": True}
    assert {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in v["daemonsets"]["tolerations"]
    assert "operator" not in v or "repository" not in v.get("operator", {})

    m = mig_mixed.releases["gpu-operator"]
    assert m["release"]["chartPath"] == "/srv/charts/gpu-operator-v26.7.0.tgz" and "repoURL" not in m["release"]
    v = m["values"]
    assert v["driver"]["enabled"] is True and v["toolkit"]["enabled"] is True
    assert v["driver"]["version"] == "580.95.05" and v["operator"]["upgradeCRD"] is False
    assert v["mig"] == {"strategy": "mixed"}
    assert v["dcgmExporter"]["serviceMonitor"] == {"enabled": False}
    assert v["devicePlugin"]["config"]["default"] == "mig-ts"
    assert v["operator"]["repository"] == "registry.local/nvcr/nvidia"
    assert v["driver"]["manager"]["repository"] == "registry.local/nvcr/nvidia/cloud-native"
    assert v["toolkit"]["repository"] == "registry.local/nvcr/nvidia/k8s"
    assert v["devicePlugin"]["imagePullSecrets"] == ["nvcr-mirror"]
    assert {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"} in v["daemonsets"]["tolerations"]
    assert v["daemonsets"]["tolerations"].count({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}) == 1


def test_operator_release_left_to_another_installer(render):
    """gpu_operator_manage_release=false: the layer keeps its namespace, the chart is someone else's."""
    plain = render("operator-unmanaged", extra_vars={"gpu_operator_manage_release": False},
                   nodes={"gpu-a": {"facts": "hgx-h100"}})
    layer = plain.layers["gpu_operator"]
    assert layer["releases"] == {} and "gpu-operator" not in plain.releases
    assert [(o["kind"], o["metadata"]["name"]) for o in layer["objects"]] == [("Namespace", "gpu-operator")]


def test_sharing_configmap_holds_one_device_plugin_config_per_name(time_slicing):
    cm = time_slicing.one("ConfigMap", "nvidia-device-plugin-config", "gpu-operator")
    docs = {k: yaml.safe_load(v) for k, v in cm["data"].items()}
    assert docs["default"] == {"version": "v1", "flags": {"migStrategy": "single"}}
    assert docs["ts4"]["sharing"]["timeSlicing"] == {
        "renameByDefault": False, "failRequestsGreaterThanOne": True,
        "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}
    assert docs["mps2"]["sharing"] == {"mps": {"renameByDefault": True,
                                               "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}


def test_device_plugin_configs_follow_the_upstream_format(time_slicing, shared_reference):
    """The chart documents named configs as `version: v1` with `flags.migStrategy`; ours carry the same keys."""
    values = (shared_reference / "k8s-device-plugin" / "chart" / "values.yaml").read_text()
    example = [line[1:] for line in values.splitlines() if line.startswith("#")]
    upstream = yaml.safe_load("\n".join(example[example.index(" config:"):example.index(" config:") + 14]))
    default = yaml.safe_load(upstream["config"]["map"]["default"])
    cm = time_slicing.one("ConfigMap", "nvidia-device-plugin-config", "gpu-operator")
    for name, text in cm["data"].items():
        doc = yaml.safe_load(text)
        assert doc["version"] == default["version"] == "v1", name
        assert set(default["flags"]) <= set(doc["flags"]), name
        assert doc["flags"]["migStrategy"] in ("none", "single", "mixed"), name
        assert set(doc) <= {"version", "flags", "sharing"}, name


def test_node_labels_come_from_facts_and_host_settings(time_slicing, mig_mixed):
    # GitOps tools must never prune (delete) a Node.
    assert time_slicing.one("Node", "gpu-a")["metadata"]["annotations"] == {
        "argocd.argoproj.io/sync-options": "Prune=false,ServerSideApply=true", "kustomize.toolkit.fluxcd.io/prune": "disabled"}
    a = time_slicing.one("Node", "gpu-a")["metadata"]["labels"]
    assert a["nvidia.com/device-plugin.config"] == "ts4"
    assert a["platform.gpuops.io/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert a["platform.gpuops.io/gpu.count"] == str(gpus("hgx-h100"))
    assert time_slicing.one("Node", "gpu-b.k8s.example")["metadata"]["labels"]["nvidia.com/device-plugin.config"] == "mps2"
    # A host without GPUs is not labelled.
    assert [n["metadata"]["name"] for n in time_slicing.find("Node")] == ["gpu-a", "gpu-b.k8s.example"]
    m = mig_mixed.one("Node", "mig-a")["metadata"]["labels"]
    assert m["nvidia.com/mig.config"] == "custom-mixed"
    assert m["nvidia.com/device-plugin.config"] == "mig-ts"


def test_tenant_quotas_follow_the_fleet_capacity(time_slicing, mig_mixed, mig_single_plan):
    # H100s x 4 time-slicing replicas, and L40S x 2 MPS replicas renamed to nvidia.com/gpu.shared.
    fleet_gpu = gpus("hgx-h100") * 4
    fleet_shared = gpus("l40s") * 2
    qa = time_slicing.one("ResourceQuota", "gpuops-tenant", "team-a")["spec"]["hard"]
    assert qa["requests.nvidia.com/gpu"] == str(math.floor(fleet_gpu * 0.5))
    assert qa["requests.nvidia.com/gpu.shared"] == str(math.floor(fleet_shared * 0.5))
    qb = time_slicing.one("ResourceQuota", "gpuops-tenant", "team-b")["spec"]["hard"]
    assert qb["requests.nvidia.com/gpu"] == "2" and qb["requests.cpu"] == "64"
    assert qb["requests.nvidia.com/gpu.shared"] == str(fleet_shared)
    # MIG mixed: 1 full GPU, 3g.40gb, 2g.20gb, and two 1g.10gb slices x 2 replicas.
    qr = mig_mixed.one("ResourceQuota", "gpuops-tenant", "research")["spec"]["hard"]
    assert qr == {"pods": "500", "requests.nvidia.com/gpu": "0", "requests.nvidia.com/mig-1g.10gb": "2",
                  "requests.nvidia.com/mig-2g.20gb": "0", "requests.nvidia.com/mig-3g.40gb": "1"}
    # The Kubernetes node name the mig role uses is the default here too.
    assert [n["metadata"]["name"] for n in mig_single_plan.find("Node")] == ["h200-node-c", "mig-b"]
    # 56 slices from the MIG plan, and the H200's MIG devices from its facts, all as nvidia.com/gpu.
    h200 = len(load_facts("h200-mig")["gpus"][0]["mig"]["devices"])
    qs = mig_single_plan.one("ResourceQuota", "gpuops-tenant", "serving")["spec"]["hard"]
    assert qs == {"pods": "500", "requests.nvidia.com/gpu": str(math.floor((56 + h200) * 0.25))}


def test_dra_node_is_labelled_and_left_out_of_quotas(dra_node):
    labels = dra_node.one("Node", "gpu-c")["metadata"]["labels"]
    assert labels["nvidia.com/gpu.deploy.device-plugin"] == "false"
    assert "nvidia.com/device-plugin.config" not in labels
    assert labels["platform.gpuops.io/gpu.count"] == str(gpus("hgx-h100"))
    # The device-plugin nodes keep the plugin and the default config.
    for name in ("gpu-a", "gpu-b"):
        other = dra_node.one("Node", name)["metadata"]["labels"]
        assert "nvidia.com/gpu.deploy.device-plugin" not in other and other["nvidia.com/device-plugin.config"] == "ts4"
    # Fleet: gpu-a and gpu-b only, x 4 time-slicing replicas.
    fleet = (gpus("hgx-h100") + gpus("l40s")) * 4
    assert dra_node.capacity["resources"] == {"nvidia.com/gpu": fleet}
    assert dra_node.capacity["dra_nodes"] == {
        "gpu-c": {"host": "gpu-c", "product": "NVIDIA-H100-80GB-HBM3", "gpu_count": gpus("hgx-h100"), "mig": False}}
    assert dra_node.capacity["nodes"]["gpu-c"]["resources"] == {}
    quota = dra_node.one("ResourceQuota", "gpuops-tenant", "team-a")["spec"]["hard"]
    assert quota["requests.nvidia.com/gpu"] == str(math.floor(fleet * 0.5))
    (cq,) = dra_node.find("ClusterQueue")
    gpu_quotas = {f["name"]: r["nominalQuota"] for f in cq["spec"]["resourceGroups"][0]["flavors"]
                  for r in f["resources"] if r["name"] == "nvidia.com/gpu"}
    assert gpu_quotas == {"nvidia-h100-80gb-hbm3": str(gpus("hgx-h100") * 4), "nvidia-l40s": str(gpus("l40s") * 4)}


def test_tenant_namespace_access_and_network(time_slicing):
    ns = time_slicing.one("Namespace", "team-a")["metadata"]
    assert ns["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert ns["annotations"] == {"platform.gpuops.io/volcano-queue": "team-a"}
    assert time_slicing.one("Namespace", "team-b")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    deny = time_slicing.one("NetworkPolicy", "gpuops-default-deny", "team-a")["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    allow = time_slicing.one("NetworkPolicy", "gpuops-allow", "team-a")["spec"]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}} in allow["ingress"][0]["from"]
    assert {"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}]} in allow["egress"]
    rb = time_slicing.one("RoleBinding", "gpuops-tenant-admin", "team-a")
    assert rb["roleRef"]["name"] == "admin" and rb["subjects"][0]["name"] == "team-a-admins"
    assert time_slicing.one("LocalQueue", "team-a", "team-a")["spec"] == {"clusterQueue": "gpu"}
    assert time_slicing.find("LocalQueue", namespace="team-b") == []
    assert {p["metadata"]["name"] for p in time_slicing.find("PriorityClass")} == {"gpu-inference-critical", "gpu-batch"}


def test_render_is_deterministic_and_idempotent(time_slicing, installed_collection):
    """A second render into the same folder writes the same bytes, changes nothing else, and prunes stale files."""
    before = {p.relative_to(time_slicing.dir): p.read_bytes() for p in time_slicing.dir.rglob("*") if p.is_file()}
    stale = time_slicing.dir / "55-dropped" / "helm" / "old" / "values.yaml"
    stale.parent.mkdir(parents=True)
    stale.write_text("a: 1\n")
    foreign = time_slicing.dir / "README.yaml"
    foreign.write_text("not ours\n")
    again = render_cluster(time_slicing.dir.parent, extra_vars={
        "gpu_sharing_configs": SHARING, "gpu_tenants_list": TENANTS,
        "gpuops_k8s_assume_api_kinds": ["monitoring.coreos.com/v1/ServiceMonitor"]},
        nodes={"gpu-a": {"facts": "hgx-h100", "vars": {"gpu_nodes_device_plugin_config": "ts4"}},
               "gpu-b": {"facts": "l40s", "vars": {"gpu_nodes_device_plugin_config": "mps2",
                                                   "gpu_nodes_node_name": "gpu-b.k8s.example"}},
               "cpu-a": {"facts": "no-gpu"}},
        collections_path=installed_collection)
    assert not stale.exists() and foreign.read_text() == "not ours\n"
    foreign.unlink()
    after = {p.relative_to(again.dir): p.read_bytes() for p in again.dir.rglob("*") if p.is_file()}
    assert after == before
    recap = [line for line in again.output.splitlines() if line.startswith("localhost ")][-1]
    # The only change: removing the stale file.
    assert "changed=1 " in recap, recap


def test_summary_counts_layers_objects_and_releases(time_slicing):
    line = "Kubernetes GPU stack rendered into %s: %d layers, %d objects, %d Helm releases" % (
        time_slicing.dir, len(time_slicing.layers), len(time_slicing.objects), len(time_slicing.releases))
    assert line in " ".join(time_slicing.output.split())
    assert time_slicing.tasks > 0


@pytest.mark.parametrize("name, extra_vars, nodes, message", [
    ("one-replica", {"gpu_sharing_configs": [{"name": "ts", "mode": "time-slicing", "replicas": 1}]},
     {"gpu-a": {"facts": "hgx-h100"}}, "sharing config 'ts': replicas of nvidia.com/gpu is 1, but the device plugin "
     "refuses it (\"number of replicas must be >= 2\")"),
    ("fractional-replicas", {"gpu_sharing_configs": [{"name": "ts", "mode": "time-slicing", "replicas": 2.7}]},
     {"gpu-a": {"facts": "hgx-h100"}}, "sharing config 'ts': replicas of nvidia.com/gpu must be a whole number, got 2.7"),
    # The global is named, not the role variable it feeds (gpu_operator_mig_strategy).
    ("unknown-mig-strategy", {"gpuops_k8s_mig_strategy": "triple"},
     {"gpu-a": {"facts": "hgx-h100"}}, "value of gpuops_k8s_mig_strategy must be one of: none, single, mixed, got: triple"),
    ("role-variable-typo", {"gpu_sharing_config": [{"name": "ts", "mode": "time-slicing", "replicas": 4}]},
     # An extra variable reaches every host: one line names them all.
     {"gpu-a": {"facts": "hgx-h100"}}, "gpu_sharing_config (2 hosts: localhost, gpu-a): no such variable in role gpu_sharing, "
     "so it would be ignored; did you mean gpu_sharing_configs?"),
    ("host-variable-typo", {}, {"gpu-a": {"facts": "hgx-h100", "vars": {"gpu_nodes_device_plugin_confg": "ts4"}}},
     "gpu_nodes_device_plugin_confg (host gpu-a): no such variable in role gpu_nodes, so it would be ignored; "
     "did you mean gpu_nodes_device_plugin_config?"),
    ("quota-over-fleet", {"gpu_tenants_list": [{"name": "greedy", "quota": {"requests.nvidia.com/gpu": 1000}}]},
     {"gpu-a": {"facts": "hgx-h100"}}, "tenant greedy quota is larger than the fleet: requests.nvidia.com/gpu=1000 but the fleet has"),
    ("mps-with-mig", {"gpu_sharing_configs": [{"name": "mps", "mode": "mps", "replicas": 2}],
                      "gpu_sharing_default_config": "mps"},
     {"mig-a": {"facts": "h200-mig"}}, "node mig-a: MPS sharing (config 'mps') cannot be used with MIG"),
])
def test_bad_variables_fail_early_with_a_clear_message(render, name, extra_vars, nodes, message):
    result = render(name, extra_vars=extra_vars, nodes=nodes, expect_failure=True)
    flat = " ".join(result.output.split())
    assert message in flat, result.output[-2000:]
    assert "value of gpu_operator_mig_strategy" not in flat
    # Failed in the plan, before any layer was rendered (or applied).
    assert not result.dir.exists() or not any(result.dir.iterdir())


MANAGED_BY = "app.kubernetes.io/managed-by"


def test_every_object_carries_one_managed_by_value(rendered):
    """ObjectMeta.labels with the recommended label app.kubernetes.io/managed-by
    (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/): one value, gpuops.platform,
    on every object the collection owns (a Node only gets labels, it is not the collection's), so one selector
    finds them all."""
    values = dict((o["kind"] + " " + o["metadata"].get("namespace", "") + "/" + o["metadata"]["name"],
                   (o["metadata"].get("labels") or {}).get(MANAGED_BY))
                  for o in rendered.objects if o["kind"] != "Node")
    assert values and set(values.values()) == {"gpuops.platform"}, \
        sorted(k for k, v in values.items() if v != "gpuops.platform")
