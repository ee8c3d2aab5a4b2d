"""A small in-memory Kubernetes API server for the apply path of cluster.yml.

It speaks the parts of the API that kubernetes.core and the collection use:
discovery (/version, /api, /apis), GET of objects and lists (with equality
label selectors), DELETE (a namespace takes its objects with it), merge
patches (k8s_taint) and server-side apply, with dry runs (dryRun=All stores
nothing), answering errors with a Status object like the real server. Every
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
"""
import copy
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
}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def _drop_nulls(value):
    """Nulls inside lists vanish, as when the real server decodes into its types (omitempty)."""
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    if isinstance(value, dict):
        return dict((k, _drop_nulls(v)) for k, v in value.items() if v is not None)
    return value


IDENTITY = {("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace")}
# When objects that a test seeds were created (long before any run).
SEEDED = "2026-01-01T00:00:00Z"
SERVER_METADATA = {"resourceVersion", "uid", "creationTimestamp", "managedFields", "generation", "deletionTimestamp"}
MISSING = object()


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
        self._crds = {}            # CRD name -> (due time, CRD object) until Established
        self.served = {}           # group/version -> [(plural, Kind, namespaced)] served by established CRDs
        self.authorizations = set()  # Authorization headers seen, to prove a credential arrived
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

            def do_DELETE(self):  # noqa: N802
                server.handle(self, "DELETE")

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

    # --- implementation ----------------------------------------------------
    def _next_rv(self):
        self._rv += 1
        return self._rv

    def _resources(self, gv):
        return list(RESOURCES.get(gv, [])) + list(self.served.get(gv, []))

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
                "acceptedNames": stored["spec"]["names"]}
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
        served = sorted(set(RESOURCES) | set(self.served))
        if path == "/apis":
            groups = {}
            for gv in served:
                if "/" in gv:
                    g, v = gv.split("/")
                    groups.setdefault(g, []).append({"groupVersion": gv, "version": v})
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": vs, "preferredVersion": vs[0]} for g, vs in sorted(groups.items())]}
        gv = path[len("/api/"):] if path.startswith("/api/") else path[len("/apis/"):]
        if gv in served:
            return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": [
                {"name": p, "singularName": k.lower(), "namespaced": n, "kind": k, "verbs": VERBS}
                for p, k, n in self._resources(gv)]}
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

    def handle(self, req, method):
        url = urlparse(req.path)
        query = parse_qs(url.query)
        length = int(req.headers.get("Content-Length") or 0)
        body = req.rfile.read(length) if length else b""
        ctype = req.headers.get("Content-Type", "")
        with self._lock:
            self._settle()
            self.authorizations.add(req.headers.get("Authorization"))
            self.requests.append((method, url.path, query, ctype))
            found = self._discovery(url.path) if method == "GET" else None
            if found:
                return req._send(*found)
            try:
                gv, plural, ns, name = self._parse(url.path)
                kinds = dict((p, (k, n)) for p, k, n in self._resources(gv))
                kind, namespaced = kinds[plural]
            except (KeyError, IndexError):
                return req._send(*self._status(404, "NotFound", "the server could not find the requested resource"))
            key = (gv, plural, ns, name)
            dry_run = (query.get("dryRun") or [""])[0] == "All"
            if method == "GET":
                if name is None:
                    try:
                        selector = _selector((query.get("labelSelector") or [""])[0])
                    except ValueError as exc:
                        return req._send(400, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                               "message": str(exc), "reason": "BadRequest", "code": 400})
                    items = [self._shown(k, o) for k, o in sorted(self.objects.items())
                             if k[0] == gv and k[1] == plural and (not ns or k[2] == ns)
                             and selector((o.get("metadata") or {}).get("labels") or {})]
                    return req._send(200, {"kind": kind + "List", "apiVersion": gv,
                                           "metadata": {"resourceVersion": str(self._rv)}, "items": items})
                if key not in self.objects:
                    return req._send(*self._status(404, "NotFound", '%s "%s" not found' % (plural, name)))
                return req._send(200, self._shown(key, self.objects[key]))
            if method == "DELETE":
                if name is None or key not in self.objects:
                    return req._send(*self._status(404, "NotFound", '%s "%s" not found' % (plural, name)))
                gone = self._shown(key, self.objects[key])
                if not dry_run:
                    for other in [k for k in self.objects
                                  if k == key or (plural == "namespaces" and gv == "v1" and k[2] == name)]:
                        # The namespace controller deletes everything in a deleted namespace.
                        del self.objects[other]
                        self.managed.pop(other, None)
                return req._send(200, gone)
            # PATCH
            if namespaced and ns and ("v1", "namespaces", "", ns) not in self.objects:
                return req._send(*self._status(404, "NotFound", 'namespaces "%s" not found' % ns))
            patch = json.loads(body or b"{}")
            existing = self.objects.get(key)
            if "apply-patch" in ctype:
                manager = (query.get("fieldManager") or [""])[0]
                if not manager:
                    return req._send(*self._status(400, "BadRequest", "PATCH with apply requires a fieldManager"))
                self.field_managers.add(manager)
                merged, managed = self._apply(key, existing, patch, manager,
                                              (query.get("force") or [""])[0] == "true")
                if managed is None:
                    return req._send(*merged)
            elif existing is None:
                return req._send(*self._status(404, "NotFound", '%s "%s" not found' % (plural, name)))
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
                if plural == "customresourcedefinitions" and existing is None:
                    self._crds[name] = (time.monotonic() + self.crd_delay, merged)
                    self._settle()
            return req._send(201 if existing is None else 200, self._shown(key, merged, managed) if dry_run else
                             self._shown(key, self.objects[key]))
