"""The k8s_node_taints module over kubernetes.core's client: one run for all the nodes, its GETs before its merge
patches, 404 and 409 as the dynamic client raises them, check and diff mode, and bad input refused before any call."""
import json
from unittest import mock

import pytest

from support.module_args import run_main

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ConflictError, NotFoundError
from ansible_collections.gpuops.platform.plugins.modules import k8s_node_taints

pytestmark = pytest.mark.usefixtures("module_exits")

GPU = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


class FakeApi:
    """kubernetes.core's client as the module's Api uses it (client.client.request by path): a missing node is the
    dynamic client's NotFoundError, a stale resourceVersion its ConflictError (the server's 409)."""

    def __init__(self, nodes, stale=0, down=False):
        self.nodes = dict((n, {"metadata": {"name": n, "resourceVersion": "7"}, "spec": {"taints": t}})
                          for n, t in nodes.items())
        self.stale, self.down, self.requests, self.connected = stale, down, [], False
        self.client = self

    def connect(self, **kwargs):
        self.connected = True
        return self

    def request(self, method, path, serializer=None, body=None, **params):
        self.requests.append((method, path, params.get("content_type"), body))
        if self.down:
            raise ConnectionRefusedError("[Errno 111] Connection refused")
        name = path.rsplit("/", 1)[1]
        if name not in self.nodes:
            raise NotFoundError(ApiException(status=404, reason="Not Found"))
        node = self.nodes[name]
        if method == "GET":
            return json.loads(json.dumps(node))
        if self.stale:
            self.stale -= 1
            node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        if body["metadata"]["resourceVersion"] != node["metadata"]["resourceVersion"]:
            raise ConflictError(ApiException(status=409, reason="Conflict"))
        node["spec"]["taints"] = body["spec"]["taints"]
        return node


def run(api, args, check_mode=False, diff=False):
    return run_main(k8s_node_taints.main, args, check_mode, diff,
                    [mock.patch.object(k8s_node_taints, "get_api_client", side_effect=api.connect)])


def test_one_run_reads_every_node_then_patches_those_that_lack_a_taint():
    api = FakeApi({"gpu-a": [NOT_READY], "gpu-b": [GPU]})
    ok, result = run(api, {"nodes": ["gpu-a", "gpu-b"], "taints": [GPU]}, diff=True)
    assert ok and result["changed"] and result["changed_nodes"] == ["gpu-a"]
    assert [r[:3] for r in api.requests] == [("GET", "/api/v1/nodes/gpu-a", None), ("GET", "/api/v1/nodes/gpu-b", None),
                                             ("PATCH", "/api/v1/nodes/gpu-a", "application/merge-patch+json")]
    assert api.requests[2][3] == {"metadata": {"resourceVersion": "7"}, "spec": {"taints": [NOT_READY, GPU]}}
    assert result["diff"] == [{"before_header": "Node gpu-a taints", "after_header": "Node gpu-a taints",
                               "before": {"taints": [NOT_READY]}, "after": {"taints": [NOT_READY, GPU]}}]
    ok, again = run(api, {"nodes": ["gpu-a", "gpu-b"], "taints": [GPU]})
    assert ok and not again["changed"] and [r[0] for r in api.requests[3:]] == ["GET", "GET"]


def test_a_conflict_reads_the_node_again():
    api = FakeApi({"gpu-a": []}, stale=1)
    ok, result = run(api, {"nodes": ["gpu-a"], "taints": [GPU]})
    assert ok and result["changed_nodes"] == ["gpu-a"] and api.nodes["gpu-a"]["spec"]["taints"] == [GPU]
    assert [r[0] for r in api.requests] == ["GET", "PATCH", "GET", "PATCH"]


def test_check_mode_patches_nothing():
    api = FakeApi({"gpu-a": [NOT_READY]})
    ok, result = run(api, {"nodes": ["gpu-a"], "taints": [GPU]}, check_mode=True)
    assert ok and result["changed"] and [r[0] for r in api.requests] == ["GET"]
    assert api.nodes["gpu-a"]["spec"]["taints"] == [NOT_READY]


def test_a_missing_node_fails_naming_it_and_taints_none():
    api = FakeApi({"gpu-a": []})
    ok, result = run(api, {"nodes": ["gpu-a", "gpu-x"], "taints": [GPU]})
    assert not ok and "Node(s) gpu-x not found: nothing was tainted" in result["msg"]
    assert [r[0] for r in api.requests] == ["GET", "GET"]


def test_an_unreachable_api_fails_naming_the_nodes():
    ok, result = run(FakeApi({"gpu-a": []}, down=True), {"nodes": ["gpu-a"], "taints": [GPU]})
    assert not ok and "tainting gpu-a failed" in result["msg"] and "Connection refused" in result["msg"]


def test_no_nodes_make_no_connection():
    api = FakeApi({})
    ok, result = run(api, {"nodes": [], "taints": [GPU]})
    assert ok and not result["changed"] and result["nodes"] == [] and not api.connected


@pytest.mark.parametrize("args, message", [
    ({"nodes": ["gpu-a"], "taints": [dict(GPU, effect="NoScheduling")]}, "effect"),
    ({"nodes": ["gpu-a"], "taints": [GPU, GPU]}, "taint 2 repeats gpu:NoSchedule"),
    ({"nodes": ["gpu-a", "gpu-a"], "taints": [GPU]}, "gpu-a named more than once"),
    ({"nodes": ["gpu-a"], "taints": [dict(GPU, key=" gpu")]}, "taint 1: key must be a non-empty string"),
])
def test_bad_input_is_refused_before_any_call(args, message):
    api = FakeApi({"gpu-a": []})
    ok, result = run(api, args)
    assert not ok and message in result["msg"] and api.requests == [] and not api.connected
