"""The run summary: "planned" under --check, pruned and kept objects per layer."""
import pytest

from ansible_collections.gpuops.platform.plugins.filter.k8s_objects import k8s_apply_report, k8s_stats_lines

LAYERS = [{"name": "gpu_tenants", "order": 80, "objects": 9, "releases": [], "changed": True,
           "pruned": ["ResourceQuota team-b/gpuops-tenant", "Namespace team-b"],
           "kept": ["Namespace team-c (holds objects this collection did not create: ConfigMap team-c/notebooks)"]},
          {"name": "gpu_sharing", "order": 20, "objects": 2, "releases": [], "changed": False}]


def test_check_mode_says_planned():
    lines = k8s_stats_lines({"mode": "apply", "check": True, "objects": 11, "releases": 0, "layers": LAYERS})
    assert lines[0] == "Kubernetes GPU stack planned (check mode): 2 layers, 11 objects, 0 Helm releases"
    assert lines[1] == "20 gpu_sharing: 2 objects, unchanged"
    assert lines[2].startswith("80 gpu_tenants: 9 objects, changes planned, prune planned 2 "
                               "(ResourceQuota team-b/gpuops-tenant, Namespace team-b), kept 1 no longer planned")
    assert "applied" not in " ".join(lines)


def test_apply_mode_says_applied_and_pruned():
    lines = k8s_stats_lines({"mode": "apply", "check": False, "objects": 11, "releases": 0, "layers": LAYERS})
    assert lines[0].startswith("Kubernetes GPU stack applied:")
    assert ", changed, pruned 2 (" in lines[2]


# Registered results as kubernetes.core.k8s (6.x, module_utils/k8s/runner.py) returns them: a list of
# definitions gives {"changed", "result": {"results": [...]}}, one definition gives the item itself; the
# item has a diff only under --diff, and for a server-side apply the diff's "before" is {} when the object
# did not exist.
def _item(kind, name, changed, namespace=None, diff=None):
    meta = {"name": name, "resourceVersion": "7"}
    if namespace:
        meta["namespace"] = namespace
    item = {"changed": changed, "method": "apply", "result": {"kind": kind, "apiVersion": "v1", "metadata": meta}}
    if diff is not None:
        item["diff"] = diff
    return item


NAMESPACE = _item("Namespace", "team-a", True, diff={"before": {}, "after": {"metadata": {"name": "team-a"}}})
OBJECTS = {"changed": True, "result": {"results": [
    _item("ResourceQuota", "gpuops-tenant", True, "team-a", diff={
        "before": {"spec": {"hard": {"requests.nvidia.com/gpu": "4"}}, "metadata": {"resourceVersion": "6"}},
        "after": {"spec": {"hard": {"requests.nvidia.com/gpu": "6"}}, "metadata": {"resourceVersion": "7"}}}),
    _item("ConfigMap", "nvidia-device-plugin-config", False, "gpu-operator", diff={"before": {}, "after": {}}),
    _item("Secret", "pull", True, "team-a", diff={"before": {"data": {"token": "b2xk"}},
                                                  "after": {"data": {"token": "bmV3"}}}),
]}}


def test_report_sorts_objects_into_created_changed_and_unchanged():
    report = k8s_apply_report([NAMESPACE, {"skipped": True, "changed": False}, OBJECTS])
    assert report["created"] == ["Namespace team-a"]
    assert report["changed"] == ["ResourceQuota team-a/gpuops-tenant", "Secret team-a/pull"]
    assert report["unchanged"] == 1
    # Server-set fields are no change of ours; values never appear.
    assert report["fields"]["ResourceQuota team-a/gpuops-tenant"] == ["spec.hard.requests.nvidia.com/gpu"]
    assert report["fields"]["Secret team-a/pull"] == ["data.token"]


def test_without_diff_a_created_object_counts_as_changed():
    bare = {"changed": True, "result": {"results": [
        _item("Namespace", "team-a", True), _item("ConfigMap", "c", False, "team-a")]}}
    report = k8s_apply_report([bare])
    assert report == {"created": [], "changed": ["Namespace team-a"], "unchanged": 1, "fields": {}}


def _stamped(kind, name, created, entries):
    """A changed object as the API server returns it: its creation time and managedFields entries."""
    item = _item(kind, name, True, "team-a")
    item["result"]["metadata"].update(creationTimestamp=created, managedFields=[
        {"manager": manager, "operation": operation, "time": stamp, "fieldsType": "FieldsV1", "fieldsV1": {}}
        for manager, operation, stamp in entries])
    return item


@pytest.mark.parametrize("created, entries, counted", [
    # Made by this apply: its one entry, an Apply, stamped when the object was (one second apart at most).
    ("2026-11-25T10:00:00Z", [("gpuops-platform", "Apply", "2026-11-25T10:00:00Z")], "created"),
    ("2026-11-25T10:00:01Z", [("gpuops-platform", "Apply", "2026-11-25T10:00:00Z")], "created"),
    ("2026-11-25T10:00:00.123456Z", [("gpuops-platform", "Apply", "2026-11-25T09:59:59Z")], "created"),
    # Made before: an older creation, another manager's entry, an Update, or no timestamps.
    ("2026-11-25T09:59:58Z", [("gpuops-platform", "Apply", "2026-11-25T10:00:00Z")], "changed"),
    ("2026-11-25T10:00:00Z", [("gpuops-platform", "Apply", "2026-11-25T10:00:00Z"),
                              ("kubectl-edit", "Update", "2026-11-25T10:00:00Z")], "changed"),
    ("2026-11-25T10:00:00Z", [("kubectl-client-side-apply", "Update", "2026-11-25T10:00:00Z")], "changed"),
    (None, [("gpuops-platform", "Apply", "2026-11-25T10:00:00Z")], "changed"),
    ("2026-11-25T10:00:00Z", [("gpuops-platform", "Apply", None)], "changed"),
    ("yesterday", [("gpuops-platform", "Apply", "yesterday")], "changed"),
])
def test_without_diff_creation_is_told_by_the_servers_timestamps(created, entries, counted):
    report = k8s_apply_report([{"changed": True, "result": {"results": [_stamped("ConfigMap", "c", created, entries)]}}])
    assert report[counted] == ["ConfigMap team-a/c"]
    assert report["created" if counted == "changed" else "changed"] == []


def test_a_diff_decides_over_the_timestamps():
    item = _stamped("ConfigMap", "c", "2026-11-25T10:00:00Z", [("gpuops-platform", "Apply", "2026-11-25T10:00:00Z")])
    item["diff"] = {"before": {"data": {"a": "1"}}, "after": {"data": {"a": "2"}}}
    assert k8s_apply_report([item])["changed"] == ["ConfigMap team-a/c"]


def test_the_applys_own_created_decides_over_diff_and_timestamps():
    # k8s_server_side_apply says whether it created the object (the API's answers): a patched object stamped in the
    # second it was created, or whose diff has an empty before, is changed; a created one is created.
    patched = _stamped("RayCluster", "demo", "2026-11-25T10:00:00Z", [("gpuops-platform", "Apply", "2026-11-25T10:00:00Z")])
    patched["created"] = False
    added = _item("ConfigMap", "d", True, "team-a", diff={"before": {}, "after": {"data": {"a": "1"}}})
    added["created"] = False
    made = dict(_item("ConfigMap", "e", True, "team-a"), created=True)
    report = k8s_apply_report([{"changed": True, "result": {"results": [patched, added, made]}}])
    assert report["created"] == ["ConfigMap team-a/e"]
    assert report["changed"] == ["RayCluster team-a/demo", "ConfigMap team-a/d"]


def test_summary_counts_objects_per_layer_and_lists_them_only_under_diff():
    layer = {"name": "gpu_tenants", "order": 80, "objects": 4, "releases": [], "changed": True,
             "report": k8s_apply_report([NAMESPACE, OBJECTS])}
    plain = k8s_stats_lines({"mode": "apply", "check": False, "objects": 4, "releases": 0, "layers": [layer]})
    assert plain[1] == "80 gpu_tenants: 4 objects, changed (objects: 1 created, 2 changed, 1 unchanged)"
    assert len(plain) == 2
    checked = k8s_stats_lines({"mode": "apply", "check": True, "diff": True, "objects": 4, "releases": 0,
                               "layers": [layer]})
    assert checked[1] == "80 gpu_tenants: 4 objects, changes planned (objects: 1 to create, 2 to change, 1 unchanged)"
    assert checked[2:] == ["    create Namespace team-a",
                           "    change ResourceQuota team-a/gpuops-tenant: spec.hard.requests.nvidia.com/gpu",
                           "    change Secret team-a/pull: data.token"]
    assert "bmV3" not in " ".join(checked) and "b2xk" not in " ".join(checked)


def test_values_show_old_and_new_except_in_a_secret():
    report = k8s_apply_report([NAMESPACE, OBJECTS], values=True)
    assert report["fields"]["ResourceQuota team-a/gpuops-tenant"] == ["spec.hard.requests.nvidia.com/gpu: 4 -> 6"]
    assert report["fields"]["Secret team-a/pull"] == ["data.token"]
    long = {"changed": True, "result": {"results": [_item("ConfigMap", "c", True, "ns", diff={
        "before": {"data": {"a": "x" * 200}}, "after": {"data": {"b": {"k": [1, 2]}}}})]}}
    fields = k8s_apply_report([long], values=True)["fields"]["ConfigMap ns/c"]
    assert fields == ["data.a: %s... -> (none)" % ("x" * 57), 'data.b.k: (none) -> [1, 2]']
    # A map that was empty is told by its new keys, not as "{} -> (none)".
    labels = {"changed": True, "result": {"results": [_item("Node", "gpu-b", True, diff={
        "before": {"metadata": {"labels": {}}}, "after": {"metadata": {"labels": {"gpu": "true"}}}})]}}
    assert k8s_apply_report([labels], values=True)["fields"]["Node gpu-b"] == ["metadata.labels.gpu: (none) -> true"]


def test_a_member_still_finalizing_is_named_without_a_change():
    """ObjectMeta.deletionTimestamp (API reference): deleted on an earlier run, held by finalizers."""
    layer = {"name": "gpu_tenants", "order": 80, "objects": 9, "releases": [], "changed": False,
             "finalizing": ["Namespace team-b (being deleted since 2026-11-01T10:00:00Z)"]}
    lines = k8s_stats_lines({"mode": "apply", "check": False, "objects": 9, "releases": 0, "layers": [layer]})
    assert lines[1] == ("80 gpu_tenants: 9 objects, unchanged, still finalizing 1 "
                        "(Namespace team-b (being deleted since 2026-11-01T10:00:00Z))")


def test_recovered_releases_and_objects_check_mode_could_not_dry_run_are_told_after_the_layers():
    layers = [dict(LAYERS[1], recovered=["kueue: pending-upgrade at revision 3: rolled back to revision 2"]),
              dict(LAYERS[0], recovered=[])]
    unchecked = [{"layer": "gpu_tenants", "count": 2, "kinds": ["ConfigMap", "LocalQueue"]}]
    lines = k8s_stats_lines({"mode": "apply", "check": True, "objects": 11, "releases": 0, "layers": layers,
                             "unchecked": unchecked})
    assert lines[-2:] == [
        "Planned Helm recoveries: kueue: pending-upgrade at revision 3: rolled back to revision 2",
        "2 object(s) of gpu_tenants depend on a namespace or CRD that this run would create first; they were not "
        "dry-run: ConfigMap, LocalQueue"]
    applied = k8s_stats_lines({"mode": "apply", "check": False, "objects": 11, "releases": 0, "layers": layers})
    assert applied[-1].startswith("Helm recoveries: kueue: ")
    # Nothing recovered, nothing left out: no such line.
    assert len(k8s_stats_lines({"mode": "apply", "objects": 11, "releases": 0, "layers": LAYERS})) == 3
