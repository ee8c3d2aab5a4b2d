"""gpu_nodes_plan: the GPU nodes of the Kubernetes layer in one pass over every host's variables and facts, through
the running ansible-core's own HostVars (as gpu_nodes' plan task reads them)."""
import json
from pathlib import Path

import pytest
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.gpuops.platform.plugins.action.fleet_plan import read_variables
from ansible_collections.gpuops.platform.plugins.plugin_utils import gpu_capacity, gpu_nodes_plan as plan

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "nvml"
PREFIX = "platform.gpuops.io"
TAINTS = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]


def hosts(tmp_path, text, facts=None):
    (tmp_path / "hosts.yml").write_text(text)
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(tmp_path / "hosts.yml")])
    manager = VariableManager(loader=loader, inventory=inventory)
    for host, nvidia in (facts or {}).items():
        manager.set_host_facts(host, {"nvidia": nvidia})
    names = [h.name for h in inventory.groups["gpu_nodes"].get_hosts()]
    variables = read_variables(HostVars(inventory, manager, loader), names, loader)
    return [(n, variables[n]) for n in names]


INVENTORY = """
all:
  children:
    gpu_nodes:
      vars:
        gpu_nodes_device_plugin_config: ts4
      hosts:
        h100-a:
          gpuops_nvml_replay_file: %(fixtures)s/hgx-h100.json
          gpu_nodes_node_name: node-a
          gpu_nodes_mig_config: all-disabled
          gpu_nodes_host_labels: {pool: train, %(prefix)s/gpu.product: custom}
        l40s-b:
          gpuops_nvml_replay_file: %(fixtures)s/l40s.json
          mig_k8s_node_name: node-b
        live-c: {}
        dra-d:
          gpu_nodes_dra: "yes"
          gpu_nodes_host_labels: {nvidia.com/gpu.deploy.device-plugin: "false"}
        bare-e: {}
""" % {"fixtures": FIXTURES, "prefix": PREFIX}
SHARING = gpu_capacity.gpu_sharing_configs([{"name": "ts4", "mode": "time-slicing", "replicas": 4}], "single")


def test_one_pass_plans_capacity_labels_and_patches_from_recorded_and_live_facts(tmp_path):
    live = json.loads((FIXTURES / "l40s.json").read_text())
    capacity, nodes = plan.plan(hosts(tmp_path, INVENTORY, {"live-c": live}), "single", SHARING, "", {"site": "x"},
                                PREFIX, TAINTS)
    h100 = json.loads((FIXTURES / "hgx-h100.json").read_text())
    count = len(h100["gpus"])
    # The recorded facts are read through recorded_facts (the replay file), the others' from their facts.
    assert capacity["nodes"]["node-a"]["resources"] == {"nvidia.com/gpu": count * 4}
    assert capacity["nodes"]["live-c"]["gpu_count"] == len(live["gpus"])
    assert capacity["missing_facts"] == ["dra-d", "bare-e"]
    assert sorted(capacity["dra_nodes"]) == ["dra-d"]
    assert nodes["taints"] == TAINTS
    # Inventory order; a node without GPUs and not DRA gets no labels.
    assert [n["name"] for n in nodes["nodes"]] == ["node-a", "node-b", "live-c", "dra-d"]
    first = nodes["nodes"][0]
    assert first["host"] == "h100-a"
    # The host's labels win over the planned ones; the common ones are under both.
    assert first["labels"] == {PREFIX + "/gpu": "true", PREFIX + "/gpu.count": str(count), PREFIX + "/gpu.product": "custom",
                               "nvidia.com/device-plugin.config": "ts4", "nvidia.com/mig.config": "all-disabled",
                               "site": "x", "pool": "train"}
    # A DRA node is labelled even without facts, its switch always "false" and no device-plugin config.
    assert nodes["nodes"][3]["labels"] == {"site": "x", "nvidia.com/gpu.deploy.device-plugin": "false"}
    assert nodes["objects"][0] == {"apiVersion": "v1", "kind": "Node",
                                   "metadata": {"name": "node-a", "labels": first["labels"]}}
    assert all("annotations" not in o["metadata"] for o in nodes["objects"])


def test_render_mode_patches_carry_the_gitops_annotations(tmp_path):
    _capacity, nodes = plan.plan(hosts(tmp_path, INVENTORY), "single", SHARING, "", {}, PREFIX, [], render=True)
    assert all(o["metadata"]["annotations"] == plan.RENDER_ANNOTATIONS for o in nodes["objects"])


def test_the_fleet_plans_mig_resources_win_over_the_hosts_own(tmp_path):
    text = """
all:
  children:
    gpu_nodes:
      hosts:
        mig-a:
          mig_k8s_resources: {mixed: {mig-1g.10gb: 2}}
        mig-b:
          mig_k8s_resources: {mixed: {mig-1g.10gb: 2}}
"""
    fleet = {"mig-a": {"mig_k8s_resources": {"mixed": {"mig-3g.40gb": 2}}}}
    capacity, _nodes = plan.plan(hosts(tmp_path, text), "mixed", {}, "", {}, PREFIX, [], fleet_nodes=fleet)
    assert capacity["nodes"]["mig-a"]["resources"] == {"mig-3g.40gb": 2}
    assert capacity["nodes"]["mig-b"]["resources"] == {"mig-1g.10gb": 2}


@pytest.mark.parametrize("variable, message", [
    ("gpuops_nvml_replay_file: %(tmp)s/no-such.json", "^gpu-x: no facts file for this host"),
    ("gpu_nodes_host_labels: [pool, train]", "^gpu-x: gpu_nodes_host_labels must map label names to values"),
])
def test_a_host_that_cannot_be_planned_fails_naming_it(tmp_path, variable, message):
    text = "all:\n  children:\n    gpu_nodes:\n      hosts:\n        gpu-x:\n          %s\n" % (
        variable % {"tmp": tmp_path})
    with pytest.raises(plan.GpuNodesPlanError, match=message):
        plan.plan(hosts(tmp_path, text), "single", {}, "", {}, PREFIX, [])


def test_a_config_that_is_not_defined_fails_naming_the_node(tmp_path):
    with pytest.raises(gpu_capacity.CapacityError, match="node node-a selects device-plugin config 'ts4'"):
        plan.plan(hosts(tmp_path, INVENTORY), "single", {}, "", {}, PREFIX, [])
