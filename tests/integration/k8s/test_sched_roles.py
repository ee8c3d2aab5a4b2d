"""The scheduling and add-on roles (volcano, kueue, kuberay, kai_scheduler,
dra_driver, network_operator, gpu_smoke_test), planned without a cluster for
several fleets and checked against the official Kubernetes schemas, the
upstream CRDs and chart values in the shared reference."""
import json
import re
from collections import namedtuple
from pathlib import Path

import pytest
import yaml

from k8s_support import DEFAULT_K8S_VERSION, check_helm_values, load_facts, validate_builtin, validate_objects
from sched_support import fleet, plan_roles

ROLES_DIR = Path(__file__).resolve().parents[3] / "roles"

pytestmark = pytest.mark.slow

# The reference chart of each role's release.
CHARTS = {"volcano": "volcano", "kueue": "kueue", "kuberay": "kuberay", "kai_scheduler": "kai-scheduler",
          "dra_driver": "dra-driver-gpu", "network_operator": "network-operator"}
HOSTS = {"hgx-h100-01": "hgx-h100", "hgx-h100-02": "hgx-h100", "l40s-01": "l40s", "l40s-02": "l40s"}
# Everything on, in render mode (no API call), at the targeted Kubernetes version.
ALL_ON = {
    "gpuops_k8s_render_dir": "/nonexistent/render",
    "gpuops_k8s_version": DEFAULT_K8S_VERSION,
    "kuberay_cluster_enabled": True,
    "gpu_smoke_test_rayjob": True,
    "gpuops_k8s_nodes": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}], "nodes": []},
}
CONFIGS = {
    # Host driver, whole GPUs (the collection's default).
    "host-driver": lambda: dict(ALL_ON, gpuops_k8s_capacity=fleet(HOSTS)),
    # Time-slicing with 4 replicas on two HGX H100 (64 schedulable GPUs), two
    # teams splitting them in a cohort.
    "time-slicing": lambda: dict(
        ALL_ON,
        gpuops_k8s_capacity=fleet({"hgx-h100-01": "hgx-h100", "hgx-h100-02": "hgx-h100"},
                                  sharing=[{"name": "ts4", "mode": "time-slicing", "replicas": 4}], default_config="ts4"),
        kueue_cluster_queues=[
            {"name": "team-a", "namespaces": ["team-a"], "quotas": {"nvidia-h100-80gb-hbm3": {"nvidia.com/gpu": 40}}},
            {"name": "team-b", "namespaces": ["team-b"], "quotas": {"nvidia-h100-80gb-hbm3": {"nvidia.com/gpu": 24, "cpu": 32}},
             "borrowing_limits": {"nvidia-h100-80gb-hbm3": {"nvidia.com/gpu": 4}}}],
        gpu_tenants_list=[{"name": "team-a", "kueue_cluster_queue": "team-a"}]),
    "mig-single": lambda: dict(ALL_ON, gpuops_k8s_capacity=fleet({"h200-mig-01": "h200-mig"}, "single")),
    # Mixed MIG beside whole GPUs, the operator's driver container, every
    # optional knob off its default.
    "mig-mixed": lambda: dict(
        ALL_ON,
        gpuops_k8s_capacity=fleet({"h100-mig-01": "h100-mig-mixed", "hgx-h100-01": "hgx-h100"}, "mixed"),
        kuberay_worker_gpu_resource="nvidia.com/mig-3g.40gb", kuberay_batch_scheduler="volcano",
        kuberay_image_repository="registry.example.com/kuberay/operator",
        dra_driver_driver_root="/run/nvidia/driver", dra_driver_compute_domains=True,
        dra_driver_device_selector="device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')",
        network_operator_rdma_resources=[{"name": "rdma_ib", "rdma_hca_max": 32, "vendors": ["15b3"], "if_names": ["ibp24s0"]}],
        kai_scheduler_gpu_sharing=True, kai_scheduler_image_registry="registry.example.com/kai",
        volcano_replicas=2, volcano_image_registry="registry.example.com",
        kueue_image_repository="registry.example.com/kueue/kueue",
        volcano_queues=[{"name": "training", "weight": 3, "reclaimable": False,
                         "capability": {"nvidia.com/mig-3g.40gb": 1, "cpu": "64"},
                         "guarantee": {"nvidia.com/mig-3g.40gb": 1}},
                        {"name": "gpu-batch"}]),
}


Planned = namedtuple("Planned", "name extra data")


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def planned(request, installed_collection, tmp_path_factory):
    extra = CONFIGS[request.param]()
    rc, output, data = plan_roles(tmp_path_factory.mktemp(request.param), extra, installed_collection)
    assert rc == 0, output[-6000:]
    return Planned(request.param, extra, data)


def _objects(data):
    return [obj for role in data.values() for obj in role["objects"]]


def _of(data, kind, api=None):
    return [o for o in _objects(data) if o["kind"] == kind and (api is None or o["apiVersion"].startswith(api))]


def test_every_object_is_valid_kubernetes_or_matches_its_upstream_crd(planned, shared_reference):
    data = planned.data
    objects = _objects(data)
    counts = validate_objects(objects, shared_reference, DEFAULT_K8S_VERSION)
    assert counts["builtin"] + counts["custom"] == len(objects)
    kinds = {o["kind"] for o in objects}
    assert kinds >= {"Namespace", "Pod", "Job", "DeviceClass", "ResourceClaimTemplate", "Queue", "ResourceFlavor",
                     "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "RayCluster", "RayJob", "NicClusterPolicy"}
    assert len(_of(data, "Queue", "scheduling.run.ai/")) >= 1 and len(_of(data, "Job", "batch.volcano.sh/")) == 1


def test_every_helm_value_exists_in_the_upstream_chart(planned, shared_reference):
    data = planned.data
    for role, chart in CHARTS.items():
        values = data[role]["release"]["values"]
        assert check_helm_values(values, shared_reference / chart / "chart" / "values.yaml") == [], role


def _reference_versions(reference, chart):
    """The chart's version and the release tags the reference was taken from."""
    folder = Path(reference) / chart
    versions = {str(yaml.safe_load((folder / "chart" / "Chart.yaml").read_text())["version"]).lstrip("v")}
    for line in (folder / "SOURCE.txt").read_text().splitlines():
        match = re.match(r"\s*(?:ref|git describe):\s*v?(\d+\.\d+\.\d+)", line)
        if match:
            versions.add(match.group(1))
    return versions


def test_chart_versions_are_pinned_to_the_reference_releases(planned, shared_reference):
    data = planned.data
    for role, chart in CHARTS.items():
        release = data[role]["release"]
        assert release["version"].lstrip("v") in _reference_versions(shared_reference, chart), role
        assert release["repo_url"] and not release["chart_path"], role


def test_kueue_writes_the_version_it_stores_and_consistent_cluster_queues(planned):
    name, data = planned.name, planned.data
    kueue = [o for o in _objects(data) if o["apiVersion"].startswith("kueue.x-k8s.io/")]
    assert {o["apiVersion"] for o in kueue} == {"kueue.x-k8s.io/v1beta2"}
    flavors = {f["metadata"]["name"] for f in _of(data, "ResourceFlavor")}
    for cq in _of(data, "ClusterQueue"):
        spec = cq["spec"]
        (group,) = spec["resourceGroups"]
        assert {"cpu", "memory"} <= set(group["coveredResources"]), name
        for flavor in group["flavors"]:
            assert flavor["name"] in flavors
            # Kueue's rules that the CRD leaves to CEL and webhooks: the same
            # resources in the same order as coveredResources, and no
            # borrowingLimit outside a cohort.
            assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
            assert "cohortName" in spec or all("borrowingLimit" not in r for r in flavor["resources"])


def test_flavors_select_the_product_label_and_tolerate_the_gpu_taint(planned):
    extra, data = planned.extra, planned.data
    products = set(extra["gpuops_k8s_capacity"]["by_product"])
    flavors = _of(data, "ResourceFlavor")
    assert {f["spec"]["nodeLabels"]["platform.gpuops.io/gpu.product"] for f in flavors} == products
    for flavor in flavors:
        assert {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in flavor["spec"]["tolerations"]


def test_default_quota_is_exactly_the_fleet(installed_collection, tmp_path):
    # Counted from the recorded facts, independently of the capacity filter.
    h100 = 2 * len(load_facts("hgx-h100")["gpus"])
    l40s = 2 * len(load_facts("l40s")["gpus"])
    extra = dict(ALL_ON, gpuops_k8s_capacity=fleet(HOSTS))
    rc, output, data = plan_roles(tmp_path, extra, installed_collection, roles=["kueue"])
    assert rc == 0, output[-3000:]
    (cq,) = _of(data, "ClusterQueue")
    quotas = {(f["name"], r["name"]): r["nominalQuota"]
              for f in cq["spec"]["resourceGroups"][0]["flavors"] for r in f["resources"]}
    assert quotas == {
        ("nvidia-h100-80gb-hbm3", "cpu"): str(16 * h100), ("nvidia-h100-80gb-hbm3", "memory"): "%dGi" % (128 * h100),
        ("nvidia-h100-80gb-hbm3", "nvidia.com/gpu"): str(h100),
        ("nvidia-l40s", "cpu"): str(16 * l40s), ("nvidia-l40s", "memory"): "%dGi" % (128 * l40s),
        ("nvidia-l40s", "nvidia.com/gpu"): str(l40s)}
    assert cq["spec"]["namespaceSelector"] == {} and cq["spec"]["cohortName"] == "gpu-fleet"


def test_nodes_without_the_device_plugin_are_left_out_of_quotas_and_cuda_tests(installed_collection, tmp_path):
    # hgx-h100-02 is a DRA node: the GPU Operator runs no device plugin there.
    nodes = {"nodes": [{"name": "hgx-h100-02", "labels": {"nvidia.com/gpu.deploy.device-plugin": "false"}}],
             "taints": ALL_ON["gpuops_k8s_nodes"]["taints"]}
    extra = dict(ALL_ON, gpuops_k8s_capacity=fleet(HOSTS), gpuops_k8s_nodes=nodes)
    rc, output, data = plan_roles(tmp_path, extra, installed_collection, roles=["kueue", "gpu_smoke_test"])
    assert rc == 0, output[-3000:]
    (cq,) = _of(data, "ClusterQueue")
    quotas = {(f["name"], r["name"]): r["nominalQuota"]
              for f in cq["spec"]["resourceGroups"][0]["flavors"] for r in f["resources"]}
    assert quotas[("nvidia-h100-80gb-hbm3", "nvidia.com/gpu")] == str(len(load_facts("hgx-h100")["gpus"]))
    nodes_tested = {p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in _of(data, "Pod")}
    assert nodes_tested == set(HOSTS) - {"hgx-h100-02"}


def test_queues_tenants_name_are_made_and_borrow_from_the_cohort(installed_collection, tmp_path):
    tenants = [{"name": "team-a", "kueue_cluster_queue": "shared", "volcano_queue": "team-a"},
               {"name": "team-b", "namespace": "b-ns", "kueue_cluster_queue": "shared"},
               {"name": "team-c", "kueue_cluster_queue": "gpu-fleet", "volcano_queue": "gpu-batch"}]
    extra = dict(ALL_ON, gpuops_k8s_capacity=fleet(HOSTS), gpu_tenants_list=tenants)
    rc, output, data = plan_roles(tmp_path, extra, installed_collection, roles=["volcano", "kueue"])
    assert rc == 0, output[-3000:]
    assert sorted(q["metadata"]["name"] for q in _of(data, "Queue")) == ["gpu-batch", "team-a"]
    queues = {cq["metadata"]["name"]: cq["spec"] for cq in _of(data, "ClusterQueue")}
    assert sorted(queues) == ["gpu-fleet", "shared"]
    shared = queues["shared"]
    assert shared["cohortName"] == queues["gpu-fleet"]["cohortName"] == "gpu-fleet"
    assert shared["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "b-ns"]}]
    (group,) = shared["resourceGroups"]
    # The same flavors and resources as the fleet queue, all with zero quota:
    # it can only borrow what gpu-fleet leaves idle.
    assert group == {**group, "coveredResources": queues["gpu-fleet"]["resourceGroups"][0]["coveredResources"]}
    assert {f["name"] for f in group["flavors"]} == {"nvidia-h100-80gb-hbm3", "nvidia-l40s"}
    assert {r["nominalQuota"] for f in group["flavors"] for r in f["resources"]} <= {"0", "0Gi"}


def test_smoke_test_has_a_cuda_pod_per_node_and_per_mig_profile_under_mixed(planned):
    name, extra, data = planned
    capacity = extra["gpuops_k8s_capacity"]
    expected = set()
    for node, entry in capacity["nodes"].items():
        mig = [r for r in entry["resources"] if r.startswith("nvidia.com/mig-")]
        for res in (mig if capacity["mig_strategy"] == "mixed" and mig else ["nvidia.com/gpu"]):
            expected.add((node, res))
    pods = _of(data, "Pod")
    got = {(p["spec"]["nodeSelector"]["kubernetes.io/hostname"], next(iter(p["spec"]["containers"][0]["resources"]["limits"])))
           for p in pods}
    assert got == expected, name
    assert all(p["spec"]["containers"][0]["command"] == ["nvidia-smi"] for p in pods)
    (gang,) = _of(data, "Job", "batch.volcano.sh/")
    assert gang["spec"]["minAvailable"] == gang["spec"]["tasks"][0]["replicas"] == 2
    assert gang["spec"]["queue"] == "gpu-batch"
    (job,) = _of(data, "Job", "batch/")
    (local_queue,) = _of(data, "LocalQueue")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == local_queue["metadata"]["name"]
    assert job["spec"]["suspend"] is True


def test_ray_worker_group_asks_for_gpus_within_min_and_max(planned):
    extra, data = planned.extra, planned.data
    (cluster,) = _of(data, "RayCluster")
    (group,) = cluster["spec"]["workerGroupSpecs"]
    assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits[extra.get("kuberay_worker_gpu_resource", "nvidia.com/gpu")] == 1


def test_dra_runs_only_where_the_device_plugin_does_not(planned):
    data = planned.data
    values = data["dra_driver"]["release"]["values"]
    assert values["kubeletPlugin"]["nodeSelector"] == {"nvidia.com/gpu.deploy.device-plugin": "false"}
    assert values["resourceApiVersion"] == "resource.k8s.io/v1"
    (device_class,) = _of(data, "DeviceClass")
    (template,) = _of(data, "ResourceClaimTemplate")
    request = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert request["deviceClassName"] == device_class["metadata"]["name"]


def test_network_operator_policy_carries_the_rdma_shared_device_plugin_config(planned):
    extra, data = planned.extra, planned.data
    (policy,) = _of(data, "NicClusterPolicy")
    assert policy["metadata"]["name"] == "nic-cluster-policy"
    config = json.loads(policy["spec"]["rdmaSharedDevicePlugin"]["config"])
    wanted = extra.get("network_operator_rdma_resources") or [{"name": "rdma_shared_device_a"}]
    assert [c["resourceName"] for c in config["configList"]] == [r["name"] for r in wanted]
    assert all(c["rdmaHcaMax"] >= 1 and c["selectors"] for c in config["configList"])


def test_dra_objects_are_not_valid_before_kubernetes_134():
    # Why the role refuses 1.33: resource.k8s.io/v1 does not exist there.
    device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "x"},
                    "spec": {"selectors": [{"cel": {"expression": "true"}}]}}
    assert validate_builtin(device_class, "1.34") is True
    assert validate_builtin(device_class, "1.33") is False


BAD = [
    (["dra_driver"], {"gpuops_k8s_version": "1.33"},
     "dra_driver needs Kubernetes 1.34 or newer (resource.k8s.io/v1) and dra_driver_example_gpus >= 1; this cluster is 1.33"),
    (["volcano"], {"volcano_queues": [{"name": "a", "weight": -1}]},
     "queue a: weight must be an integer from 1 to 65535, got -1"),
    (["volcano"], {"volcano_queues": [{"name": "a", "capability": {"nvidia.com/gpu": 2}, "guarantee": {"nvidia.com/gpu": 4}}]},
     "queue a: guarantee nvidia.com/gpu=4 is more than its capability 2"),
    (["volcano"], {"volcano_queues": [{"name": "a"}], "volcano_tenant_queues": False,
                   "gpu_tenants_list": [{"name": "team-a", "volcano_queue": "team-a"}]},
     "tenant team-a uses volcano_queue team-a, which is not one of the queues (a); define it in volcano_queues"),
    (["kueue"], {"kueue_cluster_queues": [{"name": "a", "quotas": {"nvidia-h100-80gb-hbm3": {"nvidia.com/gpu": 10}}},
                                          {"name": "b", "quotas": {"nvidia-h100-80gb-hbm3": {"nvidia.com/gpu": 7}}}]},
     "ClusterQueues a, b ask for 17 nvidia.com/gpu on flavor nvidia-h100-80gb-hbm3, but the fleet has 16"),
    (["kueue"], {"kueue_cluster_queues": [{"name": "a", "quotas": {"nvidia-l40s": {"nvidia.com/gpu": -2}}}]},
     "ClusterQueue a: nvidia.com/gpu quota of flavor nvidia-l40s must be a whole number of devices, not negative, got -2"),
    (["kueue"], {"kueue_cluster_queues": [{"name": "a", "quotas": {"a100": {"nvidia.com/gpu": 1}}}]},
     "ClusterQueue a sets quota on flavor a100, which is not one of the ResourceFlavors"),
    (["kueue"], {"kueue_tenant_cluster_queues": False, "gpu_tenants_list": [{"name": "team-a", "kueue_cluster_queue": "team-a"}]},
     "tenant team-a uses kueue_cluster_queue team-a, which is not one of the ClusterQueues (gpu-fleet); define it in kueue_cluster_queues"),
    # A variable that would silently do nothing beside another is refused.
    (["kueue"], {"kueue_default_cluster_queue": "all", "kueue_cluster_queues": [{"name": "a"}]},
     "kueue: kueue_default_cluster_queue (all) names the one ClusterQueue made when kueue_cluster_queues is empty"),
    (["kueue"], {"kueue_cohort": "", "gpu_tenants_list": [{"name": "team-a", "kueue_cluster_queue": "team-a"}]},
     "the tenant ClusterQueues team-a have no quota of their own and borrow from the cohort; set kueue_cohort"),
    (["kuberay"], {"kuberay_worker_min_replicas": -1},
     "the GPU worker group needs 0 <= kuberay_worker_min_replicas (-1)"),
    (["kuberay"], {"kuberay_worker_max_replicas": 0, "kuberay_worker_min_replicas": 1},
     "<= kuberay_worker_max_replicas (0)"),
    (["kai_scheduler"], {"kai_scheduler_queues": [{"name": "a", "parent": "missing"}]},
     "queue a: parent missing is not one of kai_scheduler_queues"),
    (["network_operator"], {"network_operator_rdma_resources": [{"name": "rdma-a", "rdma_hca_max": 0}]},
     "network_operator_rdma_resources needs at least one resource, unique names of letters, digits and underscores, and rdma_hca_max >= 1"),
    (["gpu_smoke_test"], {"gpu_smoke_test_gang_size": 0},
     "gpu_smoke_test: gang size (0), timeout (600) and cleanup timeout (300) must be at least 1"),
]


@pytest.mark.parametrize("roles, extra, message", BAD, ids=[case[2][:40] for case in BAD])
def test_bad_variables_fail_early_with_a_clear_message(installed_collection, tmp_path, roles, extra, message):
    evars = dict(ALL_ON, gpuops_k8s_capacity=fleet(HOSTS), **extra)
    rc, output, data = plan_roles(tmp_path, evars, installed_collection, roles=roles)
    assert rc != 0 and data is None
    assert message in " ".join(output.split()), output[-3000:]


def test_every_object_carries_one_managed_by_value(planned):
    """The recommended label app.kubernetes.io/managed-by
    (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/): gpuops.platform on every
    object of every scheduling role."""
    missing = sorted("%s %s" % (o["kind"], o["metadata"]["name"]) for o in _objects(planned.data)
                     if (o["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") != "gpuops.platform")
    assert _objects(planned.data) and missing == []


@pytest.mark.parametrize("role,path", [("kuberay", ["image"]), ("kueue", ["controllerManager", "manager", "image"])])
def test_an_image_tag_is_honoured_without_a_repository(installed_collection, tmp_path, role, path):
    """A variable never silently does nothing: the tag alone goes into the chart's values (the repository stays the
    chart's), the repository alone keeps the chart's tag. Helm values of the pinned charts (shared reference), not an
    API object: the Container's image field (API reference, Container v1 core) is built from them by the chart."""
    def image(extra):
        workdir = tmp_path / str(len(list(tmp_path.iterdir())))
        workdir.mkdir()
        rc, output, data = plan_roles(workdir,
                                      dict(ALL_ON, gpuops_k8s_capacity=fleet(HOSTS), **extra), installed_collection,
                                      roles=[role])
        assert rc == 0, output[-3000:]
        values = data[role]["release"]["values"]
        for key in path:
            values = values.get(key) or {}
        return values

    pinned = yaml.safe_load((ROLES_DIR / role / "defaults" / "main.yml").read_text())[role + "_image_tag"]
    assert image({role + "_image_tag": "v9.9.9"}) == {"tag": "v9.9.9"}
    assert image({}) == {"tag": pinned}
    assert image({role + "_image_repository": "registry.example.com/x"}) == {
        "repository": "registry.example.com/x", "tag": pinned}
    assert image({role + "_image_tag": ""}) == {}
