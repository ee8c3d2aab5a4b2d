"""The k8s_node_patches module: one run sends every planned merge patch, a node that changed since the plan (409)
or is gone (404) is named while the others are patched, check mode sends nothing, and bad input is refused before
any call."""
import json
from unittest import mock

import pytest

from support.module_args import run_main

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ConflictError, NotFoundError
from ansible_collections.gpuops.platform.plugins.modules import k8s_node_patches

pytestmark = pytest.mark.usefixtures("module_exits")

LABEL = {"metadata": {"labels": {"platform.gpuops.io/gpu-health": "ok"}}}
TAINTS = {"metadata": {"resourceVersion": "7"}, "spec": {"taints": [{"key": "gpu-health", "effect": "NoSchedule"}]}}


class FakeApi:
    """kubernetes.core's client as Api uses it: the server's 404 and 409 as the dynamic client raises them."""

    def __init__(self, nodes, down=False):
        self.nodes = dict((n, {"metadata": {"name": n, "resourceVersion": rv}}) for n, rv in nodes.items())
        self.down, self.requests, self.connected = down, [], False
        self.client = self

    def connect(self, **kwargs):
        self.connected = True
        return self

    def request(self, method, path, serializer=None, body=None, **params):
        self.requests.append((method, path, params.get("content_type"), json.loads(json.dumps(body))))
        if self.down:
            raise ConnectionRefusedError("[Errno 111] Connection refused")
        name = path.rsplit("/", 1)[1]
        if name not in self.nodes:
            raise NotFoundError(ApiException(status=404, reason="Not Found"))
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if rv and rv != self.nodes[name]["metadata"]["resourceVersion"]:
            raise ConflictError(ApiException(status=409, reason="Conflict"))
        return self.nodes[name]


def run(api, patches, check_mode=False):
    return run_main(k8s_node_patches.main, {"patches": patches}, check_mode,
                    patches=[mock.patch.object(k8s_node_patches, "get_api_client", side_effect=api.connect)])


def test_every_patch_goes_out_as_planned_in_one_run():
    api = FakeApi({"gpu-a": "7", "gpu-b": "3"})
    ok, result = run(api, [{"name": "gpu-a", "patch": TAINTS}, {"name": "gpu-b", "patch": LABEL}])
    assert ok and result["changed"] and result["patched"] == ["gpu-a", "gpu-b"] and result["refused"] == {}
    assert api.requests == [("PATCH", "/api/v1/nodes/gpu-a", "application/merge-patch+json", TAINTS),
                            ("PATCH", "/api/v1/nodes/gpu-b", "application/merge-patch+json", LABEL)]


def test_a_node_changed_since_the_plan_or_gone_is_named_and_the_others_are_patched():
    api = FakeApi({"gpu-a": "8", "gpu-b": "3"})
    ok, result = run(api, [{"name": "gpu-a", "patch": TAINTS}, {"name": "gpu-b", "patch": LABEL},
                           {"name": "gpu-x", "patch": LABEL}])
    assert not ok and result["changed"] and result["patched"] == ["gpu-b"]
    assert result["refused"] == {"gpu-a": "changed since the plan read it", "gpu-x": "not found"}
    assert "refused the patch of gpu-a (changed since the plan read it); gpu-x (not found): run again" in result["msg"]


def test_check_mode_and_an_empty_list_send_nothing():
    api = FakeApi({"gpu-a": "7"})
    ok, result = run(api, [{"name": "gpu-a", "patch": LABEL}], check_mode=True)
    assert ok and result["changed"] and result["patched"] == ["gpu-a"] and api.requests == [] and not api.connected
    ok, result = run(api, [])
    assert ok and not result["changed"] and api.requests == [] and not api.connected


def test_an_unreachable_api_fails_naming_the_nodes():
    ok, result = run(FakeApi({"gpu-a": "7"}, down=True), [{"name": "gpu-a", "patch": LABEL}])
    assert not ok and "patching gpu-a failed" in result["msg"] and "Connection refused" in result["msg"]


DEEP = {"metadata": {"labels": {}}}
_inner = DEEP["metadata"]["labels"]
for _level in range(10):
    _inner["x"] = {}
    _inner = _inner["x"]


@pytest.mark.parametrize("patches, message", [
    ([{"name": "gpu-a", "patch": {}}], "patch 2 ('gpu-a'): patch must be a non-empty mapping"),
    ([{"name": "gpu-a", "patch": {"status": {"capacity": {}}}}], "patch 2 ('gpu-a') sets status: a node patch sets metadata and spec only"),
    ([{"name": "gpu-a", "patch": LABEL}, {"name": "gpu-a", "patch": LABEL}], "gpu-a named more than once"),
    ([{"name": "../x", "patch": LABEL}], "is not a node name"),
    ([{"name": "gpu-a", "patch": DEEP}], "patch 2 ('gpu-a') nests deeper than 8 levels"),
])
def test_bad_input_is_refused_before_any_call(patches, message):
    api = FakeApi({"gpu-a": "7"})
    # A good patch first: nothing is sent before every patch is checked.
    ok, result = run(api, [{"name": "gpu-b", "patch": LABEL}] + patches)
    assert not ok and message in result["msg"] and "nothing was patched" in result["msg"]
    assert api.requests == [] and not api.connected
