"""A small in-memory Kubernetes API server for the apply path of cluster.yml.

It speaks the parts of the API that kubernetes.core uses here: discovery
(/version, /api, /apis), GET of objects and lists, server-side apply (PATCH
with application/apply-patch+yaml and a required fieldManager), merge patches
(k8s_taint), and dry runs (dryRun=All stores nothing), answering 404 with a
Status object like the real server. Every request is recorded so tests can
count API calls and check what was sent. It is not a validating server:
schemas are checked by the render tests.
"""
import copy
import json
import threading
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
}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def _drop_nulls(value):
    """Nulls inside lists vanish, as when the real server decodes into its types (omitempty)."""
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    if isinstance(value, dict):
        return dict((k, _drop_nulls(v)) for k, v in value.items() if v is not None)
    return value


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


class FakeAPIServer:
    def __init__(self, version="1.34"):
        self.version = version
        self.objects = {}          # (group_version, plural, namespace, name) -> object
        self.requests = []         # (method, path, query, content_type)
        self.field_managers = set()
        self._rv = 1
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 - http.server's naming
                server.handle(self, "GET")

            def do_PATCH(self):  # noqa: N802
                server.handle(self, "PATCH")

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
    def add(self, obj):
        gv, plural, ns, name = self._key_for(obj)
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {}).setdefault("resourceVersion", str(self._next_rv()))
        self.objects[(gv, plural, ns, name)] = obj

    def get(self, kind, name, namespace=""):
        for (gv, plural, ns, n), obj in self.objects.items():
            if obj.get("kind") == kind and n == name and ns == (namespace or ""):
                return obj
        return None

    def writes(self):
        return [r for r in self.requests if r[0] != "GET"]

    # --- implementation ----------------------------------------------------
    def _next_rv(self):
        self._rv += 1
        return self._rv

    def _key_for(self, obj):
        gv = obj["apiVersion"]
        for plural, kind, namespaced in RESOURCES[gv]:
            if kind == obj["kind"]:
                ns = obj["metadata"].get("namespace", "") if namespaced else ""
                return gv, plural, ns, obj["metadata"]["name"]
        raise KeyError(obj["kind"])

    def _status(self, code, reason, message):
        return code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": message, "reason": reason, "code": code}

    def _discovery(self, path):
        if path == "/version":
            major, minor = self.version.split(".")
            return 200, {"major": major, "minor": minor, "gitVersion": "v%s.0" % self.version}
        if path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "/apis":
            groups = {}
            for gv in RESOURCES:
                if "/" in gv:
                    g, v = gv.split("/")
                    groups.setdefault(g, []).append({"groupVersion": gv, "version": v})
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": vs, "preferredVersion": vs[0]} for g, vs in sorted(groups.items())]}
        gv = path[len("/api/"):] if path.startswith("/api/") else path[len("/apis/"):]
        if gv in RESOURCES:
            return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": [
                {"name": p, "singularName": k.lower(), "namespaced": n, "kind": k, "verbs": VERBS}
                for p, k, n in RESOURCES[gv]]}
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

    def handle(self, req, method):
        url = urlparse(req.path)
        query = parse_qs(url.query)
        length = int(req.headers.get("Content-Length") or 0)
        body = req.rfile.read(length) if length else b""
        ctype = req.headers.get("Content-Type", "")
        with self._lock:
            self.requests.append((method, url.path, query, ctype))
            found = self._discovery(url.path) if method == "GET" else None
            if found:
                return req._send(*found)
            try:
                gv, plural, ns, name = self._parse(url.path)
                kinds = dict((p, (k, n)) for p, k, n in RESOURCES[gv])
                kind, namespaced = kinds[plural]
            except (KeyError, IndexError):
                return req._send(*self._status(404, "NotFound", "the server could not find the requested resource"))
            key = (gv, plural, ns, name)
            if method == "GET":
                if name is None:
                    items = [o for (g, p, n, dummy), o in sorted(self.objects.items()) if g == gv and p == plural
                             and (not ns or n == ns)]
                    return req._send(200, {"kind": kind + "List", "apiVersion": gv,
                                           "metadata": {"resourceVersion": str(self._rv)}, "items": items})
                if key not in self.objects:
                    return req._send(*self._status(404, "NotFound", '%s "%s" not found' % (plural, name)))
                return req._send(200, self.objects[key])
            # PATCH
            if namespaced and ns and ("v1", "namespaces", "", ns) not in self.objects:
                return req._send(*self._status(404, "NotFound", 'namespaces "%s" not found' % ns))
            patch = json.loads(body or b"{}")
            if "apply-patch" in ctype:
                manager = (query.get("fieldManager") or [""])[0]
                if not manager:
                    return req._send(*self._status(400, "BadRequest", "PATCH with apply requires a fieldManager"))
                self.field_managers.add(manager)
            elif key not in self.objects:
                return req._send(*self._status(404, "NotFound", '%s "%s" not found' % (plural, name)))
            existing = self.objects.get(key)
            merged = _merge(existing or {}, patch)
            merged.setdefault("metadata", {})
            if existing is None:
                merged["metadata"].update(uid="uid-%d" % self._next_rv(), creationTimestamp="2026-01-01T00:00:00Z")
            if merged != existing:
                merged["metadata"]["resourceVersion"] = str(self._next_rv())
            if (query.get("dryRun") or [""])[0] != "All":
                self.objects[key] = merged
            return req._send(201 if existing is None else 200, merged)
