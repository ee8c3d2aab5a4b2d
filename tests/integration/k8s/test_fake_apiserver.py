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
  on every request to a deprecated API);
- verbs and admission: APIResource.verbs in the API reference (a verb a resource lacks is 405
  MethodNotAllowed), the NamespaceLifecycle admission plugin (new content in a Terminating
  namespace is 403 Forbidden).
- writes: POST (create, AlreadyExists) and PUT (replace, stale resourceVersion), protobuf bodies of
  built-in kinds as client-go sends them, OpenAPI v3 with the fieldValidation parameter of each PATCH.
Plain HTTP, no Ansible: these run in a second.
"""
import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from fake_apiserver import AGGREGATED, FakeAPIServer

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


def test_a_list_answers_each_item_with_its_managed_fields_as_a_get_does(api):
    """ObjectMeta.managedFields is part of every object the API returns, in a LIST's items too (a client that does
    not want them asks the server to leave them out); what the label apply takes as its states before."""
    call(api, "PATCH", NODE, node({"a": "1"}), fieldManager="gpuops-platform")
    code, listed = call(api, "GET", "/api/v1/nodes")
    assert code == 200 and listed["kind"] == "NodeList"
    code, one = call(api, "GET", NODE)
    assert listed["items"][0]["metadata"]["managedFields"] == one["metadata"]["managedFields"]
    assert managers(listed["items"][0])["gpuops-platform"]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:a": {}}}}


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


def test_a_kind_taken_as_installed_is_served_as_its_crd_says_once_one_is_established(api):
    """kueue's ClusterQueue is in the static table (v1beta1 and v1beta2). Once its own CRD is Established it is listed
    once (a kind listed twice makes clients refuse it as not unique), and at the versions that CRD serves."""
    api.crd_delay = 0
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "clusterqueues.kueue.x-k8s.io"},
           "spec": {"group": "kueue.x-k8s.io", "scope": "Cluster",
                    "names": {"plural": "clusterqueues", "kind": "ClusterQueue"},
                    "versions": [{"name": "v1beta1", "served": True, "storage": False},
                                 {"name": "v1beta2", "served": True, "storage": True}]}}
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusterqueues.kueue.x-k8s.io"

    def kinds(version):
        return [r["name"] for r in call(api, "GET", "/apis/kueue.x-k8s.io/" + version)[1]["resources"]]

    assert kinds("v1beta2") == ["localqueues", "clusterqueues"]
    assert call(api, "PATCH", path, crd, fieldManager="gpuops-platform")[0] == 201
    time.sleep(0.1)
    call(api, "GET", path)
    assert sorted(kinds("v1beta2")) == ["clusterqueues", "localqueues"]
    crd["spec"]["versions"] = [{"name": "v1beta2", "served": True, "storage": True}]
    assert call(api, "PATCH", path, crd, fieldManager="gpuops-platform")[0] == 200
    assert kinds("v1beta1") == ["localqueues"] and sorted(kinds("v1beta2")) == ["clusterqueues", "localqueues"]


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


METHOD_NOT_ALLOWED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": "the server does not allow this method on the requested resource",
                      "reason": "MethodNotAllowed", "details": {}, "code": 405}


@pytest.mark.parametrize("gv, plural, namespaced", [
    ("v1", "bindings", True), ("authorization.k8s.io/v1", "localsubjectaccessreviews", True),
    ("authorization.k8s.io/v1", "subjectaccessreviews", False), ("authorization.k8s.io/v1", "selfsubjectaccessreviews", False),
    ("authorization.k8s.io/v1", "selfsubjectrulesreviews", False), ("authentication.k8s.io/v1", "tokenreviews", False),
    ("authentication.k8s.io/v1", "selfsubjectreviews", False)])
def test_the_review_kinds_and_binding_take_a_create_only(api, gv, plural, namespaced):
    """kube-apiserver's discovery names verbs [create] for the virtual kinds (their storage is a Creater only), in
    both documents; a list, get, delete or apply of them has no route: 405 MethodNotAllowed, a Status."""
    base = ("/api/%s" % gv if "/" not in gv else "/apis/%s" % gv)
    listed = call(api, "GET", base)[1]
    assert [r["verbs"] for r in listed["resources"] if r["name"] == plural] == [["create"]]
    group = gv.rpartition("/")[0]
    aggregated = call(api, "GET", "/apis" if group else "/api", headers={"Accept": AGGREGATED})[1]
    found = [r for g in aggregated["items"] if g["metadata"]["name"] == group for v in g["versions"]
             for r in v["resources"] if r["resource"] == plural]
    assert [(r["verbs"], r["scope"]) for r in found] == [(["create"], "Namespaced" if namespaced else "Cluster")]
    collection = base + ("/namespaces/team-a" if namespaced else "") + "/" + plural
    for method, path in (("GET", collection), ("GET", collection + "/x"), ("DELETE", collection + "/x"),
                         ("PATCH", collection + "/x")):
        assert call(api, method, path, {"apiVersion": gv, "kind": "X", "metadata": {"name": "x"}},
                    fieldManager="m") == (405, METHOD_NOT_ALLOWED), (method, path)
    assert api.writes() == [] or all(r[1].startswith(collection) for r in api.writes())
    assert not [k for k in api.objects if k[1] == plural]


def test_a_resource_answers_the_verbs_its_discovery_names(api):
    """v1 Namespace names no deletecollection (its storage has none), v1 ComponentStatus get and list only; every
    stored kind names the eight verbs of a plain registry store."""
    resources = dict((r["name"], r["verbs"]) for r in call(api, "GET", "/api/v1")[1]["resources"])
    assert resources["configmaps"] == ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    assert resources["namespaces"] == ["create", "delete", "get", "list", "patch", "update", "watch"]
    assert resources["componentstatuses"] == ["get", "list"]
    assert call(api, "GET", "/api/v1/componentstatuses")[0] == 200
    assert call(api, "DELETE", "/api/v1/namespaces") == (405, METHOD_NOT_ALLOWED)
    assert call(api, "PATCH", "/api/v1/componentstatuses/etcd-0", {"apiVersion": "v1", "kind": "ComponentStatus",
                                                                   "metadata": {"name": "etcd-0"}},
                fieldManager="m") == (405, METHOD_NOT_ALLOWED)
    # A listable kind still lists.
    assert call(api, "GET", "/api/v1/nodes")[1]["items"][0]["metadata"]["name"] == "gpu-a"


def configmap(name, ns="team-a"):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {"a": "1"}}


def test_new_content_in_a_terminating_namespace_is_forbidden(api):
    """The NamespaceLifecycle admission plugin: while a namespace is Terminating, a create (a server-side apply of an
    object that is not there) is 403 Forbidden, named by resource and group as admission.NewForbidden does, with the
    NamespaceTerminating cause; an object still there may be changed."""
    api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    kept = configmap("kept")
    api.add(dict(kept, metadata=dict(kept["metadata"], finalizers=["example.com/hold"])))
    api.add({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": "q", "namespace": "team-a", "finalizers": ["example.com/hold"]}})
    assert call(api, "DELETE", "/api/v1/namespaces/team-a")[0] == 200
    assert api.get("Namespace", "team-a")["status"]["phase"] == "Terminating"
    code, body = call(api, "PATCH", "/api/v1/namespaces/team-a/configmaps/new", configmap("new"), fieldManager="m")
    assert (code, body) == (403, {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden", "code": 403,
        "message": 'configmaps "new" is forbidden: unable to create new content in namespace team-a because it is '
                   'being terminated',
        "details": {"name": "new", "kind": "configmaps", "causes": [
            {"reason": "NamespaceTerminating", "message": "namespace team-a is being terminated",
             "field": "metadata.namespace"}]}})
    assert api.get("ConfigMap", "new", "team-a") is None
    code, body = call(api, "PATCH", "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues/other",
                      {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                       "metadata": {"name": "other", "namespace": "team-a"}}, fieldManager="m")
    assert code == 403 and body["message"].startswith('localqueues.kueue.x-k8s.io "other" is forbidden: unable to create')
    assert body["details"]["group"] == "kueue.x-k8s.io"
    # An object already there (held by its finalizer) takes a change; clearing the finalizer lets it go.
    code, body = call(api, "PATCH", "/api/v1/namespaces/team-a/configmaps/kept", {"metadata": {"finalizers": None}},
                      ctype=MERGE)
    assert code == 200 and api.get("ConfigMap", "kept", "team-a") is None
    # Another namespace is not affected.
    api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})
    assert call(api, "PATCH", "/api/v1/namespaces/team-b/configmaps/new", configmap("new", "team-b"),
                fieldManager="m")[0] == 201


def protobuf_secret(name, labels, data):
    """A v1 Secret as client-go's typed client sends it (application/vnd.kubernetes.protobuf): the magic bytes, then a
    runtime.Unknown whose raw is the Secret (k8s.io/api/core/v1 generated.proto)."""
    def field(number, payload):
        return varint(number << 3 | 2) + varint(len(payload)) + payload

    def varint(value):
        out = b""
        while True:
            byte = value & 0x7F
            value >>= 7
            out += bytes([byte | (0x80 if value else 0)])
            if not value:
                return out

    def entry(key, value):
        return field(1, key.encode()) + field(2, value)
    meta = field(1, name.encode()) + b"".join(field(11, entry(k, v.encode())) for k, v in labels.items())
    secret = field(1, meta) + b"".join(field(2, entry(k, v)) for k, v in data.items()) + field(3, b"helm.sh/release.v1")
    type_meta = field(1, b"v1") + field(2, b"Secret")
    return b"k8s\x00" + field(1, type_meta) + field(2, secret) + field(4, b"application/vnd.kubernetes.protobuf")


def send(api, method, path, data, ctype, agent="helm/v3.18.0 (linux/amd64) kubernetes/abc"):
    req = urllib.request.Request(api.url + path, method=method, data=data,
                                 headers={"Content-Type": ctype, "User-Agent": agent})
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_post_creates_and_put_replaces_as_client_gos_typed_clients_call_them(api):
    """API concepts: POST to a collection creates (201; 409 AlreadyExists when the name is taken), PUT replaces an
    object (404 when there is none; 409 Conflict for a stale resourceVersion); the field manager of a request without
    fieldManager is the user agent's first part. A built-in kind may come as protobuf, as helm's storage sends it."""
    api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    body = protobuf_secret("sh.helm.release.v1.demo.v1", {"owner": "helm", "status": "pending-install"},
                           {"release": b"H4sI-payload"})
    code, created = send(api, "POST", "/api/v1/namespaces/team-a/secrets", body, "application/vnd.kubernetes.protobuf")
    assert code == 201, created
    stored = api.get("Secret", "sh.helm.release.v1.demo.v1", "team-a")
    assert stored["data"] == {"release": "SDRzSS1wYXlsb2Fk"} and stored["type"] == "helm.sh/release.v1"
    assert stored["metadata"]["labels"] == {"owner": "helm", "status": "pending-install"}
    assert [m["manager"] for m in created["metadata"]["managedFields"]] == ["helm"]
    again = send(api, "POST", "/api/v1/namespaces/team-a/secrets", body, "application/vnd.kubernetes.protobuf")
    assert again[0] == 409 and again[1]["reason"] == "AlreadyExists"
    # PUT: the whole object; a stale resourceVersion is a conflict, a missing object 404.
    rv = created["metadata"]["resourceVersion"]
    update = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sh.helm.release.v1.demo.v1",
                                                                 "labels": {"owner": "helm", "status": "deployed"}},
              "data": {"release": "eA=="}}
    code, replaced = send(api, "PUT", "/api/v1/namespaces/team-a/secrets/sh.helm.release.v1.demo.v1",
                          json.dumps(dict(update, metadata=dict(update["metadata"], resourceVersion=rv))).encode(),
                          "application/json")
    assert code == 200 and replaced["data"] == {"release": "eA=="} and replaced["metadata"]["resourceVersion"] != rv
    assert replaced["metadata"]["uid"] == created["metadata"]["uid"]
    stale = send(api, "PUT", "/api/v1/namespaces/team-a/secrets/sh.helm.release.v1.demo.v1",
                 json.dumps(dict(update, metadata=dict(update["metadata"], resourceVersion=rv))).encode(), "application/json")
    assert stale[0] == 409 and "the object has been modified" in stale[1]["message"]
    missing = send(api, "PUT", "/api/v1/namespaces/team-a/secrets/other", json.dumps(
        dict(update, metadata={"name": "other"})).encode(), "application/json")
    assert missing[0] == 404
    # Not in a missing namespace, nor new content in a terminating one.
    assert send(api, "POST", "/api/v1/namespaces/nowhere/configmaps", json.dumps(configmap("x", "nowhere")).encode(),
                "application/json")[0] == 404
    api.get("Secret", "sh.helm.release.v1.demo.v1", "team-a")["metadata"]["finalizers"] = ["example.com/hold"]
    assert call(api, "DELETE", "/api/v1/namespaces/team-a")[0] == 200
    code, body = send(api, "POST", "/api/v1/namespaces/team-a/configmaps", json.dumps(configmap("late")).encode(),
                      "application/json")
    assert code == 403 and body["message"].startswith('configmaps "late" is forbidden: unable to create new content')


def test_openapi_v3_names_each_group_version_and_the_field_validation_of_each_patch(api):
    """OpenAPI v3 (/openapi/v3 and one document per group-version): kubectl and helm validate on the server when a
    PATCH takes the fieldValidation parameter; a create-only kind has no PATCH."""
    code, index = call(api, "GET", "/openapi/v3")
    assert code == 200 and index["paths"]["api/v1"]["serverRelativeURL"].startswith("/openapi/v3/api/v1?hash=")
    code, core = call(api, "GET", index["paths"]["api/v1"]["serverRelativeURL"].split("?")[0])
    patch = core["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert "fieldValidation" in [p["name"] for p in patch["parameters"] if p["in"] == "query"]
    assert "/api/v1/nodes/{name}" in core["paths"]
    assert not [p for p in core["paths"] if "/bindings/" in p]
    assert call(api, "GET", "/openapi/v3/apis/example.com/v1")[0] == 404


def test_latency_delays_every_answer_and_calls_in_flight_wait_side_by_side(api):
    """The benchmark's per-call cost (--latency-ms): each answer waits; concurrent calls do not queue behind each other."""
    api.latency = 0.2
    start = time.monotonic()
    assert call(api, "GET", "/version")[0] == 200
    assert time.monotonic() - start >= 0.2
    start = time.monotonic()
    threads = [threading.Thread(target=call, args=(api, "GET", "/api/v1/nodes")) for dummy in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 0.2 <= time.monotonic() - start < 0.6
    api.latency = 0.0
    start = time.monotonic()
    call(api, "GET", "/version")
    assert time.monotonic() - start < 0.2
