"""The apply path of cluster.yml against an in-memory API server (fake_apiserver).

What the render tests cannot see: the same objects really go out by
server-side apply with our field manager, one task per phase, the taints are
merged, the allocatable check reads the nodes, a second run changes nothing,
and check mode writes nothing. The GPU Operator release needs a chart, so it is
left out here, except where it is seeded as deployed in Helm's storage and the
real helm (tests/conftest.py, helm_dir) reads it.
"""
import collections
import json
import re
import urllib.error
import urllib.request

import pytest

import fake_apiserver
from fake_apiserver import FakeAPIServer
from k8s_support import load_facts, render_cluster, short_tmpdir

pytestmark = pytest.mark.slow

TOKEN = "sekret-token-8c1f"
SHARING = [{"name": "default", "mode": "none"}, {"name": "ts4", "mode": "time-slicing", "replicas": 4}]
TENANTS = [{"name": "team-a", "gpu_share": 0.5, "members": [{"kind": "Group", "name": "team-a"}]}]
NODES = {"gpu-a": {"facts": "hgx-h100", "vars": {"gpu_nodes_device_plugin_config": "ts4"}},
         "gpu-b": {"facts": "l40s"}}


def seed(api, allocatable_a):
    for name, alloc in (("gpu-a", allocatable_a), ("gpu-b", str(len(load_facts("l40s")["gpus"])))):
        api.add({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                 "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
                 "status": {"allocatable": {"cpu": "96", "nvidia.com/gpu": alloc}}})
    # Someone labelled gpu-a by hand first: that manager owns the label.
    api.add(dict(api.get("Node", "gpu-a"), metadata={"name": "gpu-a", "labels": {
        "kubernetes.io/hostname": "gpu-a", "nvidia.com/device-plugin.config": "default"}}), manager="kubectl-label")


def run(tmp_path, api, name, args=(), expect_failure=False, collections=None, extra=None, playbook="playbooks/cluster.yml",
        env=None):
    return render_cluster(tmp_path / name, extra_vars=dict({
        "gpuops_k8s_render_dir": "",
        "gpuops_k8s_host": api.url,
        "gpuops_k8s_api_key": TOKEN,
        "gpu_operator_enabled": False,
        # Their Helm releases need the helm binary too (test_sched_apply.py
        # covers these layers' objects without them).
        "volcano_enabled": False,
        "kueue_enabled": False,
        "kuberay_enabled": False,
        "gpu_sharing_configs": SHARING,
        "gpu_tenants_list": TENANTS,
        "gpu_nodes_validate_retries": 1,
        "gpu_nodes_validate_delay": 0,
    }, **(extra or {})), nodes=NODES, env=dict({"K8S_AUTH_HOST": None, "K8S_AUTH_KUBECONFIG": None}, **(env or {})), args=args,
        expect_failure=expect_failure, collections_path=collections, playbook=playbook)


def discovery_calls(requests):
    """The discovery GETs among ``requests``: /version, /api, /apis and each group-version's."""
    return [r[1] for r in requests
            if r[0] == "GET" and re.match(r"^/(version|api|apis)$|^/api/v1/?$|^/apis/[^/]+/[^/]+/?$", r[1])]


def recap(result):
    return [line for line in result.output.splitlines() if line.startswith("localhost ")][-1]


def test_apply_then_no_change_then_check_mode(tmp_path, installed_collection):
    gpus = len(load_facts("hgx-h100")["gpus"])
    with FakeAPIServer() as api:
        seed(api, str(gpus * 4))
        first = run(tmp_path, api, "first", args=["-v"], collections=installed_collection)
        assert "changed=0" not in recap(first)
        # The credential reached the server through module_defaults and never the log.
        assert TOKEN not in first.output
        assert api.field_managers == {"gpuops-platform"}
        # The objects went out by server-side apply and landed as defined.
        cm = api.get("ConfigMap", "nvidia-device-plugin-config", "gpu-operator")
        assert "ts4" in cm["data"] and "replicas: 4" in cm["data"]["ts4"]
        assert api.get("Namespace", "gpu-operator") is not None
        quota = api.get("ResourceQuota", "gpuops-tenant", "team-a")
        # Half the fleet: the H100s time-sliced four ways plus the L40S's whole GPU(s).
        assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == str((gpus * 4 + len(load_facts("l40s")["gpus"])) // 2)
        node = api.get("Node", "gpu-a")
        assert node["metadata"]["labels"]["nvidia.com/device-plugin.config"] == "ts4"
        # force_conflicts took the label over from the manager that set it first ...
        owners = api.owners("Node", "gpu-a")
        assert "metadata.labels.nvidia.com/device-plugin.config" in owners["gpuops-platform"]
        assert "metadata.labels.nvidia.com/device-plugin.config" not in owners.get("kubectl-label", set())
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "gpu-a"
        # The GitOps tools' annotations belong to render mode: none reaches a live Node
        # (ObjectMeta.annotations, API reference: the applied configuration is what the manager owns).
        assert not [k for k in node["metadata"].get("annotations") or {} if "argoproj.io" in k or "fluxcd.io" in k]
        # Taints merged, not replaced.
        assert {"key": "gpu", "value": "true", "effect": "NoSchedule"} in node["spec"]["taints"]
        assert {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"} in node["spec"]["taints"]
        # One run for both nodes: each read, then one merge patch each (guarded by the version read).
        # The Nodes: one LIST (discovery's), no GET (the label apply takes its states before from that LIST, the
        # taints theirs from its answers), one apply PATCH and one taint merge patch each.
        node_calls = collections.Counter((r[0], r[1]) for r in api.requests if r[1].startswith("/api/v1/nodes"))
        assert node_calls == {("GET", "/api/v1/nodes"): 1, ("PATCH", "/api/v1/nodes/gpu-a"): 2,
                              ("PATCH", "/api/v1/nodes/gpu-b"): 2}, node_calls
        taint_task = first.output.split("Taint the GPU nodes]", 1)[1].split("TASK [", 1)[0]
        assert taint_task.count("changed: [") == 1, taint_task
        assert sorted(r[1] for r in api.writes() if r[3] == "application/merge-patch+json") == [
            "/api/v1/nodes/gpu-a", "/api/v1/nodes/gpu-b"]
        applies = [r for r in api.writes() if "apply-patch" in r[3]]
        assert len(applies) == len([o for o in api.objects.values() if o["kind"] != "Node"]) + 2
        said = " ".join(first.output.split())
        assert "Kubernetes GPU stack applied" in said
        # Without --diff too, what the apply created is told from what it changed (the seeded nodes).
        assert "80 gpu_tenants: 8 objects, changed (objects: 8 created)" in said
        assert "30 gpu_nodes: 2 objects, changed (objects: 2 changed)" in said
        # Clean against the pinned kubernetes.core: nothing deprecated is used, and a run with nothing wrong
        # prints no warning; the API server sent no deprecation Warning header (299, see fake_apiserver).
        assert "DEPRECATION" not in first.output
        assert "[WARNING]" not in first.output, [ln for ln in first.output.splitlines() if "WARNING" in ln]
        assert api.warnings == []

        rv = {k: o["metadata"]["resourceVersion"] for k, o in api.objects.items()}
        start = len(api.requests)
        # As in a fresh execution environment: no kubernetes.core discovery cache file (it lives in the temp dir).
        with short_tmpdir("gpuops-fresh-") as fresh_tmp:
            second = run(tmp_path, api, "second", collections=installed_collection, env={"TMPDIR": str(fresh_tmp)})
            cache_files = [p.name for p in fresh_tmp.glob("k8srcp-*.json")]
        assert "changed=0" in recap(second), recap(second)
        # One plan loop and one pass over every layer: at most 60 tasks (165 before).
        assert second.tasks <= 60, second.tasks
        # Discovery: the first kubernetes.core client asks /version and /apis for its cache file, k8s_discovery
        # the aggregated /api and /apis and fills that file; no later client asks again (no group-version GET).
        assert discovery_calls(api.requests[start:]) == ["/version", "/apis", "/api", "/apis"]
        assert cache_files != []
        # A no-op reads no member of a layer on its own: the objects' call lists each layer's members first (the
        # LISTs its prune needs anyway) and takes each one's state before from there. A Node is no member (the
        # run labels it, it does not own it): its state before is discovery's LIST, and a Node whose labels this
        # field manager owns at the planned values already is not written at all. Nor is any other object whose
        # listed state shows that ownership (Server-Side Apply: an apply of what the manager owns, at the values it
        # holds, stores the object as it is; ssa.unchanged_by_apply), which is every object here.
        patched = [r[1] for r in api.requests[start:] if r[0] == "PATCH"]
        reads = collections.Counter(r[1] for r in api.requests[start:] if r[0] == "GET")
        assert patched == [], patched
        object_paths = set("/%s/%s%s/%s/%s" % ("apis" if "/" in gv else "api", gv, "/namespaces/" + ns if ns else "",
                                               plural, name) for gv, plural, ns, name in api.objects)
        assert "/api/v1/namespaces/team-a/resourcequotas/gpuops-tenant" in object_paths
        assert sorted(set(reads) & object_paths) == [], reads
        assert [p for p in list(reads) + patched if p.startswith("/api/v1/nodes/")] == [], (reads, patched)
        # The nodes are listed once, by the plan; the allocatable check takes the Nodes as the label apply answered
        # them, which advertise what the plan says already (it reads them again only when they do not).
        assert reads["/api/v1/nodes"] == 1, reads
        # The summary counts per layer what the server-side applies did.
        said = " ".join(second.output.split())
        assert "80 gpu_tenants: 8 objects, unchanged (objects: 8 unchanged)" in said
        assert "30 gpu_nodes: 2 objects, unchanged (objects: 2 unchanged)" in said
        assert {k: o["metadata"]["resourceVersion"] for k, o in api.objects.items()} == rv
        assert "[WARNING]" not in second.output, [ln for ln in second.output.splitlines() if "WARNING" in ln]

        # ... and is needed: the same apply without force is a conflict once another manager owns the label.
        handler = api.objects[("v1", "nodes", "", "gpu-a")]
        api.add(dict(handler, metadata=dict(handler["metadata"], labels=dict(
            handler["metadata"]["labels"], **{"nvidia.com/device-plugin.config": "default"}))), manager="kubectl-label")
        body = json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": "gpu-a", "labels": {"nvidia.com/device-plugin.config": "ts4"}}}).encode()
        request = urllib.request.Request(api.url + "/api/v1/nodes/gpu-a?fieldManager=gpuops-platform", data=body,
                                         method="PATCH", headers={"Content-Type": "application/apply-patch+yaml"})
        with pytest.raises(urllib.error.HTTPError) as conflict:
            urllib.request.urlopen(request)
        assert conflict.value.code == 409

    with FakeAPIServer() as fresh:
        seed(fresh, str(gpus * 4))
        before = {k: dict(o) for k, o in fresh.objects.items()}
        checked = run(tmp_path, fresh, "check", args=["--check", "--diff"], collections=installed_collection)
        assert fresh.objects == before
        assert all((r[2].get("dryRun") or ["All"])[0] == "All" for r in fresh.writes()), fresh.writes()
        # Objects in namespaces the run would create cannot be dry-run; they are reported.
        said = " ".join(checked.output.split())
        assert "depend on a namespace or CRD that this run would create first" in said
        # --check --diff names each object it would create or change, and the fields that differ.
        assert "20 gpu_sharing: 2 objects, changes planned (objects: 1 to create)" in said
        assert "create Namespace gpu-operator" in said
        assert "30 gpu_nodes: 2 objects, changes planned (objects: 2 to change)" in said
        assert "change Node gpu-a: " in said
        # The label another manager set, with its old and new value.
        assert "metadata.labels.nvidia.com/device-plugin.config: default -> ts4" in said
        assert "DEPRECATION" not in checked.output


def test_allocatable_that_differs_from_the_facts_fails_naming_the_node(tmp_path, installed_collection):
    gpus = len(load_facts("hgx-h100")["gpus"])
    with FakeAPIServer() as api:
        seed(api, str(gpus))  # the device plugin did not pick up time-slicing
        result = run(tmp_path, api, "mismatch", expect_failure=True, collections=installed_collection)
        flat = " ".join(result.output.split())
        assert "node gpu-a: allocatable nvidia.com/gpu is %d, expected %d" % (gpus, gpus * 4) in flat, result.output[-3000:]


def test_a_gpu_node_that_is_not_a_kubernetes_node_refuses_the_layer_before_any_write(tmp_path, installed_collection):
    """The discovery run's Node list is what the gpu_nodes plan checks: a label patch would create gpu-b."""
    with FakeAPIServer() as api:
        seed(api, str(len(load_facts("hgx-h100")["gpus"]) * 4))
        del api.objects[("v1", "nodes", "", "gpu-b")]
        result = run(tmp_path, api, "absent", expect_failure=True, collections=installed_collection)
        flat = " ".join(result.output.split())
        assert "GPU node(s) gpu-b are not Kubernetes nodes: join them to the cluster, or set gpu_nodes_node_name" in flat, \
            result.output[-3000:]
        assert [r[1] for r in api.requests if r[1].startswith("/api/v1/nodes")] == ["/api/v1/nodes"]
        assert api.writes() == [] and api.get("Node", "gpu-b") is None


def helm_storage(api, release, values, revision, status, chart_version):
    """Seed one revision of ``release`` into Helm's storage, as helm would have left it."""
    api.add_helm_revision({
        "name": release["name"], "namespace": release["namespace"], "version": revision,
        "info": {"status": status, "description": "", "first_deployed": "", "last_deployed": ""},
        "chart": {"metadata": {"name": release["chart"], "version": chart_version, "appVersion": chart_version}},
        "config": values, "manifest": ""})


POLICIES = "/apis/nvidia.com/v1/clusterpolicies"


def test_helm_release_deployed_as_wanted_is_left_alone_and_a_pending_one_stops(
        tmp_path, installed_collection, helm, monkeypatch):
    """helm itself is asked, once for the run, and only what the decision needs: no install, no upgrade.
    The GPU Operator's ClusterPolicy is listed by the run that applies the objects: ready there, it is not
    waited for; not ready, it is, and the wait fails once its attempts are spent."""
    marker = "values-marker-5d2c"
    operator = {"gpu_operator_enabled": True, "gpu_operator_wait_ready": True, "gpu_operator_wait_retries": 1,
                "gpu_operator_wait_delay": 0, "gpu_operator_values": {"gpuopsTestMarker": marker}}
    planned = render_cluster(tmp_path / "render", extra_vars=dict(operator, gpu_sharing_configs=SHARING,
                                                                  gpu_tenants_list=TENANTS),
                             nodes=NODES, collections_path=installed_collection).releases["gpu-operator"]
    release, values = planned["release"], planned["values"]
    assert values["gpuopsTestMarker"] == marker
    gpus = len(load_facts("hgx-h100")["gpus"])
    with FakeAPIServer() as api:
        seed(api, str(gpus * 4))
        api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": release["namespace"]}})
        # Deployed as wanted, after an upgrade: the run asks helm and installs nothing.
        helm_storage(api, release, values, 1, "superseded", "v0.0.1")
        helm_storage(api, release, values, 2, "deployed", release["version"])
        # Someone else's release of the same name in another namespace, left pending: not ours, so not
        # recovered (that would call helm) and not what decides about ours.
        api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab"}})
        helm_storage(api, dict(release, namespace="lab"), {}, 5, "pending-install", release["version"])
        # The operator's own ClusterPolicy (its chart makes it), reconciled.
        monkeypatch.setitem(fake_apiserver.RESOURCES, "nvidia.com/v1", [("clusterpolicies", "ClusterPolicy", False)])
        api.add({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
                 "status": {"state": "ready"}})
        result = run(tmp_path, api, "deployed", args=["-vvv"], collections=installed_collection, extra=operator,
                     env=helm.env)
        # Listed once, by the objects' call: ready there, so the wait reads nothing (no kubernetes.core.k8s_info run).
        assert [r[0] for r in api.requests if r[1] == POLICIES] == ["GET"]
        waited = result.output.split("Wait until the ClusterPolicy reports ready]", 1)[1].split("TASK [", 1)[0]
        assert "skipping: [localhost]" in waited and "ok: [localhost]" not in waited, waited
        # One helm list for every release of the run, then the values of the one deployed at the wanted chart.
        assert helm.calls() == [
            ["list", "--all", "--all-namespaces", "--max", "0", "--filter", "^(?:gpu\\-operator)$", "-o", "json"],
            ["get", "values", "gpu-operator", "--namespace", "gpu-operator", "-o", "json"]]
        assert "chart %s and values already deployed" % release["version"] in result.output
        # The module's result, as -vvv shows it, carries the decision, never the values. Nothing moved, so the
        # same module run applied the objects: the steps after the Helm releases are skipped in one task, and
        # none of them is even included.
        task = result.output.split("Ask helm for the state of every release, and apply the objects of every layer "
                                   "when none moves]", 1)[1].split("TASK [", 1)[0]
        assert "applied: true" in task
        after = result.output.split("Act on the releases that move, then apply the objects after them]", 1)[1].split(
            "TASK [", 1)[0]
        assert "skipping: [localhost]" in after and "included:" not in after, after
        assert "Apply the objects of every layer after the Helm releases]" not in result.output
        assert "chart %s and values already deployed" % release["version"] in task
        assert marker not in task
        assert "Kubernetes GPU stack applied" in " ".join(result.output.split())

        # Not ready when the objects' call lists it: the wait reads it again until its attempts are spent.
        api.get("ClusterPolicy", "cluster-policy")["status"]["state"] = "notReady"
        del api.requests[:]
        waiting = run(tmp_path, api, "not-ready", collections=installed_collection, extra=operator, env=helm.env,
                      expect_failure=True)
        # The objects' call lists it once, then the wait (kubernetes.core.k8s_info) reads it again.
        assert len([r for r in api.requests if r[1] == POLICIES]) > 1, waiting.output[-3000:]
        waited = waiting.output.split("Wait until the ClusterPolicy reports ready]", 1)[1].split("TASK [", 1)[0]
        assert "fatal: [localhost]: FAILED!" in waited and "state: notReady" in waited, waited

        # An upgrade interrupted at revision 3, with recovery off: stop before any change, naming the command.
        helm_storage(api, release, values, 3, "pending-upgrade", release["version"])
        helm.clear()
        failed = run(tmp_path, api, "pending", collections=installed_collection, expect_failure=True,
                     extra=dict(operator, gpuops_k8s_helm_recover=False), env=helm.env)
        flat = " ".join(failed.output.split())
        assert "Helm release gpu-operator in namespace gpu-operator is pending-upgrade (revision 3)" in flat
        assert "`helm rollback gpu-operator 2 --namespace gpu-operator`" in flat
        # The history is read only for the pending release, to find the revision to roll back to.
        assert [c[:2] for c in helm.calls()] == [["list", "--all"], ["history", "gpu-operator"]]


PART_OF = "applyset.kubernetes.io/part-of"


def test_a_dropped_tenant_is_pruned_a_foreign_object_never_and_check_mode_only_lists(tmp_path, installed_collection):
    gpus = len(load_facts("hgx-h100")["gpus"])
    three = TENANTS + [{"name": "team-b", "gpu_share": 0.25}, {"name": "team-c", "gpu_share": 0.25}]
    with FakeAPIServer() as api:
        seed(api, str(gpus * 4))
        run(tmp_path, api, "three", collections=installed_collection, extra={"gpu_tenants_list": three})
        parent = api.get("Secret", "gpuops-gpu-tenants", "gpuops-system")
        set_id = parent["metadata"]["labels"]["applyset.kubernetes.io/id"]
        assert parent["metadata"]["annotations"]["applyset.kubernetes.io/tooling"] == "gpuops.platform/v1"
        assert "Namespace" in parent["metadata"]["annotations"]["applyset.kubernetes.io/contains-group-kinds"].split(",")
        assert api.get("ResourceQuota", "gpuops-tenant", "team-b")["metadata"]["labels"][PART_OF] == set_id
        # A user's own object in team-c: team-c must survive, its tenant objects not.
        api.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "notebooks", "namespace": "team-c"}})
        before = {k: dict(o) for k, o in api.objects.items()}

        checked = run(tmp_path, api, "check", args=["--check"], collections=installed_collection)
        assert api.objects == before
        assert not [r for r in api.requests if r[0] == "DELETE"]
        flat = " ".join(checked.output.split())
        assert "ResourceQuota team-b/gpuops-tenant" in flat and "Namespace team-b" in flat
        assert "planned" in flat

        # A finalizer holds team-b's LimitRange: deleted, its namespace stays Terminating until it clears
        # (ObjectMeta.deletionTimestamp and finalizers, API reference).
        api.objects[("v1", "limitranges", "team-b", "gpuops-tenant")]["metadata"]["finalizers"] = ["example.com/hold"]
        run(tmp_path, api, "one", collections=installed_collection)
        assert api.get("Namespace", "team-b")["metadata"]["deletionTimestamp"]
        assert api.get("ResourceQuota", "gpuops-tenant", "team-b") is None
        assert api.get("ResourceQuota", "gpuops-tenant", "team-c") is None
        assert api.get("Namespace", "team-c") is not None, "a namespace with a foreign object was deleted"
        assert api.get("ConfigMap", "notebooks", "team-c") is not None
        assert api.get("ResourceQuota", "gpuops-tenant", "team-a") is not None
        # Nodes are never members, so never pruned.
        assert api.get("Node", "gpu-a") is not None and PART_OF not in api.get("Node", "gpu-a")["metadata"]["labels"]

        # While team-b finalizes, a run sends no DELETE, changes nothing and says it is still finalizing.
        del api.requests[:]
        again = run(tmp_path, api, "two", collections=installed_collection)
        assert "changed=0" in recap(again), recap(again)
        assert not [r for r in api.requests if r[0] == "DELETE"]
        assert "still finalizing 2 (LimitRange team-b/gpuops-tenant (being deleted since" in " ".join(again.output.split())


def test_a_layer_without_releases_never_acts_on_an_earlier_applys_helm_plans(tmp_path, installed_collection):
    """The Helm decisions are set on every apply: stale ones would uninstall a release again (and call helm)."""
    with FakeAPIServer() as api:
        result = render_cluster(tmp_path / "stale",
                                extra_vars={"gpuops_k8s_render_dir": "", "gpuops_k8s_host": api.url,
                                            "gpuops_k8s_api_key": TOKEN},
                                nodes=NODES, playbook="tests/integration/k8s/stale_helm_plans.yml",
                                env={"K8S_AUTH_HOST": None, "K8S_AUTH_KUBECONFIG": None},
                                collections_path=installed_collection)
        assert api.get("ConfigMap", "applied", "stale-check")["data"] == {"layer": "stale_check"}
        flat = " ".join(result.output.split())
        # The layer's own Helm decision (none: it has no release) says that nothing acts: its first call applied
        # the ConfigMap, so neither the steps after helm nor the Helm tasks are even included.
        assert re.search(r"Act on the releases that move, then apply the objects after them\] \**\s*skipping:", flat), \
            flat[-3000:]
        assert "Recover, install or upgrade the Helm releases" not in flat
        assert "Uninstall the Helm releases that never deployed" not in flat
        assert "never deployed: uninstalled" not in flat
        assert "failed=0" in recap(result)
