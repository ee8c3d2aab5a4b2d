"""gpu_nodes_plan's action: the plan of every GPU host in one task, and its warning for hosts without facts."""
import json
import os
from unittest import mock

from ansible.parsing.dataloader import DataLoader

from ansible_collections.gpuops.platform.plugins.action import gpu_nodes_plan

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "nvml")


def _run(hostvars):
    args = {"hosts": sorted(hostvars), "label_prefix": "platform.gpuops.io", "mig_strategy": "single"}
    task = mock.Mock(args=args, async_val=0, check_mode=False, diff=False)
    action = gpu_nodes_plan.ActionModule(task, mock.Mock(), mock.Mock(check_mode=False), loader=DataLoader(),
                                         templar=None, shared_loader_obj=None)
    return action.run(task_vars={"hostvars": hostvars, "groups": {"all": sorted(hostvars)}})


def test_a_host_without_facts_is_named_in_a_warning_of_the_task_and_counted_without_gpus():
    with open(os.path.join(FIXTURES, "l40s.json")) as handle:
        facts = json.load(handle)
    result = _run({"gpu-a": {"ansible_facts": {"nvidia": facts}, "inventory_hostname": "gpu-a"},
                   "bare-b": {"inventory_hostname": "bare-b"}})
    assert result["capacity"]["missing_facts"] == ["bare-b"]
    assert result["warnings"] == ["No NVIDIA facts for bare-b: their GPUs are not counted. Run playbooks/site.yml (or "
                                  "nodes.yml first) or enable fact caching."]
    assert [n["name"] for n in result["nodes"]["nodes"]] == ["gpu-a"]


def test_no_warning_when_every_host_has_facts():
    with open(os.path.join(FIXTURES, "l40s.json")) as handle:
        facts = json.load(handle)
    result = _run({"gpu-a": {"ansible_facts": {"nvidia": facts}, "inventory_hostname": "gpu-a"}})
    assert "warnings" not in result and result["capacity"]["missing_facts"] == []
