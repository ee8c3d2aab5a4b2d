"""The in-memory API server follows the Kubernetes API where the roles rely on it.

Each behaviour comes from the Kubernetes documentation:
- server-side apply: https://kubernetes.io/docs/reference/using-api/server-side-apply/
  (field management, conflicts, force, removal of fields a manager stopped applying,
  merge patches as Update operations);
- CRDs: https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/
  (the kind is served once the CRD is Established);
- API concepts: https://kubernetes.io/docs/reference/using-api/api-concepts/
  (404 for a missing namespace or kind, label selectors on list, delete);
- finalizers: https://kubernetes.io/docs/concepts/overview/working-with-objects/finalizers/
  and ObjectMeta.deletionTimestamp in the API reference;
- discovery: https://kubernetes.io/docs/concepts/overview/kubernetes-api/#discovery-api
  (APIGroup.preferredVersion, the aggregated APIGroupDiscoveryList of apidiscovery.k8s.io/v2);
- warnings: https://kubernetes.io/blog/2020/09/03/warnings/ (the `Warning: 299 - "..."` header
  on every request to a deprecated API).
Plain HTTP, no Ansible: these run in a second.
"""
import json
import time
import urllib.error
import urllib.request

import pytest

from fake_apiserver import FakeAPIServer

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
NODE = "/api/v1/nodes/gpu-a"


def call(api, method, path, body=None, ctype=APPLY, headers=None, **query):
    code, body, dummy = call_with_headers(api, method, path, body, ctype, headers, **query)
    return code, body


def call_with_headers(api, method, path, body=None, ctype=APPLY, headers=None, **query):
    url = api.url + path + ("?" + "&".join("%s=%s" % kv for kv in query.items()) if query else "")
    req = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None,
                                 headers=dict({"Content-Type": ctype}, **(headers or {})))
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read()), resp.headers
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read()), err.headers


def node(labels):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a", "labels": labels}}


def managers(body):
    return dict((m["manager"], m) for m in body["metadata"].get("managedFields", []))


@pytest.fixture
def api():
    with FakeAPIServer() as server:
        server.add({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a"}, "spec": {}})
        yield server


def test_apply_records_field_ownership_per_manager(api):
    code, body = call(api, "PATCH", NODE, node({"a": "1"}), fieldManager="gpuops-platform")
    assert code == 200
    mine = managers(body)["gpuops-platform"]
    assert mine["operation"] == "Apply" and mine["fieldsType"] == "FieldsV1"
    assert mine["fieldsV1"] == {"f:metadata": {"f:labels": {"f:a": {}}}}
    call(api, "PATCH", NODE, node({"b": "2"}), fieldManager="other")
    assert api.owners("Node", "gpu-a") == {"gpuops-platform": {"metadata.labels.a"}, "other": {"metadata.labels.b"}}


def test_changing_a_field_another_manager_owns_is_a_409_conflict(api):
    call(api, "PATCH", NODE, node({"nvidia.com/device-plugin.config": "default"}), fieldManager="kubectl-label")
    before = json.dumps(sorted(api.objects.items()))
    code, body = call(api, "PATCH", NODE, node({"nvidia.com/device-plugin.config": "ts4"}),
                      fieldManager="gpuops-platform")
    assert code == 409 and body["reason"] == "Conflict"
    assert body["details"]["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "kubectl-label"',
                                          "field": ".metadata.labels.nvidia.com/device-plugin.config"}]
    assert json.dumps(sorted(api.objects.items())) == before


def test_same_value_shares_ownership_without_conflict(api):
    call(api, "PATCH", NODE, node({"a": "1"}), fieldManager="one")
    code, dummy = call(api, "PATCH", NODE, node({"a": "1"}), fieldManager="two")
    assert code == 200
    assert api.owners("Node", "gpu-a") == {"one": {"metadata.labels.a"}, "two": {"metadata.labels.a"}}


def test_force_takes_ownership(api):
    call(api, "PATCH", NODE, node({"a": "1", "keep": "x"}), fieldManager="kubectl-label")
    code, body = call(api, "PATCH", NODE, node({"a": "2"}), fieldManager="gpuops-platform", force="true")
    assert code == 200 and body["metadata"]["labels"] == {"a": "2", "keep": "x"}
    assert api.owners("Node", "gpu-a") == {"gpuops-platform": {"metadata.labels.a"}, "kubectl-label": {"metadata.labels.keep"}}


def test_fields_a_manager_stops_applying_are_removed_unless_another_owns_them(api):
    call(api, "PATCH", NODE, node({"a": "1", "b": "1", "shared": "1"}), fieldManager="gpuops-platform")
    call(api, "PATCH", NODE, node({"shared": "1"}), fieldManager="other")
    code, body = call(api, "PATCH", NODE, node({"a": "1"}), fieldManager="gpuops-platform")
    assert code == 200 and body["metadata"]["labels"] == {"a": "1", "shared": "1"}


def test_a_merge_patch_is_an_update_that_takes_the_fields_it_sets(api):
    call(api, "PATCH", NODE, node({"a": "1"}), fieldManager="gpuops-platform")
    code, body = call(api, "PATCH", NODE, {"metadata": {"labels": {"a": "9"}}}, ctype=MERGE, fieldManager="kubectl-edit")
    assert code == 200 and managers(body)["kubectl-edit"]["operation"] == "Update"
    assert api.owners("Node", "gpu-a") == {"kubectl-edit": {"metadata.labels.a"}}
    # The applier lost the field, so applying it again is a conflict.
    assert call(api, "PATCH", NODE, node({"a": "1"}), fieldManager="gpuops-platform")[0] == 409


def test_a_crds_kind_is_served_only_once_established(api):
    api.crd_delay = 0.5
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "queues.example.com"},
           "spec": {"group": "example.com", "scope": "Cluster", "names": {"plural": "queues", "kind": "Queue"},
                    "versions": [{"name": "v1", "served": True, "storage": True}]}}
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/queues.example.com"
    assert call(api, "PATCH", path, crd, fieldManager="gpuops-platform")[0] == 201
    assert call(api, "GET", "/apis/example.com/v1/queues")[0] == 404
    assert "example.com" not in json.dumps(call(api, "GET", "/apis")[1])
    assert "status" not in call(api, "GET", path)[1]
    time.sleep(0.6)
    conditions = call(api, "GET", path)[1]["status"]["conditions"]
    assert {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"} in conditions
    assert call(api, "GET", "/apis/example.com/v1/queues")[0] == 200
    assert call(api, "GET", "/apis/example.com/v1")[1]["resources"][0]["kind"] == "Queue"


def test_missing_namespace_and_unknown_kind_are_404(api):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "nowhere"}}
    code, body = call(api, "PATCH", "/api/v1/namespaces/nowhere/configmaps/c", cm, fieldManager="m")
    assert code == 404 and body["message"] == 'namespaces "nowhere" not found'
    assert call(api, "GET", "/apis/example.com/v1/widgets")[0] == 404
    assert ("v1", "configmaps", "nowhere", "c") not in api.objects


def test_list_by_label_selector_and_delete(api):
    for name, labels in (("a", {"part": "x"}), ("b", {"part": "y"}), ("c", {})):
        api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
    api.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "in-a", "namespace": "a"}})

    def names(**query):
        return [o["metadata"]["name"] for o in call(api, "GET", "/api/v1/namespaces", **query)[1]["items"]]

    assert names(labelSelector="part=x") == ["a"]
    assert names(labelSelector="part!=x") == ["b", "c"]
    assert names(labelSelector="part") == ["a", "b"]
    assert call(api, "DELETE", "/api/v1/namespaces/a", dryRun="All")[0] == 200
    assert api.get("Namespace", "a") is not None
    assert call(api, "DELETE", "/api/v1/namespaces/a")[0] == 200
    # The namespace took its objects with it.
    assert api.get("Namespace", "a") is None and api.get("ConfigMap", "in-a", "a") is None
    assert call(api, "DELETE", "/api/v1/namespaces/a")[0] == 404


def test_dry_run_checks_conflicts_and_stores_nothing(api):
    call(api, "PATCH", NODE, node({"a": "1"}), fieldManager="kubectl-label")
    assert call(api, "PATCH", NODE, node({"a": "2"}), fieldManager="gpuops-platform", dryRun="All")[0] == 409
    code, body = call(api, "PATCH", NODE, node({"a": "2"}), fieldManager="gpuops-platform", dryRun="All", force="true")
    assert code == 200 and body["metadata"]["labels"] == {"a": "2"}
    assert api.get("Node", "gpu-a")["metadata"]["labels"] == {"a": "1"}


def test_creation_and_entry_times_follow_the_api_reference(api):
    """creationTimestamp on create (dry run too); an entry's time moves when its fields or values change,
    stays on a no-op, and stays for a manager whose field another one took over."""
    clock = iter(["2026-11-01T10:00:0%dZ" % i for i in range(10)])
    api.now = lambda: next(clock)
    path = "/api/v1/namespaces/team-a"
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"a": "1"}}}
    code, body = call(api, "PATCH", path, ns, fieldManager="gpuops-platform", dryRun="All")
    # As the API server does: the field manager stamps the entry, then the create stamps the object.
    assert code == 201 and managers(body)["gpuops-platform"]["time"] == "2026-11-01T10:00:00Z"
    assert body["metadata"]["creationTimestamp"] == "2026-11-01T10:00:01Z"
    assert api.get("Namespace", "team-a") is None
    code, body = call(api, "PATCH", path, ns, fieldManager="gpuops-platform")
    assert code == 201 and body["metadata"]["creationTimestamp"] == "2026-11-01T10:00:03Z"
    assert managers(body)["gpuops-platform"]["time"] == "2026-11-01T10:00:02Z"
    code, body = call(api, "PATCH", path, ns, fieldManager="gpuops-platform")
    assert code == 200 and managers(body)["gpuops-platform"]["time"] == "2026-11-01T10:00:02Z"
    changed = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"a": "2"}}}
    body = call(api, "PATCH", path, changed, fieldManager="gpuops-platform")[1]
    assert managers(body)["gpuops-platform"]["time"] == "2026-11-01T10:00:04Z"
    assert body["metadata"]["creationTimestamp"] == "2026-11-01T10:00:03Z"
    body = call(api, "PATCH", path, {"metadata": {"labels": {"b": "1"}}}, ctype=MERGE, fieldManager="kubectl-edit")[1]
    assert managers(body)["kubectl-edit"]["time"] == "2026-11-01T10:00:05Z"
    # The edit takes a over from the applier: the applier's time stays.
    body = call(api, "PATCH", path, {"metadata": {"labels": {"a": "3"}}}, ctype=MERGE, fieldManager="kubectl-edit")[1]
    assert managers(body)["kubectl-edit"]["time"] == "2026-11-01T10:00:06Z"
    assert "gpuops-platform" not in managers(body)
    # Seeded objects were made before any run.
    assert api.get("Node", "gpu-a")["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"


def test_finalizers_keep_a_deleted_object_marked_until_they_clear(api):
    """ObjectMeta.deletionTimestamp and finalizers (API reference, ObjectMeta; the Finalizers concept page)."""
    api.now = lambda: "2026-11-01T10:00:00Z"
    api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})
    api.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "held", "namespace": "team-b",
                                                                   "finalizers": ["example.com/hold"]}})
    api.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "free", "namespace": "team-b"}})
    code, body = call(api, "DELETE", "/api/v1/namespaces/team-b")
    assert code == 200 and body["metadata"]["deletionTimestamp"] == "2026-11-01T10:00:00Z"
    assert body["status"]["phase"] == "Terminating"
    # The free object went; the held one stays, marked; so does its namespace.
    assert api.get("ConfigMap", "free", "team-b") is None
    held = call(api, "GET", "/api/v1/namespaces/team-b/configmaps/held")[1]
    assert held["metadata"]["deletionTimestamp"] == "2026-11-01T10:00:00Z"
    version = api.get("Namespace", "team-b")["metadata"]["resourceVersion"]
    # A second DELETE changes nothing.
    api.now = lambda: "2026-11-01T10:05:00Z"
    code, body = call(api, "DELETE", "/api/v1/namespaces/team-b")
    assert code == 200 and body["metadata"]["deletionTimestamp"] == "2026-11-01T10:00:00Z"
    assert body["metadata"]["resourceVersion"] == version
    # Nothing new may be created in a Terminating namespace.
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new", "namespace": "team-b"}}
    code, body = call(api, "PATCH", "/api/v1/namespaces/team-b/configmaps/new", cm, fieldManager="m")
    assert code == 403 and body["reason"] == "Forbidden"
    # Clearing the finalizer lets both go.
    call(api, "PATCH", "/api/v1/namespaces/team-b/configmaps/held", {"metadata": {"finalizers": None}}, ctype=MERGE,
         fieldManager="example")
    assert api.get("ConfigMap", "held", "team-b") is None and api.get("Namespace", "team-b") is None


def test_discovery_names_the_preferred_version_and_serves_every_version_as_one_object(api):
    """APIGroup.preferredVersion (API reference, APIGroupList) and versions as views of one object."""
    groups = dict((g["name"], g) for g in call(api, "GET", "/apis")[1]["groups"])
    assert groups["kueue.x-k8s.io"]["preferredVersion"]["version"] == "v1beta2"
    assert [v["version"] for v in groups["kueue.x-k8s.io"]["versions"]] == ["v1beta2", "v1beta1"]
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"}}
    assert call(api, "PATCH", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/q", cq, fieldManager="m")[0] == 201
    code, body = call(api, "GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/q")
    assert code == 200 and body["apiVersion"] == "kueue.x-k8s.io/v1beta1"


def test_aggregated_discovery_when_asked_for_and_served(api):
    """APIGroupDiscoveryList (apidiscovery.k8s.io/v2): versions in descending order of preference."""
    accept = {"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"}
    code, body, headers = call_with_headers(api, "GET", "/apis", headers=accept)
    assert code == 200 and body["kind"] == "APIGroupDiscoveryList" and body["apiVersion"] == "apidiscovery.k8s.io/v2"
    assert headers["Content-Type"] == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    kueue = next(g for g in body["items"] if g["metadata"]["name"] == "kueue.x-k8s.io")
    assert [v["version"] for v in kueue["versions"]] == ["v1beta2", "v1beta1"]
    queue = next(r for r in kueue["versions"][0]["resources"] if r["resource"] == "clusterqueues")
    assert queue["scope"] == "Cluster"
    assert queue["responseKind"] == {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "ClusterQueue"}
    core = call_with_headers(api, "GET", "/api", headers=accept)[1]
    assert [g["metadata"]["name"] for g in core["items"]] == [""]
    # Plain discovery without the header, and on a server that does not aggregate.
    assert call(api, "GET", "/apis")[1]["kind"] == "APIGroupList"
    api.aggregated = False
    assert call_with_headers(api, "GET", "/api", headers=accept)[1]["kind"] == "APIVersions"


def test_server_side_apply_answers_with_the_stored_object(api):
    """PATCH (application/apply-patch+yaml) returns the object, as the API reference's patch operations say."""
    code, body = call(api, "PATCH", NODE, node({"a": "1"}), fieldManager="gpuops-platform")
    assert code == 200 and body == call(api, "GET", NODE)[1]
    again = call(api, "PATCH", NODE, node({"a": "1"}), fieldManager="gpuops-platform")[1]
    assert again["metadata"]["resourceVersion"] == body["metadata"]["resourceVersion"]


def test_deprecated_versions_answer_with_a_warning_header(api):
    """The API server's deprecation warnings: `Warning: 299 - "<text>"` on every request to them."""
    code, dummy, headers = call_with_headers(api, "GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues")
    assert code == 200 and headers.get_all("Warning") == [
        '299 - "kueue.x-k8s.io/v1beta1 ClusterQueue is deprecated; use kueue.x-k8s.io/v1beta2 ClusterQueue"']
    assert call_with_headers(api, "GET", "/api/v1/namespaces/x/endpoints")[2]["Warning"].startswith(
        '299 - "v1 Endpoints is deprecated')
    assert call_with_headers(api, "GET", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues")[2]["Warning"] is None
    assert [w[1] for w in api.warnings] == ["/apis/kueue.x-k8s.io/v1beta1/clusterqueues", "/api/v1/namespaces/x/endpoints"]
