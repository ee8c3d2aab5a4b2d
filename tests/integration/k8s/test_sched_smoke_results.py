"""gpu_smoke_test's verdicts on recorded API answers (the shapes kubernetes.core
k8s_info and k8s_log return): which runs pass, which fail, and why."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from k8s_support import ROOT

pytestmark = pytest.mark.slow

PLAYBOOK = Path(__file__).with_name("sched_results.yml")
# The head of the nvidia-smi table (driver 570, CUDA 12.8).
SMI = """Fri Nov 20 09:14:02 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.172.08             Driver Version: 570.172.08     CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
|=========================================+========================+======================|
|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |
+-----------------------------------------+------------------------+----------------------+
"""
NVML_ERROR = "Failed to initialize NVML: Unknown Error\n"
PODS = [{"name": "cuda-gpu-a-gpu", "node": "gpu-a", "resource": "nvidia.com/gpu"},
        {"name": "cuda-gpu-b-mig-1g-10gb", "node": "gpu-b", "resource": "nvidia.com/mig-1g.10gb"}]


def pod(name, phase, **labels):
    return {"metadata": {"name": name, "namespace": "gpu-smoke-test", "labels": labels}, "status": {"phase": phase}}


def answers(cuda_logs, cuda_phases, volcano_phase, admitted, kueue_pod_phase):
    workload = {"metadata": {"name": "job-kueue-admitted-1a2b3", "ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "kueue-admitted", "uid": "u1"}]},
        "status": {"conditions": [
            {"type": "QuotaReserved", "status": "True" if admitted else "False", "reason": "QuotaReserved" if admitted else "Pending"},
            {"type": "Admitted", "status": "True" if admitted else "False", "reason": "Admitted" if admitted else "NoReservation"}]}}
    pods = [pod(p["name"], phase) for p, phase in zip(PODS, cuda_phases)]
    pods.append(pod("kueue-admitted-x7k2p", kueue_pod_phase, **{"job-name": "kueue-admitted"}))
    return {
        "gpu_smoke_test__cuda_pods": PODS,
        "gpu_smoke_test__pods": {"changed": False, "resources": pods},
        "gpu_smoke_test__logs": {"changed": False, "results": [
            {"item": p, "log": log, "log_lines": log.splitlines()} for p, log in zip(PODS, cuda_logs)]},
        "gpu_smoke_test__status": {"changed": False, "results": [
            {"item": {"api_version": "batch.volcano.sh/v1alpha1", "kind": "Job"}, "resources": [
                {"metadata": {"name": "volcano-gang"}, "status": {"state": {"phase": volcano_phase}, "minAvailable": 2}}]},
            {"item": {"api_version": "kueue.x-k8s.io/v1beta2", "kind": "Workload"}, "resources": [workload]}]},
    }


def judge(installed_collection, tmp_path, extra):
    out = tmp_path / "results.json"
    (tmp_path / "vars.json").write_text(json.dumps(dict(extra, sched_out=str(out), gpu_smoke_test_rayjob=False)))
    bindir = Path(sys.executable).parent
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(installed_collection), str(ROOT / "collections")]))
    proc = subprocess.run([str(bindir / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-e", "ansible_python_interpreter=%s" % sys.executable, "-e", "@%s" % (tmp_path / "vars.json"),
                           str(PLAYBOOK)], cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout, json.loads(out.read_text())


def test_a_healthy_cluster_passes_every_test(installed_collection, tmp_path):
    rc, output, results = judge(installed_collection, tmp_path, answers(
        [SMI, SMI], ["Succeeded", "Succeeded"], "Completed", True, "Succeeded"))
    assert rc == 0, output[-3000:]
    assert results["passed"] is True and results["total"] == 4 and results["failed"] == 0
    assert [(t["test"], t["name"], t["passed"]) for t in results["tests"]] == [
        ("cuda", "cuda-gpu-a-gpu", True), ("cuda", "cuda-gpu-b-mig-1g-10gb", True),
        ("volcano-gang", "volcano-gang", True), ("kueue-admission", "kueue-admitted", True)]
    assert results["tests"][1]["resource"] == "nvidia.com/mig-1g.10gb"
    assert "4/4 smoke tests passed" in output


def test_broken_layers_fail_with_the_reason_and_stop_the_play(installed_collection, tmp_path):
    # NVML broken on gpu-b, the gang never fits, Kueue never admits the job.
    rc, output, results = judge(installed_collection, tmp_path, answers(
        [SMI, NVML_ERROR], ["Succeeded", "Failed"], "Pending", False, "Missing"))
    assert rc != 0
    assert results["passed"] is False and results["failed"] == 3
    by_name = {t["name"]: t for t in results["tests"]}
    assert by_name["cuda-gpu-a-gpu"]["passed"] is True
    assert by_name["cuda-gpu-b-mig-1g-10gb"]["detail"] == "pod Failed; nvidia-smi table missing from the log"
    assert by_name["volcano-gang"]["detail"] == "job Pending (minAvailable 2)"
    assert by_name["kueue-admitted"]["detail"] == "not admitted, pod Missing"
    assert "GPU smoke tests failed: cuda-gpu-b-mig-1g-10gb, volcano-gang, kueue-admitted" in " ".join(output.split())


def test_a_pod_that_succeeds_without_the_table_fails(installed_collection, tmp_path):
    # Exit 0 is not enough: the log must hold the nvidia-smi table.
    extra = answers(["No devices were found\n", SMI], ["Succeeded", "Succeeded"], "Completed", True, "Succeeded")
    extra["gpu_smoke_test_fail_on_error"] = False
    rc, output, results = judge(installed_collection, tmp_path, extra)
    assert rc == 0, output[-3000:]
    assert results["passed"] is False and results["failed"] == 1
    assert results["tests"][0]["detail"] == "pod Succeeded; nvidia-smi table missing from the log"


# The two-node RDMA test: the launcher's all_reduce_perf log, recorded.
NCCL_LOGS = ROOT / "tests" / "fixtures" / "nccl-tests"


def with_rdma(extra, log, phase="Succeeded", floor=20):
    extra = dict(extra, gpu_smoke_test_rdma=True, gpu_smoke_test_rdma_min_busbw_gbps=floor)
    extra["gpu_smoke_test__pods"]["resources"] += [pod("nccl-rdma-launcher", phase), pod("nccl-rdma-worker", "Succeeded")]
    extra["gpu_smoke_test__logs"]["results"].append({"item": {"name": "nccl-rdma-launcher"}, "log": log})
    return extra


def healthy():
    return answers([SMI, SMI], ["Succeeded", "Succeeded"], "Completed", True, "Succeeded")


def test_rdma_engaged_between_two_nodes_passes(installed_collection, tmp_path):
    log = (NCCL_LOGS / "rdma-ib-gdrdma.log").read_text()
    rc, output, results = judge(installed_collection, tmp_path, with_rdma(healthy(), log))
    assert rc == 0, output[-3000:]
    rdma = [t for t in results["tests"] if t["test"] == "rdma-nccl"]
    assert rdma == [{"test": "rdma-nccl", "name": "nccl-rdma-launcher", "passed": True, "transport": "IB", "gdrdma": True,
                     "peak_busbw": 23.58, "avg_busbw": 23.2542,
                     "detail": "NET/IB/GDRDMA, peak bus bandwidth 23.58 GB/s (floor 20.00)"}]
    assert results["passed"] is True and results["total"] == 5
    assert "rdma-nccl nccl-rdma-launcher: ok (NET/IB/GDRDMA, peak bus bandwidth 23.58 GB/s (floor 20.00))" in " ".join(output.split())


def test_rdma_fallen_back_to_sockets_fails_the_run(installed_collection, tmp_path):
    log = (NCCL_LOGS / "socket-fallback.log").read_text()
    rc, output, results = judge(installed_collection, tmp_path, with_rdma(healthy(), log, floor=0))
    assert rc != 0
    rdma = [t for t in results["tests"] if t["test"] == "rdma-nccl"][0]
    assert rdma["passed"] is False and rdma["transport"] == "Socket"
    assert rdma["detail"] == "NCCL used NET/Socket, not only the IB/RoCE transport (NET/IB)"
    assert "GPU smoke tests failed: nccl-rdma-launcher" in " ".join(output.split())


def test_a_failed_launcher_fails_even_with_a_good_log(installed_collection, tmp_path):
    log = (NCCL_LOGS / "rdma-ib-gdrdma.log").read_text()
    extra = with_rdma(healthy(), log, phase="Failed")
    extra["gpu_smoke_test_fail_on_error"] = False
    rc, output, results = judge(installed_collection, tmp_path, extra)
    assert rc == 0, output[-3000:]
    rdma = [t for t in results["tests"] if t["test"] == "rdma-nccl"][0]
    assert rdma["passed"] is False and rdma["detail"].startswith("launcher pod Failed; NET/IB/GDRDMA")


def test_rdma_on_one_gpu_node_fails_with_the_reason(installed_collection, tmp_path):
    extra = healthy()
    extra["gpu_smoke_test__cuda_pods"] = [dict(PODS[0]), dict(PODS[0], name="cuda-gpu-a-mig", resource="nvidia.com/mig-1g.10gb")]
    extra.update(gpu_smoke_test_rdma=True, gpu_smoke_test_fail_on_error=False)
    rc, output, results = judge(installed_collection, tmp_path, extra)
    assert rc == 0, output[-3000:]
    rdma = [t for t in results["tests"] if t["test"] == "rdma-nccl"][0]
    assert rdma["passed"] is False
    assert rdma["detail"] == "needs two GPU nodes, found 1; set gpu_smoke_test_rdma=false on a single-node cluster"
