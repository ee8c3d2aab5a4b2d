"""The scheduling and add-on layers through the apply path of cluster.yml,
against the in-memory API server (fake_apiserver): their objects go out by
server-side apply with our field manager, a second run changes nothing, check
mode writes nothing. The Helm releases need the helm binary and the charts, so
here every operator counts as installed another way (<role>_manage_release:
false) and only the objects are managed."""
import pytest

import fake_apiserver
from fake_apiserver import FakeAPIServer
from k8s_support import load_facts, render_cluster, short_tmpdir

pytestmark = pytest.mark.slow

TOKEN = "sekret-token-5d2e"
# The kinds these layers write, as the operators' CRDs (and Kubernetes 1.34) serve them.
KINDS = {
    "scheduling.volcano.sh/v1beta1": [("queues", "Queue", False)],
    "kueue.x-k8s.io/v1beta2": [("localqueues", "LocalQueue", True), ("clusterqueues", "ClusterQueue", False),
                               ("resourceflavors", "ResourceFlavor", False),
                               ("workloadpriorityclasses", "WorkloadPriorityClass", False)],
    "ray.io/v1": [("rayclusters", "RayCluster", True)],
    "scheduling.run.ai/v2": [("queues", "Queue", False)],
    "resource.k8s.io/v1": [("deviceclasses", "DeviceClass", False), ("resourceclaimtemplates", "ResourceClaimTemplate", True)],
    "mellanox.com/v1alpha1": [("nicclusterpolicies", "NicClusterPolicy", False)],
}
NODES = {"gpu-a": {"facts": "hgx-h100"}, "gpu-b": {"facts": "l40s"}}


@pytest.fixture(autouse=True)
def served_kinds(monkeypatch):
    for group_version, kinds in KINDS.items():
        monkeypatch.setitem(fake_apiserver.RESOURCES, group_version, kinds)


def seed(api):
    # Every cluster has the default namespace (the DRA example claim template goes there).
    api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    for name, facts in NODES.items():
        gpus = str(len(load_facts(facts["facts"])["gpus"]))
        api.add({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                 "spec": {}, "status": {"allocatable": {"cpu": "96", "nvidia.com/gpu": gpus}}})


def run(tmp_path, api, name, collections, args=()):
    extra = {
        "gpuops_k8s_render_dir": "", "gpuops_k8s_host": api.url, "gpuops_k8s_api_key": TOKEN,
        "gpu_operator_enabled": False, "gpu_nodes_validate_retries": 1, "gpu_nodes_validate_delay": 0,
        "kai_scheduler_enabled": True, "dra_driver_enabled": True, "network_operator_enabled": True,
        "kuberay_cluster_enabled": True, "kuberay_cluster_create_namespace": True,
        "gpu_tenants_list": [{"name": "team-a", "kueue_cluster_queue": "team-a", "volcano_queue": "team-a"}],
    }
    for role in ("volcano", "kueue", "kuberay", "kai_scheduler", "dra_driver", "network_operator"):
        extra[role + "_manage_release"] = False
    return render_cluster(tmp_path / name, extra_vars=extra, nodes=NODES,
                          env={"K8S_AUTH_HOST": None, "K8S_AUTH_KUBECONFIG": None}, args=args, collections_path=collections)


def recap(result):
    return [line for line in result.output.splitlines() if line.startswith("localhost ")][-1]


def test_objects_are_applied_once_then_left_alone(tmp_path, installed_collection):
    with FakeAPIServer() as api:
        seed(api)
        first = run(tmp_path, api, "first", installed_collection)
        assert TOKEN not in first.output
        assert api.field_managers == {"gpuops-platform"}
        assert api.get("Queue", "gpu-batch")["spec"]["weight"] == 1
        assert api.get("Queue", "team-a") is not None
        fleet = api.get("ClusterQueue", "gpu-fleet")["spec"]
        flavors = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]}
                   for f in fleet["resourceGroups"][0]["flavors"]}
        assert flavors["nvidia-h100-80gb-hbm3"]["nvidia.com/gpu"] == str(len(load_facts("hgx-h100")["gpus"]))
        assert api.get("ClusterQueue", "team-a")["spec"]["cohortName"] == "gpu-fleet"
        assert api.get("LocalQueue", "team-a", "team-a")["spec"]["clusterQueue"] == "team-a"
        assert api.get("ResourceFlavor", "nvidia-l40s")["spec"]["nodeLabels"] == {"platform.gpuops.io/gpu.product": "NVIDIA-L40S"}
        assert api.get("WorkloadPriorityClass", "inference-critical")["value"] == 1000
        assert api.get("RayCluster", "ray-gpu", "ray")["spec"]["workerGroupSpecs"][0]["maxReplicas"] == 4
        assert api.get("DeviceClass", "gpuops-nvidia-gpu") is not None
        assert api.get("ResourceClaimTemplate", "gpuops-nvidia-gpu-x1", "default") is not None
        assert api.get("NicClusterPolicy", "nic-cluster-policy")["spec"]["rdmaSharedDevicePlugin"]["image"] == \
            "k8s-rdma-shared-dev-plugin"
        # The smoke tests ran nothing: that takes gpu_smoke_test_run.
        assert api.get("Namespace", "gpu-smoke-test") is None

        rv = {k: o["metadata"]["resourceVersion"] for k, o in api.objects.items()}
        second = run(tmp_path, api, "second", installed_collection)
        assert "changed=0" in recap(second), recap(second)
        assert {k: o["metadata"]["resourceVersion"] for k, o in api.objects.items()} == rv


def test_check_mode_writes_nothing(tmp_path, installed_collection):
    with FakeAPIServer() as api:
        seed(api)
        before = {k: dict(o) for k, o in api.objects.items()}
        run(tmp_path, api, "check", installed_collection, args=["--check"])
        assert api.objects == before
        assert all((r[2].get("dryRun") or ["All"])[0] == "All" for r in api.writes()), api.writes()


def test_dra_refuses_an_api_server_older_than_134(tmp_path, installed_collection):
    # The version comes from kubernetes.core's client: asked by it without a discovery cache file (a fresh
    # execution environment), then read from the file that the first run left.
    with short_tmpdir("gpuops-dra-") as temp, FakeAPIServer(version="1.33") as api:
        seed(api)
        for run_name in ("old", "old-cached"):
            start = len(api.requests)
            result = render_cluster(tmp_path / run_name, extra_vars={
                "gpuops_k8s_render_dir": "", "gpuops_k8s_host": api.url, "gpuops_k8s_api_key": TOKEN,
                "gpu_operator_enabled": False, "dra_driver_enabled": True, "volcano_enabled": False, "kueue_enabled": False,
                "kuberay_enabled": False}, nodes=NODES, env={"K8S_AUTH_HOST": None, "K8S_AUTH_KUBECONFIG": None,
                                                             "TMPDIR": str(temp)},
                expect_failure=True, collections_path=installed_collection)
            assert "this cluster is 1.33 (API server)" in " ".join(result.output.split())
            asked = [r[1] for r in api.requests[start:]]
            assert asked.count("/version") == (1 if run_name == "old" else 0), asked
        assert api.writes() == []
