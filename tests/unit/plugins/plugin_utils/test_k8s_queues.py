"""Kueue, Volcano and KAI Scheduler queues (plugin_utils/k8s_queues.py)."""
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpuops.platform.plugins.filter import k8s_queues as filters
from ansible_collections.gpuops.platform.plugins.plugin_utils import k8s_queues as queues

ROLES = Path(__file__).resolve().parents[4] / "roles"
KUEUE = yaml.safe_load((ROLES / "kueue" / "defaults" / "main.yml").read_text())
KAI = yaml.safe_load((ROLES / "kai_scheduler" / "defaults" / "main.yml").read_text())["kai_scheduler_queues"]
H100, L40S = "NVIDIA-H100-80GB-HBM3", "NVIDIA-L40S"
CAPACITY = {"nodes": {
    "h-2": {"product": H100, "resources": {"nvidia.com/gpu": 8}},
    "h-1": {"product": H100, "resources": {"nvidia.com/gpu": 8, "nvidia.com/mig-1g.10gb": 7}},
    "l-1": {"product": L40S, "resources": {"nvidia.com/gpu": 2}},
    "cpu-1": {"product": "", "resources": {}}}}
TOLERATIONS = [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]


def settings(**changes):
    out = dict((key[len("kueue_"):], value) for key, value in KUEUE.items())
    out.update(flavor_node_label="platform.gpuops.io/gpu.product", flavor_tolerations=TOLERATIONS)
    out.update(changes)
    return out


def plan(tenants=(), nodes=None, **changes):
    return filters.kueue_plan(settings(**changes), CAPACITY, nodes or {}, list(tenants))


def test_the_fleet_is_summed_per_product_without_device_plugin_free_nodes():
    assert queues.kueue_fleet(CAPACITY, {}) == {
        "nvidia-h100-80gb-hbm3": {"label": H100, "resources": {"nvidia.com/gpu": 16, "nvidia.com/mig-1g.10gb": 7}},
        "nvidia-l40s": {"label": L40S, "resources": {"nvidia.com/gpu": 2}}}
    dra = {"nodes": [{"name": "h-1", "labels": {"nvidia.com/gpu.deploy.device-plugin": "false"}}]}
    assert queues.kueue_fleet(CAPACITY, dra)["nvidia-h100-80gb-hbm3"]["resources"] == {"nvidia.com/gpu": 8}
    assert queues.kueue_fleet({}, {}) == {}


def test_the_default_plan_is_one_flavor_per_product_and_one_queue_with_the_whole_fleet():
    got = plan()
    assert got["errors"] == []
    assert [f["name"] for f in got["flavors"]] == ["nvidia-h100-80gb-hbm3", "nvidia-l40s"]
    assert got["flavors"][1] == {"name": "nvidia-l40s", "node_labels": {"platform.gpuops.io/gpu.product": L40S},
                                 "tolerations": TOLERATIONS}
    (cq,) = got["cluster_queues"]
    assert cq["name"] == "gpu-fleet" and cq["cohort"] == "gpu-fleet" and cq["namespaces"] == []
    assert cq["quotas"]["nvidia-h100-80gb-hbm3"] == {"cpu": 16 * 23, "memory": "%dGi" % (128 * 23), "nvidia.com/gpu": 16,
                                                     "nvidia.com/mig-1g.10gb": 7}
    assert cq["queueing_strategy"] == "BestEffortFIFO" and cq["preemption"] == KUEUE["kueue_preemption"]


def test_given_cpu_and_memory_win_and_other_fields_are_kept():
    given = [{"name": "a", "cohort": None, "quotas": {"nvidia-l40s": {"nvidia.com/gpu": 1, "cpu": 4}},
              "borrowing_limits": {"nvidia-l40s": {"nvidia.com/gpu": 1}}, "queueing_strategy": "StrictFIFO"}]
    (cq,) = plan(cluster_queues=given)["cluster_queues"]
    assert cq["quotas"] == {"nvidia-l40s": {"cpu": 4, "memory": "128Gi", "nvidia.com/gpu": 1}}
    assert cq["cohort"] is None and cq["queueing_strategy"] == "StrictFIFO"
    assert cq["borrowing_limits"] == {"nvidia-l40s": {"nvidia.com/gpu": 1}} and cq["lending_limits"] == {}


def test_queues_tenants_name_borrow_with_zero_quota_for_their_namespaces():
    tenants = [{"name": "a", "kueue_cluster_queue": "shared"}, {"name": "b", "namespace": "b-ns", "kueue_cluster_queue": "shared"},
               {"name": "c", "kueue_cluster_queue": "gpu-fleet"}, {"name": "d"}]
    got = plan(tenants)
    assert got["errors"] == [] and [cq["name"] for cq in got["cluster_queues"]] == ["gpu-fleet", "shared"]
    shared = got["cluster_queues"][1]
    assert shared["namespaces"] == ["a", "b-ns"]
    assert shared["quotas"]["nvidia-l40s"] == {"cpu": 0, "memory": "0Gi", "nvidia.com/gpu": 0}
    assert got["tenants"][3] == {"name": "d", "namespace": "d", "cluster_queue": ""}
    off = plan(tenants, tenant_cluster_queues=False)
    assert off["errors"] == ["kueue: tenant %s uses kueue_cluster_queue shared, which is not one of the ClusterQueues (gpu-fleet); "
                             "define it in kueue_cluster_queues or set kueue_tenant_cluster_queues" % name for name in "ab"]
    assert plan(tenants, cohort="")["errors"] == [
        "kueue: the tenant ClusterQueues shared have no quota of their own and borrow from the cohort; "
        "set kueue_cohort or define them in kueue_cluster_queues"]


@pytest.mark.parametrize("changes, message", [
    ({"cluster_queues": [{"name": "a", "quotas": {"nvidia-h100-80gb-hbm3": {"nvidia.com/gpu": 10}}},
                         {"name": "b", "quotas": {"nvidia-h100-80gb-hbm3": {"nvidia.com/gpu": 7}}}]},
     "kueue: ClusterQueues a, b ask for 17 nvidia.com/gpu on flavor nvidia-h100-80gb-hbm3, but the fleet has 16 (gpuops_k8s_capacity); "
     "lower the nominal quotas or let queues borrow within the cohort"),
    ({"cluster_queues": [{"name": "a", "quotas": {"nvidia-l40s": {"nvidia.com/gpu": -2}}}]},
     "kueue: ClusterQueue a: nvidia.com/gpu quota of flavor nvidia-l40s must be a whole number of devices, not negative, got -2"),
    ({"cluster_queues": [{"name": "a", "quotas": {"nvidia-l40s": {"nvidia.com/gpu": True}}}]},
     "kueue: ClusterQueue a: nvidia.com/gpu quota of flavor nvidia-l40s must be a whole number of devices, not negative, got True"),
    ({"cluster_queues": [{"name": "a", "quotas": {"a100": {"cpu": 1}}}]},
     "kueue: ClusterQueue a sets quota on flavor a100, which is not one of the ResourceFlavors (nvidia-h100-80gb-hbm3, nvidia-l40s)"),
    ({"cluster_queues": [{"name": "A"}]}, "kueue: ClusterQueue name 'A' must be a DNS-1123 subdomain"),
    ({"resource_flavors": [{"name": "f"}, {"name": "f"}], "cluster_queues": [{"name": "a", "quotas": {}}]},
     "kueue: ResourceFlavor names must be unique, got f, f"),
    ({"workload_priority_classes": [{"name": "p", "value": 2000000000}]},
     "kueue: WorkloadPriorityClass p: value must be an integer up to 1000000000, got 2000000000"),
    ({"workload_priority_classes": [{"name": "p", "value": "1"}]},
     "kueue: WorkloadPriorityClass p: value must be an integer up to 1000000000, got '1'"),
])
def test_each_bad_setting_is_named(changes, message):
    assert plan(**changes)["errors"] == [message]


def test_a_fleet_without_gpus_names_no_flavor():
    got = filters.kueue_plan(settings(cluster_queues=[{"name": "a", "quotas": {"x": {"nvidia.com/gpu": 0}}}]), {}, {}, [])
    assert got["errors"][0].endswith("which is not one of the ResourceFlavors (none)")


def test_volcano_makes_the_queues_tenants_name_once():
    tenants = [{"name": "a", "volcano_queue": "team"}, {"name": "b", "volcano_queue": "team"}, {"name": "c", "volcano_queue": "gpu-batch"},
               {"name": "d"}]
    given = [{"name": "gpu-batch", "weight": 2}]
    assert filters.volcano_queues(given, True, tenants) == given + [{"name": "team", "weight": 1, "reclaimable": True}]
    assert filters.volcano_queues(given, False, tenants) == given
    assert filters.volcano_queue_errors(filters.volcano_queues(given, True, tenants), tenants) == []


@pytest.mark.parametrize("queue, message", [
    ({"name": "a", "weight": -1}, "queue a: weight must be an integer from 1 to 65535, got -1"),
    ({"name": "a", "weight": True}, "queue a: weight must be an integer from 1 to 65535, got True"),
    ({"name": "A_b"}, "queue name 'A_b' must be a DNS-1123 subdomain"),
    ({"weight": 1}, "queue name '' must be a DNS-1123 subdomain"),
    ({"name": "a", "capability": {"cpu": "x"}}, "queue a: capability[cpu] must be a non-negative quantity, got 'x'"),
    ({"name": "a", "guarantee": {"gpu": False}}, "queue a: guarantee[gpu] must be a non-negative quantity, got False"),
    ({"name": "a", "capability": {"nvidia.com/gpu": 2}, "guarantee": {"nvidia.com/gpu": 4}},
     "queue a: guarantee nvidia.com/gpu=4 is more than its capability 2"),
])
def test_each_bad_volcano_queue_is_named(queue, message):
    assert filters.volcano_queue_errors([queue], []) == [message]


def test_volcano_tenants_need_their_queue_and_names_are_unique():
    assert filters.volcano_queue_errors([{"name": "a"}], [{"name": "team-a", "volcano_queue": "team-a"}]) == [
        "tenant team-a uses volcano_queue team-a, which is not one of the queues (a); define it in volcano_queues or set volcano_tenant_queues"]
    assert filters.volcano_queue_errors([{"name": "a"}, {"name": "a", "capability": {"cpu": "1.5", "memory": "2Gi"}}], []) == [
        "queue names must be unique"]


def test_the_kai_defaults_are_valid():
    assert filters.kai_queue_errors(KAI) == []


@pytest.mark.parametrize("queues_, message", [
    ([{"name": "a"}, {"name": "a"}], "queue names must be unique"),
    ([{"name": "B"}], "queue name 'B' must be a DNS-1123 label"),
    ([{"name": "a", "parent": "missing"}], "queue a: parent missing is not one of kai_scheduler_queues"),
    ([{"name": "a", "cpu": {"quota": True}}], "queue a: cpu.quota must be a number >= -1, got True"),
    ([{"name": "a", "gpu": {"over_quota_weight": -1}}], "queue a: gpu.over_quota_weight must be a number >= 0, got -1"),
    ([{"name": "a", "memory": {"limit": "1Gi"}}], "queue a: memory.limit must be a number >= -1, got '1Gi'"),
    ([{"name": "a", "gpu": {"quota": 5, "limit": 2}}], "queue a: gpu quota 5 is above its limit 2"),
])
def test_each_bad_kai_queue_is_named(queues_, message):
    assert filters.kai_queue_errors(queues_) == [message]


def test_a_kai_quota_within_an_unlimited_or_larger_limit_is_valid():
    assert filters.kai_queue_errors([{"name": "a", "gpu": {"quota": 5, "limit": -1}, "cpu": {"quota": 1.5, "limit": 2}}]) == []
