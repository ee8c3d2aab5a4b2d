"""A small in-memory Kubernetes API server for the apply path of cluster.yml.

It speaks the parts of the API that kubernetes.core and the collection use:
discovery (/version, /api, /apis), GET of objects and lists (with equality
label selectors), DELETE (a namespace takes its objects with it), merge
patches (k8s_node_taints, gpu_health; one that carries a metadata.resourceVersion
is refused with 409 Conflict once the object has another, as the real server's
precondition) and server-side apply, with dry runs (dryRun=All stores nothing), answering errors with a Status object like the real server. Every
request is recorded so tests can count API calls and check what was sent.

Server-side apply follows the Kubernetes documentation
(https://kubernetes.io/docs/reference/using-api/server-side-apply/):
- every field is owned by the managers that set it, shown in
  metadata.managedFields (operation Apply or Update, fieldsType FieldsV1),
  each entry's time set when it is added or its fields or their values
  change, not when another manager takes a field over (ManagedFieldsEntry in
  the API reference); metadata.creationTimestamp is the time of creation, in
  a dry run too;
- an apply that changes a field another manager owns fails with 409 Conflict
  (reason Conflict, one cause per field) unless force=true, which moves the
  ownership to the applier; an apply of the same value shares ownership;
- a field that a manager applied before and no longer applies is removed,
  unless another manager owns it;
- an update (merge patch) takes ownership of the fields it sets, without
  conflicts; lists are atomic, status is a subresource (ignored on apply);
- a CustomResourceDefinition's kind is served (discovery, requests) only once
  the CRD is Established, `crd_delay` seconds after it is created;
- a namespaced object in a missing namespace, or an unknown kind, is 404.
It is not a validating server: schemas are checked by the render tests.

Beyond server-side apply it follows the API reference where the roles rely on it:
- deletion (https://kubernetes.io/docs/concepts/overview/working-with-objects/finalizers/
  and DeleteOptions in the API reference): an object with metadata.finalizers is
  not removed by DELETE but marked with metadata.deletionTimestamp, and stays
  until an update clears its finalizers; a second DELETE changes nothing. A
  deleted namespace is Terminating (status.phase) until every object in it is
  gone; new objects in it are refused with 403 Forbidden;
- discovery (https://kubernetes.io/docs/concepts/overview/kubernetes-api/#discovery-api):
  every group names its preferredVersion (the highest by Kubernetes version
  priority, GA before beta before alpha); with the Accept header
  `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`, /api
  and /apis answer the aggregated APIGroupDiscoveryList (versions listed
  preferred first), unless `aggregated` is off, as on a server before 1.30;
  both documents carry what kubernetes.core's discovery cache is built from
  (verbs, singular names, subresources: the `name/sub` entries of an
  APIResourceList are the aggregated document's APISubresourceDiscovery), so
  a cache filled from either is the same; /version answers `version`;
- several versions of a kind are views of one stored object (apiVersion is the
  one asked for);
- a deprecated version is served with a `Warning: 299 - "..."` header
  (https://kubernetes.io/blog/2020/09/03/warnings/, RFC 7234 warn-code 299), as
  for every request to it; every warning sent is recorded in `warnings`;
- a server-side apply PATCH answers with the object as stored (as a GET would),
  or as it would be stored for a dry run;
- POST creates an object (409 AlreadyExists when there is one) and PUT replaces one (404
  when there is none, 409 Conflict for a stale metadata.resourceVersion), as client-go's
  typed clients call them (helm's release storage and resources); the field manager is
  fieldManager, else the client's user agent up to its first "/";
- every resource names its verbs in discovery as the real server does (k8s.io/apiserver's
  installer: a storage that cannot list has no `list` route); a request whose verb the
  resource lacks (a LIST of v1 Binding or of authorization.k8s.io's
  LocalSubjectAccessReview, which take only create) answers 405 MethodNotAllowed with the
  Status that go-restful's unmatched method gets from the API server;
- a new object in a Terminating namespace is refused by the NamespaceLifecycle admission
  plugin: 403 Forbidden, `<resource>[.<group>] "<name>" is forbidden: unable to create
  new content in namespace <ns> because it is being terminated`, with the
  NamespaceTerminating cause; a change to an object already there is let through.
"""
import base64
import copy
import gzip
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

# group/version -> [(plural, Kind, namespaced)]
RESOURCES = {
    "v1": [("namespaces", "Namespace", False), ("nodes", "Node", False), ("configmaps", "ConfigMap", True),
           ("resourcequotas", "ResourceQuota", True), ("limitranges", "LimitRange", True),
           ("pods", "Pod", True), ("secrets", "Secret", True)],
    "rbac.authorization.k8s.io/v1": [("rolebindings", "RoleBinding", True), ("clusterroles", "ClusterRole", False)],
    "networking.k8s.io/v1": [("networkpolicies", "NetworkPolicy", True)],
    "scheduling.k8s.io/v1": [("priorityclasses", "PriorityClass", False)],
    "apiextensions.k8s.io/v1": [("customresourcedefinitions", "CustomResourceDefinition", False)],
    "kueue.x-k8s.io/v1beta2": [("localqueues", "LocalQueue", True), ("clusterqueues", "ClusterQueue", False)],
    # Older versions the real server still serves, each a view of the objects above.
    "kueue.x-k8s.io/v1beta1": [("localqueues", "LocalQueue", True), ("clusterqueues", "ClusterQueue", False)],
    "discovery.k8s.io/v1": [("endpointslices", "EndpointSlice", True)],
}
# Deprecated group/versions or kinds -> the warning the API server sends with every request to them
# (k8s.io/apiserver's deprecation warnings; v1 Endpoints since 1.33, kueue v1beta1 since 0.14).
DEPRECATED = {
    "kueue.x-k8s.io/v1beta1": "kueue.x-k8s.io/v1beta1 {kind} is deprecated; use kueue.x-k8s.io/v1beta2 {kind}",
    ("v1", "Endpoints"): "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice",
}
RESOURCES["v1"].append(("endpoints", "Endpoints", True))
# The discovery verbs of a stored resource (APIResource.verbs), as the real server names them.
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
# Resources whose verbs differ, as kube-apiserver 1.36 serves them: the virtual kinds that take only a create
# (their storage is a Creater alone: a review is answered, not stored), and Namespace, whose storage has no
# DeleteCollection. Any verb not named is 405 MethodNotAllowed.
CREATE = ["create"]
OWN_VERBS = {
    ("v1", "namespaces"): ["create", "delete", "get", "list", "patch", "update", "watch"],
    ("v1", "bindings"): CREATE,
    ("v1", "componentstatuses"): ["get", "list"],
    ("authentication.k8s.io/v1", "tokenreviews"): CREATE,
    ("authentication.k8s.io/v1", "selfsubjectreviews"): CREATE,
    ("authorization.k8s.io/v1", "localsubjectaccessreviews"): CREATE,
    ("authorization.k8s.io/v1", "selfsubjectaccessreviews"): CREATE,
    ("authorization.k8s.io/v1", "selfsubjectrulesreviews"): CREATE,
    ("authorization.k8s.io/v1", "subjectaccessreviews"): CREATE,
}
RESOURCES["v1"] += [("bindings", "Binding", True), ("componentstatuses", "ComponentStatus", False)]
RESOURCES["authentication.k8s.io/v1"] = [("selfsubjectreviews", "SelfSubjectReview", False),
                                         ("tokenreviews", "TokenReview", False)]
RESOURCES["authorization.k8s.io/v1"] = [
    ("localsubjectaccessreviews", "LocalSubjectAccessReview", True),
    ("selfsubjectaccessreviews", "SelfSubjectAccessReview", False),
    ("selfsubjectrulesreviews", "SelfSubjectRulesReview", False),
    ("subjectaccessreviews", "SubjectAccessReview", False)]
# (group/version, plural) -> its subresources (name, verbs), in both discovery documents: name/sub entries of the
# APIResourceList, APISubresourceDiscovery entries of the aggregated one (most answer their resource's kind).
SUBRESOURCES = {
    ("v1", "nodes"): [("status", ["get", "patch", "update"]), ("proxy", ["create", "delete", "get", "patch", "update"])],
    ("v1", "namespaces"): [("status", ["get", "patch", "update"]), ("finalize", ["update"])],
    ("v1", "pods"): [("status", ["get", "patch", "update"]), ("log", ["get"])],
    ("v1", "resourcequotas"): [("status", ["get", "patch", "update"])],
}
# Subresources that answer another kind than their resource's (group, version, kind), as the API reference has them.
SUBRESOURCE_KINDS = {("v1", "nodes", "proxy"): ("", "v1", "NodeProxyOptions")}


def _subresources(gv, plural, kind):
    """[(name, verbs, (group, version, kind))] of a resource."""
    group, dummy, version = gv.rpartition("/")
    return [(name, verbs, SUBRESOURCE_KINDS.get((gv, plural, name), (group, version, kind)))
            for name, verbs in SUBRESOURCES.get((gv, plural), [])]


def _drop_nulls(value):
    """Nulls inside lists vanish, as when the real server decodes into its types (omitempty)."""
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    if isinstance(value, dict):
        return dict((k, _drop_nulls(v)) for k, v in value.items() if v is not None)
    return value


def _storage_versions(crd):
    """A new CRD's status.storedVersions: its storage version (the API server adds each later one on update)."""
    return [v["name"] for v in (crd.get("spec") or {}).get("versions", []) if v.get("storage")][:1]


# Fields every object keeps whatever its schema (the API server handles them itself).
ROOT_FIELDS = ("apiVersion", "kind", "metadata")


def _prune(schema, value, root=False):
    """Drop the fields a structural schema does not specify, as the API server prunes a custom resource
    (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#field-pruning):
    properties are kept, additionalProperties and items recursed into, x-kubernetes-preserve-unknown-fields keeps
    the rest, an embedded resource keeps apiVersion, kind and metadata."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, list):
        return [_prune(schema.get("items"), v) for v in value] if isinstance(schema.get("items"), dict) else value
    if not isinstance(value, dict):
        return value
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    keep_unknown = schema.get("x-kubernetes-preserve-unknown-fields") or extra is True
    out = {}
    for key, sub in value.items():
        # The server keeps apiVersion, kind and metadata itself, whatever the schema says of them (a CRD schema may
        # declare `metadata: {type: object}` only).
        if (root or schema.get("x-kubernetes-embedded-resource")) and key in ROOT_FIELDS:
            out[key] = sub
        elif key in props:
            out[key] = _prune(props[key], sub)
        elif isinstance(extra, dict):
            out[key] = _prune(extra, sub)
        elif keep_unknown:
            out[key] = sub
    return out


IDENTITY = {("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace")}
# When objects that a test seeds were created (long before any run).
SEEDED = "2026-01-01T00:00:00Z"
SERVER_METADATA = {"resourceVersion", "uid", "creationTimestamp", "managedFields", "generation", "deletionTimestamp",
                   "deletionGracePeriodSeconds"}
MISSING = object()
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _verbs(gv, plural):
    """A resource's discovery verbs."""
    return list(OWN_VERBS.get((gv, plural), VERBS))


def _verb(method, name):
    """The verb of a request (k8s.io/apiserver's RequestInfo): a GET of a collection is list, of one object get;
    a DELETE of a collection is deletecollection; a POST of a collection create, a PUT of an object update; a
    server-side apply or merge patch is patch."""
    return {("GET", False): "list", ("GET", True): "get", ("DELETE", False): "deletecollection",
            ("DELETE", True): "delete", ("POST", False): "create", ("PUT", True): "update"}.get(
        (method, bool(name)), method.lower())


def _version_key(version):
    """apimachinery's CompareKubeAwareVersionStrings as a sort key: v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > other."""
    m = re.match(r"^v(\d+)(?:(alpha|beta)(\d+))?$", version)
    if not m:
        return (0, 0, 0, version)
    return (1, {"alpha": 1, "beta": 2, None: 3}[m.group(2)], int(m.group(1)) * 1000 + int(m.group(3) or 0), "")


def _accepts_aggregated(accept):
    """Whether an Accept header asks for the v2 aggregated discovery document."""
    for part in (accept or "").split(","):
        params = dict(p.strip().partition("=")[::2] for p in part.split(";")[1:])
        if part.split(";")[0].strip() == "application/json" and params.get("g") == "apidiscovery.k8s.io" \
                and params.get("v") == "v2" and params.get("as", "APIGroupDiscoveryList") == "APIGroupDiscoveryList":
            return True
    return False


def _leaves(obj, prefix=()):
    """Field paths an object sets: maps are walked, lists and scalars are leaves (atomic)."""
    out = set()
    for key, value in (obj or {}).items():
        path = prefix + (key,)
        if path == ("status",) or path in IDENTITY or (prefix == ("metadata",) and key in SERVER_METADATA):
            continue
        if isinstance(value, dict) and value:
            out |= _leaves(value, path)
        elif value is not None:
            out.add(path)
    return out


def _at(obj, path):
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return MISSING
        obj = obj[key]
    return obj


def _remove(obj, path):
    parents = [obj]
    for key in path[:-1]:
        obj = obj.get(key) if isinstance(obj, dict) else None
        if not isinstance(obj, dict):
            return
        parents.append(obj)
    obj.pop(path[-1], None)
    # Maps left empty by the removal go too (not metadata itself).
    for depth in range(len(path) - 1, 0, -1):
        if not parents[depth] and path[:depth] != ("metadata",):
            parents[depth - 1].pop(path[depth - 1], None)


def _overlap(a, b):
    short = min(len(a), len(b))
    return a[:short] == b[:short]


def _fields_v1(paths):
    tree = {}
    for path in sorted(paths):
        node = tree
        for key in path:
            node = node.setdefault("f:%s" % key, {})
    return tree


def _merge(base, patch):
    """Maps merge key by key; lists and scalars are replaced (enough for these objects)."""
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        elif value is None:
            out.pop(key, None)
        else:
            out[key] = _drop_nulls(copy.deepcopy(value))
    return out


def _selector(text):
    """A label selector as the API's list documents it (apimachinery's labels.Parse): equality
    terms (`a=b`, `a==b`, `c!=d`), existence (`e`, `!f`) and set terms (`g in (x,y)`,
    `h notin (z)`), joined by commas; an unknown operator is an error, as the API server's 400."""
    terms = []
    pos, text = 0, text.strip()
    pattern = re.compile(r"\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(in|notin)\s*\(([^)]*)\)|(==|=|!=)\s*([A-Za-z0-9_.-]*))?\s*(,|$)")
    while pos < len(text):
        m = pattern.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError("unable to parse requirement: %r" % text[pos:])
        neg, key, set_op, values, op, value = m.group(1, 2, 3, 4, 5, 6)
        if neg and (set_op or op):
            raise ValueError("unable to parse requirement: %r" % m.group(0))
        if set_op:
            members = frozenset(v.strip() for v in values.split(",") if v.strip())
            if set_op == "in":
                terms.append(lambda labels, k=key, vs=members: labels.get(k) in vs)
            else:
                terms.append(lambda labels, k=key, vs=members: labels.get(k) not in vs)
        elif op == "!=":
            terms.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif op:
            terms.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif neg:
            terms.append(lambda labels, k=key: k not in labels)
        else:
            terms.append(lambda labels, k=key: k in labels)
        pos = m.end()
    return lambda labels: all(t(labels) for t in terms)


PROTOBUF = "application/vnd.kubernetes.protobuf"
PROTOBUF_MAGIC = b"k8s\x00"


def _wire(data):
    """Protocol buffers' wire format: [(field number, wire type, value)]; a varint as int, a length-delimited field as
    bytes (fixed 32/64-bit fields as bytes too)."""
    out, pos = [], 0

    def varint():
        nonlocal pos
        shift = value = 0
        while True:
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value
    while pos < len(data):
        key = varint()
        number, kind = key >> 3, key & 7
        if kind == 0:
            out.append((number, kind, varint()))
        elif kind == 2:
            size = varint()
            out.append((number, kind, data[pos:pos + size]))
            pos += size
        elif kind in (1, 5):
            size = 8 if kind == 1 else 4
            out.append((number, kind, data[pos:pos + size]))
            pos += size
        else:
            raise ValueError("protobuf wire type %d is not supported" % kind)
    return out


def _pb_map(entries, binary=False):
    """A protobuf map<string, string|bytes> (repeated entries of key 1, value 2); bytes as base64, as JSON has them."""
    out = {}
    for raw in entries:
        fields = dict((n, v) for n, k, v in _wire(raw))
        value = fields.get(2, b"")
        out[fields.get(1, b"").decode()] = base64.b64encode(value).decode() if binary else value.decode()
    return out


def _pb_meta(data):
    """The ObjectMeta fields a client sets on a create or update (k8s.io/apimachinery's generated.proto)."""
    fields = _wire(data)
    meta = {}
    for number, key in ((1, "name"), (2, "generateName"), (3, "namespace"), (6, "resourceVersion")):
        found = [v for n, k, v in fields if n == number]
        if found and found[-1]:
            meta[key] = found[-1].decode()
    for number, key in ((11, "labels"), (12, "annotations")):
        found = _pb_map([v for n, k, v in fields if n == number])
        if found:
            meta[key] = found
    finalizers = [v.decode() for n, k, v in fields if n == 14]
    if finalizers:
        meta["finalizers"] = finalizers
    return meta


def _from_protobuf(body):
    """A v1 Secret or ConfigMap sent as protobuf (client-go's typed clients send built-in kinds so, helm's release
    storage among them): the runtime.Unknown envelope after the magic bytes, then the object (k8s.io/api's
    generated.proto). Anything else is refused, as a kind this server cannot read."""
    if not body.startswith(PROTOBUF_MAGIC):
        raise ValueError("a protobuf body starts with the magic bytes k8s\\x00")
    envelope = dict((n, v) for n, k, v in _wire(body[len(PROTOBUF_MAGIC):]))
    type_meta = dict((n, v.decode()) for n, k, v in _wire(envelope.get(1, b"")))
    api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
    fields = _wire(envelope.get(2, b""))
    obj = {"apiVersion": api_version, "kind": kind,
           "metadata": _pb_meta(next((v for n, k, v in fields if n == 1), b""))}
    if (api_version, kind) == ("v1", "Secret"):
        data, type_ = _pb_map([v for n, k, v in fields if n == 2], binary=True), [v for n, k, v in fields if n == 3]
        string_data = _pb_map([v for n, k, v in fields if n == 4])
        obj.update(dict((k, v) for k, v in (("data", data), ("stringData", string_data)) if v))
        if type_:
            obj["type"] = type_[-1].decode()
    elif (api_version, kind) == ("v1", "ConfigMap"):
        data, binary = _pb_map([v for n, k, v in fields if n == 2]), _pb_map([v for n, k, v in fields if n == 3], True)
        obj.update(dict((k, v) for k, v in (("data", data), ("binaryData", binary)) if v))
    else:
        raise ValueError("this server reads no %s/%s as protobuf" % (api_version, kind))
    return obj


class FakeAPIServer:
    def __init__(self, version="1.34"):
        self.version = version
        self.objects = {}          # (group_version, plural, namespace, name) -> object
        self.requests = []         # (method, path, query, content_type)
        self.field_managers = set()
        self.managed = {}          # object key -> {manager: {"operation", "apiVersion", "fields": set of paths, "time"}}
        # The server's clock, as metav1.Time writes it (RFC 3339, seconds, UTC); tests may replace it.
        self.now = lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.crd_delay = 0.0       # seconds from a CRD's creation to Established
        # Seconds each call takes before it is answered (a real server's round trip, authentication,
        # admission and etcd): the benchmark sets it; calls in flight wait side by side, as on a real server.
        self.latency = 0.0
        self._crds = {}            # CRD name -> (due time, CRD object) until Established
        self.served = {}           # group/version -> [(plural, Kind, namespaced)] served by established CRDs
        self.authorizations = set()  # Authorization headers seen, to prove a credential arrived
        self.aggregated = True     # serve the aggregated discovery document (Kubernetes 1.30+)
        self.warnings = []         # (method, path, Warning header) sent
        self._rv = 1
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, code, body, content_type="application/json"):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                for warning in getattr(self, "warnings", []):
                    self.send_header("Warning", warning)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 - http.server's naming
                server.handle(self, "GET")

            def do_PATCH(self):  # noqa: N802
                server.handle(self, "PATCH")

            def do_DELETE(self):  # noqa: N802
                server.handle(self, "DELETE")

            def do_POST(self):  # noqa: N802
                server.handle(self, "POST")

            def do_PUT(self):  # noqa: N802
                server.handle(self, "PUT")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    # --- helpers for tests -------------------------------------------------
    def add(self, obj, manager=None):
        """Store an object as is; with ``manager``, that manager owns all its fields (operation Update)."""
        key = self._key_for(obj)
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {}).setdefault("resourceVersion", str(self._next_rv()))
        # Seeded objects were made before the run.
        obj["metadata"].setdefault("creationTimestamp", SEEDED)
        self.objects[key] = obj
        if manager:
            self.managed[key] = {manager: {"operation": "Update", "apiVersion": key[0], "fields": _leaves(obj),
                                           "time": SEEDED}}

    def add_helm_revision(self, release):
        """Store one revision of a Helm release as Helm's default ``secrets`` storage driver does
        (helm's pkg/storage/driver/secrets.go and util.go): a Secret ``sh.helm.release.v1.<name>.v<revision>`` of type
        ``helm.sh/release.v1``, labelled ``owner=helm``, ``name``, ``status`` and ``version``, whose
        ``data.release`` is base64 of gzip of the release's JSON (``helm status -o json``'s document), base64
        again as Secret data. The real helm binary reads these (helm list, get values, history)."""
        payload = base64.b64encode(gzip.compress(json.dumps(release).encode()))
        self.add({"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                  "metadata": {"name": "sh.helm.release.v1.%s.v%d" % (release["name"], release["version"]),
                               "namespace": release["namespace"],
                               "labels": {"name": release["name"], "owner": "helm", "status": release["info"]["status"],
                                          "version": str(release["version"])}},
                  "data": {"release": base64.b64encode(payload).decode()}})

    def owners(self, kind, name, namespace=""):
        """{manager: set of dotted field paths} of an object."""
        for key, obj in self.objects.items():
            if obj.get("kind") == kind and key[3] == name and key[2] == (namespace or ""):
                return dict((m, set(".".join(p) for p in e["fields"])) for m, e in self.managed.get(key, {}).items())
        return None

    def get(self, kind, name, namespace=""):
        for (gv, plural, ns, n), obj in self.objects.items():
            if obj.get("kind") == kind and n == name and ns == (namespace or ""):
                return obj
        return None

    def writes(self):
        return [r for r in self.requests if r[0] != "GET"]

    # --- custom resources: pruning, CRD updates, create and replace ---------

    def _crd_of(self, gv, plural):
        """The stored CRD that serves ``plural`` in ``gv``'s group; None for a built-in kind."""
        group = gv.rpartition("/")[0]
        return self.objects.get(("apiextensions.k8s.io/v1", "customresourcedefinitions", "", "%s.%s" % (plural, group)))

    def _pruned(self, gv, plural, obj):
        """A custom resource as the API server keeps it: the fields its version's schema does not know dropped."""
        crd = self._crd_of(gv, plural) if isinstance(obj, dict) else None
        if crd is None:
            return obj
        version = gv.rpartition("/")[2]
        for entry in crd["spec"].get("versions", []):
            schema = ((entry.get("schema") or {}).get("openAPIV3Schema"))
            if entry.get("name") == version and schema:
                return _prune(schema, obj, root=True)
        return obj

    def _crd_update_refusal(self, existing, updated):
        """The API server's 422 for a CRD update whose spec.versions lacks a version of status.storedVersions."""
        names = [v.get("name") for v in (updated.get("spec") or {}).get("versions", [])]
        for index, version in enumerate((existing.get("status") or {}).get("storedVersions") or []):
            if version not in names:
                code, body = self._status(422, "Invalid", 'CustomResourceDefinition.apiextensions.k8s.io "%s" is invalid: '
                                          'status.storedVersions[%d]: Invalid value: "%s": must appear in spec.versions'
                                          % (existing["metadata"]["name"], index, version))
                body["details"] = {"name": existing["metadata"]["name"], "group": "apiextensions.k8s.io",
                                   "kind": "CustomResourceDefinition",
                                   "causes": [{"reason": "FieldValueInvalid", "field": "status.storedVersions[%d]" % index}]}
                return code, body
        return None

    def _crd_updated(self, name):
        """An Established CRD changed: its served versions follow spec.versions at once, and a new storage version
        joins status.storedVersions (the API server keeps the old ones until a migration trims them)."""
        if name in self._crds:
            return  # not Established yet: _settle serves it when due
        crd = self.objects[("apiextensions.k8s.io/v1", "customresourcedefinitions", "", name)]
        spec = crd["spec"]
        entry = (spec["names"]["plural"], spec["names"]["kind"], spec.get("scope") == "Namespaced")
        for gv in [gv for gv in self.served if gv.rpartition("/")[0] == spec["group"]]:
            self.served[gv] = [e for e in self.served[gv] if e[0] != entry[0]]
            if not self.served[gv]:
                del self.served[gv]
        for version in spec.get("versions", []):
            if version.get("served", True):
                self.served.setdefault("%s/%s" % (spec["group"], version["name"]), []).append(entry)
        status = crd.setdefault("status", {})
        stored = list(status.get("storedVersions") or [])
        status["storedVersions"] = stored + [v for v in _storage_versions(crd) if v not in stored]

    def _openapi_v2(self, req):
        """/openapi/v2 as a server that documents no schema there: an empty OpenAPI v2 Document in protobuf (zero
        bytes). Clients that validate before they write (helm install and upgrade, kubectl) find no schema for any
        kind and skip their own validation, as they do for a kind the document lacks."""
        req.send_response(200)
        req.send_header("Content-Type", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
        req.send_header("Content-Length", "0")
        req.end_headers()

    # --- implementation ----------------------------------------------------
    def _next_rv(self):
        self._rv += 1
        return self._rv

    def _resources(self, gv):
        """The kinds served at ``gv``. A kind of the static table (a CRD taken as installed beforehand) whose CRD is
        Established here is served as that CRD says, as a real server has no other source: listed once, and only
        at the versions the CRD serves now."""
        group = gv.rpartition("/")[0]
        defined = set(e[0] for served, entries in self.served.items() if served.rpartition("/")[0] == group
                      for e in entries)
        return [e for e in RESOURCES.get(gv, []) if e[0] not in defined] + list(self.served.get(gv, []))

    def _settle(self):
        """CRDs whose time has come become Established and their kind served."""
        now = time.monotonic()
        for name, (due, crd) in list(self._crds.items()):
            if due > now:
                continue
            del self._crds[name]
            key = ("apiextensions.k8s.io/v1", "customresourcedefinitions", "", name)
            if key not in self.objects:
                continue
            stored = self.objects[key]
            stored["status"] = {"conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts"},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}],
                "acceptedNames": stored["spec"]["names"], "storedVersions": _storage_versions(stored)}
            stored["metadata"]["resourceVersion"] = str(self._next_rv())
            spec = stored["spec"]
            for version in spec.get("versions", []):
                if version.get("served", True):
                    kinds = self.served.setdefault("%s/%s" % (spec["group"], version["name"]), [])
                    entry = (spec["names"]["plural"], spec["names"]["kind"], spec.get("scope") == "Namespaced")
                    if entry not in kinds:
                        kinds.append(entry)

    def _managed_fields(self, managed):
        return [{"manager": m, "operation": e["operation"], "apiVersion": e["apiVersion"],
                 "time": e["time"], "fieldsType": "FieldsV1", "fieldsV1": _fields_v1(e["fields"])}
                for m, e in sorted(managed.items())]

    def _shown(self, key, obj, managed=None):
        """The object as the API returns it; ``managed``: the entries of a dry run, not the stored ones."""
        obj = copy.deepcopy(obj)
        fields = self._managed_fields(self.managed.get(key, {}) if managed is None else managed)
        if fields:
            obj.setdefault("metadata", {})["managedFields"] = fields
        return obj

    def _key_for(self, obj):
        gv = obj["apiVersion"]
        for plural, kind, namespaced in self._resources(gv):
            if kind == obj["kind"]:
                ns = obj["metadata"].get("namespace", "") if namespaced else ""
                return self._stored_as(gv, plural), plural, ns, obj["metadata"]["name"]
        raise KeyError(obj["kind"])

    def _group_versions(self):
        return sorted(gv for gv in set(RESOURCES) | set(self.served) if self._resources(gv))

    def _preferred(self, group):
        """A group's preferred version: the highest by Kubernetes version priority."""
        versions = [gv.rpartition("/")[2] for gv in self._group_versions() if gv.rpartition("/")[0] == group]
        return max(versions, key=_version_key) if versions else None

    def _stored_as(self, gv, plural):
        """The group/version an object is kept under: every version of a kind is a view of one object."""
        group = gv.rpartition("/")[0]
        views = [v for v in self._group_versions() if v.rpartition("/")[0] == group and
                 any(p == plural for p, k, n in self._resources(v))]
        best = max((v.rpartition("/")[2] for v in views), key=_version_key, default=None)
        return ("%s/%s" % (group, best) if group else best) if best else gv

    def _warning(self, gv, kind):
        text = DEPRECATED.get((gv, kind)) or DEPRECATED.get(gv)
        return ['299 - "%s"' % text.format(kind=kind)] if text else []

    def _status(self, code, reason, message):
        return code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": message, "reason": reason, "code": code}

    def _write(self, method, asked, gv, plural, kind, namespaced, ns, name, body, query, agent, ctype):
        """POST (create) and PUT (update, a whole object): the calls of client-go's typed clients (helm's storage,
        its resources). The field manager is fieldManager, else the client's user agent up to its first "/", as the
        API server derives it; it takes every field it sends (operation Update)."""
        try:
            obj = _from_protobuf(body) if ctype.split(";")[0].strip() == PROTOBUF else json.loads(body or b"{}")
        except (ValueError, IndexError) as exc:
            return self._status(400, "BadRequest", "the body of the request was in an unknown format: %s" % exc)
        if obj.get("stringData"):  # written into data, as the API server's Secret strategy does
            obj["data"] = dict(obj.get("data") or {}, **dict(
                (k, base64.b64encode(v.encode()).decode()) for k, v in obj.pop("stringData").items()))
        meta = obj.setdefault("metadata", {})
        if method == "POST":
            name = meta.get("name")
        elif meta.get("name") != name:
            return self._status(400, "BadRequest", "the name of the object (%s) does not match the name on the URL (%s)"
                                % (meta.get("name"), name))
        if not name:
            return self._status(400, "BadRequest", "resource name may not be empty")
        if namespaced:
            if meta.get("namespace", ns) != ns:
                return self._status(400, "BadRequest", "the namespace of the provided object does not match the "
                                                       "namespace sent on the request")
            meta["namespace"] = ns
            if ("v1", "namespaces", "", ns) not in self.objects:
                return self._status(404, "NotFound", 'namespaces "%s" not found' % ns)
        key = (gv, plural, ns, name)
        existing = self.objects.get(key)
        if method == "POST" and existing is not None:
            code, status = self._status(409, "AlreadyExists", '%s "%s" already exists' % (plural, name))
            status["details"] = {"name": name, "kind": plural}
            return code, status
        if method == "PUT" and existing is None:
            return self._status(404, "NotFound", '%s "%s" not found' % (plural, name))
        if method == "POST" and namespaced and self.objects[("v1", "namespaces", "", ns)]["metadata"].get("deletionTimestamp"):
            return self._terminating(asked, plural, name, ns)
        if method == "PUT" and meta.get("resourceVersion") and \
                meta["resourceVersion"] != existing["metadata"].get("resourceVersion"):
            return self._status(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": the object has been '
                                                 'modified; please apply your changes to the latest version and try again'
                                % (plural, name))
        manager = (query.get("fieldManager") or [""])[0] or agent.split("/", 1)[0] or "unknown"
        obj = self._pruned(asked, plural, _drop_nulls(dict(obj, apiVersion=gv, kind=kind)))
        if plural == "customresourcedefinitions" and existing is not None:
            refused = self._crd_update_refusal(existing, obj)
            if refused:
                return refused
        kept = dict((k, v) for k, v in ((existing or {}).get("metadata") or {}).items()
                    if k in ("uid", "creationTimestamp", "generation", "deletionTimestamp"))
        obj["metadata"] = dict((k, v) for k, v in obj["metadata"].items() if k not in SERVER_METADATA)
        obj["metadata"].update(kept)
        if existing is None:
            obj["metadata"].update(uid="uid-%d" % self._next_rv(), creationTimestamp=self.now())
        if "status" in (existing or {}) and plural != "secrets":
            obj["status"] = existing["status"]  # status is a subresource
        managed = copy.deepcopy(self.managed.get(key, {}))
        fields = _leaves(obj)
        for m in managed:
            managed[m]["fields"] = set(g for g in managed[m]["fields"] if not any(_overlap(f, g) for f in fields))
        managed[manager] = {"operation": "Update", "apiVersion": gv, "fields": fields, "time": self.now()}
        managed = dict((m, e) for m, e in managed.items() if e["fields"])
        same = existing is not None and dict(obj, metadata=dict(obj["metadata"], resourceVersion=None)) == dict(
            existing, metadata=dict(existing["metadata"], resourceVersion=None))
        obj["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"] if same else str(self._next_rv())
        if (query.get("dryRun") or [""])[0] == "All":
            return (201 if existing is None else 200), self._view(self._shown(key, obj, managed), asked)
        self.objects[key] = obj
        self.managed[key] = managed
        if plural == "customresourcedefinitions":
            if existing is None:  # Established after crd_delay, as on a PATCH
                self._crds[name] = (time.monotonic() + self.crd_delay, obj)
                self._settle()
            else:
                self._crd_updated(name)
        self._collect()
        return (201 if existing is None else 200), self._view(self._shown(key, obj), asked)

    def _terminating(self, gv, plural, name, ns):
        """The NamespaceLifecycle admission plugin's refusal of new content (admission.NewForbidden: the resource
        qualified by its group, then the name), with the NamespaceTerminating cause."""
        group = gv.rpartition("/")[0]
        resource = "%s.%s" % (plural, group) if group else plural
        code, body = self._status(403, "Forbidden", '%s "%s" is forbidden: unable to create new content in namespace %s '
                                                    'because it is being terminated' % (resource, name, ns))
        body["details"] = {"name": name, "group": group, "kind": plural, "causes": [
            {"reason": "NamespaceTerminating", "message": "namespace %s is being terminated" % ns,
             "field": "metadata.namespace"}]}
        if not group:
            del body["details"]["group"]  # omitempty
        return code, body

    def _aggregated(self, core):
        """APIGroupDiscoveryList (apidiscovery.k8s.io/v2): versions preferred first, as the API reference says."""
        groups = {}
        for gv in self._group_versions():
            if ("/" in gv) != core:
                groups.setdefault(gv.rpartition("/")[0], []).append(gv.rpartition("/")[2])
        items = []
        for group, versions in sorted(groups.items()):
            items.append({"metadata": {"name": group, "creationTimestamp": None}, "versions": [
                {"version": v, "freshness": "Current", "resources": [
                    {"resource": p, "responseKind": {"group": group, "version": v, "kind": k},
                     "scope": "Namespaced" if n else "Cluster", "singularResource": k.lower(),
                     "verbs": _verbs("%s/%s" % (group, v) if group else v, p),
                     "subresources": [{"subresource": name, "verbs": verbs,
                                       "responseKind": {"group": sg, "version": sv, "kind": sk}}
                                      for name, verbs, (sg, sv, sk) in _subresources(
                                          "%s/%s" % (group, v) if group else v, p, k)]}
                    for p, k, n in self._resources("%s/%s" % (group, v) if group else v)]}
                for v in sorted(versions, key=_version_key, reverse=True)]})
        return 200, {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
                     "items": items}, AGGREGATED

    def _openapi(self, path):
        """OpenAPI v3 (https://kubernetes.io/docs/concepts/overview/kubernetes-api/#openapi-v3): /openapi/v3 names a
        document per group-version, each with its paths; the PATCH of an object takes the fieldValidation query
        parameter, which is how kubectl's and helm's validation learn that the server validates fields itself (they
        then send fieldValidation=Strict, and need no schema of their own)."""
        served = self._group_versions()
        if path == "/openapi/v3":
            return 200, {"paths": dict(("api/%s" % gv if "/" not in gv else "apis/%s" % gv,
                                        {"serverRelativeURL": "/openapi/v3/%s?hash=%d" % (
                                            "api/%s" % gv if "/" not in gv else "apis/%s" % gv, self._rv)})
                                       for gv in served)}
        rest = path[len("/openapi/v3/"):]
        gv = rest[len("api/"):] if rest.startswith("api/") else rest[len("apis/"):]
        if gv not in served:
            return None
        group, dummy, version = gv.rpartition("/")
        base = "/api/%s" % gv if not group else "/apis/%s" % gv
        paths = {}
        for plural, kind, namespaced in self._resources(gv):
            if "patch" not in _verbs(gv, plural):
                continue
            named = "%s%s/%s/{name}" % (base, "/namespaces/{namespace}" if namespaced else "", plural)
            paths[named] = {"patch": {
                "operationId": "patch%s" % kind, "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": kind},
                "parameters": [{"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                               for p in ("dryRun", "fieldManager", "fieldValidation", "force")]}}
        return 200, {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v%s.0" % self.version},
                     "paths": paths}

    def _discovery(self, path, accept=""):
        if path == "/openapi/v3" or path.startswith("/openapi/v3/"):
            return self._openapi(path)
        if path == "/version":
            major, minor = self.version.split(".")
            return 200, {"major": major, "minor": minor, "gitVersion": "v%s.0" % self.version}
        if path in ("/api", "/apis") and self.aggregated and _accepts_aggregated(accept):
            return self._aggregated(path == "/api")
        if path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        served = self._group_versions()
        if path == "/apis":
            groups = {}
            for gv in served:
                if "/" in gv:
                    g, v = gv.split("/")
                    groups.setdefault(g, []).append({"groupVersion": gv, "version": v})
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": sorted(vs, key=lambda e: _version_key(e["version"]), reverse=True),
                 "preferredVersion": {"groupVersion": "%s/%s" % (g, self._preferred(g)), "version": self._preferred(g)}}
                for g, vs in sorted(groups.items())]}
        gv = path[len("/api/"):] if path.startswith("/api/") else path[len("/apis/"):]
        if gv in served:
            resources = []
            for p, k, n in self._resources(gv):
                resources.append({"name": p, "singularName": k.lower(), "namespaced": n, "kind": k, "verbs": _verbs(gv, p)})
                for name, verbs, (sg, sv, sk) in _subresources(gv, p, k):
                    sub = {"name": "%s/%s" % (p, name), "singularName": "", "namespaced": n, "kind": sk, "verbs": verbs}
                    if (("%s/%s" % (sg, sv)) if sg else sv) != gv:  # named only where they differ from the list's
                        sub.update(group=sg, version=sv)
                    resources.append(sub)
            return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
        return None

    def _parse(self, path):
        parts = [p for p in path.split("/") if p]
        if parts[0] == "api":
            gv, rest = parts[1], parts[2:]
        else:
            gv, rest = "%s/%s" % (parts[1], parts[2]), parts[3:]
        ns = ""
        if len(rest) > 2 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        return gv, plural, ns, name

    def _conflict(self, conflicts):
        causes = [{"reason": "FieldManagerConflict", "message": 'conflict with "%s"' % m, "field": "." + ".".join(f)}
                  for m, f in conflicts]
        code, body = self._status(409, "Conflict", "Apply failed with %d conflict%s: %s" % (
            len(conflicts), "" if len(conflicts) == 1 else "s",
            "; ".join('conflict with "%s": .%s' % (m, ".".join(f)) for m, f in conflicts)))
        body["details"] = {"causes": causes}
        return code, body

    def _apply(self, key, existing, config, manager, force):
        """Server-side apply: (status, body) for a conflict, else (merged object, managers)."""
        managed = copy.deepcopy(self.managed.get(key, {}))
        live = copy.deepcopy(existing or {})
        config = dict((k, v) for k, v in config.items() if k != "status")  # status is a subresource
        fields = _leaves(config)
        conflicts = sorted(set((m, f) for m, entry in managed.items() if m != manager
                               for f in fields for g in entry["fields"]
                               if _overlap(f, g) and _at(live, f) != _at(config, f)))
        if conflicts and not force:
            return self._conflict(conflicts), None
        for m, f in conflicts:  # force: the applier takes them over
            managed[m]["fields"] = set(g for g in managed[m]["fields"] if not _overlap(f, g))
        before = managed.get(manager, {}).get("fields", set())
        for gone in sorted(before - fields):
            if not any(_overlap(gone, g) for m, e in managed.items() if m != manager for g in e["fields"]):
                _remove(live, gone)
        merged = _merge(live, config)
        managed[manager] = {"operation": "Apply", "apiVersion": key[0], "fields": fields,
                            "time": self._entry_time(key, manager, existing, merged, fields)}
        return merged, dict((m, e) for m, e in managed.items() if e["fields"])

    def _entry_time(self, key, manager, existing, merged, fields):
        """The manager's entry time: kept while its fields and their values stay, else now."""
        old = self.managed.get(key, {}).get(manager)
        if old and old["fields"] == fields and all(_at(existing or {}, f) == _at(merged, f) for f in fields):
            return old["time"]
        return self.now()

    def _update(self, key, existing, patch, manager):
        """Merge patch: the updater takes the fields it sets, no conflicts."""
        managed = copy.deepcopy(self.managed.get(key, {}))
        fields = _leaves(patch)
        for m in managed:
            managed[m]["fields"] = set(g for g in managed[m]["fields"] if not any(_overlap(f, g) for f in fields))
        entry = managed.setdefault(manager, {"operation": "Update", "apiVersion": key[0], "fields": set()})
        entry["fields"] |= fields
        merged = _merge(existing, patch)
        entry["time"] = self._entry_time(key, manager, existing, merged, entry["fields"])
        return merged, dict((m, e) for m, e in managed.items() if e["fields"])

    def _view(self, obj, gv):
        """An object as the version ``gv`` shows it."""
        if obj.get("apiVersion") and gv:
            obj = dict(obj, apiVersion=gv)
        return obj

    def _in_namespace(self, key, name):
        return key[2] == name and key != ("v1", "namespaces", "", name)

    def _delete(self, key, now):
        """DELETE: remove the object, or, while finalizers hold it, mark it (deletionTimestamp) and keep it."""
        obj = self.objects[key]
        meta = obj.setdefault("metadata", {})
        if meta.get("deletionTimestamp"):
            return  # already being deleted: nothing changes
        namespace = key[:2] == ("v1", "namespaces")
        if meta.get("finalizers") or namespace:
            meta.update(deletionTimestamp=now, deletionGracePeriodSeconds=0, resourceVersion=str(self._next_rv()))
            if namespace:
                obj["status"] = dict(obj.get("status") or {}, phase="Terminating")
                # The namespace controller deletes everything in it.
                for other in [k for k in self.objects if self._in_namespace(k, key[3])]:
                    self._delete(other, now)
            self._collect()
            return
        del self.objects[key]
        self.managed.pop(key, None)
        self._collect()

    def _collect(self):
        """Objects marked for deletion go once their finalizers are clear (a namespace once it is empty too)."""
        for key in sorted(self.objects, key=lambda k: k[:2] == ("v1", "namespaces")):
            meta = (self.objects.get(key) or {}).get("metadata") or {}
            if not meta.get("deletionTimestamp") or meta.get("finalizers"):
                continue
            if key[:2] == ("v1", "namespaces") and any(self._in_namespace(k, key[3]) for k in self.objects):
                continue
            del self.objects[key]
            self.managed.pop(key, None)

    def handle(self, req, method):
        if self.latency:
            time.sleep(self.latency)
        url = urlparse(req.path)
        query = parse_qs(url.query)
        length = int(req.headers.get("Content-Length") or 0)
        body = req.rfile.read(length) if length else b""
        ctype = req.headers.get("Content-Type", "")
        with self._lock:
            self._settle()
            self.authorizations.add(req.headers.get("Authorization"))
            self.requests.append((method, url.path, query, ctype))
            if method == "GET" and url.path == "/openapi/v2":
                return self._openapi_v2(req)
            found = self._discovery(url.path, req.headers.get("Accept", "")) if method == "GET" else None
            if found:
                return req._send(*found)
            try:
                asked, plural, ns, name = self._parse(url.path)
                kinds = dict((p, (k, n)) for p, k, n in self._resources(asked))
                kind, namespaced = kinds[plural]
            except (KeyError, IndexError):
                return req._send(*self._status(404, "NotFound", "the server could not find the requested resource"))
            if _verb(method, name) not in _verbs(asked, plural):
                # No route for the method: go-restful's 405, written by the API server as a Status.
                code, status = self._status(405, "MethodNotAllowed",
                                            "the server does not allow this method on the requested resource")
                return req._send(code, dict(status, details={}))
            req.warnings = self._warning(asked, kind)
            self.warnings += [(method, url.path, w) for w in req.warnings]
            gv = self._stored_as(asked, plural)
            key = (gv, plural, ns, name)
            dry_run = (query.get("dryRun") or [""])[0] == "All"
            if method == "GET":
                if name is None:
                    try:
                        selector = _selector((query.get("labelSelector") or [""])[0])
                    except ValueError as exc:
                        return req._send(400, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                               "message": str(exc), "reason": "BadRequest", "code": 400})
                    items = [self._view(self._shown(k, o), asked) for k, o in sorted(self.objects.items())
                             if k[0] == gv and k[1] == plural and (not ns or k[2] == ns)
                             and selector((o.get("metadata") or {}).get("labels") or {})]
                    return req._send(200, {"kind": kind + "List", "apiVersion": asked,
                                           "metadata": {"resourceVersion": str(self._rv)}, "items": items})
                if key not in self.objects:
                    return req._send(*self._status(404, "NotFound", '%s "%s" not found' % (plural, name)))
                return req._send(200, self._view(self._shown(key, self.objects[key]), asked))
            if method == "DELETE":
                if name is None or key not in self.objects:
                    return req._send(*self._status(404, "NotFound", '%s "%s" not found' % (plural, name)))
                before = self._shown(key, self.objects[key])
                if not dry_run:
                    self._delete(key, self.now())
                # The object marked for deletion while finalizers hold it, else as it was.
                after = self.objects.get(key)
                return req._send(200, self._view(self._shown(key, after) if after is not None else before, asked))
            if method in ("POST", "PUT"):
                return req._send(*self._write(method, asked, gv, plural, kind, namespaced, ns, name, body, query,
                                              req.headers.get("User-Agent") or "", ctype))
            # PATCH
            if namespaced and ns and ("v1", "namespaces", "", ns) not in self.objects:
                return req._send(*self._status(404, "NotFound", 'namespaces "%s" not found' % ns))
            existing = self.objects.get(key)
            terminating = namespaced and ns and self.objects[("v1", "namespaces", "", ns)]["metadata"].get("deletionTimestamp")
            if existing is None and terminating:
                return req._send(*self._terminating(asked, plural, name, ns))
            patch = self._pruned(asked, plural, json.loads(body or b"{}"))
            if plural == "customresourcedefinitions" and existing is not None:
                refused = self._crd_update_refusal(existing, _merge(existing, patch))
                if refused:
                    return req._send(*refused)
            if "apply-patch" in ctype:
                manager = (query.get("fieldManager") or [""])[0]
                if not manager:
                    return req._send(*self._status(400, "BadRequest", "PATCH with apply requires a fieldManager"))
                self.field_managers.add(manager)
                merged, managed = self._apply(key, existing, dict(patch, apiVersion=gv), manager,
                                              (query.get("force") or [""])[0] == "true")
                if managed is None:
                    return req._send(*merged)
            elif existing is None:
                return req._send(*self._status(404, "NotFound", '%s "%s" not found' % (plural, name)))
            elif (patch.get("metadata") or {}).get("resourceVersion") not in (None, existing["metadata"].get("resourceVersion")):
                # A patch that carries a resourceVersion is guarded by it, as the real server's precondition.
                return req._send(*self._status(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": the object '
                                               'has been modified; please apply your changes to the latest version '
                                               'and try again' % (plural, name)))
            else:
                merged, managed = self._update(key, existing, patch,
                                               (query.get("fieldManager") or ["unknown"])[0])
            merged.setdefault("metadata", {})
            if existing is None:
                merged["metadata"].update(uid="uid-%d" % self._next_rv(), creationTimestamp=self.now())
            if merged != existing or managed != self.managed.get(key, {}):
                merged["metadata"]["resourceVersion"] = str(self._next_rv())
            if not dry_run:
                self.objects[key] = merged
                self.managed[key] = managed
                if plural == "customresourcedefinitions" and existing is not None:
                    self._crd_updated(name)
                if plural == "customresourcedefinitions" and existing is None:
                    self._crds[name] = (time.monotonic() + self.crd_delay, merged)
                    self._settle()
                self._collect()  # an update that clears the last finalizer of a marked object removes it
                if key not in self.objects:
                    return req._send(200, self._view(self._shown(key, merged, managed), asked))
            return req._send(201 if existing is None else 200, self._view(
                self._shown(key, merged, managed) if dry_run else self._shown(key, self.objects[key]), asked))
