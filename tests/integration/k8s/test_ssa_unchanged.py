"""k8s_server_side_apply leaves alone what an apply would not change: ssa.unchanged_by_apply against managedFields as
a real API server records them, and the module against the in-memory server (a no-op writes nothing, a drifted or
dropped field is applied again).

Server-Side Apply (https://kubernetes.io/docs/reference/using-api/server-side-apply/): each manager's entry in
metadata.managedFields names the fields it owns in the FieldsV1 format of structured-merge-diff: "f:<name>" a map
field, "k:<json>" an item of a list keyed by some of its fields, "v:<json>" a member of a set, "i:<n>" an item by
index, "." the map or item itself. An applied configuration is the manager's whole intent: applying the fields it
owns, at the values they hold, stores the object as it is.
"""
import copy
import json
import urllib.request

import pytest

from fake_apiserver import FakeAPIServer

from test_ssa_module import MANAGER, run

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import ssa

pytestmark = pytest.mark.slow

DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "probe", "namespace": "gpu-operator", "labels": {"app": "probe"}},
    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "probe"}},
             "template": {"metadata": {"labels": {"app": "probe"}},
                          "spec": {"containers": [{"name": "probe", "image": "nvcr.io/probe:1.0", "args": ["--once"],
                                                   "ports": [{"containerPort": 8080, "protocol": "TCP"}]}],
                                   "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}},
}
# The entry a real API server records for that apply: containers keyed by name, ports by containerPort and protocol,
# the selector and tolerations atomic, each keyed item and map with its own "." member.
FIELDS = {
    "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
    "f:spec": {
        "f:replicas": {}, "f:selector": {},
        "f:template": {
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {
                "f:containers": {'k:{"name":"probe"}': {
                    ".": {}, "f:name": {}, "f:image": {}, "f:args": {},
                    "f:ports": {".": {}, 'k:{"containerPort":8080,"protocol":"TCP"}': {
                        ".": {}, "f:containerPort": {}, "f:protocol": {}}}}},
                "f:tolerations": {}}}},
}


def live(fields=None, manager=MANAGER, operation="Apply", api_version="apps/v1", **changes):
    """The Deployment as the server holds it: what was applied, the server's defaults and a sidecar another manager
    added, and the managedFields entry of this manager."""
    obj = copy.deepcopy(DEPLOYMENT)
    spec = obj["spec"]["template"]["spec"]
    spec["containers"][0]["imagePullPolicy"] = "IfNotPresent"  # defaulted: owned by no applier
    spec["containers"].append({"name": "mesh-proxy", "image": "proxy:2"})  # another manager's item
    spec["restartPolicy"] = "Always"
    obj["metadata"].update(uid="u-1", resourceVersion="7", managedFields=[
        {"manager": manager, "operation": operation, "apiVersion": api_version, "fieldsType": "FieldsV1",
         "fieldsV1": FIELDS if fields is None else fields},
        {"manager": "mesh-injector", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {'k:{"name":"mesh-proxy"}': {
             ".": {}, "f:name": {}, "f:image": {}}}}}}}}])
    for path, value in changes.items():
        node = obj
        keys = path.split(".")
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[keys[-1]] = value
    obj["status"] = {"readyReplicas": 1}
    return obj


def test_an_object_owned_as_applied_at_the_same_values_is_unchanged_whatever_others_added():
    assert ssa.unchanged_by_apply(DEPLOYMENT, live(), MANAGER) is True


@pytest.mark.parametrize("why, before", [
    ("an owned value drifted", live(**{"spec.template.spec.containers.0.image": "nvcr.io/probe:0.9"})),
    ("an atomic list drifted", live(**{"spec.template.spec.containers.0.args": ["--once", "--verbose"]})),
    ("an atomic map drifted", live(**{"spec.selector": {"matchLabels": {"app": "probe", "tier": "gpu"}}})),
    ("a number became a string", live(**{"spec.replicas": "1"})),
    ("a boolean is not a number", live(**{"spec.replicas": True})),
    ("the manager owns a field the configuration dropped",
     live(fields=dict(FIELDS, **{"f:spec": dict(FIELDS["f:spec"], **{"f:paused": {}})}))),
    ("the manager does not own the replicas yet",
     live(fields=dict(FIELDS, **{"f:spec": dict((k, v) for k, v in FIELDS["f:spec"].items() if k != "f:replicas")}))),
    ("another manager's entry", live(manager="kubectl")),
    ("an update, not an apply", live(operation="Update")),
    ("another apiVersion", live(api_version="apps/v1beta2")),
    ("no state before", None),
])
def test_anything_an_apply_would_set_give_up_or_take_over_is_applied(why, before):
    assert ssa.unchanged_by_apply(DEPLOYMENT, before, MANAGER) is False, why


def test_keyed_list_items_are_matched_by_their_key_fields_not_by_position():
    before = live()
    containers = before["spec"]["template"]["spec"]["containers"]
    containers.reverse()  # the other manager's item first: keyed items are found by name
    assert ssa.unchanged_by_apply(DEPLOYMENT, before, MANAGER) is True
    # A container the configuration adds has no member yet: applied.
    more = copy.deepcopy(DEPLOYMENT)
    more["spec"]["template"]["spec"]["containers"].append({"name": "second", "image": "x:1"})
    assert ssa.unchanged_by_apply(more, before, MANAGER) is False
    # One the configuration dropped is still owned: applied (the server removes it), whether or not another
    # item of the manager's stays.
    two = json.loads(json.dumps(FIELDS))
    two["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"second"}'] = {".": {}, "f:name": {}, "f:image": {}}
    both = live(fields=two)
    both["spec"]["template"]["spec"]["containers"].append({"name": "second", "image": "x:1"})
    assert ssa.unchanged_by_apply(more, both, MANAGER) is True
    assert ssa.unchanged_by_apply(DEPLOYMENT, both, MANAGER) is False
    fewer = copy.deepcopy(DEPLOYMENT)
    fewer["spec"]["template"]["spec"]["containers"] = [{"name": "other", "image": "x:1"}]
    assert ssa.unchanged_by_apply(fewer, before, MANAGER) is False
    # Two items of one key cannot both be the one member.
    twice = copy.deepcopy(DEPLOYMENT)
    twice["spec"]["template"]["spec"]["containers"].append(copy.deepcopy(twice["spec"]["template"]["spec"]["containers"][0]))
    doubled = json.loads(json.dumps(FIELDS))
    doubled["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"mesh-proxy"}'] = {".": {}, "f:name": {}}
    assert ssa.unchanged_by_apply(twice, live(fields=doubled), MANAGER) is False


def test_a_port_applied_without_its_defaulted_key_field_is_applied_as_the_server_must_tell():
    # The server keys ports by containerPort and the protocol it defaults: the item as applied lacks a key field.
    obj = copy.deepcopy(DEPLOYMENT)
    del obj["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"]
    fields = json.loads(json.dumps(FIELDS))
    del fields["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"probe"}']["f:ports"][
        'k:{"containerPort":8080,"protocol":"TCP"}']["f:protocol"]
    assert ssa.unchanged_by_apply(obj, live(fields=fields), MANAGER) is False


def test_a_set_of_scalars_and_an_index_keyed_list():
    obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab", "finalizers": ["a.io/x", "b.io/y"]}}
    before = {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "lab", "finalizers": ["b.io/y", "a.io/x", "c.io/z"], "managedFields": [
            {"manager": MANAGER, "operation": "Apply", "apiVersion": "v1",
             "fieldsV1": {"f:metadata": {"f:finalizers": {".": {}, 'v:"a.io/x"': {}, 'v:"b.io/y"': {}}}}}]}}
    assert ssa.unchanged_by_apply(obj, before, MANAGER) is True
    before["metadata"]["finalizers"].remove("b.io/y")
    assert ssa.unchanged_by_apply(obj, before, MANAGER) is False
    indexed = copy.deepcopy(before)
    indexed["metadata"]["managedFields"][0]["fieldsV1"] = {"f:metadata": {"f:finalizers": {"i:0": {}, "i:1": {}}}}
    indexed["metadata"]["finalizers"] = ["a.io/x", "b.io/y"]
    assert ssa.unchanged_by_apply(obj, indexed, MANAGER) is False


def test_a_null_is_applied():
    obj = dict(DEPLOYMENT, spec=dict(DEPLOYMENT["spec"], replicas=None))
    assert ssa.unchanged_by_apply(obj, live(), MANAGER) is False


CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plan", "namespace": "team-a",
                                                                   "labels": {"app": "gpuops"}},
             "data": {"a": "1", "b": "2"}}


def _groups(obj):
    # Forced, as gpu_nodes' labels are: an edit by another manager takes the field over, and only a forced apply
    # takes it back (without force, the conflict fails the run naming both managers).
    return [{"objects": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a",
                                                                                "labels": {"app": "gpuops"}}}]},
            {"objects": [obj], "force_conflicts": True}]


def _patches(api, start):
    return [(p, (q.get("dryRun") or [None])[0]) for m, p, q, c in api.requests[start:] if m == "PATCH"]


def _merge_patch(api, path, body, manager):
    request = urllib.request.Request(api.url + path + "?fieldManager=" + manager, data=json.dumps(body).encode(),
                                     method="PATCH", headers={"Authorization": "Bearer t0ken-ssa",
                                                              "Content-Type": "application/merge-patch+json"})
    with urllib.request.urlopen(request) as answer:  # nosec - the in-memory server
        return json.loads(answer.read().decode())


def test_a_no_op_writes_nothing_and_drift_or_a_dropped_field_is_applied_again():
    path = "/api/v1/namespaces/team-a/configmaps/plan"
    with FakeAPIServer() as api:
        assert run(api, groups=_groups(CONFIGMAP))["changed"] is True
        start = len(api.requests)
        again = run(api, groups=_groups(CONFIGMAP), diff=True)
        assert again["changed"] is False and _patches(api, start) == [] and again["diff"] == []
        assert [r["result"]["metadata"]["name"] for r in again["result"]["results"]] == ["team-a", "plan"]
        assert all(r["changed"] is False for r in again["result"]["results"])

        # Someone edits a value this manager owns (an update takes the field over): the next apply writes it back.
        _merge_patch(api, path, {"data": {"a": "edited"}}, "kubectl-edit")
        start = len(api.requests)
        fixed = run(api, groups=_groups(CONFIGMAP), diff=True)
        assert fixed["changed"] is True and _patches(api, start) == [(path, None)], fixed
        assert api.get("ConfigMap", "plan", "team-a")["data"] == {"a": "1", "b": "2"}

        # Check mode shows a change as a dry run and writes nothing; then the field the plan drops is removed.
        dropped = copy.deepcopy(CONFIGMAP)
        del dropped["data"]["b"]
        start = len(api.requests)
        checked = run(api, groups=_groups(dropped), check_mode=True, diff=True)
        assert checked["changed"] is True and _patches(api, start) == [(path, "All")]
        assert api.get("ConfigMap", "plan", "team-a")["data"] == {"a": "1", "b": "2"}
        start = len(api.requests)
        assert run(api, groups=_groups(dropped))["changed"] is True and _patches(api, start) == [(path, None)]
        assert api.get("ConfigMap", "plan", "team-a")["data"] == {"a": "1"}
        start = len(api.requests)
        assert run(api, groups=_groups(dropped))["changed"] is False and _patches(api, start) == []
