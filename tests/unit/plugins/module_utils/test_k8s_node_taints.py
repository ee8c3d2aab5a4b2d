"""Taints merged into several nodes: kubernetes.core.k8s_taint's merge, every node read before any patch, each
patch guarded by the resourceVersion read, and a node changed in between read and merged again."""
import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import node_taints
from ansible_collections.gpuops.platform.plugins.module_utils._k8s.node_taints import TaintError, check_names, \
    check_taints, converge, merged

GPU = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


class Conflict(Exception):
    pass


class Nodes:
    """Nodes by name; ``race`` names a taint another controller adds just before each of our patches lands."""

    def __init__(self, taints, race=None, races=1):
        self.nodes = dict((n, {"metadata": {"name": n, "resourceVersion": "1"}, "spec": {"taints": list(t)}})
                          for n, t in taints.items())
        self.race, self.races, self.calls = race, races, []

    def get(self, name):
        self.calls.append(("GET", name))
        node = self.nodes.get(name)
        return None if node is None else {"metadata": dict(node["metadata"]), "spec": {"taints": list(node["spec"]["taints"])}}

    def patch(self, name, body):
        self.calls.append(("PATCH", name, body))
        node = self.nodes[name]
        if self.race and self.races:
            self.races -= 1
            node["spec"]["taints"].append(self.race)
            node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        if body["metadata"]["resourceVersion"] != node["metadata"]["resourceVersion"]:
            raise Conflict(name)
        node["spec"]["taints"] = body["spec"]["taints"]
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)


def run(nodes, names, taints=(GPU,), state="present", check_mode=False):
    return converge(nodes.get, nodes.patch, names, check_taints(list(taints)), state, check_mode, conflict=Conflict)


def test_present_adds_the_missing_taint_after_the_nodes_own_and_updates_a_value():
    wanted = check_taints([GPU])
    assert merged([NOT_READY], wanted) == [NOT_READY, GPU]
    assert merged([dict(GPU, value="false"), NOT_READY], wanted) == [GPU, NOT_READY]
    assert merged([NOT_READY, GPU], wanted) is None
    # A taint without a value is the same as one with an empty value; the added one carries no empty value.
    bare = {"key": "gpu", "effect": "NoSchedule"}
    assert merged([bare], check_taints([bare])) is None
    assert merged([], check_taints([bare])) == [bare]
    # The same key with another effect is another taint.
    assert merged([dict(GPU, effect="NoExecute")], wanted) == [dict(GPU, effect="NoExecute"), GPU]


def test_absent_removes_by_key_and_effect_only():
    wanted = check_taints([dict(GPU, value="other")])
    assert merged([NOT_READY, GPU], wanted, "absent") == [NOT_READY]
    assert merged([NOT_READY, dict(GPU, effect="NoExecute")], wanted, "absent") is None


def test_every_node_is_read_before_any_is_patched_and_each_patch_carries_the_version_read():
    nodes = Nodes({"gpu-a": [NOT_READY], "gpu-b": [GPU], "gpu-c": []})
    results = run(nodes, ["gpu-a", "gpu-b", "gpu-c"])
    assert [c[:2] for c in nodes.calls] == [
        ("GET", "gpu-a"), ("GET", "gpu-b"), ("GET", "gpu-c"), ("PATCH", "gpu-a"), ("PATCH", "gpu-c")]
    assert nodes.calls[3][2] == {"metadata": {"resourceVersion": "1"}, "spec": {"taints": [NOT_READY, GPU]}}
    assert [(r["name"], r["changed"]) for r in results] == [("gpu-a", True), ("gpu-b", False), ("gpu-c", True)]
    assert results[0]["before"] == [NOT_READY] and results[0]["after"] == [NOT_READY, GPU]
    assert nodes.nodes["gpu-c"]["spec"]["taints"] == [GPU]
    # Idempotent: a second run reads and patches nothing.
    nodes.calls = []
    assert not any(r["changed"] for r in run(nodes, ["gpu-a", "gpu-b", "gpu-c"]))
    assert [c[0] for c in nodes.calls] == ["GET"] * 3


def test_a_missing_node_stops_the_run_before_any_patch():
    nodes = Nodes({"gpu-a": []})
    with pytest.raises(TaintError, match=r"Node\(s\) gpu-x not found: nothing was tainted"):
        run(nodes, ["gpu-a", "gpu-x"])
    assert [c[0] for c in nodes.calls] == ["GET", "GET"] and nodes.nodes["gpu-a"]["spec"]["taints"] == []


def test_a_taint_set_by_another_controller_in_between_is_kept():
    unreachable = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    nodes = Nodes({"gpu-a": [NOT_READY]}, race=unreachable)
    (result,) = run(nodes, ["gpu-a"])
    assert nodes.nodes["gpu-a"]["spec"]["taints"] == [NOT_READY, unreachable, GPU]
    assert result["after"] == [NOT_READY, unreachable, GPU] and result["before"] == [NOT_READY, unreachable]
    assert [c[0] for c in nodes.calls] == ["GET", "PATCH", "GET", "PATCH"]


def test_a_node_that_keeps_changing_is_named():
    nodes = Nodes({"gpu-a": []}, race={"key": "flapping", "effect": "NoSchedule"}, races=99)
    with pytest.raises(TaintError, match="Node gpu-a changed 5 times while its taints were being written"):
        run(nodes, ["gpu-a"])
    assert [c[0] for c in nodes.calls].count("PATCH") == node_taints.ATTEMPTS


def test_check_mode_reads_and_patches_nothing():
    nodes = Nodes({"gpu-a": [NOT_READY], "gpu-b": [GPU]})
    results = run(nodes, ["gpu-a", "gpu-b"], check_mode=True)
    assert [c[0] for c in nodes.calls] == ["GET", "GET"]
    assert [(r["changed"], r["after"]) for r in results] == [(True, [NOT_READY, GPU]), (False, [GPU])]


@pytest.mark.parametrize("taints, message", [
    ([], "taints must be a non-empty list"),
    ("gpu=true:NoSchedule", "taints must be a non-empty list"),
    (["gpu"], "taint 1 must be a mapping"),
    ([dict(GPU, effect="NoScheduling")], "taint 1 (gpu): effect must be one of NoSchedule, PreferNoSchedule, NoExecute"),
    ([GPU, dict(GPU, value="x")], "taint 2 repeats gpu:NoSchedule"),
    ([dict(GPU, key="gpu\n")], "taint 1: key must be a non-empty string"),
    ([dict(GPU, key="g\x00pu")], "taint 1: key must be a non-empty string"),
    ([dict(GPU, key=["gpu"])], "taint 1: key must be a non-empty string"),
    ([dict(GPU, value=1)], "taint 1 (gpu): value must be a string"),
    ([dict(GPU, operator="Equal")], "taint 1 has unknown field(s) operator"),
])
def test_bad_taints_are_named(taints, message):
    with pytest.raises(TaintError) as caught:
        check_taints(taints)
    assert message in str(caught.value)


@pytest.mark.parametrize("names, message", [
    ("gpu-a", "nodes must be a list"),
    (["gpu-a", "gpu-a"], "gpu-a named more than once"),
    (["../secrets"], "is not a node name"),
    ([""], "is not a node name"),
    ([None], "is not a node name"),
    (["gpu-a\n"], "is not a node name"),
    (["gpu\x00a"], "is not a node name"),
    (["ｇpu-a"], "is not a node name"),
    (["gpu-١"], "is not a node name"),
    (["GPU-A"], "is not a node name"),
    ([["gpu-a"]], "is not a node name"),
    (["a" * 254], "is not a node name"),
])
def test_bad_node_names_are_named(names, message):
    with pytest.raises(TaintError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_names(names)
