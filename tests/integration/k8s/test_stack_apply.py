"""The whole stack through cluster.yml against the in-memory API server: every
layer on, each Helm release already deployed as planned (seeded into Helm's
storage, where the real helm reads it; no chart is installed here) and its
chart's CRDs Established.

What a per-layer test cannot see: the layers are applied phase by phase
together, a no-op run changes nothing, runs one `helm list` and no install or
upgrade, sends one server-side apply per object and nothing else that writes,
waits for no CRD that was already served, taints no node that
has its taints, and still reports one line per layer."""
import re
import threading
import time

import pytest

import fake_apiserver
from fake_apiserver import FakeAPIServer
from k8s_support import render_cluster
import test_core_apply as core
import test_sched_apply as sched

pytestmark = pytest.mark.slow

NODES = sched.NODES
# The CRDs that the add-on charts install and the layers wait for (k8s_apply_wait_crds).
CHART_CRDS = {
    "queues.scheduling.volcano.sh": ("scheduling.volcano.sh", "v1beta1", "queues", "Queue", "Cluster"),
    "resourceflavors.kueue.x-k8s.io": ("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor", "Cluster"),
    "clusterqueues.kueue.x-k8s.io": ("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", "Cluster"),
    "workloadpriorityclasses.kueue.x-k8s.io": ("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses",
                                               "WorkloadPriorityClass", "Cluster"),
    "rayclusters.ray.io": ("ray.io", "v1", "rayclusters", "RayCluster", "Namespaced"),
    "queues.scheduling.run.ai": ("scheduling.run.ai", "v2", "queues", "Queue", "Cluster"),
    "nicclusterpolicies.mellanox.com": ("mellanox.com", "v1alpha1", "nicclusterpolicies", "NicClusterPolicy", "Cluster"),
}
LAYERS = ["gpu_operator", "gpu_sharing", "gpu_nodes", "volcano", "kueue", "kuberay", "kai_scheduler", "dra_driver",
          "network_operator", "gpu_tenants"]


def stack_vars(api=None):
    extra = {
        "gpu_operator_enabled": True, "gpu_operator_wait_ready": False,
        "gpu_nodes_validate_retries": 1, "gpu_nodes_validate_delay": 0,
        "kai_scheduler_enabled": True, "dra_driver_enabled": True, "network_operator_enabled": True,
        "kuberay_cluster_enabled": True, "kuberay_cluster_create_namespace": True,
        "gpu_sharing_configs": core.SHARING,
        "gpu_tenants_list": [{"name": "team-a", "gpu_share": 0.5, "kueue_cluster_queue": "team-a",
                              "volcano_queue": "team-a"}],
    }
    if api is not None:
        extra.update(gpuops_k8s_render_dir="", gpuops_k8s_host=api.url, gpuops_k8s_api_key=core.TOKEN)
    return extra


def seed(api, workdir, collections, playbook="playbooks/cluster.yml"):
    """Nodes, each release deployed with the chart and values a render gives, and the charts' CRDs.

    Returns the render (its objects and releases)."""
    for group_version, kinds in sched.KINDS.items():
        fake_apiserver.RESOURCES[group_version] = kinds
    sched.seed(api)
    planned = render_cluster(workdir / "render", extra_vars=stack_vars(), nodes=NODES, collections_path=collections,
                             playbook=playbook)
    for entry in planned.releases.values():
        api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": entry["release"]["namespace"]}})
        core.helm_storage(api, entry["release"], entry["values"], 1, "deployed", entry["release"]["version"])
    for name, (group, version, plural, kind, scope) in CHART_CRDS.items():
        api.add({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
                 "spec": {"group": group, "scope": scope, "names": {"plural": plural, "kind": kind},
                          "versions": [{"name": version, "served": True, "storage": True}]},
                 "status": {"conditions": [{"type": "Established", "status": "True"}]}})
    return planned


def run(api, workdir, name, collections, args=(), playbook="playbooks/cluster.yml", env=None):
    return render_cluster(workdir / name, extra_vars=stack_vars(api), nodes=NODES, args=args, playbook=playbook,
                          env=dict({"K8S_AUTH_HOST": None, "K8S_AUTH_KUBECONFIG": None}, **(env or {})),
                          collections_path=collections)


@pytest.fixture
def served_kinds(monkeypatch):
    for group_version, kinds in sched.KINDS.items():
        monkeypatch.setitem(fake_apiserver.RESOURCES, group_version, kinds)


def test_the_whole_stack_applies_phase_by_phase_and_a_no_op_only_applies_each_object_once(
        tmp_path, installed_collection, served_kinds, helm):
    with FakeAPIServer() as api:
        planned = seed(api, tmp_path, installed_collection)
        assert len(planned.releases) == 7
        first = run(api, tmp_path, "first", installed_collection, env=helm.env)
        flat = " ".join(first.output.split())
        # Every release was found deployed as wanted: helm was asked (one list, then each one's values)
        # and installed or upgraded nothing.
        assert "releases dra-driver-nvidia-gpu" in flat and "kubernetes.core.helm" not in flat
        assert sorted(c[:2] for c in helm.calls()) == sorted([["list", "--all"]] + [["get", "values"]] * 7)
        # Objects of every layer went out, the node labels forced, the others not.
        assert api.get("ClusterQueue", "gpu-fleet") is not None and api.get("Queue", "team-a") is not None
        assert api.get("NicClusterPolicy", "nic-cluster-policy") is not None
        assert api.get("Node", "gpu-a")["metadata"]["labels"]["platform.gpuops.io/gpu"] == "true"
        forced = [r for r in api.requests if r[0] == "PATCH" and (r[2].get("force") or ["false"])[0] == "true"]
        assert forced and all(re.match(r"^/api/v1/nodes/|^/api/v1/namespaces/gpuops-system/secrets/", r[1])
                              for r in forced), [r[1] for r in forced]
        # One summary line per layer.
        for order_layer in ("10 gpu_operator:", "30 gpu_nodes:", "50 kueue:", "80 gpu_tenants:"):
            assert order_layer in flat
        # The smoke tests' objects are rendered, and applied only by a run with gpu_smoke_test_run.
        objects = sum(len(layer["objects"]) for name, layer in planned.layers.items() if name != "gpu_smoke_test")

        rv = {k: o["metadata"]["resourceVersion"] for k, o in api.objects.items()}
        del api.requests[:]
        helm.clear()
        noop = run(api, tmp_path, "noop", installed_collection, env=helm.env)
        assert "changed=0" in core.recap(noop), core.recap(noop)
        assert {k: o["metadata"]["resourceVersion"] for k, o in api.objects.items()} == rv
        writes = api.writes()
        # No write at all: no taint patch, no ApplySet parent write, and no server-side apply, since every planned
        # object (each Node's labels too) is owned by this field manager at the planned values already, as the
        # LISTs before the applies show (ssa.unchanged_by_apply).
        assert objects > 20 and writes == [], writes
        assert not [r for r in api.requests if r[1].startswith("/api/v1/nodes/")]
        # One helm list for every release, each deployed release's values, and no install or upgrade
        # (helm reads its own storage: its one list across namespaces, then each release's latest revision).
        calls = helm.calls()
        assert [c[0] for c in calls].count("list") == 1
        assert sorted(c[:3] for c in calls) == sorted([["list", "--all", "--all-namespaces"]] + [
            ["get", "values", name] for name in planned.releases])
        assert not [c for c in calls if c[0] in ("install", "upgrade", "rollback", "uninstall")]
        # No CRD waited for (all were served at discovery).
        assert not [r for r in api.requests if r[1].startswith("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/")]
        # Both nodes have their taints: k8s_node_taints is not run for either.
        taint_task = noop.output.split("Taint the GPU nodes]", 1)[1].split("TASK [", 1)[0]
        assert "gpu-a" not in taint_task and "gpu-b" not in taint_task, taint_task
        assert "skipping: [" in taint_task and "ok: [" not in taint_task, taint_task
        # The Nodes are listed once, by the discovery run: gpu_nodes runs no lookup of its own.
        assert [r[0] for r in api.requests if r[1] == "/api/v1/nodes"] == ["GET"], api.requests
        assert "Look up the cluster's nodes" not in noop.output or re.search(
            r"Look up the cluster's nodes\][^\n]*\n\s*skipping", noop.output), noop.output
        noop_flat = " ".join(noop.output.split())
        # Every layer planned in one loop and applied in one pass: a whole-stack no-op runs at most 60 tasks
        # (skipped ones and the test's own fact replay on each GPU node included; 178 before).
        assert noop.tasks <= 60, noop.tasks
        for layer in LAYERS:
            assert re.search(r"\b\d\d %s: \d+ objects[^.]*?, unchanged" % layer, noop_flat), layer


def test_a_chart_crd_not_served_at_discovery_is_waited_for(tmp_path, installed_collection, served_kinds, helm):
    """As on a first install: KubeRay's chart brings its CRD during the run, after discovery."""
    with FakeAPIServer() as api:
        seed(api, tmp_path, installed_collection)
        ray = fake_apiserver.RESOURCES.pop("ray.io/v1")
        crd = api.get("CustomResourceDefinition", "rayclusters.ray.io")
        api.objects = dict((k, o) for k, o in api.objects.items() if o is not crd)

        def chart_installs_the_crd():
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                if any("owner=helm" in "".join(r[2].get("labelSelector", [])) for r in list(api.requests)):
                    fake_apiserver.RESOURCES["ray.io/v1"] = ray
                    api.add(crd)
                    return
                time.sleep(0.05)

        installer = threading.Thread(target=chart_installs_the_crd, daemon=True)
        installer.start()
        run(api, tmp_path, "first", installed_collection, env=helm.env)
        installer.join(5)
        crd_gets = sorted(set(r[1].rpartition("/")[2] for r in api.requests
                              if r[1].startswith("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/")))
        assert crd_gets == ["rayclusters.ray.io"]
        assert api.get("RayCluster", "ray-gpu", "ray") is not None
