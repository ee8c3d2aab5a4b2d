"""k8s_applyset against the in-memory API server, without a play: what it lists, deletes and reports.

Each test names the part of the Kubernetes API reference it follows; the fake
API server models it (test_fake_apiserver.py).
"""
import tempfile

import pytest

from fake_apiserver import FakeAPIServer

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import applyset as aset
from ansible_collections.gpuops.platform.plugins.modules import k8s_applyset
from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client as k8s_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client

NAMESPACE = "gpuops-system"
SET = "gpuops-gpu-tenants"
SET_ID = aset.applyset_id(SET, NAMESPACE)


class Failed(Exception):
    pass


class Module(object):
    """What k8s_applyset.reconcile reads from AnsibleModule."""

    def __init__(self, url, check_mode=False, **params):
        self.params = dict(dict(name=None, namespace=NAMESPACE, objects=[], sets=None, prune=True,
                                prune_namespaces_with_foreign_objects=False, field_manager="gpuops-platform",
                                kubeconfig=None, context=None, host=url, api_key="t0ken", ca_cert=None,
                                validate_certs=False), **params)
        self.check_mode = check_mode
        self.warnings = []

    def fail_json(self, **kwargs):
        raise Failed(kwargs["msg"])

    def warn(self, text):
        self.warnings.append(text)


def reconcile(api, objects, check_mode=False, **params):
    module = Module(api.url, check_mode, **params)
    client = get_api_client(k8s_applyset._Module(module))
    return k8s_applyset.reconcile(module, client, [{"name": SET, "objects": objects}], NAMESPACE)[0]


def member(kind, name, namespace=None, api_version="v1", **meta):
    obj = {"apiVersion": api_version, "kind": kind, "metadata": dict(name=name, labels={aset.PART_OF_LABEL: SET_ID}, **meta)}
    if namespace:
        obj["metadata"]["namespace"] = namespace
    return obj


def tenant(name):
    return [member("Namespace", name), member("ResourceQuota", "gpuops-tenant", name),
            member("LocalQueue", "default", name, "kueue.x-k8s.io/v1beta2")]


@pytest.fixture
def api():
    with FakeAPIServer() as server:
        server.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for obj in tenant("team-a") + tenant("team-b"):
            server.add(obj)
        yield server


@pytest.fixture(autouse=True)
def fresh_discovery(monkeypatch, tmp_path):
    """kubernetes.core keeps a client per server URL in memory and its discovery in a file under the temp
    dir: a server on a port an earlier test's server had would be read as that one."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(k8s_client, "_pool", {})


def deletes(api):
    return [r[1] for r in api.requests if r[0] == "DELETE"]


def test_an_object_already_being_deleted_is_not_deleted_again(api):
    """ObjectMeta.deletionTimestamp (API reference): set by the server when deletion began, the object stays
    until its finalizers clear. Such an object counts as gone: no second DELETE, no change, reported."""
    api.now = lambda: "2026-11-01T10:00:00Z"
    # A finalizer holds team-b's queue, so team-b stays Terminating after the first prune.
    key = next(k for k, o in api.objects.items() if o["kind"] == "LocalQueue" and k[2] == "team-b")
    api.objects[key]["metadata"]["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    first = reconcile(api, tenant("team-a"))
    assert first["changed"] and sorted(first["pruned"]) == [
        "LocalQueue.kueue.x-k8s.io team-b/default", "Namespace team-b", "ResourceQuota team-b/gpuops-tenant"]
    assert api.get("Namespace", "team-b")["metadata"]["deletionTimestamp"] == "2026-11-01T10:00:00Z"
    del api.requests[:]
    for dummy in range(3):
        again = reconcile(api, tenant("team-a"))
        assert not again["changed"] and again["pruned"] == [] and deletes(api) == []
        assert again["finalizing"] == ["LocalQueue.kueue.x-k8s.io team-b/default (being deleted since 2026-11-01T10:00:00Z)",
                                       "Namespace team-b (being deleted since 2026-11-01T10:00:00Z)"]
    # Once the finalizer clears, both are gone and nothing is left to report.
    api.objects[key]["metadata"].pop("finalizers")
    api._collect()
    assert api.get("Namespace", "team-b") is None
    assert reconcile(api, tenant("team-a"))["finalizing"] == []


def test_the_foreign_object_check_lists_preferred_versions_only_and_no_deprecated_api(api):
    """APIGroup.preferredVersion (API reference, discovery): one list per kind, at the version the server prefers;
    no request draws a deprecation Warning header (v1 Endpoints, kueue.x-k8s.io/v1beta1)."""
    reconcile(api, tenant("team-a"))
    lists = [r[1] for r in api.requests if r[0] == "GET" and "/namespaces/team-b/" in r[1]]
    assert lists, "the namespace was not checked for foreign objects"
    assert not [p for p in lists if "/kueue.x-k8s.io/v1beta1/" in p]
    assert "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-b/localqueues" in lists
    assert len(lists) == len(set(lists))
    assert api.warnings == []
