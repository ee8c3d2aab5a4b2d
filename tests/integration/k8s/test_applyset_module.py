"""k8s_applyset against the in-memory API server, without a play: what it lists, deletes and reports.

Each test names the part of the Kubernetes API reference it follows; the fake
API server models it (test_fake_apiserver.py).
"""
import tempfile

import pytest

from fake_apiserver import FakeAPIServer
from support.module_args import ExitJson, FailJson, patch_module_args

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import applyset as aset
from ansible_collections.gpuops.platform.plugins.module_utils._k8s import discovery
from ansible_collections.gpuops.platform.plugins.module_utils._k8s.api import reader
from ansible_collections.gpuops.platform.plugins.modules import k8s_applyset
from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client as k8s_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client

pytestmark = pytest.mark.usefixtures("module_exits")

NAMESPACE = "gpuops-system"
SET = "gpuops-gpu-tenants"
SET_ID = aset.applyset_id(SET, NAMESPACE)
DISCOVERY = ("/version", "/api", "/apis")


def run(api, check_mode=False, **params):
    """The module's result, as a task gets it."""
    args = dict(dict(namespace=NAMESPACE, host=api.url, api_key="t0ken", _ansible_check_mode=check_mode), **params)
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as err:
            k8s_applyset.main()
    return dict(err.value.args[0], failed=err.type is FailJson)


def table(api):
    """The API table, as gpuops.platform.k8s_discovery gives it to the role (gpuops_k8s_api_table)."""
    return discovery.discover(reader(get_api_client(host=api.url, api_key="t0ken")), version=False)["table"]


def reconcile(api, objects, check_mode=False, **params):
    """One set's result, with the table the role passes."""
    result = run(api, check_mode, name=SET, objects=objects, api_table=table(api), **params)
    assert not result.get("failed"), result
    return result["sets"][0]


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


def test_with_the_api_table_no_discovery_call_is_made(api):
    """The paths come from the table (group, version, resource, scope): kubernetes.core's discovery is never asked."""
    rows = table(api)
    del api.requests[:]
    result = run(api, name=SET, objects=tenant("team-a"), api_table=rows)
    assert result["changed"] and "Namespace team-b" in result["pruned"]
    assert not [r for r in api.requests if r[1] in DISCOVERY or r[1] in ("/api/v1",) or
                (r[1].startswith("/apis/") and r[1].count("/") == 3)], api.requests
    # One list of the parents, one per group-kind, the namespace's kinds once each, the deletes and the parent.
    assert [r[0] for r in api.requests].count("DELETE") == 3
    assert [r for r in api.requests if r[0] == "PATCH"] and api.writes()


def test_without_the_table_the_module_reads_it_in_two_calls(api):
    """Aggregated discovery (https://kubernetes.io/docs/concepts/overview/kubernetes-api/#aggregated-discovery)."""
    get_api_client(host=api.url, api_key="t0ken")  # kubernetes.core's discovery cache file, as any earlier client leaves
    k8s_client._pool.clear()
    del api.requests[:]
    result = run(api, name=SET, objects=tenant("team-a") + tenant("team-b"))
    assert not result["failed"] and result["pruned"] == [] and result["group_kinds"] == [
        "LocalQueue.kueue.x-k8s.io", "Namespace", "ResourceQuota"]
    assert [r[1] for r in api.requests if r[1] in DISCOVERY or r[1] == "/api/v1" or
            (r[1].startswith("/apis/") and r[1].count("/") == 3)] == ["/api", "/apis"]


@pytest.mark.parametrize("params, message", [
    ({"name": SET, "api_table": [{"group": "", "version": "v1", "kind": "Secret"}]}, "lacks resource, namespaced, preferred"),
    ({"sets": [{"name": SET}, {"name": SET}]}, "each ApplySet parent name must be given once"),
    ({"name": SET, "objects": [{"kind": "ConfigMap", "metadata": {"name": "x"}}]}, "every object needs apiVersion"),
])
def test_bad_input_fails_with_what_to_change_and_changes_nothing(api, params, message):
    result = run(api, **params)
    assert result["failed"] and message in result["msg"]
    assert api.writes() == []


def test_a_parent_of_another_tool_is_refused(api):
    """KEP-3659: the parent's applyset.kubernetes.io/tooling names the tool that owns the set."""
    api.add({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": SET, "namespace": NAMESPACE, "labels": {aset.ID_LABEL: SET_ID},
        "annotations": {aset.TOOLING_ANNOTATION: "kubectl/v1.36"}}})
    result = run(api, name=SET, objects=tenant("team-a"), api_table=table(api))
    assert result["failed"] and "not of this collection" in result["msg"] and "kubectl/v1.36" in result["msg"]
    assert api.writes() == []


def test_a_kind_that_takes_no_list_is_left_out_of_the_foreign_object_check(api):
    """APIResource.verbs (API reference, discovery): v1 Binding and LocalSubjectAccessReview take only create, a LIST
    of them is 405 MethodNotAllowed; the table carries the verbs, so the check never asks."""
    result = reconcile(api, tenant("team-a"))
    assert "Namespace team-b" in result["pruned"]
    assert not [r for r in api.requests if "/namespaces/team-b/" in r[1] and r[1].endswith(
        ("/bindings", "/localsubjectaccessreviews"))], api.requests
    # Every kind the namespace was checked for takes a list: no request was refused.
    lists = [r[1].rpartition("/")[2] for r in api.requests if r[0] == "GET" and "/namespaces/team-b/" in r[1]]
    assert "configmaps" in lists and "localqueues" in lists
    assert not set(lists) & {"bindings", "localsubjectaccessreviews"}


def test_a_hand_built_table_without_verbs_takes_the_405_as_nothing_listable(api):
    """A table row without verbs (built by hand) allows every verb: the LIST of v1 Binding is asked, and its 405
    MethodNotAllowed means nothing of that kind is there."""
    rows = [dict((k, v) for k, v in r.items() if k != "verbs") for r in table(api)]
    result = run(api, name=SET, objects=tenant("team-a"), api_table=rows)
    assert not result["failed"] and "Namespace team-b" in result["pruned"]
    assert "/api/v1/namespaces/team-b/bindings" in [r[1] for r in api.requests]


def test_a_kind_missing_from_the_table_reads_it_again_once(api):
    """A custom resource is served once its CRD is Established (CustomResourceDefinition, API reference): a table read
    before then lacks its kind, so the module reads the table again, once, and finds the members of that kind."""
    rows = [r for r in table(api) if r["group"] != "kueue.x-k8s.io"]
    del api.requests[:]
    result = run(api, name=SET, objects=tenant("team-a"), api_table=rows)
    assert "LocalQueue.kueue.x-k8s.io team-b/default" in result["pruned"] and result["unlisted_group_kinds"] == []
    assert [r[1] for r in api.requests if r[1] in DISCOVERY] == ["/api", "/apis"]
