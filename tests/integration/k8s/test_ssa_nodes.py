"""k8s_server_side_apply with the Nodes discovery listed (its ``nodes`` option), and k8s_node_taints with the Nodes
the label apply answered (its ``listed`` option), against the in-memory API server: the calls by verb and path.

Server-Side Apply (https://kubernetes.io/docs/reference/using-api/server-side-apply/): a LIST answers each item
with its metadata.managedFields, one entry per manager and operation, fieldsV1 naming the fields it owns (the
object's identity, apiVersion, kind, metadata.name, is never among them); an applier's configuration is its whole
intent, so an apply of the fields it owns, at the values they hold, changes nothing.
"""
import json
import urllib.request

import pytest

from fake_apiserver import FakeAPIServer

from test_ssa_module import MANAGER, TABLE, run_module

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import discovery, ssa
from ansible_collections.gpuops.platform.plugins.modules import k8s_node_taints, k8s_server_side_apply

pytestmark = pytest.mark.slow

NODE_TABLE = TABLE + [{"group": "", "version": "v1", "kind": "Node", "resource": "nodes", "namespaced": False,
                       "preferred": True}]
NAMES = ["gpu-%02d" % i for i in range(1, 6)]
TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}


def labels(name, count="8"):
    return {"platform.gpuops.io/gpu": "true", "platform.gpuops.io/gpu.count": count, "pool": name[:3]}


def patches(names=NAMES, **kw):
    return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": labels(n, **kw)}} for n in names]


def seed(api, names=NAMES):
    for name in names:
        api.add({"apiVersion": "v1", "kind": "Node",
                 "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                 "spec": {"podCIDR": "10.0.0.0/24"}, "status": {"allocatable": {"cpu": "96", "nvidia.com/gpu": "8"}}},
                manager="kubelet")


def listed(api):
    """The Nodes as k8s_discovery's nodes option gives them: one LIST, cut."""
    req = urllib.request.Request(api.url + "/api/v1/nodes", headers={"Authorization": "Bearer t0ken-ssa"})
    with urllib.request.urlopen(req) as answer:  # nosec - the in-memory server
        return discovery.nodes(json.loads(answer.read().decode()))


def run(module, api, check_mode=False, diff=False, **args):
    return run_module(module, api, check_mode, diff, **args)


def apply(api, objects, nodes, **kw):
    return run(k8s_server_side_apply, api, groups=[{"objects": objects, "force_conflicts": True}], nodes=nodes,
               field_manager=MANAGER, api_table=NODE_TABLE, **kw)


def node_calls(api, start):
    """``[(method, path)]`` of the Node requests since ``start`` (a dry run's PATCH marked)."""
    return [(m + (" dryRun" if q.get("dryRun") else ""), p) for m, p, q, c in api.requests[start:]
            if p.startswith("/api/v1/nodes")]


def test_a_first_apply_takes_the_listed_states_and_patches_each_changing_node_once():
    with FakeAPIServer() as api:
        seed(api)
        nodes = listed(api)
        # A LIST answers with managedFields (the real server's default), which the cut keeps for Apply entries only.
        assert all("managedFields" not in n["metadata"] for n in nodes)
        start = len(api.requests)
        first = apply(api, patches(), nodes)
        assert first["changed"] is True and all(r["changed"] for r in first["result"]["results"]), first
        assert node_calls(api, start) == [("PATCH", "/api/v1/nodes/%s" % n) for n in NAMES]
        assert api.get("Node", "gpu-01", "")["metadata"]["labels"]["platform.gpuops.io/gpu.count"] == "8"


def test_a_no_op_reads_and_writes_no_node():
    with FakeAPIServer() as api:
        seed(api)
        apply(api, patches(), listed(api))
        nodes = listed(api)
        assert all(n["metadata"]["managedFields"][0]["manager"] == MANAGER for n in nodes)
        versions = dict((k, o["metadata"]["resourceVersion"]) for k, o in api.objects.items())
        start = len(api.requests)
        again = apply(api, patches(), nodes, diff=True)
        assert again["changed"] is False and again.get("diff") == [], again
        assert node_calls(api, start) == []
        assert dict((k, o["metadata"]["resourceVersion"]) for k, o in api.objects.items()) == versions
        # Each result is the Node as listed, so what comes after (taints, allocatable) reads it from there.
        assert [r["result"] for r in again["result"]["results"]] == nodes
        # In check mode too: nothing to dry-run.
        start = len(api.requests)
        assert apply(api, patches(), nodes, check_mode=True)["changed"] is False
        assert node_calls(api, start) == []


def test_a_node_that_changes_is_patched_and_shown_and_the_others_are_not_written():
    with FakeAPIServer() as api:
        seed(api)
        apply(api, patches(), listed(api))
        nodes = listed(api)
        wanted = patches(NAMES[:1], count="4") + patches(NAMES[1:])
        start = len(api.requests)
        checked = apply(api, wanted, nodes, check_mode=True, diff=True)
        assert checked["changed"] is True
        assert node_calls(api, start) == [("PATCH dryRun", "/api/v1/nodes/gpu-01")]
        # --check --diff shows the Node that would change, as the cut it was listed in, and only that one.
        assert [d["before_header"] for d in checked["diff"]] == ["Node gpu-01"]
        assert checked["diff"][0]["before"]["metadata"]["labels"]["platform.gpuops.io/gpu.count"] == "8"
        assert checked["diff"][0]["after"]["metadata"]["labels"]["platform.gpuops.io/gpu.count"] == "4"
        assert "images" not in json.dumps(checked["diff"]) and "podCIDR" not in json.dumps(checked["diff"])
        start = len(api.requests)
        done = apply(api, wanted, nodes)
        assert [r["changed"] for r in done["result"]["results"]] == [True, False, False, False, False]
        assert node_calls(api, start) == [("PATCH", "/api/v1/nodes/gpu-01")]


def test_a_label_dropped_from_the_plan_is_applied_so_that_the_server_removes_it():
    with FakeAPIServer() as api:
        seed(api)
        apply(api, patches(), listed(api))
        # gpu-02's pool label went from the plan: the apply must give it up (the server removes it).
        fewer = patches()
        del fewer[1]["metadata"]["labels"]["pool"]
        nodes = listed(api)
        start = len(api.requests)
        done = apply(api, fewer, nodes)
        assert node_calls(api, start) == [("PATCH", "/api/v1/nodes/gpu-02")]
        assert done["result"]["results"][1]["changed"] is True
        assert "pool" not in api.get("Node", "gpu-02", "")["metadata"]["labels"]


def test_a_node_that_joined_after_the_list_is_read_once():
    with FakeAPIServer() as api:
        seed(api)
        nodes = listed(api)
        seed(api, ["gpu-06"])
        start = len(api.requests)
        done = apply(api, patches(NAMES + ["gpu-06"]), nodes)
        assert done["changed"] is True
        calls = node_calls(api, start)
        assert calls.count(("GET", "/api/v1/nodes/gpu-06")) == 1
        assert [c for c in calls if c[0] == "GET"] == [("GET", "/api/v1/nodes/gpu-06")]


@pytest.mark.parametrize("entry, expected", [
    ({"manager": MANAGER, "operation": "Apply", "apiVersion": "v1",
      "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}, "f:b": {}}}}}, True),
    # A map's own "." member (an update records it) changes nothing.
    ({"manager": MANAGER, "operation": "Apply", "apiVersion": "v1",
      "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:a": {}, "f:b": {}}}}}, True),
    # The manager owns a label the plan dropped: the apply would remove it.
    ({"manager": MANAGER, "operation": "Apply", "apiVersion": "v1",
      "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}, "f:b": {}, "f:c": {}}}}}, False),
    # It does not own b yet: the apply takes it.
    ({"manager": MANAGER, "operation": "Apply", "apiVersion": "v1", "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}}}},
     False),
    ({"manager": MANAGER, "operation": "Update", "apiVersion": "v1",
      "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}, "f:b": {}}}}}, False),
    ({"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
      "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}, "f:b": {}}}}}, False),
    ({"manager": MANAGER, "operation": "Apply", "apiVersion": "v1", "subresource": "status",
      "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}, "f:b": {}}}}}, False),
])
def test_unchanged_by_apply_needs_the_managers_apply_entry_to_own_exactly_the_applied_fields(entry, expected):
    before = {"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": "n", "labels": {"a": "1", "b": "2", "c": "3"}, "managedFields": [entry]}}
    obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"a": "1", "b": "2"}}}
    assert ssa.unchanged_by_apply(obj, before, MANAGER) is expected


def test_unchanged_by_apply_needs_the_values_and_a_definition_of_maps_of_scalars():
    entry = {"manager": MANAGER, "operation": "Apply", "apiVersion": "v1",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}}}}
    before = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"a": "1"}, "managedFields": [entry]}}
    obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"a": "1"}}}
    assert ssa.unchanged_by_apply(obj, before, MANAGER) is True
    assert ssa.unchanged_by_apply(dict(obj, metadata={"name": "n", "labels": {"a": "2"}}), before, MANAGER) is False
    assert ssa.unchanged_by_apply(dict(obj, spec={"taints": []}), before, MANAGER) is False
    assert ssa.unchanged_by_apply(dict(obj, metadata={"name": "n", "labels": {}}), before, MANAGER) is False
    assert ssa.unchanged_by_apply(dict(obj, apiVersion="v2"), before, MANAGER) is False
    assert ssa.unchanged_by_apply(obj, None, MANAGER) is False


def taint(api, names, listed_nodes, **kw):
    return run(k8s_node_taints, api, nodes=names, taints=[TAINT], listed=listed_nodes, **kw)


def test_the_taints_take_the_nodes_given_and_read_only_the_others():
    with FakeAPIServer() as api:
        seed(api)
        answered = apply(api, patches(), listed(api))
        states = [discovery.node_state(r["result"]) for r in answered["result"]["results"]]
        start = len(api.requests)
        done = taint(api, NAMES, states[1:])
        assert done["changed_nodes"] == NAMES
        calls = node_calls(api, start)
        assert [c for c in calls if c[0] == "GET"] == [("GET", "/api/v1/nodes/gpu-01")]
        assert sorted(c for c in calls if c[0] == "PATCH") == [("PATCH", "/api/v1/nodes/%s" % n) for n in NAMES]
        assert all(TAINT in api.get("Node", n, "")["spec"]["taints"] for n in NAMES)


def test_a_node_given_at_an_old_version_is_read_again_and_keeps_the_other_taint():
    with FakeAPIServer() as api:
        seed(api, NAMES[:1])
        stale = listed(api)
        other = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
        node = api.get("Node", "gpu-01", "")
        node["spec"]["taints"] = [other]
        node["metadata"]["resourceVersion"] = "999"
        start = len(api.requests)
        done = taint(api, NAMES[:1], stale)
        assert done["changed"] is True
        assert [c[0] for c in node_calls(api, start)] == ["PATCH", "GET", "PATCH"]
        assert api.get("Node", "gpu-01", "")["spec"]["taints"] == [other, TAINT]
