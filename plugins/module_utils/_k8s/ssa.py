# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): server-side apply with one read per object.
"""Server-side apply, object by object, with at most one read each.

Follows the API reference (https://kubernetes.io/docs/reference/using-api/server-side-apply/):
an apply is a PATCH with ``Content-Type: application/apply-patch+yaml`` and a
``fieldManager``; the server answers with the object as stored (or, with
``dryRun=All``, as it would be stored, nothing persisted:
https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run); a
change to a field another manager owns is a 409 Conflict naming the managers
unless ``force=true``. So each object costs one GET (the state before, for
``changed`` and the diff; 404 when it does not exist yet) and one PATCH.

Resource paths come from a table of served resources (the k8s_discovery
result); a kind the table lacks (a CRD this run created) is looked up with one
legacy discovery GET of its group-version. The transport is a callable
``request(method, path, query, body, content_type) -> (object, warnings)``
that raises ApiError for any status outside 2xx.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import threading
import time

from ansible.module_utils.common.dict_transformations import recursive_diff
from ansible.module_utils.six.moves.urllib.parse import quote

try:
    from kubernetes.dynamic.resource import ResourceInstance
except ImportError:  # the module reports the missing library (AnsibleK8SModule's requires)
    ResourceInstance = None

from ansible_collections.kubernetes.core.plugins.module_utils.k8s.waiter import RESOURCE_PREDICATES, custom_condition

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import side_by_side

APPLY_PATCH = "application/apply-patch+yaml"
CRD_KIND, CRD_API = "CustomResourceDefinition", "apiextensions.k8s.io/v1"
# What a dry run returns differently from the object before without any change being planned: the
# server's bookkeeping of the request itself (metav1.ObjectMeta: set by the server, read-only).
BOOKKEEPING = ("managedFields", "resourceVersion", "generation", "creationTimestamp")
# What a diff never shows of a Secret (v1): its values, and the annotation that kubectl's client-side apply fills
# with a copy of them.
SECRET_FIELDS = ("data", "stringData")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
HIDDEN, CHANGED = "<hidden>", "<hidden, changed>"
# The first pause between two reads of an object that is not ready yet; each pause doubles, up to wait_sleep. A CRD
# is Established a moment after it is created (its names accepted, its kind served): it is read again at once, not
# after a fixed wait.
FIRST_PAUSE = 0.05
# RFC 7234 section 5.5 as the API server writes it: warn-code, warn-agent, quoted warn-text.
WARNING = re.compile(r'([0-9]{3}) (\S+) "((?:[^"\\]|\\.)*)"')


class ApiError(Exception):
    """A response outside 2xx: its status code, its Status object (or {}) and its warnings."""

    def __init__(self, status, body=None, warnings=None, reason=None):
        super(ApiError, self).__init__(status, reason)
        self.status = status
        self.body = body if isinstance(body, dict) else {}
        self.warnings = list(warnings or [])
        self.reason = reason

    @property
    def message(self):
        return self.body.get("message") or self.reason or "HTTP %s" % self.status


class ApplyError(Exception):
    """What to tell the user, and the per-object results applied before it."""

    def __init__(self, msg, results=None):
        super(ApplyError, self).__init__(msg)
        self.msg = msg
        self.results = list(results or [])


def parse_warnings(values):
    """The warn-texts of ``Warning`` header values (a header may hold several, comma-joined)."""
    out = []
    for value in values or []:
        for _code, _agent, text in WARNING.findall(value or ""):
            text = re.sub(r"\\(.)", r"\1", text)
            if text not in out:
                out.append(text)
    return out


def group_version(entry):
    return "%s/%s" % (entry["group"], entry["version"]) if entry.get("group") else entry["version"]


def describe(obj):
    """``Kind namespace/name`` of a definition, for messages."""
    meta = (obj or {}).get("metadata") or {}
    return "%s %s%s" % (obj.get("kind", "?"), "%s/" % meta["namespace"] if meta.get("namespace") else "",
                        meta.get("name", "?"))


class Resources(object):
    """Where each (apiVersion, kind) is served: the given table, then one discovery GET per missing group-version."""

    def __init__(self, request, table=None):
        self._request = request
        self._by_kind = {}
        self._fetched = set()
        self.warnings = []
        for entry in table or []:
            self._add(entry)

    def _add(self, entry):
        missing = [k for k in ("version", "kind", "resource", "namespaced") if k not in entry]
        if missing:
            raise ApplyError("api_table entry %r lacks %s (each entry: group, version, kind, resource, namespaced, "
                             "preferred, as gpuops.platform.k8s_discovery returns them)" % (entry, ", ".join(missing)))
        self._by_kind.setdefault((group_version(entry), entry["kind"]), entry)

    def _discover(self, api_version):
        """One legacy discovery GET (APIResourceList) of a group-version; a 404 means it is not served."""
        self._fetched.add(api_version)
        group, _sep, version = api_version.rpartition("/")
        path = "/apis/%s" % api_version if group else "/api/%s" % version
        try:
            body, warnings = self._request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return
            raise ApplyError("Discovery of %s failed: %s" % (api_version, exc.message))
        self.warnings += warnings
        for res in body.get("resources") or []:
            if "/" in res.get("name", "/"):  # subresources (status, scale) are not objects
                continue
            self._add({"group": group, "version": version, "kind": res.get("kind"), "resource": res["name"],
                       "namespaced": bool(res.get("namespaced")), "preferred": False})

    def find(self, api_version, kind):
        key = (api_version, kind)
        if key not in self._by_kind and api_version not in self._fetched:
            self._discover(api_version)
        if key not in self._by_kind:
            raise ApplyError("The API server does not serve %s at %s: check the apiVersion, or apply the "
                             "CustomResourceDefinition that defines it first" % (kind, api_version))
        return self._by_kind[key]


def ready(obj):
    """kubernetes.core.k8s's wait, on one object: a CRD until its Established condition is True (the
    wait_condition the role always gave its CRDs), a kind the waiter knows (Deployment, DaemonSet, StatefulSet,
    Pod, Job) by that kind's predicate, any other kind once it exists."""
    instance = ResourceInstance(None, obj)
    if obj.get("kind") == CRD_KIND:
        return custom_condition({"type": "Established", "status": "True"}, instance)
    predicate = RESOURCE_PREDICATES.get(obj.get("kind"))
    return bool(predicate(instance)) if predicate else True


def object_path(entry, obj):
    """The REST path of one object (API concepts: /api/v1 or /apis/GROUP/VERSION[/namespaces/NS]/RESOURCE/NAME)."""
    meta = obj.get("metadata") or {}
    name, namespace = meta.get("name"), meta.get("namespace")
    if not name:
        raise ApplyError("%s has no metadata.name: every applied object needs one" % describe(obj))
    base = "/apis/%s/%s" % (entry["group"], entry["version"]) if entry.get("group") else "/api/%s" % entry["version"]
    if entry["namespaced"]:
        if not namespace:
            raise ApplyError("%s is namespaced and has no metadata.namespace: set it in the definition" % describe(obj))
        base += "/namespaces/%s" % quote(namespace, safe="")
    return "%s/%s/%s" % (base, entry["resource"], quote(name, safe=""))


def _without_bookkeeping(obj):
    obj = dict(obj or {})
    obj["metadata"] = dict((k, v) for k, v in (obj.get("metadata") or {}).items() if k not in BOOKKEEPING)
    return obj


def _without_status(obj):
    return dict((k, v) for k, v in (obj or {}).items() if k != "status")


def is_changed(before, after, dry_run):
    """Whether the apply changed (or, in a dry run, would change) the object.

    Applied for real, the server bumps metadata.resourceVersion on every write
    and only then (ObjectMeta in the API reference). A dry run's answer is
    compared with the object before, leaving out what the server fills in for
    the request itself (managedFields, resourceVersion, generation, creationTimestamp).
    """
    if before is None:
        return True
    if not dry_run:
        return (after.get("metadata") or {}).get("resourceVersion") != (before.get("metadata") or {}).get("resourceVersion")
    return _without_bookkeeping(before) != _without_bookkeeping(after)


def was_created(before, after):
    """Whether the apply created the object (or, in a dry run, would create it), by the API's own answers: it did not
    exist before (the GET of the state before, or the ApplySet's list, answered 404), or the object answered is
    another one than the one read before (metadata.uid: unique per object over the cluster's lifetime, so one
    deleted and made again in between is a new one). An object that existed and was patched is never created,
    whatever its timestamps say."""
    if before is None:
        return True
    uid = ((before.get("metadata") or {}).get("uid"), ((after or {}).get("metadata") or {}).get("uid"))
    return bool(uid[0] and uid[1] and uid[0] != uid[1])


def _mask_values(mine, before):
    """A Secret's ``data`` or ``stringData`` with every value hidden: HIDDEN, or CHANGED where ``before`` (the other
    side's, None for the before side itself) differs, so that a diff shows which keys came, went or changed, never a
    value."""
    if not isinstance(mine, dict):
        return mine if mine is None else HIDDEN
    if before is None:
        return dict((k, HIDDEN) for k in mine)
    before = before if isinstance(before, dict) else {}
    return dict((k, HIDDEN if k in before and before[k] == v else CHANGED) for k, v in mine.items())


def masked(obj, before=None):
    """``obj`` as a diff may show it: a Secret's values (data, stringData, and the last-applied-configuration
    annotation, which holds them too) hidden; for the after side, ``before`` is the object before, so that a changed
    value shows as CHANGED."""
    if not isinstance(obj, dict) or obj.get("kind") != "Secret" or obj.get("apiVersion") != "v1":
        return obj
    old = before if isinstance(before, dict) else ({} if before is not None else None)
    out = dict(obj)
    for key in SECRET_FIELDS:
        if key in out:
            out[key] = _mask_values(out[key], None if old is None else old.get(key, {}))
    annotations = (out.get("metadata") or {}).get("annotations")
    if isinstance(annotations, dict) and LAST_APPLIED in annotations:
        theirs = None if old is None else (((old.get("metadata") or {}).get("annotations")) or {}).get(LAST_APPLIED)
        same = old is None or theirs == annotations[LAST_APPLIED]
        out["metadata"] = dict(out["metadata"], annotations=dict(annotations, **{LAST_APPLIED: HIDDEN if same else CHANGED}))
    return out


def object_diff(before, after):
    """``{"before", "after"}`` of what differs (kubernetes.core.k8s's shape: only differing keys; {} before a create);
    a Secret's values hidden (masked)."""
    found = recursive_diff(masked(before) or {}, masked(after, before or {}) or {})
    if not found:
        return {}
    return {"before": found[0], "after": found[1]}


def shown(obj):
    """An object as a diff block shows it: without what the server writes for its own bookkeeping (managedFields,
    resourceVersion, generation, creationTimestamp, uid)."""
    obj = _without_bookkeeping(obj)
    obj["metadata"] = dict((k, v) for k, v in obj["metadata"].items() if k != "uid")
    return obj


def diff_block(obj, before, after, dry_run):
    """One entry of the task's ``diff`` (ansible-core's callbacks print a list of them, each a unified diff of
    ``before`` and ``after`` under its headers): the whole object before and after, as ``shown``, a Secret's values
    hidden; ``before`` is empty for a new object."""
    label = describe(obj)
    old = shown(before) if before is not None else None
    return {"before": masked(old) if old is not None else "", "after": masked(shown(after), old or {}),
            "before_header": label if before is not None else "%s (absent)" % label,
            "after_header": "%s%s" % (label, " (dry run)" if dry_run else "")}


def _managers(body):
    """The managers a 409's causes name (FieldManagerConflict: 'conflict with "manager" ...')."""
    names, fields = [], []
    for cause in (body.get("details") or {}).get("causes") or []:
        m = re.search(r'conflict with "([^"]*)"', cause.get("message") or "")
        if m and m.group(1) not in names:
            names.append(m.group(1))
        if cause.get("field"):
            fields.append(cause["field"])
    return names, fields


def failure_message(obj, exc, field_manager):
    """What went wrong with one object's PATCH, and what to do."""
    if exc.status == 409:
        managers, fields = _managers(exc.body)
        return ("Server-side apply of %s conflicts with field manager(s) %s on %s. Another tool or person owns those "
                "fields. Leave them out of the definition, make that manager give them up, or take them over: force "
                "conflicts for the layer (k8s_apply_force_conflicts, or force_conflicts of this group), which moves "
                "their ownership to %s. The API server said: %s"
                % (describe(obj), ", ".join('"%s"' % m for m in managers) or "(not named)",
                   ", ".join(fields) or "some fields", field_manager, exc.message))
    return "Server-side apply of %s failed (HTTP %s): %s" % (describe(obj), exc.status, exc.message)


# What a server-side apply never records in managedFields: the object's identity (the API server's field manager
# strips them from every applied configuration).
IDENTITY = ("apiVersion", "kind")
IDENTITY_METADATA = ("name", "namespace")


_MISSING = object()


def _same(applied, live):
    """Equal as JSON (so True is not 1, and 1.0 is not 1): a value the server normalised (a quantity, a float) is
    not taken for the one applied."""
    return json.dumps(applied, sort_keys=True) == json.dumps(live, sort_keys=True)


def _owned(node):
    """A fieldsV1 node without its "." members (a map's or a list item's own entry, which an apply may record)."""
    return dict((k, v) for k, v in node.items() if k != ".") if isinstance(node, dict) else None


def _map_holds(node, applied, live):
    """Whether the fieldsV1 ``node`` owns exactly the fields of the applied map ``applied`` and ``live`` holds their
    values. Anything this cannot tell without the schema (a null, a list keyed by index) is False."""
    node = _owned(node)
    if node is None or not isinstance(live, dict) or set(node) != set("f:%s" % k for k in applied):
        return False
    return all(_value_holds(node["f:%s" % key], value, live.get(key, _MISSING)) for key, value in applied.items())


def _value_holds(node, applied, live):
    """One applied value against its fieldsV1 ``node``: a leaf (a scalar, an atomic map or list) is compared whole; a
    map or list the server tracks field by field is walked."""
    node = _owned(node)
    if live is _MISSING or applied is None or node is None:
        return False
    if not node:  # a leaf: a scalar, an atomic map or list, or an empty one (owned as a whole)
        return _same(applied, live)
    if isinstance(applied, dict):
        return _map_holds(node, applied, live)
    if isinstance(applied, list):
        return _list_holds(node, applied, live)
    return False


def _list_holds(node, applied, live):
    """A list the server tracks by item: a set of scalars ("v:" members) or a map list keyed by some of its items'
    fields ("k:" members, each naming its key fields and their values). Each applied item must be owned by exactly one
    member, and the live item of the same key must hold its values."""
    if not isinstance(live, list) or len(node) != len(applied):
        return False
    if all(k.startswith("v:") for k in node):
        try:
            owned = sorted(json.dumps(json.loads(k[2:]), sort_keys=True) for k in node)
        except ValueError:
            return False
        return owned == sorted(json.dumps(v, sort_keys=True) for v in applied) and all(v in live for v in applied)
    members = []
    for key in node:
        try:
            fields = json.loads(key[2:]) if key.startswith("k:") else None
        except ValueError:
            fields = None
        if not isinstance(fields, dict) or not fields:
            return False
        members.append((fields, node[key]))

    def of(item, fields):
        return isinstance(item, dict) and all(k in item and _same(v, item[k]) for k, v in fields.items())

    for item in applied:
        owning = [m for m in members if of(item, m[0])]
        found = [i for i in live if of(i, owning[0][0])] if len(owning) == 1 else []
        if len(found) != 1 or not _map_holds(owning[0][1], item, found[0]):
            return False
        members.remove(owning[0])  # as many members as items: each item has its own
    return True


def unchanged_by_apply(obj, before, field_manager):
    """Whether applying ``obj`` as ``field_manager`` would change nothing on ``before`` (the object as read or listed,
    with its managedFields): ``field_manager``'s Apply entry owns exactly the fields ``obj`` sets, and ``before`` holds
    their values already. Then no field would be set, given up or taken over, so the server would store the object
    as it is (Server-Side Apply: a manager's applied configuration is its whole intent). Lists are walked as the
    entry records them (atomic, a set, or keyed by their items' fields). False whenever this cannot be told without
    the server: the object is then applied."""
    meta = obj.get("metadata") or {}
    if not isinstance(before, dict) or not isinstance(meta, dict):
        return False
    config = dict((k, v) for k, v in obj.items() if k not in IDENTITY)
    config["metadata"] = dict((k, v) for k, v in meta.items() if k not in IDENTITY_METADATA)
    if not config["metadata"]:
        del config["metadata"]
    if not config:
        return False
    entries = [e for e in (before.get("metadata") or {}).get("managedFields") or []
               if isinstance(e, dict) and e.get("manager") == field_manager and e.get("operation") == "Apply" and not e.get("subresource")]
    if len(entries) != 1 or entries[0].get("apiVersion") != obj.get("apiVersion"):
        return False
    return _map_holds(entries[0].get("fieldsV1"), config, before)


class Applier(object):
    """Applies definitions one by one: a GET of the state before, then the apply PATCH.

    ``ready(obj)`` says whether an object that a group waits for is ready;
    ``sleep`` is time.sleep (tests replace it). ``known`` holds states before that were read already, by
    ``(apiVersion, kind, namespace or "", name)`` (the members of an ApplySet, listed before the apply): an object
    found there at the apiVersion it is applied at is not read again. Each serves once, so an object applied
    twice in one run is read before its second apply.

    ``listed``: objects as a LIST answered them, cut by ``view`` (a callable, from a whole object to that cut; the
    Nodes of k8s_discovery): their states before too, each with its resourceVersion. Their answers are compared and
    shown through ``view``.

    An object that an apply would leave as it is (unchanged_by_apply: this field manager owns exactly the fields it
    applies, at the values it applies, in the state before) is not applied at all: a no-op writes nothing, and the
    state before is its answer. Any object this cannot be told of is applied.
    """

    def __init__(self, request, resources, field_manager, dry_run=False, diff=False, wait_timeout=300, wait_sleep=5,
                 ready=ready, sleep=time.sleep, clock=time.monotonic, known=None, listed=None, view=None):
        self._request = request
        self._known = dict(known or {})
        self._view = view
        self._listed = set()
        for obj in listed or []:
            meta = (obj.get("metadata") or {}) if isinstance(obj, dict) else {}
            if view is None or not meta or not obj.get("apiVersion") or not obj.get("kind") or not meta.get("name") \
                    or not meta.get("resourceVersion"):
                continue  # read as any other object would be
            key = (obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])
            self._known.setdefault(key, obj)
            self._listed.add(key)
        self.resources = resources
        self.field_manager = field_manager
        self.dry_run = dry_run
        self.diff = diff
        self.wait_timeout = wait_timeout
        self.wait_sleep = wait_sleep
        self._ready = ready
        self._sleep = sleep
        self._clock = clock
        self.warnings = []
        self._warned = threading.Lock()
        self.diffs = []  # the diff blocks of the objects that changed, in diff mode

    def _call(self, method, path, query=None, body=None, content_type=None):
        try:
            obj, warnings = self._request(method, path, query, body, content_type)
        except ApiError as exc:
            self._warn(exc.warnings)
            raise
        self._warn(warnings)
        return obj

    def _warn(self, warnings):
        with self._warned:  # reads side by side may warn at once
            self.warnings += [w for w in warnings if w not in self.warnings]

    def _before(self, obj, path):
        try:
            return self._call("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise ApplyError("Reading %s failed (HTTP %s): %s" % (describe(obj), exc.status, exc.message))

    def pauses(self):
        """The pauses between two reads of an object that is not ready yet: FIRST_PAUSE, doubling up to wait_sleep."""
        pause = min(FIRST_PAUSE, self.wait_sleep)
        while True:
            yield pause
            pause = min(pause * 2, self.wait_sleep)

    def _wait(self, obj, path, after):
        """Poll until ready, with a short pause that doubles up to wait_sleep (pauses); the PATCH's answer is looked
        at first, so a ready object costs no call."""
        deadline = self._clock() + self.wait_timeout
        pauses = self.pauses()
        while not self._ready(after):
            if self._clock() >= deadline:
                raise ApplyError("%s was applied but is not ready after %s seconds (wait_timeout)"
                                 % (describe(obj), self.wait_timeout))
            self._sleep(next(pauses))
            after = self._before(obj, path) or after
        return after

    def wait_established(self, names):
        """Wait (outside a dry run) until each named CustomResourceDefinition exists and is Established: one GET
        each when it is, then one after each pause (pauses: short at first, up to wait_sleep), up to wait_timeout each. These are the CRDs that
        something other than this run's applies made, such as a Helm chart's."""
        if self.dry_run or not names:
            return
        entry = self.resources.find(CRD_API, CRD_KIND)
        for name in names:
            deadline = self._clock() + self.wait_timeout
            obj = {"apiVersion": CRD_API, "kind": CRD_KIND, "metadata": {"name": name}}
            path = object_path(entry, obj)
            pauses = self.pauses()
            while True:
                live = self._before(obj, path)
                if live is not None and self._ready(live):
                    break
                if self._clock() >= deadline:
                    raise ApplyError("%s is %s after %s seconds (wait_timeout): check the Helm release that installs "
                                     "it, and the API server's log" % (
                                         describe(obj), "not Established" if live else "still missing",
                                         self.wait_timeout))
                self._sleep(next(pauses))

    def _target(self, obj):
        """``(path, key)`` of one definition: where it is applied, and its key among the known states before."""
        if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind"):
            raise ApplyError("Every definition needs apiVersion, kind and metadata.name; got %r" % (describe(obj or {}),))
        entry = self.resources.find(obj["apiVersion"], obj["kind"])
        self._warn(self.resources.warnings)
        meta = obj.get("metadata") or {}
        key = (obj["apiVersion"], obj["kind"], (meta.get("namespace") or "") if entry["namespaced"] else "", meta.get("name"))
        return object_path(entry, obj), key

    def read_before(self, objects):
        """The states before of ``objects`` that no earlier read holds (the first time each is applied), every GET at
        once: their round trips overlap, and the applies keep their order. A definition that apply() would refuse
        is left to apply(), in its turn."""
        jobs, keys = [], set()
        for obj in objects:
            try:
                path, key = self._target(obj)
            except ApplyError:
                continue
            if key not in self._known and key not in keys:
                keys.add(key)
                jobs.append((key, obj, path))
        states = side_by_side.in_order(lambda job: self._before(job[1], job[2]), jobs)
        self._known.update((job[0], state) for job, state in zip(jobs, states))

    def apply(self, obj, force=False, wait=False):
        """Apply one definition; its result as kubernetes.core.k8s gives it (changed, method, result, diff)."""
        path, key = self._target(obj)
        listed = key in self._known and key in self._listed
        self._listed.discard(key)
        before = self._known.pop(key) if key in self._known else self._before(obj, path)
        if unchanged_by_apply(obj, before, self.field_manager):
            # Nothing to write: the object as it was read is the answer an apply would have given.
            if wait and not self.dry_run:
                before = self._wait(obj, path, before)
            result = {"changed": False, "method": "apply", "result": before}
            if not listed:
                result["created"] = False
            if self.diff:
                result["diff"] = {}
            return result
        query = [("fieldManager", self.field_manager)]
        if force:
            query.append(("force", "true"))
        if self.dry_run:
            query.append(("dryRun", "All"))
        try:
            after = self._call("PATCH", path, query, obj, APPLY_PATCH)
        except ApiError as exc:
            raise ApplyError(failure_message(obj, exc, self.field_manager))
        # A listed state before is a cut of the object: the answer is compared, and shown, as the same cut; and by
        # what the object holds, as a dry run's is, not by its resourceVersion, which its controllers (a kubelet
        # writing a Node's status) may have moved since the LIST. Its status is not the apply's to change.
        seen = self._view(after) if listed else after
        if listed:
            changed = is_changed(_without_status(before), _without_status(seen), True)
        else:
            changed = is_changed(before, after, self.dry_run)
        if wait and not self.dry_run:
            after = self._wait(obj, path, after)
        result = {"changed": changed, "method": "apply", "result": after, "created": was_created(before, after)}
        if self.diff:
            result["diff"] = object_diff(before, seen) if changed else {}
            if changed:
                self.diffs.append(diff_block(obj, before, seen, self.dry_run))
        return result

    def read(self, kinds):
        """After the applies: every object of each ``{api_version, kind}``, one LIST each (across namespaces).
        ``[{api_version, kind, served, resources}]``: a kind the server does not serve (its CRD not installed
        yet) is ``served: false`` with no resources, not an error."""
        out = []
        for wanted in kinds or []:
            api_version, kind = wanted["api_version"], wanted["kind"]
            try:
                entry = self.resources.find(api_version, kind)
            except ApplyError:
                out.append({"api_version": api_version, "kind": kind, "served": False, "resources": []})
                continue
            self._warn(self.resources.warnings)
            base = "/apis/%s/%s" % (entry["group"], entry["version"]) if entry.get("group") else "/api/%s" % entry["version"]
            try:
                body = self._call("GET", "%s/%s" % (base, entry["resource"]))
            except ApiError as exc:
                raise ApplyError("Listing %s (%s) failed (HTTP %s): %s" % (kind, api_version, exc.status, exc.message))
            # A list's items carry neither apiVersion nor kind (API concepts, collections): each gets them back.
            items = [dict(item, apiVersion=api_version, kind=kind) for item in body.get("items") or []]
            out.append({"api_version": api_version, "kind": kind, "served": True, "resources": items})
        return out

    def apply_groups(self, groups):
        """Apply each group's definitions in order; (changed, per-object results). Fails at the first error."""
        results = []
        for group in groups:
            try:
                self.read_before(group.get("objects") or [])
            except ApplyError as exc:
                raise ApplyError(exc.msg, results)
            for obj in group.get("objects") or []:
                try:
                    results.append(self.apply(obj, bool(group.get("force_conflicts")), bool(group.get("wait"))))
                except ApplyError as exc:
                    raise ApplyError(exc.msg, results)
                except ApiError as exc:
                    raise ApplyError("%s: %s" % (describe(obj), exc.message), results)
        return any(r["changed"] for r in results), results
