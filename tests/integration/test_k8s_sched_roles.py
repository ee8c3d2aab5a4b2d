"""The scheduling and add-on roles (volcano, kueue, kuberay, kai_scheduler,
dra_driver, network_operator, gpu_smoke_test) rendered in several fleet
configurations without a cluster, and checked against the upstream CRDs,
chart values and the official Kubernetes schemas."""
import kubernetes_validate
import pytest

from k8s_sched import capacity
from k8s_sched.checks import (chart_values, is_custom, render, unknown_value_keys,
                              validate_custom)

pytestmark = pytest.mark.slow

K8S_VERSION = "1.34.1"
EVERYTHING_ON = {
    "gpuops_k8s_render_dir": "/nonexistent/render",   # render mode: no API call
    "gpuops_k8s_version": K8S_VERSION,
    "kuberay_cluster_enabled": True,
    "gpu_smoke_test_rayjob": True,
}
CONFIGS = {
    "host-driver": dict(EVERYTHING_ON, gpuops_k8s_capacity=capacity.WHOLE_GPUS),
    "time-slicing": dict(EVERYTHING_ON, gpuops_k8s_capacity=capacity.TIME_SLICED,
                         kueue_cluster_queues=[
                             {"name": "team-a", "namespaces": ["team-a"], "quotas": {"nvidia-l40s": {"nvidia.com/gpu": 20}}},
                             {"name": "team-b", "namespaces": ["team-b"], "quotas": {"nvidia-l40s": {"nvidia.com/gpu": 12}},
                              "borrowing_limits": {"nvidia-l40s": {"nvidia.com/gpu": 4}}}]),
    "mig-single": dict(EVERYTHING_ON, gpuops_k8s_capacity=capacity.MIG_SINGLE, gpu_smoke_test_mig_strategy="single"),
    "mig-mixed": dict(EVERYTHING_ON, gpuops_k8s_capacity=capacity.MIG_MIXED, gpu_smoke_test_mig_strategy="mixed",
                      kuberay_worker_gpu_resource="nvidia.com/mig-3g.71gb",
                      dra_driver_driver_root="/run/nvidia/driver", dra_driver_device_selector="device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H200')",
                      network_operator_rdma_resources=[{"name": "rdma_ib", "rdma_hca_max": 32, "vendors": ["15b3"], "if_names": ["ibp24s0"]}],
                      kai_scheduler_gpu_sharing=True, kai_scheduler_image_registry="registry.example.com/kai",
                      volcano_replicas=2, volcano_image_registry="registry.example.com",
                      kueue_image_repository="registry.example.com/kueue/kueue", kuberay_batch_scheduler="volcano",
                      volcano_queues=[{"name": "training", "weight": 3, "reclaimable": False,
                                       "capability": {"nvidia.com/mig-3g.71gb": 8, "cpu": "64"},
                                       "guarantee": {"nvidia.com/mig-3g.71gb": 2}}]),
}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def rendered(request, tmp_path_factory):
    rc, output, data = render(tmp_path_factory.mktemp(request.param), CONFIGS[request.param])
    assert rc == 0, output
    return request.param, data


def _objects(data):
    return [obj for role in data.values() for obj in role["objects"]]


def _of(data, kind, api=None):
    return [o for o in _objects(data) if o["kind"] == kind and (api is None or o["apiVersion"].startswith(api))]


def test_builtin_kinds_pass_strict_kubernetes_validation(rendered):
    _, data = rendered
    builtin = [o for o in _objects(data) if not is_custom(o)]
    assert {o["kind"] for o in builtin} >= {"Namespace", "Pod", "Job", "DeviceClass", "ResourceClaimTemplate"}
    for obj in builtin:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_custom_resources_match_the_upstream_crds(rendered, shared_reference):
    _, data = rendered
    custom = [o for o in _objects(data) if is_custom(o)]
    assert {o["kind"] for o in custom} >= {"Queue", "Job", "ResourceFlavor", "ClusterQueue", "LocalQueue",
                                           "WorkloadPriorityClass", "RayCluster", "RayJob", "NicClusterPolicy"}
    errors = [e for obj in custom for e in validate_custom(shared_reference, obj)]
    assert errors == []


def test_every_helm_value_exists_in_the_upstream_chart(rendered, shared_reference):
    _, data = rendered
    for role, entry in data.items():
        if entry["release"] is None:
            continue
        assert entry["release"]["version"], role
        assert unknown_value_keys(entry["release"]["values"], chart_values(shared_reference, role)) == [], role


def test_kueue_uses_the_served_storage_version_and_valid_cluster_queues(rendered):
    name, data = rendered
    for obj in _objects(data):
        if obj["apiVersion"].startswith("kueue.x-k8s.io/"):
            assert obj["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    flavors = {f["metadata"]["name"] for f in _of(data, "ResourceFlavor")}
    for cq in _of(data, "ClusterQueue"):
        spec = cq["spec"]
        for group in spec["resourceGroups"]:
            for flavor in group["flavors"]:
                assert flavor["name"] in flavors
                # Kueue's own rules: same resources, same order, as coveredResources;
                # no borrowingLimit without a cohort.
                assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
                assert "cohortName" in spec or all("borrowingLimit" not in r for r in flavor["resources"])
        assert {"cpu", "memory"} <= set(spec["resourceGroups"][0]["coveredResources"]), name


def test_default_quotas_come_from_the_fleet(tmp_path):
    # The single default queue gets exactly the fleet: 16 H100 and 8 L40S.
    rc, output, data = render(tmp_path, dict(EVERYTHING_ON, gpuops_k8s_capacity=capacity.WHOLE_GPUS), roles=["kueue"])
    assert rc == 0, output
    (cq,) = _of(data, "ClusterQueue")
    quotas = {(f["name"], r["name"]): r["nominalQuota"] for f in cq["spec"]["resourceGroups"][0]["flavors"] for r in f["resources"]}
    assert quotas[("nvidia-h100-80gb-hbm3", "nvidia.com/gpu")] == "16"
    assert quotas[("nvidia-l40s", "nvidia.com/gpu")] == "8"
    assert quotas[("nvidia-l40s", "cpu")] == "128"
    assert quotas[("nvidia-l40s", "memory")] == "1024Gi"
    labels = {f["metadata"]["name"]: f["spec"]["nodeLabels"] for f in _of(data, "ResourceFlavor")}
    assert labels == {"nvidia-h100-80gb-hbm3": {"nvidia.com/gpu.product": capacity.HGX_H100},
                      "nvidia-l40s": {"nvidia.com/gpu.product": capacity.L40S}}


def test_smoke_test_has_a_pod_per_node_and_per_mig_profile_under_mixed(rendered):
    name, data = rendered
    pods = _of(data, "Pod")
    fleet = CONFIGS[name]["gpuops_k8s_capacity"]["nodes"]
    expected = set()
    for node, entry in fleet.items():
        mig = [r for r in entry["resources"] if r.startswith("nvidia.com/mig-")]
        for res in (mig if name == "mig-mixed" and mig else ["nvidia.com/gpu"]):
            expected.add((node, res))
    got = {(p["spec"]["nodeSelector"]["kubernetes.io/hostname"], next(iter(p["spec"]["containers"][0]["resources"]["limits"])))
           for p in pods}
    assert got == expected
    assert all(p["spec"]["containers"][0]["command"] == ["nvidia-smi"] for p in pods)
    (gang,) = _of(data, "Job", "batch.volcano.sh")
    assert gang["spec"]["minAvailable"] == gang["spec"]["tasks"][0]["replicas"] == 2
    (job,) = _of(data, "Job", "batch/")
    (local_queue,) = _of(data, "LocalQueue")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == local_queue["metadata"]["name"]
    assert job["spec"]["suspend"] is True


def test_dra_keeps_the_device_plugin_off_its_nodes(rendered):
    _, data = rendered
    values = data["dra_driver"]["release"]["values"]
    assert values["kubeletPlugin"]["nodeSelector"] == {"nvidia.com/gpu.deploy.device-plugin": "false"}
    assert values["resourceApiVersion"] == "resource.k8s.io/v1"
    (device_class,) = _of(data, "DeviceClass")
    (template,) = _of(data, "ResourceClaimTemplate")
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == device_class["metadata"]["name"]


@pytest.mark.parametrize("roles, extra, message", [
    (["dra_driver"], {"gpuops_k8s_version": "1.33.4"},
     "dra_driver needs Kubernetes 1.34 or newer"),
    (["volcano"], {"volcano_queues": [{"name": "a", "weight": -1}]},
     "queue a: weight must be an integer from 1 to 65535, got -1"),
    (["volcano"], {"volcano_queues": [{"name": "a", "capability": {"nvidia.com/gpu": 2}, "guarantee": {"nvidia.com/gpu": 4}}]},
     "queue a: guarantee nvidia.com/gpu=4 is more than its capability 2"),
    (["kueue"], {"kueue_cluster_queues": [{"name": "a", "quotas": {"nvidia-l40s": {"nvidia.com/gpu": 6}}},
                                          {"name": "b", "quotas": {"nvidia-l40s": {"nvidia.com/gpu": 4}}}]},
     "ClusterQueues a, b ask for 10 nvidia.com/gpu on flavor nvidia-l40s, but the fleet has 8"),
    (["kueue"], {"kueue_cluster_queues": [{"name": "a", "quotas": {"nvidia-l40s": {"nvidia.com/gpu": -2}}}]},
     "must be a whole number of devices, not negative, got -2"),
    (["kueue"], {"kueue_cluster_queues": [{"name": "a", "quotas": {"a100": {"nvidia.com/gpu": 1}}}]},
     "sets quota on flavor a100, which is not one of the ResourceFlavors"),
    (["kuberay"], {"kuberay_cluster_enabled": True, "kuberay_worker_min_replicas": -1},
     "the GPU worker group needs 0 <= kuberay_worker_min_replicas (-1)"),
    (["kuberay"], {"kuberay_cluster_enabled": True, "kuberay_worker_max_replicas": 0, "kuberay_worker_min_replicas": 1},
     "kuberay_worker_max_replicas (0)"),
    (["kai_scheduler"], {"kai_scheduler_queues": [{"name": "a", "parent": "missing"}]},
     "queue a: parent missing is not one of kai_scheduler_queues"),
    (["network_operator"], {"network_operator_rdma_resources": []},
     "network_operator_rdma_resources needs at least one resource"),
])
def test_bad_variables_fail_early_with_a_clear_message(tmp_path, roles, extra, message):
    rc, output, data = render(tmp_path, dict(EVERYTHING_ON, gpuops_k8s_capacity=capacity.WHOLE_GPUS, **extra), roles=roles)
    assert rc != 0 and data is None
    assert message in " ".join(output.split())
