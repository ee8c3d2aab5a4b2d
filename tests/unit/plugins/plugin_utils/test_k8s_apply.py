"""k8s_apply's decisions (plugin_utils/k8s_apply.py): an add-on role's release, the render's count."""
from ansible_collections.gpuops.platform.plugins.filter import k8s_apply as filters
from ansible_collections.gpuops.platform.plugins.plugin_utils import k8s_apply

ROLE = {"_manage_release": True, "_release_name": "kueue", "_namespace": "kueue-system", "_chart_ref": "kueue",
        "_chart_version": 0.14, "_chart_repo_url": "oci://registry.k8s.io/kueue/charts", "_chart_path": "",
        "values": {"replicas": 2}}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}}


def test_the_release_of_a_role_that_manages_one():
    assert k8s_apply.role_release(ROLE, []) == [{
        "name": "kueue", "namespace": "kueue-system", "chart": "kueue", "version": "0.14",
        "repo_url": "oci://registry.k8s.io/kueue/charts", "chart_path": "", "create_namespace": True,
        "values": {"replicas": 2}}]


def test_helm_creates_the_namespace_only_when_the_layer_does_not():
    (release,) = k8s_apply.role_release(ROLE, [NAMESPACE])
    assert release["create_namespace"] is False
    other = dict(NAMESPACE, metadata={"name": "elsewhere"})
    assert k8s_apply.role_release(ROLE, [other, {"kind": "ConfigMap", "metadata": {"name": "kueue-system"}}])[0]["create_namespace"]


def test_no_release_when_the_role_manages_none_whatever_the_flag_looks_like():
    for flag in (False, "false", "False", "no", 0):
        assert k8s_apply.role_release(dict(ROLE, _manage_release=flag), []) == []
    assert len(k8s_apply.role_release(dict(ROLE, _manage_release="True"), [])) == 1


def test_stats_add_a_rendered_layer_and_keep_other_keys():
    layer = {"name": "kueue", "order": "50", "objects": "3", "releases": ["kueue"], "files": ["50-kueue/manifests.yaml"]}
    first = k8s_apply.stats_add_layer({}, layer)
    assert first == {"layers": [{"name": "kueue", "order": 50, "objects": 3, "releases": ["kueue"],
                                 "files": ["50-kueue/manifests.yaml"]}], "objects": 3, "releases": 1}
    assert list(first) == ["layers", "objects", "releases"]
    second = k8s_apply.stats_add_layer(dict(first, pruned=["x"]), dict(layer, name="volcano", objects=0, releases=[]))
    assert [entry["name"] for entry in second["layers"]] == ["kueue", "volcano"]
    assert (second["objects"], second["releases"], second["pruned"]) == (3, 1, ["x"])
    assert first["layers"] == [first["layers"][0]]     # the input is not changed


def test_stats_count_each_rendered_layer_with_its_files_under_its_folder():
    rendered = [
        {"layer": "kueue", "order": 50, "objects": 3, "releases": [{"name": "kueue"}], "folder": "50-kueue",
         "files": [{"path": "manifests.yaml", "content": "x"}, {"path": "helm/kueue/release.yaml", "content": "y"}]},
        {"layer": "gpu_nodes", "order": 30, "objects": 0, "releases": [], "folder": "30-gpu_nodes", "files": []}]
    stats = filters.k8s_stats_add({"mode": "render"}, rendered)
    assert stats == {"mode": "render", "objects": 3, "releases": 1, "layers": [
        {"name": "kueue", "order": 50, "objects": 3, "releases": ["kueue"],
         "files": ["50-kueue/manifests.yaml", "50-kueue/helm/kueue/release.yaml"]},
        {"name": "gpu_nodes", "order": 30, "objects": 0, "releases": [], "files": []}]}
    assert filters.k8s_stats_add({}, []) == {}
