"""playbooks/cluster.yml with every scheduling and add-on layer on, rendered
without a cluster: the layers fit together (flavors select the nodes gpu_nodes
labels and tolerate its taints, tenants' queues exist, objects are valid), and
a bad add-on variable stops the run before any layer is written."""
import pytest

from k8s_support import DEFAULT_K8S_VERSION, check_helm_values, load_facts, validate_objects

pytestmark = pytest.mark.slow

MINE = {"volcano": "volcano", "kueue": "kueue", "kuberay-operator": "kuberay", "kai-scheduler": "kai-scheduler",
        "dra-driver-nvidia-gpu": "dra-driver-gpu", "network-operator": "network-operator"}
EVERYTHING = {
    "kai_scheduler_enabled": True, "dra_driver_enabled": True, "network_operator_enabled": True,
    "kuberay_cluster_enabled": True, "gpu_smoke_test_rayjob": True,
    "gpu_nodes_taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
    "gpu_tenants_list": [{"name": "team-a", "gpu_share": 0.5, "kueue_cluster_queue": "team-a", "volcano_queue": "team-a"},
                         {"name": "team-b", "kueue_cluster_queue": "gpu-fleet"}],
    "kueue_cluster_queues": [
        {"name": "gpu-fleet", "quotas": {"nvidia-h100-80gb-hbm3": {"nvidia.com/gpu": 4}, "nvidia-l40s": {"nvidia.com/gpu": 1}}},
        {"name": "team-a", "namespaces": ["team-a"], "quotas": {"nvidia-h100-80gb-hbm3": {"nvidia.com/gpu": 4}}}],
}
# gpu-c runs the DRA kubelet plugin, which needs driver 580 or newer.
DRIVER_580 = {"driver_version": "580.82.07", "kernel_module_version": "580.82.07"}
NODES = {"gpu-a": {"facts": "hgx-h100"}, "gpu-b": {"facts": "l40s"},
         "gpu-c": {"facts": dict(load_facts("hgx-h100"), **DRIVER_580),
                   "vars": {"gpu_nodes_host_labels": {"nvidia.com/gpu.deploy.device-plugin": "false"}}}}


@pytest.fixture(scope="module")
def stack(render):
    return render("sched-stack", extra_vars=EVERYTHING, nodes=NODES)


def test_every_object_of_the_stack_is_valid(stack, shared_reference):
    counts = validate_objects(stack.objects, shared_reference, DEFAULT_K8S_VERSION)
    assert counts["custom"] > 0 and counts["builtin"] + counts["custom"] == len(stack.objects)
    for release, chart in MINE.items():
        values = stack.releases[release]["values"]
        assert check_helm_values(values, shared_reference / chart / "chart" / "values.yaml") == [], release


def test_layers_come_in_the_documented_order(stack):
    assert list(stack.layers) == ["gpu_operator", "gpu_sharing", "gpu_nodes", "volcano", "kueue", "kuberay",
                                  "kai_scheduler", "dra_driver", "network_operator", "gpu_tenants", "gpu_smoke_test"]
    mine = ("volcano", "kueue", "kuberay", "kai_scheduler", "dra_driver", "network_operator", "gpu_smoke_test")
    assert [stack.layers[n]["order"] for n in mine] == [40, 50, 60, 65, 70, 75, 90]


def test_flavors_select_labelled_nodes_and_tolerate_their_taints(stack):
    nodes = stack.find("Node")
    assert nodes
    for flavor in stack.find("ResourceFlavor"):
        selected = [n for n in nodes
                    if all(n["metadata"]["labels"].get(k) == v for k, v in flavor["spec"]["nodeLabels"].items())]
        assert selected, "flavor %s selects no node" % flavor["metadata"]["name"]
        # gpu_nodes taints every GPU node with gpu_nodes_taints (k8s_taint in
        # apply mode; they are not part of the rendered Node patches).
        for taint in EVERYTHING["gpu_nodes_taints"]:
            assert any(t["key"] == taint["key"] and t.get("effect", taint["effect"]) == taint["effect"]
                       for t in flavor["spec"]["tolerations"]), (flavor["metadata"]["name"], taint)
    for pod in stack.find("Pod"):
        assert {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in pod["spec"]["tolerations"]


def test_tenant_queues_exist(stack):
    cluster_queues = {cq["metadata"]["name"] for cq in stack.find("ClusterQueue")}
    for lq in stack.find("LocalQueue"):
        assert lq["spec"]["clusterQueue"] in cluster_queues, lq["metadata"]
    volcano = {q["metadata"]["name"] for q in stack.find("Queue") if q["apiVersion"].startswith("scheduling.volcano.sh/")}
    for ns in stack.find("Namespace"):
        wanted = (ns["metadata"].get("annotations") or {}).get("platform.gpuops.io/volcano-queue")
        assert wanted is None or wanted in volcano


def test_dra_node_is_kept_off_the_device_plugin(stack):
    node = stack.one("Node", "gpu-c")
    assert node["metadata"]["labels"]["nvidia.com/gpu.deploy.device-plugin"] == "false"
    selector = stack.releases["dra-driver-nvidia-gpu"]["values"]["kubeletPlugin"]["nodeSelector"]
    assert all(node["metadata"]["labels"].get(k) == v for k, v in selector.items())
    for other in ("gpu-a", "gpu-b"):
        labels = stack.one("Node", other)["metadata"]["labels"]
        assert not all(labels.get(k) == v for k, v in selector.items())
    # No device-plugin smoke test on the DRA node: it advertises no nvidia.com/gpu.
    assert sorted(p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in stack.find("Pod")) == ["gpu-a", "gpu-b"]


def test_run_counts(stack):
    # What the note reports: tasks executed and objects rendered.
    mine = ("volcano", "kueue", "kuberay", "kai_scheduler", "dra_driver", "network_operator", "gpu_smoke_test")
    objects = sum(len(stack.layers[n]["objects"]) for n in mine)
    print("\ncluster.yml render: %d tasks, %d objects (%d from the scheduling and add-on layers), %d releases"
          % (stack.tasks, len(stack.objects), objects, len(stack.releases)))
    # volcano: gpu-batch and team-a's queue; kueue: 2 flavors, 2 ClusterQueues,
    # 3 priority classes; kuberay: namespace and RayCluster; kai: 2 queues;
    # dra: DeviceClass and claim template; network: the policy; smoke test:
    # namespace, a CUDA pod per device-plugin GPU node (2), gang job,
    # LocalQueue, Job, RayJob.
    assert {n: len(stack.layers[n]["objects"]) for n in mine} == {
        "volcano": 2, "kueue": 7, "kuberay": 2, "kai_scheduler": 2, "dra_driver": 2, "network_operator": 1,
        "gpu_smoke_test": 7}
    assert objects == 23 and len(stack.releases) == 7
    # Every layer rendered in one pass: at most 80 tasks for the whole stack (186 before).
    assert 0 < stack.tasks <= 80, stack.tasks


def test_dra_node_with_a_driver_older_than_580_stops_before_any_layer(render):
    """gpu-c (DRA) has 570.172.08 in its facts; gpu-a (device plugin) may keep 570."""
    nodes = dict(NODES, **{"gpu-c": dict(NODES["gpu-c"], facts="hgx-h100"), "gpu-d": dict(NODES["gpu-c"])})
    failed = render("sched-dra-570", extra_vars={"dra_driver_enabled": True}, nodes=nodes, expect_failure=True)
    flat = " ".join(failed.output.split())
    assert "needs NVIDIA driver 580 or newer on every node that runs its kubelet plugin" in flat, flat[-2000:]
    assert "gpu-c (host gpu-c) has driver 570.172.08 in its facts" in flat
    assert "gpu-d" not in flat.split("needs NVIDIA driver 580")[1] and "gpu-a (host" not in flat
    assert failed.layers == {}


def test_dra_on_kubernetes_133_stops_before_any_layer(render):
    failed = render("sched-dra-133", extra_vars={"dra_driver_enabled": True, "gpuops_k8s_version": "1.33"},
                    nodes={"gpu-a": {"facts": "hgx-h100"}}, expect_failure=True)
    assert "dra_driver needs Kubernetes 1.34 or newer" in " ".join(failed.output.split())
    assert failed.layers == {}
