"""Apply order, phases and render of the k8s_apply mechanism's filter."""
import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter import k8s_objects as f


def obj(kind, name, namespace=None, api="v1", **extra):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    o = {"apiVersion": api, "kind": kind, "metadata": meta}
    o.update(extra)
    return o


MIXED = [
    obj("LocalQueue", "default", "team-a", api="kueue.x-k8s.io/v1beta1"),
    obj("ConfigMap", "cfg", "gpu-operator", data={"a": "b"}),
    obj("ClusterQueue", "gpu", api="kueue.x-k8s.io/v1beta1"),
    obj("CustomResourceDefinition", "queues.example.com", api="apiextensions.k8s.io/v1"),
    obj("RoleBinding", "rb", "team-a", api="rbac.authorization.k8s.io/v1"),
    obj("Namespace", "team-a"),
    obj("PriorityClass", "batch", api="scheduling.k8s.io/v1"),
    obj("ResourceQuota", "gpu", "team-a"),
    obj("Namespace", "gpu-operator"),
]


def kinds(objs):
    return [o["kind"] for o in objs]


def test_apply_order_namespaces_then_crds_then_cluster_then_namespaced():
    ordered = f.k8s_apply_order(MIXED)
    assert kinds(ordered) == ["Namespace", "Namespace", "CustomResourceDefinition", "PriorityClass",
                              "ClusterQueue", "ResourceQuota", "ConfigMap", "RoleBinding", "LocalQueue"]
    assert [o["metadata"]["name"] for o in ordered[:2]] == ["gpu-operator", "team-a"]


def test_apply_order_is_independent_of_input_order():
    assert f.k8s_apply_order(MIXED) == f.k8s_apply_order(list(reversed(MIXED)))


def test_phases_split_crds_from_their_resources():
    phases = f.k8s_phases(MIXED)
    assert kinds(phases["namespaces"]) == ["Namespace", "Namespace"]
    assert kinds(phases["crds"]) == ["CustomResourceDefinition"]
    assert "CustomResourceDefinition" not in kinds(phases["resources"])
    assert len(phases["resources"]) == len(MIXED) - 3


def test_duplicate_object_is_an_error():
    with pytest.raises(AnsibleFilterError, match="duplicate Kubernetes object ConfigMap gpu-operator/cfg"):
        f.k8s_apply_order([MIXED[1], dict(MIXED[1])])


@pytest.mark.parametrize("bad", [{"kind": "ConfigMap", "metadata": {"name": "x"}}, {"apiVersion": "v1", "kind": "X"}, "text"])
def test_incomplete_object_is_an_error(bad):
    with pytest.raises(AnsibleFilterError):
        f.k8s_apply_order([bad])


def test_manifest_round_trips_in_apply_order_with_block_strings():
    objs = MIXED + [obj("ConfigMap", "multi", "gpu-operator", data={"cfg": "version: v1\nflags: {}\n"})]
    text = f.k8s_manifest(objs, header="Layer x")
    assert text.startswith("# Layer x\n---\n")
    docs = [d for d in yaml.safe_load_all(text) if d]
    assert docs == f.k8s_apply_order(objs)
    assert "cfg: |" in text
    assert f.k8s_manifest(list(reversed(objs)), header="Layer x") == text


def test_helm_release_sources():
    base = {"name": "r", "namespace": "ns", "chart": "c", "version": "1.2.3", "values": {"a": 1}}
    repo = f.k8s_helm_release(dict(base, repo_url="https://charts.example/x"))
    assert (repo["chart_ref"], repo["chart_repo_url"], repo["source"]) == ("c", "https://charts.example/x", "repo")
    oci = f.k8s_helm_release(dict(base, repo_url="oci://ghcr.io/org/charts/"))
    assert (oci["chart_ref"], oci["chart_repo_url"], oci["source"]) == ("oci://ghcr.io/org/charts/c", None, "oci")
    path = f.k8s_helm_release(dict(base, repo_url="https://x", chart_path="/srv/c-1.2.3.tgz"))
    assert (path["chart_ref"], path["source"]) == ("/srv/c-1.2.3.tgz", "path")
    assert repo["create_namespace"] is True and repo["wait"] is True


@pytest.mark.parametrize("bad, message", [
    ({"name": "r", "namespace": "ns", "chart": "c", "repo_url": "https://x"}, "lacks version"),
    ({"name": "r", "namespace": "ns", "chart": "c", "version": "1"}, "needs repo_url"),
    ({"name": "r", "namespace": "ns", "chart": "c", "version": "1", "repo_url": "https://x", "values": []}, "values must be a mapping"),
])
def test_helm_release_errors(bad, message):
    with pytest.raises(AnsibleFilterError, match=message):
        f.k8s_helm_release(bad)


def test_release_files_descriptor_and_values():
    files = f.k8s_release_files([{"name": "gpu-operator", "namespace": "gpu-operator", "chart": "gpu-operator",
                                  "version": "v26.7.0", "repo_url": "https://helm.ngc.nvidia.com/nvidia",
                                  "values": {"driver": {"enabled": False}}}])
    assert [x["path"] for x in files] == ["helm/gpu-operator/release.yaml", "helm/gpu-operator/values.yaml"]
    desc = yaml.safe_load(files[0]["content"])
    assert desc == {"name": "gpu-operator", "namespace": "gpu-operator", "chart": "gpu-operator", "version": "v26.7.0",
                    "repoURL": "https://helm.ngc.nvidia.com/nvidia", "createNamespace": True, "valuesFile": "values.yaml"}
    assert yaml.safe_load(files[1]["content"]) == {"driver": {"enabled": False}}


def test_api_kinds_and_served():
    apis = {"v1": {"Pod": {}, "ConfigMap": {}}, "monitoring.coreos.com/v1": {"ServiceMonitor": {}}}
    kinds_ = f.k8s_api_kinds(apis)
    assert kinds_ == ["monitoring.coreos.com/v1/ServiceMonitor", "v1/ConfigMap", "v1/Pod"]
    served = f.k8s_served(MIXED, kinds_)
    assert kinds(served) == ["ConfigMap"]
    assert len(f.k8s_served(MIXED, kinds_, served=False)) == len(MIXED) - 1


def test_stats_lines():
    lines = f.k8s_stats_lines({"mode": "apply", "objects": 3, "releases": 1, "layers": [
        {"name": "b", "order": 20, "objects": 2, "releases": [], "changed": False},
        {"name": "a", "order": 10, "objects": 1, "releases": ["gpu-operator"], "changed": True}]})
    assert lines == ["Kubernetes GPU stack applied: 2 layers, 3 objects, 1 Helm releases",
                     "10 a: 1 objects, releases gpu-operator, changed", "20 b: 2 objects, unchanged"]


def test_nested():
    assert f.k8s_nested({"driver.manager.repository": "r/x", "driver.repository": "r", "toolkit.enabled": False}) == {
        "driver": {"manager": {"repository": "r/x"}, "repository": "r"}, "toolkit": {"enabled": False}}
    with pytest.raises(AnsibleFilterError, match="both a value and a map"):
        f.k8s_nested({"a": 1, "a.b": 2})


class TaggedStr(str):
    """Like ansible-core's tagged strings: a str subclass that SafeDumper cannot represent."""


def test_manifest_renders_str_subclasses():
    o = obj(TaggedStr("ConfigMap"), TaggedStr("x"), TaggedStr("ns"), data={TaggedStr("k"): TaggedStr("v")})
    assert yaml.safe_load(f.k8s_manifest([o]).split("---\n", 1)[1]) == {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "ns"}, "data": {"k": "v"}}
    assert "v" in f.k8s_yaml({"a": TaggedStr("v")})


def test_in_namespaces_keeps_cluster_scoped_and_known_namespaces():
    kept = f.k8s_in_namespaces(MIXED, ["gpu-operator"])
    assert sorted(kinds(kept)) == ["ClusterQueue", "ConfigMap", "CustomResourceDefinition", "Namespace", "Namespace",
                                   "PriorityClass"]
    assert f.k8s_in_namespaces(MIXED, ["gpu-operator", "team-a"]) == MIXED


# ---- Scope and identity: a stray namespace on a cluster-scoped kind, duplicates per API group ----

STRAY = obj("ClusterRole", "gpu-reader", "team-a", api="rbac.authorization.k8s.io/v1")


def test_cluster_scoped_kind_with_a_stray_namespace_is_applied_as_cluster_scoped():
    namespaced = obj("ConfigMap", "a-first", "team-a")
    assert f.k8s_phase(STRAY) == f.PHASE_CLUSTER
    ordered = f.k8s_apply_order([namespaced, STRAY])
    # Cluster-scoped before namespaced, whatever the names; the stray namespace is dropped.
    assert [o["metadata"] for o in ordered] == [{"name": "gpu-reader"}, {"name": "a-first", "namespace": "team-a"}]
    assert STRAY["metadata"]["namespace"] == "team-a", "the input object must not be modified"
    phases = f.k8s_phases([namespaced, STRAY, obj("Namespace", "team-a")])
    assert [o["metadata"] for o in phases["resources"]] == [{"name": "gpu-reader"}, {"name": "a-first", "namespace": "team-a"}]
    manifest = yaml.safe_load_all(f.k8s_manifest([STRAY]))
    assert [d["metadata"] for d in manifest] == [{"name": "gpu-reader"}]


def test_cluster_scoped_kind_with_a_stray_namespace_is_kept_whatever_namespaces_exist():
    assert f.k8s_in_namespaces([STRAY, obj("ConfigMap", "x", "team-b")], ["team-b"]) == [STRAY, obj("ConfigMap", "x", "team-b")]
    assert f.k8s_in_namespaces([STRAY, obj("ConfigMap", "x", "team-b")], []) == [STRAY]


def test_a_stray_namespace_does_not_hide_a_duplicate_cluster_scoped_object():
    with pytest.raises(AnsibleFilterError, match="duplicate Kubernetes object ClusterRole gpu-reader"):
        f.k8s_apply_order([STRAY, obj("ClusterRole", "gpu-reader", api="rbac.authorization.k8s.io/v1")])


def test_duplicates_are_keyed_by_api_group_not_version():
    """apps/v1 and apps/v1beta1 Deployment x are one object; batch/v1 Job and example.com/v1 Job are two."""
    with pytest.raises(AnsibleFilterError, match="duplicate Kubernetes object Deployment team-a/x"):
        f.k8s_apply_order([obj("Deployment", "x", "team-a", api="apps/v1"),
                           obj("Deployment", "x", "team-a", api="apps/v1beta1")])
    with pytest.raises(AnsibleFilterError, match="duplicate Kubernetes object LocalQueue team-a/q"):
        f.k8s_apply_order([obj("LocalQueue", "q", "team-a", api="kueue.x-k8s.io/v1beta1"),
                           obj("LocalQueue", "q", "team-a", api="kueue.x-k8s.io/v1beta2")])
    two = [obj("Job", "x", "team-a", api="batch/v1"), obj("Job", "x", "team-a", api="example.com/v1"),
           obj("Job", "x", "team-b", api="batch/v1"), obj("CronJob", "x", "team-a", api="batch/v1")]
    assert len(f.k8s_apply_order(two)) == 4


# --- discovery and taints: what lets a no-op skip module runs -----------------

def test_api_resources_are_named_as_their_crds():
    apis = {
        "v1": {"Pod": {"name": "pods", "namespaced": True}, "Binding": {"name": "bindings"}},
        "apps/v1": {"Deployment": {"name": "deployments"}},
        "scheduling.volcano.sh/v1beta1": {"Queue": {"name": "queues"}},
        "kueue.x-k8s.io/v1beta2": {"ClusterQueue": {"name": "clusterqueues"},
                                   "ClusterQueueStatus": {"name": "clusterqueues/status"}},
    }
    assert f.k8s_api_resources(apis) == ["clusterqueues.kueue.x-k8s.io", "deployments.apps", "queues.scheduling.volcano.sh"]
    assert f.k8s_api_resources(None) == []
    with pytest.raises(AnsibleFilterError, match="apis mapping"):
        f.k8s_api_resources(["v1"])


def test_api_kinds_and_resources_of_the_discovery_table():
    """gpuops.platform.k8s_discovery's api_table gives what k8s_cluster_info's apis gave, every served version."""
    table = [{"group": "", "version": "v1", "kind": "Pod", "resource": "pods", "namespaced": True, "preferred": True},
             {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "ClusterQueue", "resource": "clusterqueues",
              "namespaced": False, "preferred": True},
             {"group": "kueue.x-k8s.io", "version": "v1beta1", "kind": "ClusterQueue", "resource": "clusterqueues",
              "namespaced": False, "preferred": False}]
    assert f.k8s_api_kinds(table) == ["kueue.x-k8s.io/v1beta1/ClusterQueue", "kueue.x-k8s.io/v1beta2/ClusterQueue", "v1/Pod"]
    assert f.k8s_api_resources(table) == ["clusterqueues.kueue.x-k8s.io"]
    with pytest.raises(AnsibleFilterError, match="api_table.*lacks resource"):
        f.k8s_api_kinds([{"group": "", "version": "v1", "kind": "Pod", "namespaced": True, "preferred": True}])


def _node(name, taints=None):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {"taints": taints} if taints else {}}


def test_only_nodes_that_lack_a_wanted_taint_need_a_call():
    wanted = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}, {"key": "maint", "effect": "NoExecute"}]
    nodes = [
        _node("done", [{"key": "gpu", "value": "true", "effect": "NoSchedule"}, {"key": "maint", "effect": "NoExecute"},
                       {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]),
        _node("bare"),
        # Same key and effect, other value: k8s_taint replaces the value, so a call is needed.
        _node("other-value", [{"key": "gpu", "value": "false", "effect": "NoSchedule"},
                              {"key": "maint", "value": "", "effect": "NoExecute"}]),
        # Same key and value, other effect.
        _node("other-effect", [{"key": "gpu", "value": "true", "effect": "PreferNoSchedule"},
                               {"key": "maint", "effect": "NoExecute"}]),
    ]
    assert f.k8s_nodes_missing_taints(nodes, wanted) == ["bare", "other-value", "other-effect"]
    assert f.k8s_nodes_missing_taints(nodes, []) == []
    with pytest.raises(AnsibleFilterError, match="Node objects"):
        f.k8s_nodes_missing_taints(["done"], wanted)
