"""k8s_server_side_apply's main() against the in-memory API server, without a play: the calls it makes per object.

Each test names the part of the Kubernetes API reference it follows; the fake
API server models it (see fake_apiserver's docstring and test_fake_apiserver.py):
- Server-Side Apply (https://kubernetes.io/docs/reference/using-api/server-side-apply/): the apply PATCH
  answers with the object as stored; an apply of what is already there changes nothing (resourceVersion
  kept); a field another manager owns is a 409 Conflict unless force;
- dry run (https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run): dryRun=All stores nothing;
- warnings (https://kubernetes.io/blog/2020/09/03/warnings/): a deprecated version draws a `Warning` header;
- CustomResourceDefinition: its kind is served once the CRD is Established.
"""
import time
from unittest import mock

import pytest
from ansible.module_utils import basic

from fake_apiserver import FakeAPIServer
from support.module_args import ExitJson, FailJson, module_exits, patch_module_args

from test_core_apply import helm_storage

from ansible_collections.gpuops.platform.plugins.filter.k8s_helm import k8s_helm_wanted
from ansible_collections.gpuops.platform.plugins.module_utils._k8s import applyset as aset
from ansible_collections.gpuops.platform.plugins.modules import k8s_server_side_apply

pytestmark = pytest.mark.slow

MANAGER = "gpuops-platform"
TABLE = [
    {"group": "", "version": "v1", "kind": "Namespace", "resource": "namespaces", "namespaced": False, "preferred": True},
    {"group": "", "version": "v1", "kind": "ConfigMap", "resource": "configmaps", "namespaced": True, "preferred": True},
    {"group": "", "version": "v1", "kind": "ResourceQuota", "resource": "resourcequotas", "namespaced": True,
     "preferred": True},
    {"group": "apiextensions.k8s.io", "version": "v1", "kind": "CustomResourceDefinition",
     "resource": "customresourcedefinitions", "namespaced": False, "preferred": True},
    {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "LocalQueue", "resource": "localqueues",
     "namespaced": True, "preferred": True},
]
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "widgets.example.com"},
       "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": {"type": "object"}}}]}}


def objects():
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plan", "namespace": "team-a"}, "data": {"a": "1"}},
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpuops-tenant", "namespace": "team-a"},
         "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "default", "namespace": "team-a"},
         "spec": {"clusterQueue": "gpus"}},
        # The CRD applied in the first group of the same run: its kind is not in the table.
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "team-a"}, "spec": {}},
    ]


def groups():
    return [{"objects": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}]},
            {"objects": [CRD], "wait": True},
            {"objects": objects()}]


def run_module(module, api, check_mode=False, diff=False, **args):
    """One run of ``module``'s main() against ``api`` with the test's token: its result, ``failed`` set on a failure."""
    params = dict({"host": api.url, "api_key": "t0ken-ssa", "validate_certs": False,
                   "_ansible_check_mode": check_mode, "_ansible_diff": diff}, **args)
    with module_exits(), patch_module_args(params):
        try:
            module.main()
        except ExitJson as done:
            return done.args[0]
        except FailJson as failed:
            return dict(failed.args[0], failed=True)
    raise AssertionError("the module neither exited nor failed")


def run(api, check_mode=False, diff=False, **args):
    return run_module(k8s_server_side_apply, api, check_mode, diff,
                      **dict({"field_manager": MANAGER, "api_table": TABLE, "wait_sleep": 1}, **args))


def object_calls(api, start):
    """The requests since ``start`` that are not discovery."""
    return [(m, p, q) for m, p, q, c in api.requests[start:]
            if not (p in ("/version", "/api", "/apis", "/api/v1") or p.count("/") == 3 and p.startswith("/apis/"))]


def test_a_no_op_reads_each_object_once_and_writes_none_that_it_owns_as_applied():
    with FakeAPIServer() as api:
        api.crd_delay = 1.0  # Established a second after it is created: the first run waits for it
        first = run(api, groups=groups())
        assert first.get("failed") is None, first
        assert first["changed"] is True
        assert all(r["changed"] for r in first["result"]["results"])
        crd = [r["result"] for r in first["result"]["results"] if r["result"]["kind"] == "CustomResourceDefinition"][0]
        assert {"type": "Established", "status": "True"} in [
            dict(type=c["type"], status=c["status"]) for c in crd["status"]["conditions"]]
        assert api.get("Widget", "w", "team-a") is not None
        versions = dict((k, o["metadata"]["resourceVersion"]) for k, o in api.objects.items())
        start = len(api.requests)

        again = run(api, groups=groups())
        assert again["changed"] is False, again
        assert [r["changed"] for r in again["result"]["results"]] == [False] * 6
        # Nothing written: every object kept its resourceVersion (ObjectMeta: it changes on every write).
        assert dict((k, o["metadata"]["resourceVersion"]) for k, o in api.objects.items()) == versions
        calls = object_calls(api, start)
        per_object = {}
        for method, path, query in calls:
            per_object.setdefault(path, []).append(method)
        # One GET for each of the 6 objects, nothing else but discovery of the one group-version the table lacks
        # (example.com/v1, the CRD's). Each object whose fields this field manager owns, at the values it applies,
        # is not written (ssa.unchanged_by_apply). The Namespace sets no field of its own, and the Widget only an
        # empty spec, which this server stores no record of: nothing shows that an apply would leave them as they
        # are, so each gets its apply PATCH.
        written = ["/api/v1/namespaces/team-a", "/apis/example.com/v1/namespaces/team-a/widgets/w"]
        assert per_object == dict([(path, ["GET", "PATCH"]) for path in written] + [
            (path, ["GET"]) for path in per_object if path not in written]), per_object
        assert len(per_object) == 6
        discovery = [p for m, p, q, c in api.requests[start:] if (m, p, q) not in calls]
        assert discovery == ["/apis/example.com/v1"], discovery
        assert api.warnings == []


def test_a_new_crd_is_read_again_at_once_not_after_a_fixed_wait():
    """A CRD is Established a moment after it is created (CustomResourceDefinition status, conditions): with the
    default wait_sleep of 5 s, a CRD Established 0.3 s after its apply is waited for well under a second, not 5 s."""
    with FakeAPIServer() as api:
        api.crd_delay = 0.3
        started = time.monotonic()
        done = run(api, groups=[{"objects": [CRD], "wait": True}], wait_sleep=5)
        took = time.monotonic() - started
        assert done.get("failed") is None, done
        assert {"type": "Established", "status": "True"} in [
            dict(type=c["type"], status=c["status"]) for c in done["result"]["results"][0]["result"]["status"]["conditions"]]
        assert took < 2.5, took
        reads = [r for r in api.requests if r[0] == "GET" and r[1].endswith("/widgets.example.com")]
        # The state before, then a few reads while it settles.
        assert 2 <= len(reads) <= 8, reads


def test_check_mode_dry_runs_every_patch_and_writes_nothing():
    with FakeAPIServer() as api:
        run(api, groups=groups()[:2])
        api.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plan", "namespace": "team-a"},
                 "data": {"a": "0"}}, manager=MANAGER)
        before = dict((k, dict(o)) for k, o in api.objects.items())
        start = len(api.requests)
        checked = run(api, check_mode=True, diff=True, groups=[{"objects": objects()[:2]}])
        assert checked["changed"] is True
        patches = [q for m, p, q, c in api.requests[start:] if m == "PATCH"]
        assert len(patches) == 2 and all(q.get("dryRun") == ["All"] for q in patches)
        assert api.objects == before
        change, create = checked["result"]["results"]
        # kubernetes.core.k8s's diff shape: what differs; nothing before a create.
        assert change["diff"]["before"]["data"] == {"a": "0"} and change["diff"]["after"]["data"] == {"a": "1"}
        assert create["diff"]["before"] == {} and create["diff"]["after"]["kind"] == "ResourceQuota"


def test_a_conflict_fails_naming_the_object_and_the_managers_and_changes_nothing():
    with FakeAPIServer() as api:
        run(api, groups=groups()[:1])
        api.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plan", "namespace": "team-a"},
                 "data": {"a": "by-hand"}}, manager="kubectl-edit")
        before = dict(api.get("ConfigMap", "plan", "team-a"))
        failed = run(api, groups=[{"objects": objects()[:1]}])
        assert failed["failed"] is True
        msg = failed["msg"]
        assert "ConfigMap team-a/plan" in msg and '"kubectl-edit"' in msg and ".data.a" in msg
        assert "force" in msg
        assert api.get("ConfigMap", "plan", "team-a") == before
        # Forcing takes the field over (the Server-Side Apply reference: ownership moves to the applier).
        forced = run(api, groups=[{"objects": objects()[:1], "force_conflicts": True}])
        assert forced["changed"] is True
        assert api.get("ConfigMap", "plan", "team-a")["data"] == {"a": "1"}
        assert "data.a" in api.owners("ConfigMap", "plan", "team-a")[MANAGER]


def test_a_deprecated_version_is_a_task_warning():
    with FakeAPIServer() as api:
        run(api, groups=groups()[:1])
        old = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
               "metadata": {"name": "default", "namespace": "team-a"}, "spec": {"clusterQueue": "gpus"}}
        with mock.patch.object(basic.AnsibleModule, "warn") as warn:
            run(api, groups=[{"objects": [old]}])
        assert [c.args[0] for c in warn.call_args_list] == ["kueue.x-k8s.io/v1beta1 LocalQueue is deprecated; use kueue.x-k8s.io/v1beta2 LocalQueue"]


def test_a_hidden_group_is_refused_outside_a_no_log_task_before_any_call():
    with FakeAPIServer() as api:
        failed = run(api, groups=[{"objects": objects()[:1], "no_log": True}])
        assert failed["failed"] is True and "no_log: true" in failed["msg"]
        assert [p for m, p, q, c in api.requests if "configmaps" in p] == []
        hidden = run(api, _ansible_no_log=True, groups=groups()[:1] + [{"objects": objects()[:1], "no_log": True}])
        assert hidden["changed"] is True


SET_NAMESPACE, SET_NAME = "gpuops-system", "gpuops-team-a"


def labelled(obj):
    set_id = aset.applyset_id(SET_NAME, SET_NAMESPACE)
    meta = dict(obj["metadata"], labels=dict(obj["metadata"].get("labels") or {}, **{aset.PART_OF_LABEL: set_id}))
    return dict(obj, metadata=meta)


def applied_with_prune(api, dropped=(), **kw):
    """groups() with every object a member of one ApplySet, less the ``dropped`` names, pruned in the same call."""
    planned = [[labelled(o) for o in g["objects"] if o["metadata"]["name"] not in dropped] for g in groups()]
    applysets = {"namespace": SET_NAMESPACE, "sets": [{"name": SET_NAME, "objects": [o for g in planned for o in g]}]}
    return run(api, groups=[dict(g, objects=o) for g, o in zip(groups(), planned)], applysets=applysets, **kw)


def test_with_applysets_a_no_op_reads_no_object_and_what_the_plan_drops_is_pruned_after_every_apply():
    # kubectl apply --server-side --applyset --prune (KEP-3659): the members are listed once, by the part-of
    # label; here that list is also each object's state before, so a no-op writes only the objects that list
    # cannot show unchanged (ssa.unchanged_by_apply).
    with FakeAPIServer() as api:
        api.crd_delay = 1.0
        first = applied_with_prune(api)
        assert first.get("failed") is None and first["changed"] is True, first
        pruning = first["applysets"]["sets"][0]
        # The CRD's kind was not served when the members were listed: it is listed after the apply.
        assert "Widget.example.com" in pruning["group_kinds"] and pruning["unlisted_group_kinds"] == []
        assert api.get("Secret", SET_NAME, SET_NAMESPACE) is not None
        versions = dict((k, o["metadata"]["resourceVersion"]) for k, o in api.objects.items())
        start = len(api.requests)

        again = applied_with_prune(api)
        assert again["changed"] is False and again["applysets"]["changed"] is False, again
        assert dict((k, o["metadata"]["resourceVersion"]) for k, o in api.objects.items()) == versions
        calls = object_calls(api, start)
        objects_read = [p for m, p, q in calls if m == "GET" and not q.get("labelSelector")
                        and p.rsplit("/", 1)[-1] in ("team-a", "plan", "gpuops-tenant", "default", "w", CRD["metadata"]["name"])]
        assert objects_read == [], calls
        assert sorted(p for m, p, q in calls if m == "PATCH") == sorted(set(p for m, p, q in calls if m == "PATCH"))
        # Only the Widget, whose one field is an empty spec that this server keeps no record of: every other member
        # shows this field manager's ownership of exactly what it applies, at those values (the Namespace too, with
        # its part-of label).
        assert [p for m, p, q in calls if m == "PATCH"] == ["/apis/example.com/v1/namespaces/team-a/widgets/w"], calls
        # One list of the parents, one per group-kind of the set (Namespace, CRD, ConfigMap, ResourceQuota,
        # LocalQueue, Widget).
        assert len([m for m, p, q in calls if m == "GET" and q.get("labelSelector")]) == 1 + 6, calls

        start = len(api.requests)
        dropped = applied_with_prune(api, dropped=("plan",))
        assert dropped["changed"] is True and dropped["applysets"]["pruned"] == ["ConfigMap team-a/plan"], dropped
        assert api.get("ConfigMap", "plan", "team-a") is None
        methods = [m for m, p, q in object_calls(api, start) if m in ("PATCH", "DELETE")]
        # The Widget (as above), then the prune, then the parent, which no longer records ConfigMap.
        assert methods == ["PATCH", "DELETE", "PATCH"], methods
        assert "ConfigMap" not in api.get("Secret", SET_NAME, SET_NAMESPACE)["metadata"]["annotations"][
            aset.GROUP_KINDS_ANNOTATION].split(",")


def test_with_applysets_check_mode_lists_what_it_would_prune_and_writes_nothing():
    with FakeAPIServer() as api:
        applied_with_prune(api)
        before = dict((k, dict(o)) for k, o in api.objects.items())
        checked = applied_with_prune(api, dropped=("plan",), check_mode=True)
        assert checked["applysets"]["pruned"] == ["ConfigMap team-a/plan"], checked
        assert api.objects == before
        assert not [r for r in api.requests if r[0] == "DELETE"]


def test_with_applysets_a_parent_of_another_tool_is_refused_before_any_apply():
    with FakeAPIServer() as api:
        api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SET_NAMESPACE}})
        api.add({"apiVersion": "v1", "kind": "Secret", "metadata": {
            "name": SET_NAME, "namespace": SET_NAMESPACE,
            "labels": {aset.ID_LABEL: aset.applyset_id(SET_NAME, SET_NAMESPACE)},
            "annotations": {aset.TOOLING_ANNOTATION: "kubectl/v1.36"}}})
        start = len(api.requests)
        failed = applied_with_prune(api)
        assert failed["failed"] is True and "kubectl/v1.36" in failed["msg"] and "gpuops_k8s_applyset_namespace" in failed["msg"]
        assert [r for r in api.requests[start:] if r[0] in ("PATCH", "DELETE", "POST")] == []


def test_with_applysets_an_object_that_moves_to_another_set_is_no_member_of_the_one_it_left():
    # Listed before the apply, the namespace still carries the first set's part-of label; the apply hands it to
    # the second. The first set must neither prune nor keep it, and the next run must change nothing.
    first_id, second_id = (aset.applyset_id(n, SET_NAMESPACE) for n in ("gpuops-a", "gpuops-b"))

    def namespace(set_id):
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shared", "labels": {aset.PART_OF_LABEL: set_id}}}

    def call(owner, **kw):
        sets = [{"name": "gpuops-a", "objects": [namespace(first_id)] if owner == "a" else []},
                {"name": "gpuops-b", "objects": [namespace(second_id)] if owner == "b" else []}]
        return run(api, groups=[{"objects": [namespace(first_id if owner == "a" else second_id)]}],
                   applysets={"namespace": SET_NAMESPACE, "sets": sets}, **kw)

    with FakeAPIServer() as api:
        assert call("a")["changed"] is True
        checked = call("b", check_mode=True)
        assert checked["applysets"]["pruned"] == [] and checked["applysets"]["kept"] == [], checked["applysets"]
        handed = call("b")
        assert handed["applysets"]["pruned"] == [] and handed["applysets"]["kept"] == [], handed["applysets"]
        assert api.get("Namespace", "shared")["metadata"]["labels"][aset.PART_OF_LABEL] == second_id
        parents = dict((s["name"], s["group_kinds"]) for s in handed["applysets"]["sets"])
        assert parents == {"gpuops-a": [], "gpuops-b": ["Namespace"]}, parents
        again = call("b")
        assert again["changed"] is False, again


RELEASE = {"name": "demo", "namespace": "team-a", "chart": "demo", "version": "1.2.0",
           "repo_url": "https://charts.example/demo", "values": {"replicas": 2}}


def test_with_releases_one_that_moves_stops_the_applies_and_none_moving_lets_them_through_in_the_same_run(helm_dir):
    """The helm decision first (one helm list, then the values of a release deployed at the wanted chart); the
    objects only when every release stays as it is, so that a no-op is one module run."""
    helm = {"releases": k8s_helm_wanted([RELEASE]), "binary_path": str(helm_dir / "helm")}
    with FakeAPIServer() as api:
        api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
        # Not installed yet: it goes first; nothing is applied.
        first = run(api, groups=groups(), **helm)
        assert first["applied"] is False and not first["changed"] and first["result"] == {"results": []}
        assert [(p["name"], p["action"]) for p in first["helm"]["plans"]] == [("demo", "install")]
        assert [c[0] for c in first["helm"]["commands"]] == ["list"] and not api.writes()
        # Deployed at the wanted chart and values: the same run reads its values, then applies every group.
        helm_storage(api, RELEASE, RELEASE["values"], 1, "deployed", RELEASE["version"])
        done = run(api, groups=groups(), **helm)
        assert done["applied"] is True and done["changed"]
        assert [(p["name"], p["action"]) for p in done["helm"]["plans"]] == [("demo", "unchanged")]
        assert [c[:2] for c in done["helm"]["commands"]] == [["list", "--all"], ["get", "values"]]
        assert [r["result"]["metadata"]["name"] for r in done["result"]["results"]][-1] == "w"
        # The values never come back, not even as their digest.
        assert "replicas" not in repr(done) and helm["releases"][0]["values_digest"] not in repr(done)
        # Other values deployed: an upgrade goes first, nothing is applied.
        helm_storage(api, RELEASE, {"replicas": 3}, 2, "deployed", RELEASE["version"])
        writes = len(api.writes())
        moved = run(api, groups=groups(), **helm)
        assert moved["applied"] is False and moved["helm"]["plans"][0]["action"] == "upgrade"
        assert len(api.writes()) == writes


def test_with_releases_a_pending_one_without_recovery_fails_before_any_apply(helm_dir):
    with FakeAPIServer() as api:
        api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
        helm_storage(api, RELEASE, RELEASE["values"], 1, "pending-install", RELEASE["version"])
        failed = run(api, groups=groups(), releases=k8s_helm_wanted([RELEASE]), recover=False,
                     binary_path=str(helm_dir / "helm"))
        assert failed["failed"] and "Helm release demo in namespace team-a is pending-install" in failed["msg"]
        assert "`helm uninstall demo --namespace team-a`" in failed["msg"] and not api.writes()
