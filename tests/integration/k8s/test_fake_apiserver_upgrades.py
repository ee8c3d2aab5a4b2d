"""The in-memory API server's behaviour that chart upgrades rely on, as the Kubernetes documentation has it:
- field pruning (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/
  #field-pruning): fields a CRD's structural schema does not specify are dropped on write, unless
  x-kubernetes-preserve-unknown-fields; apiVersion, kind and metadata stay;
- CRD versions (.../custom-resource-definition-versioning/): a changed spec.versions is served at once,
  status.storedVersions gains each new storage version and keeps the old ones, and an update whose
  spec.versions lacks one of them is 422 Invalid;
- create (POST, 409 AlreadyExists) and replace (PUT, 404 when missing, 409 on a stale resourceVersion), as
  client-go sends them, protobuf Secrets included (helm's release storage).
Plain HTTP, no Ansible.
"""
import base64
import json
import urllib.error
import urllib.request

import pytest

from fake_apiserver import FakeAPIServer
from test_fake_apiserver import call

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/%s/namespaces/lab/widgets"
SCHEMA = {"type": "object", "properties": {"metadata": {"type": "object"}, "spec": {"type": "object", "properties": {
    "size": {"type": "integer"},
    "groups": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}


def crd(*versions, storage="v1", schema=None):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": v, "served": True, "storage": v == storage,
                                   "schema": {"openAPIV3Schema": schema or SCHEMA}} for v in versions]}}


@pytest.fixture
def api():
    with FakeAPIServer() as server:
        server.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab"}})
        assert call(server, "PATCH", CRDS + "/widgets.example.com", crd("v1"), fieldManager="t")[0] == 201
        yield server


def widget(spec, version="v1"):
    return {"apiVersion": "example.com/%s" % version, "kind": "Widget", "metadata": {"name": "w", "namespace": "lab"},
            "spec": spec}


def test_unknown_fields_are_pruned_by_the_schema_and_known_ones_kept(api):
    spec = {"size": 2, "priority": 7, "groups": [{"name": "a", "extra": 1}], "labels": {"x": "y"},
            "free": {"anything": {"goes": 1}}}
    code, body = call(api, "PATCH", WIDGETS % "v1" + "/w", widget(spec), fieldManager="t")
    assert code == 201
    assert body["spec"] == {"size": 2, "groups": [{"name": "a"}], "labels": {"x": "y"}, "free": {"anything": {"goes": 1}}}
    # metadata stays whole although the schema declares it as a bare object, as upstream CRDs do.
    assert body["metadata"]["name"] == "w" and body["metadata"]["namespace"] == "lab" and "status" not in body
    listed = call(api, "GET", WIDGETS % "v1")[1]["items"]
    assert [(o["metadata"]["name"], o["spec"]["size"]) for o in listed] == [("w", 2)]
    # A pruned field is owned by no one.
    assert "f:priority" not in json.dumps(body["metadata"]["managedFields"])


def test_a_crd_update_serves_new_versions_and_keeps_stored_versions(api):
    stored = call(api, "GET", CRDS + "/widgets.example.com")[1]["status"]
    assert stored["storedVersions"] == ["v1"]
    assert {c["type"]: c["status"] for c in stored["conditions"]} == {"NamesAccepted": "True", "Established": "True"}
    with_priority = dict(SCHEMA, properties={"spec": {"type": "object", "properties": dict(
        SCHEMA["properties"]["spec"]["properties"], priority={"type": "integer"})}})
    code, body = call(api, "PATCH", CRDS + "/widgets.example.com", crd("v1", "v2", storage="v2", schema=with_priority),
                      fieldManager="t")
    assert code == 200 and body["status"]["storedVersions"] == ["v1", "v2"]
    assert call(api, "GET", "/apis/example.com/v2/namespaces/lab/widgets")[0] == 200
    # The new schema prunes no more what it now knows.
    assert call(api, "PATCH", WIDGETS % "v2" + "/w", widget({"priority": 3}, "v2"), fieldManager="t")[1]["spec"] == {
        "priority": 3}
    # Dropping a stored version is refused, and nothing changes.
    code, body = call(api, "PATCH", CRDS + "/widgets.example.com", crd("v2", storage="v2"), fieldManager="t")
    assert code == 422 and body["reason"] == "Invalid"
    assert 'status.storedVersions[0]: Invalid value: "v1": must appear in spec.versions' in body["message"]
    assert [v["name"] for v in call(api, "GET", CRDS + "/widgets.example.com")[1]["spec"]["versions"]] == ["v1", "v2"]
    # Stopping to serve a version takes it out of discovery and requests.
    code, dummy = call(api, "PATCH", CRDS + "/widgets.example.com",
                       dict(crd("v1", "v2", storage="v2"), spec=dict(crd("v1", "v2", storage="v2")["spec"], versions=[
                           dict(v, served=v["name"] != "v1") for v in crd("v1", "v2", storage="v2")["spec"]["versions"]])),
                       fieldManager="t")
    assert code == 200 and call(api, "GET", WIDGETS % "v1")[0] == 404


def test_create_and_replace_as_client_go_sends_them(api):
    path = "/api/v1/namespaces/lab/configmaps"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}
    code, body = call(api, "POST", path, cm, ctype="application/json", fieldManager="helm")
    assert code == 201 and body["metadata"]["uid"] and body["metadata"]["managedFields"][0]["manager"] == "helm"
    assert call(api, "POST", path, cm, ctype="application/json")[0] == 409
    assert call(api, "POST", "/api/v1/namespaces/none/configmaps", cm, ctype="application/json")[0] == 404
    stale = dict(cm, metadata={"name": "c", "resourceVersion": "1"}, data={"a": "2"})
    assert call(api, "PUT", path + "/c", stale, ctype="application/json")[0] == 409
    fresh = dict(cm, metadata={"name": "c", "resourceVersion": body["metadata"]["resourceVersion"]}, data={"a": "2"})
    code, replaced = call(api, "PUT", path + "/c", fresh, ctype="application/json", fieldManager="helm")
    assert code == 200 and replaced["data"] == {"a": "2"} and replaced["metadata"]["uid"] == body["metadata"]["uid"]
    assert call(api, "PUT", path + "/d", dict(cm, metadata={"name": "d"}), ctype="application/json")[0] == 404


def _varint(n):
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def _field(number, payload):
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def test_a_protobuf_secret_is_stored_as_json(api):
    meta = _field(1, b"sh.helm.release.v1.r.v1") + _field(3, b"lab") + _field(11, _field(1, b"owner") + _field(2, b"helm"))
    secret = _field(1, meta) + _field(2, _field(1, b"release") + _field(2, b"\x00\xffdata")) + _field(3, b"helm.sh/release.v1")
    envelope = b"k8s\x00" + _field(1, _field(1, b"v1") + _field(2, b"Secret")) + _field(2, secret)
    req = urllib.request.Request(api.url + "/api/v1/namespaces/lab/secrets", data=envelope, method="POST",
                                 headers={"Content-Type": "application/vnd.kubernetes.protobuf"})
    with urllib.request.urlopen(req) as resp:
        assert resp.status == 201
    stored = api.get("Secret", "sh.helm.release.v1.r.v1", "lab")
    assert stored["type"] == "helm.sh/release.v1" and stored["metadata"]["labels"] == {"owner": "helm"}
    assert base64.b64decode(stored["data"]["release"]) == b"\x00\xffdata"
    req = urllib.request.Request(api.url + "/api/v1/namespaces/lab/secrets", data=b"not protobuf", method="POST",
                                 headers={"Content-Type": "application/vnd.kubernetes.protobuf"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req)
    # The API server's decoder refuses a body it cannot read as BadRequest (handlers' transformDecodeError).
    assert err.value.code == 400 and b"unknown format" in err.value.read()
