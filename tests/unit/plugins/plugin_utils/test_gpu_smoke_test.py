"""gpu_smoke_test's nodes, CUDA pods and verdicts (plugin_utils/gpu_smoke_test.py)."""
from ansible_collections.gpuops.platform.plugins.filter import gpu_smoke_test as filters
from ansible_collections.gpuops.platform.plugins.plugin_utils import gpu_smoke_test as smoke

SETTINGS = {"smi_header": "NVIDIA-SMI", "cuda_header": "CUDA Version", "volcano": False, "gang_size": 2,
            "kueue": False, "kueue_cluster_queue": "gpu", "rdma": False, "rdma_pods": [], "gpu_node_count": 1,
            "rayjob": False}
SMI = "| NVIDIA-SMI 570.172.08   Driver Version: 570.172.08   CUDA Version: 12.8 |"


def read(**changes):
    out = {"cuda_pods": [], "pods": [], "logs": [], "status": [], "nccl": {}}
    out.update(changes)
    return out


def settings(**changes):
    out = dict(SETTINGS)
    out.update(changes)
    return out


def test_plan_nodes_keep_gpu_nodes_with_the_device_plugin_sorted_without_case():
    capacity = {"nodes": {
        "b-node": {"resources": {"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-1g.10gb": 7}},
        "A-node": {"resources": {"nvidia.com/gpu": 8}},
        "cpu-node": {"resources": {"nvidia.com/gpu": 0}},
        "off-node": {"resources": {"nvidia.com/gpu": 8}}}}
    plan = {"nodes": [{"name": "off-node", "labels": {"nvidia.com/gpu.deploy.device-plugin": "false"}},
                      {"name": "A-node", "labels": {"nvidia.com/gpu.deploy.device-plugin": "true"}}]}
    assert filters.gpu_smoke_test_plan_nodes(capacity, plan) == [
        {"name": "A-node", "mig_resources": []},
        {"name": "b-node", "mig_resources": ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"]}]
    assert smoke.plan_nodes({}, None) == [] and smoke.plan_nodes({"nodes": {}}, {}) == []


def test_api_nodes_are_those_that_advertise_an_nvidia_resource():
    nodes = [{"metadata": {"name": "gpu-a"}, "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8"}}},
             {"metadata": {"name": "gpu-b"}, "status": {"allocatable": {"nvidia.com/mig-1g.10gb": "7",
                                                                        "nvidia.com/gpu": "0"}}},
             {"metadata": {"name": "idle"}, "status": {"allocatable": {"nvidia.com/gpu": 0}}},
             {"metadata": {"name": "new"}, "status": {}}]
    assert filters.gpu_smoke_test_api_nodes(nodes) == [
        {"name": "gpu-a", "mig_resources": []}, {"name": "gpu-b", "mig_resources": ["nvidia.com/mig-1g.10gb"]}]


def test_cuda_pods_one_per_mig_resource_only_under_the_mixed_strategy():
    nodes = [{"name": "gpu-a"}, {"name": "GPU_B.example", "mig_resources": ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"]}]
    assert filters.gpu_smoke_test_cuda_pods(nodes, "mixed", "nvidia.com/gpu") == [
        {"name": "cuda-gpu-a-gpu", "node": "gpu-a", "resource": "nvidia.com/gpu"},
        {"name": "cuda-gpu-b-example-mig-1g-10gb", "node": "GPU_B.example", "resource": "nvidia.com/mig-1g.10gb"},
        {"name": "cuda-gpu-b-example-mig-3g-40gb", "node": "GPU_B.example", "resource": "nvidia.com/mig-3g.40gb"}]
    assert [p["resource"] for p in smoke.cuda_pods(nodes, "single", "nvidia.com/gpu")] == ["nvidia.com/gpu"] * 2


def test_a_pod_name_is_a_dns_label_of_at_most_63_characters_without_a_trailing_dash():
    name = smoke.cuda_pod_name("n" * 56 + ".x", "nvidia.com/gpu")
    assert name == "cuda-" + "n" * 56 + "-x" and len(name) == 63
    assert smoke.cuda_pod_name("n" * 57 + ".x", "nvidia.com/gpu") == "cuda-" + "n" * 57


def test_cuda_verdicts_need_a_succeeded_pod_and_the_table():
    pods = [{"name": "cuda-a-gpu", "node": "a", "resource": "nvidia.com/gpu"},
            {"name": "cuda-b-gpu", "node": "b", "resource": "nvidia.com/gpu"},
            {"name": "cuda-c-gpu", "node": "c", "resource": "nvidia.com/gpu"}]
    verdict = filters.gpu_smoke_test_results(read(
        cuda_pods=pods,
        pods=[{"metadata": {"name": "cuda-a-gpu"}, "status": {"phase": "Succeeded"}},
              {"metadata": {"name": "cuda-b-gpu"}, "status": {"phase": "Succeeded"}}],
        logs=[{"item": pods[0], "log": SMI}, {"item": pods[1], "log": "Failed to initialize NVML"}]), SETTINGS)
    assert [(t["passed"], t["detail"]) for t in verdict["tests"]] == [
        (True, "nvidia-smi table printed"), (False, "pod Succeeded; nvidia-smi table missing from the log"),
        (False, "pod Missing; nvidia-smi table missing from the log")]
    assert (verdict["passed"], verdict["total"], verdict["failed"]) == (False, 3, 2)


def test_a_run_without_any_test_fails():
    assert smoke.results(read(), SETTINGS) == {"passed": False, "total": 0, "failed": 0, "tests": []}


def test_volcano_kueue_and_rayjob_verdicts():
    status = [{"item": {"kind": "Job"}, "resources": [{"metadata": {"name": "volcano-gang"},
                                                       "status": {"state": {"phase": "Completed"}}}]},
              {"item": {"kind": "Workload"}, "resources": [{"metadata": {"ownerReferences": [{"name": "kueue-admitted"}]},
                                                            "status": {"conditions": [{"type": "Admitted", "status": "True"}]}}]},
              {"item": {"kind": "RayJob"}, "resources": [{"status": {"jobStatus": "FAILED"}}]}]
    pods = [{"metadata": {"name": "kueue-admitted-x", "labels": {"job-name": "kueue-admitted"}}, "status": {"phase": "Succeeded"}}]
    verdict = smoke.results(read(status=status, pods=pods), settings(volcano=True, kueue=True, rayjob=True, gang_size="3"))
    assert [(t["test"], t["passed"], t["detail"]) for t in verdict["tests"]] == [
        ("volcano-gang", True, "job Completed (minAvailable 3)"),
        ("kueue-admission", True, "admitted by ClusterQueue gpu, pod Succeeded"),
        ("rayjob", False, "RayJob FAILED")]
    missing = smoke.results(read(), settings(volcano=True, kueue=True, rayjob=True))
    assert [t["detail"] for t in missing["tests"]] == [
        "job Missing (minAvailable 2)", "not admitted, pod Missing", "RayJob Missing"]


def test_rdma_verdicts_need_two_nodes_and_a_passing_launcher():
    one_node = smoke.results(read(), settings(rdma=True, rdma_pods=[], gpu_node_count=1))["tests"]
    assert one_node == [{"test": "rdma-nccl", "name": "nccl-rdma-launcher", "passed": False, "detail":
                         "needs two GPU nodes, found 1; set gpu_smoke_test_rdma=false on a single-node cluster"}]
    nccl = {"passed": True, "transport": "IB", "gdrdma": True, "peak_busbw": 180.5, "avg_busbw": 90.1, "detail": "IB, GDRDMA"}
    pods = [{"metadata": {"name": "nccl-rdma-launcher"}, "status": {"phase": "Failed"}}]
    rdma = settings(rdma=True, rdma_pods=["nccl-rdma-launcher", "nccl-rdma-worker"])
    (failed,) = smoke.results(read(nccl=nccl, pods=pods), rdma)["tests"]
    assert not failed["passed"] and failed["detail"] == "launcher pod Failed; IB, GDRDMA" and failed["peak_busbw"] == 180.5
    pods[0]["status"]["phase"] = "Succeeded"
    (passed,) = smoke.results(read(nccl=nccl, pods=pods), rdma)["tests"]
    assert passed["passed"] and passed["detail"] == "IB, GDRDMA"


def test_summary_lines():
    verdict = {"total": 2, "failed": 1, "tests": [{"test": "cuda", "name": "c", "passed": True, "detail": "ok?"},
                                                  {"test": "rayjob", "name": "ray-gpu", "passed": False, "detail": "RayJob FAILED"}]}
    assert filters.gpu_smoke_test_summary(verdict) == [
        "1/2 smoke tests passed", "cuda c: ok (ok?)", "rayjob ray-gpu: FAILED (RayJob FAILED)"]
