"""The apply path of cluster.yml against an in-memory API server (fake_apiserver).

What the render tests cannot see: the same objects really go out by
server-side apply with our field manager, one task per phase, the taints are
merged, the allocatable check reads the nodes, a second run changes nothing,
and check mode writes nothing. The GPU Operator release needs the helm binary
and a chart, so it is left out here.
"""
import pytest

from fake_apiserver import FakeAPIServer
from k8s_support import load_facts, render_cluster

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


def run(tmp_path, api, name, args=(), expect_failure=False, collections=None):
    return render_cluster(tmp_path / name, extra_vars={
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
    }, nodes=NODES, env={"K8S_AUTH_HOST": None, "K8S_AUTH_KUBECONFIG": None}, args=args,
        expect_failure=expect_failure, collections_path=collections)


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
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "gpu-a"
        # Taints merged, not replaced.
        assert {"key": "gpu", "value": "true", "effect": "NoSchedule"} in node["spec"]["taints"]
        assert {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"} in node["spec"]["taints"]
        applies = [r for r in api.writes() if "apply-patch" in r[3]]
        assert len(applies) == len([o for o in api.objects.values() if o["kind"] != "Node"]) + 2
        assert "Kubernetes GPU stack applied" in " ".join(first.output.split())

        rv = {k: o["metadata"]["resourceVersion"] for k, o in api.objects.items()}
        second = run(tmp_path, api, "second", collections=installed_collection)
        assert "changed=0" in recap(second), recap(second)
        assert {k: o["metadata"]["resourceVersion"] for k, o in api.objects.items()} == rv

    with FakeAPIServer() as fresh:
        seed(fresh, str(gpus * 4))
        before = {k: dict(o) for k, o in fresh.objects.items()}
        checked = run(tmp_path, fresh, "check", args=["--check"], collections=installed_collection)
        assert fresh.objects == before
        assert all((r[2].get("dryRun") or ["All"])[0] == "All" for r in fresh.writes()), fresh.writes()
        # Objects in namespaces the run would create cannot be dry-run; they are reported.
        assert "depend on a namespace or CRD that this run would create first" in " ".join(checked.output.split())


def test_allocatable_that_differs_from_the_facts_fails_naming_the_node(tmp_path, installed_collection):
    gpus = len(load_facts("hgx-h100")["gpus"])
    with FakeAPIServer() as api:
        seed(api, str(gpus))  # the device plugin did not pick up time-slicing
        result = run(tmp_path, api, "mismatch", expect_failure=True, collections=installed_collection)
        flat = " ".join(result.output.split())
        assert "node gpu-a: allocatable nvidia.com/gpu is %d, expected %d" % (gpus, gpus * 4) in flat, result.output[-3000:]
