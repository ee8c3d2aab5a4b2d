"""Server-side apply with at most one read per object (module_utils/_k8s/ssa.py), against a scripted transport.

Each test names the part of the Kubernetes API reference it follows:
- Server-Side Apply (https://kubernetes.io/docs/reference/using-api/server-side-apply/): the PATCH with
  Content-Type application/apply-patch+yaml and fieldManager, force, 409 Conflict with one cause per field;
- API concepts, dry run (https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run): dryRun=All
  answers with the object as it would be stored;
- ObjectMeta: resourceVersion changes on every write and only then;
- warnings (https://kubernetes.io/blog/2020/09/03/warnings/): `Warning: 299 - "text"` headers;
- discovery (https://kubernetes.io/docs/concepts/overview/kubernetes-api/#discovery-api): APIResourceList of a
  group-version, subresources named `resource/sub`.
"""
import copy
import threading

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import ssa

TABLE = [
    {"group": "", "version": "v1", "kind": "Namespace", "resource": "namespaces", "namespaced": False, "preferred": True},
    {"group": "", "version": "v1", "kind": "ConfigMap", "resource": "configmaps", "namespaced": True, "preferred": True},
    {"group": "apiextensions.k8s.io", "version": "v1", "kind": "CustomResourceDefinition",
     "resource": "customresourcedefinitions", "namespaced": False, "preferred": True},
]


def ns(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def cm(name, namespace="team-a", **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


def stored(obj, rv="7", **meta):
    out = copy.deepcopy(obj)
    out["metadata"].update(resourceVersion=rv, uid="u-1", creationTimestamp="2026-01-01T00:00:00Z",
                           managedFields=[{"manager": "gpuops-platform", "operation": "Apply",
                                           "time": "2026-01-01T00:00:00Z"}], **meta)
    return out


class Server(object):
    """A scripted transport: each (method, path) answers from ``answers`` (a list is consumed in order);
    every call is recorded."""

    def __init__(self, answers):
        self.answers = dict((k, list(v) if isinstance(v, list) else v) for k, v in answers.items())
        self.calls = []

    def __call__(self, method, path, query=None, body=None, content_type=None):
        self.calls.append((method, path, list(query or []), body, content_type))
        answer = self.answers.get((method, path))
        if isinstance(answer, list):
            answer = answer.pop(0) if len(answer) > 1 else answer[0]
        if answer is None:
            raise ssa.ApiError(404, {"kind": "Status", "reason": "NotFound", "code": 404, "message": "not found"})
        if isinstance(answer, ssa.ApiError):
            raise answer
        return copy.deepcopy(answer[0]), list(answer[1]) if len(answer) > 1 else []

    def methods(self):
        return [(c[0], c[1]) for c in self.calls]


def applier(server, table=None, **kw):
    table = TABLE if table is None else table
    return ssa.Applier(server, ssa.Resources(server, table), "gpuops-platform", sleep=lambda s: None, **kw)


def test_a_no_op_is_one_get_and_one_patch_per_object_and_unchanged():
    # ObjectMeta: an apply that changes nothing keeps resourceVersion.
    live = stored(cm("a", x="1"))
    server = Server({("GET", "/api/v1/namespaces/team-a/configmaps/a"): (live,),
                     ("PATCH", "/api/v1/namespaces/team-a/configmaps/a"): (live,)})
    changed, results = applier(server).apply_groups([{"objects": [cm("a", x="1")]}])
    assert server.methods() == [("GET", "/api/v1/namespaces/team-a/configmaps/a"),
                                ("PATCH", "/api/v1/namespaces/team-a/configmaps/a")]
    assert changed is False and results == [{"changed": False, "method": "apply", "result": live, "created": False}]
    # The apply PATCH of the Server-Side Apply reference: apply-patch+yaml, our field manager, no force, no dry run.
    method, path, query, body, ctype = server.calls[1]
    assert ctype == "application/apply-patch+yaml"
    assert query == [("fieldManager", "gpuops-platform")]
    assert body == cm("a", x="1")


def test_created_is_told_by_the_state_before_and_the_uid_never_by_timestamps():
    # An object read before (same uid) and patched is not created, even stamped in the same second as its creation;
    # one that was absent (404) is, and so is one the server answers with another uid (deleted and made again).
    before = stored(cm("a", x="1"))
    patched = stored(cm("a", x="2"), rv="8")
    renewed = stored(cm("a", x="2"), rv="9")
    renewed["metadata"]["uid"] = "u-2"
    server = Server({("GET", cm_path("a")): [(before,), None, (before,)],
                     ("PATCH", cm_path("a")): [(patched,), (patched,), (renewed,)]})
    results = [applier(server).apply_groups([{"objects": [cm("a", x="2")]}])[1][0] for _run in range(3)]
    assert [(r["changed"], r["created"]) for r in results] == [(True, False), (True, True), (True, True)]


def cm_path(name):
    return "/api/v1/namespaces/team-a/configmaps/%s" % name


class Overlapping(Server):
    """Server whose GETs answer only once ``reads`` of them are in flight together: a test using it hangs, then fails
    on the barrier's timeout, unless the reads overlap."""

    def __init__(self, answers, reads):
        super(Overlapping, self).__init__(answers)
        self.together = threading.Barrier(reads, timeout=10)

    def __call__(self, method, path, query=None, body=None, content_type=None):
        if method == "GET":
            self.together.wait()
        return super(Overlapping, self).__call__(method, path, query, body, content_type)


def test_the_states_before_of_a_group_are_read_at_once_and_its_applies_keep_their_order():
    names = ["a", "b", "c"]
    answers = dict(((verb, cm_path(n)), (stored(cm(n, x="1")),)) for n in names for verb in ("GET", "PATCH"))
    server = Overlapping(answers, reads=3)
    changed, results = applier(server).apply_groups([{"objects": [cm(n, x="1") for n in names]}])
    assert sorted(server.methods()[:3]) == [("GET", cm_path(n)) for n in names]
    assert server.methods()[3:] == [("PATCH", cm_path(n)) for n in names]
    assert changed is False and [r["result"]["metadata"]["name"] for r in results] == names


def test_a_read_that_fails_stops_its_group_before_any_of_its_applies():
    forbidden = ssa.ApiError(403, {"message": "configmaps is forbidden"})
    live = stored(ns("team-a"))
    server = Server({("GET", "/api/v1/namespaces/team-a"): (live,), ("PATCH", "/api/v1/namespaces/team-a"): (live,),
                     ("GET", cm_path("a")): (stored(cm("a")),), ("GET", cm_path("b")): forbidden})
    with pytest.raises(ssa.ApplyError, match=r"Reading ConfigMap team-a/b failed \(HTTP 403\)") as err:
        applier(server).apply_groups([{"objects": [ns("team-a")]}, {"objects": [cm("a"), cm("b")]}])
    assert [c for c in server.methods() if c[0] == "PATCH"] == [("PATCH", "/api/v1/namespaces/team-a")]
    # What the earlier group applied is reported with the failure.
    assert [r["result"]["metadata"]["name"] for r in err.value.results] == ["team-a"]


def test_a_state_before_read_already_costs_no_get_and_serves_once():
    # The members an ApplySet listed before the apply (reconcile.before_states): an object found there at the
    # apiVersion it is applied at is not read again; applied a second time in the run, it is read then.
    live = stored(cm("a", x="1"))
    server = Server({("GET", "/api/v1/namespaces/team-a/configmaps/a"): (stored(cm("a", x="1"), rv="8"),),
                     ("PATCH", "/api/v1/namespaces/team-a/configmaps/a"): [(live,), (stored(cm("a", x="1"), rv="8"),)]})
    known = {("v1", "ConfigMap", "team-a", "a"): live}
    changed, results = applier(server, known=known).apply_groups([{"objects": [cm("a", x="1"), cm("a", x="1")]}])
    assert server.methods() == [("PATCH", "/api/v1/namespaces/team-a/configmaps/a"),
                                ("GET", "/api/v1/namespaces/team-a/configmaps/a"),
                                ("PATCH", "/api/v1/namespaces/team-a/configmaps/a")]
    assert [r["changed"] for r in results] == [False, False] and changed is False
    assert known  # the caller's table is not consumed


def test_a_state_before_of_another_version_namespace_or_name_is_not_taken():
    # Listed at the group's preferred version, or in another namespace: not the state before of this apply.
    live = stored(cm("a", x="1"))
    server = Server({("GET", "/api/v1/namespaces/team-a/configmaps/a"): (live,),
                     ("PATCH", "/api/v1/namespaces/team-a/configmaps/a"): (live,),
                     ("GET", "/api/v1/namespaces/b"): (stored(ns("b")),),
                     ("PATCH", "/api/v1/namespaces/b"): (stored(ns("b")),)})
    known = {("v2", "ConfigMap", "team-a", "a"): live, ("v1", "ConfigMap", "team-b", "a"): live,
             ("v1", "ConfigMap", "team-a", "b"): live,
             # A cluster-scoped kind is keyed without a namespace, whatever its definition says.
             ("v1", "Namespace", "", "b"): stored(ns("b"))}
    stray = dict(ns("b"), metadata={"name": "b", "namespace": "x"})
    applier(server, known=known).apply_groups([{"objects": [cm("a", x="1"), stray]}])
    assert server.methods() == [("GET", "/api/v1/namespaces/team-a/configmaps/a"),
                                ("PATCH", "/api/v1/namespaces/team-a/configmaps/a"),
                                ("PATCH", "/api/v1/namespaces/b")]


def test_a_state_before_read_already_decides_changed_and_the_diff():
    before, after = stored(cm("a", x="1"), rv="7"), stored(cm("a", x="2"), rv="8")
    server = Server({("PATCH", "/api/v1/namespaces/team-a/configmaps/a"): (after,)})
    known = {("v1", "ConfigMap", "team-a", "a"): before}
    changed, results = applier(server, diff=True, known=known).apply_groups([{"objects": [cm("a", x="2")]}])
    assert changed is True
    assert results[0]["diff"] == {"before": {"data": {"x": "1"}, "metadata": {"resourceVersion": "7"}},
                                  "after": {"data": {"x": "2"}, "metadata": {"resourceVersion": "8"}}}
    assert server.methods() == [("PATCH", "/api/v1/namespaces/team-a/configmaps/a")]


def test_a_create_is_changed_and_its_diff_has_no_before():
    created = stored(cm("a", x="1"))
    server = Server({("PATCH", "/api/v1/namespaces/team-a/configmaps/a"): (created,)})
    changed, results = applier(server, diff=True).apply_groups([{"objects": [cm("a", x="1")]}])
    assert changed is True
    assert results[0]["diff"] == {"before": {}, "after": created}
    assert server.methods()[0] == ("GET", "/api/v1/namespaces/team-a/configmaps/a")


def test_a_change_bumps_the_resource_version_and_the_diff_shows_only_what_differs():
    before, after = stored(cm("a", x="1"), rv="7"), stored(cm("a", x="2"), rv="8")
    server = Server({("GET", "/api/v1/namespaces/team-a/configmaps/a"): (before,),
                     ("PATCH", "/api/v1/namespaces/team-a/configmaps/a"): (after,)})
    changed, results = applier(server, diff=True).apply_groups([{"objects": [cm("a", x="2")]}])
    assert changed is True
    assert results[0]["diff"] == {"before": {"data": {"x": "1"}, "metadata": {"resourceVersion": "7"}},
                                  "after": {"data": {"x": "2"}, "metadata": {"resourceVersion": "8"}}}


def test_check_mode_patches_with_dry_run_and_compares_without_the_servers_bookkeeping():
    # Dry run: dryRun=All; the answer may carry a new resourceVersion, generation and managedFields time
    # without anything planned to change.
    before = stored(cm("a", x="1"), rv="7")
    same = stored(cm("a", x="1"), rv="9", generation=2)
    same["metadata"]["managedFields"][0]["time"] = "2026-05-05T00:00:00Z"
    server = Server({("GET", "/api/v1/namespaces/team-a/configmaps/a"): (before,),
                     ("PATCH", "/api/v1/namespaces/team-a/configmaps/a"): (same,)})
    changed, results = applier(server, dry_run=True, diff=True).apply_groups([{"objects": [cm("a", x="1")]}])
    assert changed is False and results[0]["diff"] == {}
    assert ("dryRun", "All") in server.calls[1][2]
    different = stored(cm("a", x="2"), rv="7")
    server = Server({("GET", "/api/v1/namespaces/team-a/configmaps/a"): (before,),
                     ("PATCH", "/api/v1/namespaces/team-a/configmaps/a"): (different,)})
    changed, results = applier(server, dry_run=True).apply_groups([{"objects": [cm("a", x="2")]}])
    assert changed is True
    assert [c[0] for c in server.calls] == ["GET", "PATCH"]


def secret(name, namespace="team-a", **data):
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}, "data": data}


def test_diff_mode_gives_one_block_per_changed_object_and_none_for_an_unchanged_one():
    """ansible-core's callbacks print a task's ``diff`` list, one unified diff per entry with before_header and
    after_header: the whole object before and after, without the server's bookkeeping."""
    table = TABLE + [{"group": "", "version": "v1", "kind": "Secret", "resource": "secrets", "namespaced": True,
                      "preferred": True}]
    kept, old, new = stored(cm("kept", x="1")), stored(cm("a", x="1"), rv="7"), stored(cm("a", x="2"), rv="8")
    created = stored(cm("b", y="1"))
    server = Server({("GET", "/api/v1/namespaces/team-a/configmaps/kept"): (kept,),
                     ("PATCH", "/api/v1/namespaces/team-a/configmaps/kept"): (kept,),
                     ("GET", "/api/v1/namespaces/team-a/configmaps/a"): (old,),
                     ("PATCH", "/api/v1/namespaces/team-a/configmaps/a"): (new,),
                     ("PATCH", "/api/v1/namespaces/team-a/configmaps/b"): (created,)})
    run = applier(server, table, diff=True)
    run.apply_groups([{"objects": [cm("kept", x="1"), cm("a", x="2"), cm("b", y="1")]}])
    assert run.diffs == [
        {"before": cm("a", x="1"), "after": cm("a", x="2"),
         "before_header": "ConfigMap team-a/a", "after_header": "ConfigMap team-a/a"},
        {"before": "", "after": cm("b", y="1"),
         "before_header": "ConfigMap team-a/b (absent)", "after_header": "ConfigMap team-a/b"}]
    # Outside diff mode, none; in check mode the after side is the dry run's.
    server.calls = []
    assert applier(server, table).diffs == []
    dry = applier(server, table, diff=True, dry_run=True)
    dry.apply_groups([{"objects": [cm("a", x="2")]}])
    assert [d["after_header"] for d in dry.diffs] == ["ConfigMap team-a/a (dry run)"]


def test_a_secrets_values_never_show_in_a_diff():
    """A Secret's data and stringData values, and the last-applied-configuration annotation that copies them, are
    hidden in both diffs; a key that changed shows as changed, one that came or went shows, no value does."""
    annotation = {"kubectl.kubernetes.io/last-applied-configuration": '{"data":{"token":"czNjcjN0"}}'}
    old = stored(secret("s", token="czNjcjN0", kept="a2VwdA==", gone="Z29uZQ=="), rv="7", annotations=annotation)
    new = stored(dict(secret("s", token="bjN3", kept="a2VwdA==", added="YWRkZWQ="), stringData={"plain": "p4ss"}),
                 rv="8", annotations={"kubectl.kubernetes.io/last-applied-configuration": '{"data":{"token":"bjN3"}}'})
    table = TABLE + [{"group": "", "version": "v1", "kind": "Secret", "resource": "secrets", "namespaced": True,
                      "preferred": True}]
    server = Server({("GET", "/api/v1/namespaces/team-a/secrets/s"): (old,),
                     ("PATCH", "/api/v1/namespaces/team-a/secrets/s"): (new,)})
    run = applier(server, table, diff=True)
    changed, results = run.apply_groups([{"objects": [secret("s", token="bjN3")]}])
    block = run.diffs[0]
    assert block["before"]["data"] == {"token": "<hidden>", "kept": "<hidden>", "gone": "<hidden>"}
    assert block["after"]["data"] == {"token": "<hidden, changed>", "kept": "<hidden>", "added": "<hidden, changed>"}
    assert block["after"]["stringData"] == {"plain": "<hidden, changed>"}
    assert block["before"]["metadata"]["annotations"] == {"kubectl.kubernetes.io/last-applied-configuration": "<hidden>"}
    assert block["after"]["metadata"]["annotations"] == {
        "kubectl.kubernetes.io/last-applied-configuration": "<hidden, changed>"}
    assert results[0]["diff"]["before"]["data"] == {"token": "<hidden>", "gone": "<hidden>"}
    assert results[0]["diff"]["after"]["data"] == {"token": "<hidden, changed>", "added": "<hidden, changed>"}
    shown = repr(run.diffs) + repr(results[0]["diff"])
    for value in ("czNjcjN0", "bjN3", "a2VwdA==", "Z29uZQ==", "YWRkZWQ=", "p4ss"):
        assert value not in shown
    # A new Secret: every value hidden, marked as new.
    created = stored(secret("t", token="czNjcjN0"))
    server = Server({("PATCH", "/api/v1/namespaces/team-a/secrets/t"): (created,)})
    run = applier(server, table, diff=True)
    run.apply_groups([{"objects": [secret("t", token="czNjcjN0")]}])
    assert run.diffs[0]["before"] == "" and run.diffs[0]["after"]["data"] == {"token": "<hidden, changed>"}
    # Another kind's data is shown as it is.
    assert ssa.masked(cm("a", token="x")) == cm("a", token="x")


def test_force_conflicts_sends_force_true():
    live = stored(ns("team-a"))
    server = Server({("GET", "/api/v1/namespaces/team-a"): (live,), ("PATCH", "/api/v1/namespaces/team-a"): (live,)})
    applier(server).apply_groups([{"objects": [ns("team-a")], "force_conflicts": True}])
    assert ("force", "true") in server.calls[1][2]


def test_a_conflict_fails_naming_the_object_fields_and_managers_and_what_to_do():
    # Server-Side Apply, conflicts: 409 with reason Conflict and a FieldManagerConflict cause per field.
    conflict = ssa.ApiError(409, {"kind": "Status", "reason": "Conflict", "code": 409,
                                  "message": 'Apply failed with 1 conflict: conflict with "kubectl-label": .data.x',
                                  "details": {"causes": [{"reason": "FieldManagerConflict", "field": ".data.x",
                                                          "message": 'conflict with "kubectl-label" using v1'}]}})
    ok = stored(ns("team-a"))
    server = Server({("PATCH", "/api/v1/namespaces/team-a"): (ok,),
                     ("PATCH", "/api/v1/namespaces/team-a/configmaps/a"): conflict})
    with pytest.raises(ssa.ApplyError) as err:
        applier(server).apply_groups([{"objects": [ns("team-a"), cm("a", x="2")]}])
    msg = err.value.msg
    assert "ConfigMap team-a/a" in msg and '"kubectl-label"' in msg and ".data.x" in msg
    assert "force" in msg and "gpuops-platform" in msg
    # What was applied before the failure is reported with it.
    assert [r["result"]["metadata"]["name"] for r in err.value.results] == ["team-a"]


def test_other_errors_name_the_object_and_the_servers_message():
    invalid = ssa.ApiError(422, {"kind": "Status", "reason": "Invalid", "code": 422,
                                 "message": 'ConfigMap "a" is invalid: data: bad key'})
    server = Server({("PATCH", "/api/v1/namespaces/team-a/configmaps/a"): invalid})
    with pytest.raises(ssa.ApplyError, match=r"ConfigMap team-a/a failed \(HTTP 422\): .*is invalid"):
        applier(server).apply_groups([{"objects": [cm("a")]}])
    forbidden = ssa.ApiError(403, {"message": "configmaps is forbidden"})
    server = Server({("GET", "/api/v1/namespaces/team-a/configmaps/a"): forbidden})
    with pytest.raises(ssa.ApplyError, match=r"Reading ConfigMap team-a/a failed \(HTTP 403\)"):
        applier(server).apply_groups([{"objects": [cm("a")]}])
    assert [c[0] for c in server.calls] == ["GET"]


def test_bad_definitions_fail_before_any_call():
    server = Server({})
    for bad, text in ((cm("a", namespace=None), "has no metadata.namespace"),
                      ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "x"}}, "no metadata.name"),
                      ({"kind": "ConfigMap"}, "needs apiVersion, kind")):
        with pytest.raises(ssa.ApplyError, match=text):
            applier(server).apply_groups([{"objects": [bad]}])
    assert server.calls == []


def test_a_kind_not_in_the_table_costs_one_discovery_get_per_group_version():
    # Discovery: GET /apis/GROUP/VERSION answers the APIResourceList; subresources are `resource/sub`.
    listing = {"kind": "APIResourceList", "groupVersion": "kueue.x-k8s.io/v1beta2", "resources": [
        {"name": "localqueues", "kind": "LocalQueue", "namespaced": True},
        {"name": "localqueues/status", "kind": "LocalQueue", "namespaced": True},
        {"name": "clusterqueues", "kind": "ClusterQueue", "namespaced": False}]}
    lq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "t"}}
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "c"}}
    server = Server({("GET", "/apis/kueue.x-k8s.io/v1beta2"): (listing,),
                     ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/namespaces/t/localqueues/q"): (stored(lq),),
                     ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/c"): (stored(cq),)})
    applier(server).apply_groups([{"objects": [lq, cq]}])
    assert server.methods().count(("GET", "/apis/kueue.x-k8s.io/v1beta2")) == 1
    assert ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/c") in server.methods()
    # Core kinds in the table need no discovery at all; without a table, /api/v1 once.
    server = Server({("GET", "/api/v1"): ({"resources": [{"name": "namespaces", "kind": "Namespace",
                                                          "namespaced": False}]},),
                     ("PATCH", "/api/v1/namespaces/a"): (stored(ns("a")),),
                     ("PATCH", "/api/v1/namespaces/b"): (stored(ns("b")),)})
    applier(server, table=[]).apply_groups([{"objects": [ns("a"), ns("b")]}])
    assert server.methods().count(("GET", "/api/v1")) == 1


def test_a_kind_the_server_does_not_serve_is_refused_with_what_to_do():
    server = Server({})
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    with pytest.raises(ssa.ApplyError, match="does not serve Widget at example.com/v1.*CustomResourceDefinition"):
        applier(server).apply_groups([{"objects": [obj]}])
    assert server.methods() == [("GET", "/apis/example.com/v1")]


def test_a_bad_table_entry_is_refused():
    with pytest.raises(ssa.ApplyError, match="lacks resource, namespaced"):
        ssa.Resources(Server({}), [{"group": "", "version": "v1", "kind": "Namespace"}])


def test_names_are_escaped_in_paths():
    entry = TABLE[1]
    assert ssa.object_path(entry, cm("a b/c", namespace="n")) == "/api/v1/namespaces/n/configmaps/a%20b%2Fc"
    assert ssa.object_path(TABLE[2], {"kind": "CustomResourceDefinition", "metadata": {"name": "x.y.z"}}) == \
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.y.z"


def crd(conditions=None, rv="5"):
    out = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com", "resourceVersion": rv}}
    if conditions is not None:
        out["status"] = {"conditions": conditions}
    return out


ESTABLISHED = [{"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": "True"}]
PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com"


def test_a_crd_is_waited_for_until_established_and_an_established_one_costs_no_read():
    # CustomResourceDefinition status: the Established condition (kubernetes.core's wait_condition for it).
    server = Server({("PATCH", PATH): (crd([], rv="5"),), ("GET", PATH): [None, (crd([]),), (crd(ESTABLISHED),)]})
    changed, results = applier(server, wait_sleep=1).apply_groups([{"objects": [crd()], "wait": True}])
    assert changed is True
    assert server.methods() == [("GET", PATH), ("PATCH", PATH), ("GET", PATH), ("GET", PATH)]
    assert results[0]["result"]["status"]["conditions"] == ESTABLISHED
    server = Server({("PATCH", PATH): (crd(ESTABLISHED),), ("GET", PATH): (crd(ESTABLISHED),)})
    applier(server).apply_groups([{"objects": [crd()], "wait": True}])
    assert server.methods() == [("GET", PATH), ("PATCH", PATH)]


def test_waiting_ends_with_a_clear_failure_and_never_in_check_mode():
    ticks = iter(range(0, 1000, 10))
    server = Server({("PATCH", PATH): (crd([]),), ("GET", PATH): [None, (crd([]),)]})
    slow = ssa.Applier(server, ssa.Resources(server, TABLE), "gpuops-platform", wait_timeout=30, sleep=lambda s: None,
                       clock=lambda: next(ticks))
    with pytest.raises(ssa.ApplyError, match="CustomResourceDefinition widgets.example.com was applied but is not "
                                             "ready after 30 seconds"):
        slow.apply_groups([{"objects": [crd()], "wait": True}])
    server = Server({("PATCH", PATH): (crd([]),)})
    applier(server, dry_run=True).apply_groups([{"objects": [crd()], "wait": True}])
    assert server.methods() == [("GET", PATH), ("PATCH", PATH)]


def test_crds_a_chart_made_are_waited_for_until_they_exist_and_are_established():
    # A Helm chart's crds/ CRD: missing, then not Established yet, then Established; one GET when it is already.
    other = PATH.replace("widgets", "gadgets")
    server = Server({("GET", PATH): [None, (crd([]),), (crd(ESTABLISHED),)], ("GET", other): (crd(ESTABLISHED),)})
    slept = []
    waiter = ssa.Applier(server, ssa.Resources(server, TABLE), "gpuops-platform", wait_sleep=3, sleep=slept.append)
    waiter.wait_established(["widgets.example.com", "gadgets.example.com"])
    assert server.methods() == [("GET", PATH)] * 3 + [("GET", other)]
    # A short pause first, doubled for the next one: no fixed wait before a CRD that is Established at once.
    assert slept == [0.05, 0.1]


def test_the_pauses_between_reads_start_short_and_double_up_to_wait_sleep():
    # A CRD applied and waited for: the PATCH's answer is not Established yet, the reads after it are spaced by
    # doubling pauses from 0.05 s, never longer than wait_sleep; each wait starts short again.
    answers = [(crd([]),)] * 9 + [(crd(ESTABLISHED),)]
    server = Server({("PATCH", PATH): [(crd([], rv="5"),), (crd([], rv="6"),)], ("GET", PATH): [None] + answers + answers})
    slept = []
    waiter = ssa.Applier(server, ssa.Resources(server, TABLE), "gpuops-platform", wait_sleep=2, sleep=slept.append)
    waiter.apply_groups([{"objects": [crd()], "wait": True}])
    assert slept == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2, 2, 2, 2]
    slept[:] = []
    waiter.wait_established(["widgets.example.com"])
    assert slept == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2, 2, 2]


def test_waiting_for_a_charts_crd_fails_naming_it_and_never_reads_in_check_mode():
    for answers, state in (([None], "still missing"), ([(crd([]),)], "not Established")):
        ticks = iter(range(0, 1000, 10))
        server = Server({("GET", PATH): answers})
        slow = ssa.Applier(server, ssa.Resources(server, TABLE), "gpuops-platform", wait_timeout=30,
                           sleep=lambda s: None, clock=lambda: next(ticks))
        with pytest.raises(ssa.ApplyError, match="CustomResourceDefinition widgets.example.com is %s after 30 "
                                                 "seconds \\(wait_timeout\\)" % state):
            slow.wait_established(["widgets.example.com"])
        # The clock ticks 10 s per look: reads at 10 and 20 s, and one more before it gives up at 30 s.
        assert len(server.calls) == 3
    server = Server({})
    applier(server, dry_run=True).wait_established(["widgets.example.com"])
    assert server.calls == []


def test_ready_follows_kubernetes_cores_waiter():
    deployment = {"kind": "Deployment", "metadata": {"generation": 2}, "spec": {"replicas": 2},
                  "status": {"replicas": 2, "availableReplicas": 1, "observedGeneration": 2}}
    assert not ssa.ready(deployment)
    deployment["status"]["availableReplicas"] = 2
    assert ssa.ready(deployment)
    assert ssa.ready({"kind": "ConfigMap", "metadata": {"name": "x"}})
    assert not ssa.ready(crd([{"type": "Established", "status": "False"}]))


def test_server_warnings_are_collected_once_each():
    # Warning headers: `299 - "text"`, several in one header value comma-joined, quotes escaped.
    text = 'kueue.x-k8s.io/v1beta1 LocalQueue is deprecated; use kueue.x-k8s.io/v1beta2 LocalQueue'
    assert ssa.parse_warnings(['299 - "%s", 299 - "say \\"hi\\", twice"' % text, '299 - "%s"' % text]) == \
        [text, 'say "hi", twice']
    live = stored(cm("a"))
    server = Server({("GET", "/api/v1/namespaces/team-a/configmaps/a"): (live, [text]),
                     ("PATCH", "/api/v1/namespaces/team-a/configmaps/a"): (live, [text])})
    ap = applier(server)
    ap.apply_groups([{"objects": [cm("a")]}])
    assert ap.warnings == [text]


# --- reads after the applies (read) --------------------------------------------------------------------

POLICY = {"group": "nvidia.com", "version": "v1", "kind": "ClusterPolicy", "resource": "clusterpolicies",
          "namespaced": False, "preferred": True}


def test_a_read_is_one_list_per_kind_and_gives_each_item_its_api_version_and_kind():
    # API concepts, collections: a LIST answers {"kind": "ClusterPolicyList", "items": [...]}, items without kind.
    server = Server({("GET", "/apis/nvidia.com/v1/clusterpolicies"): (
        {"kind": "ClusterPolicyList", "apiVersion": "nvidia.com/v1",
         "items": [{"metadata": {"name": "cluster-policy"}, "status": {"state": "ready"}}]},)})
    read = applier(server, TABLE + [POLICY]).read([{"api_version": "nvidia.com/v1", "kind": "ClusterPolicy"}])
    assert server.methods() == [("GET", "/apis/nvidia.com/v1/clusterpolicies")]
    assert read == [{"api_version": "nvidia.com/v1", "kind": "ClusterPolicy", "served": True, "resources": [
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
         "status": {"state": "ready"}}]}]


def test_a_kind_not_served_is_read_as_not_served_and_an_empty_read_costs_nothing():
    # Discovery: a group-version the server does not serve answers 404 (its CRD is not installed yet).
    server = Server({})
    read = applier(server).read([{"api_version": "nvidia.com/v1", "kind": "ClusterPolicy"}])
    assert read == [{"api_version": "nvidia.com/v1", "kind": "ClusterPolicy", "served": False, "resources": []}]
    assert server.methods() == [("GET", "/apis/nvidia.com/v1")]
    server = Server({})
    assert applier(server).read([]) == [] and server.calls == []


def test_a_list_the_server_refuses_fails_naming_the_kind():
    forbidden = ssa.ApiError(403, {"kind": "Status", "reason": "Forbidden", "code": 403,
                                   "message": "clusterpolicies.nvidia.com is forbidden"})
    server = Server({("GET", "/apis/nvidia.com/v1/clusterpolicies"): forbidden})
    with pytest.raises(ssa.ApplyError, match=r"^Listing ClusterPolicy \(nvidia.com/v1\) failed \(HTTP 403\): "
                                             r"clusterpolicies.nvidia.com is forbidden"):
        applier(server, TABLE + [POLICY]).read([{"api_version": "nvidia.com/v1", "kind": "ClusterPolicy"}])
