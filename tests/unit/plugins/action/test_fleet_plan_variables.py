"""fleet_plan's one read of each host's variables, through the running ansible-core's own HostVars.

The units stage runs this on the controller's ansible-core and the compat stage on the
execution environment's (2.17), whose HostVarsVars takes no ``host`` argument.
"""
import pytest
from ansible.errors import AnsibleActionFail
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.gpuops.platform.plugins.action.fleet_plan import inventory_variables, known_hosts, read_variables


def _hostvars(tmp_path):
    (tmp_path / "hosts.yml").write_text(
        "all:\n"
        "  vars:\n"
        "    fleet_branch: '580'\n"
        "  children:\n"
        "    gpu_nodes:\n"
        "      hosts:\n"
        "        gpu-a:\n"
        "          nvidia_driver_branch: '{{ fleet_branch }}'\n"
        "        gpu-b:\n"
        "          nvidia_driver_branch: '570'\n")
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(tmp_path / "hosts.yml")])
    manager = VariableManager(loader=loader, inventory=inventory)
    return HostVars(inventory, manager, loader), loader


def test_each_host_is_read_with_its_own_variables_templated_in_its_context(tmp_path):
    hostvars, loader = _hostvars(tmp_path)
    variables = read_variables(hostvars, ["gpu-a", "gpu-b"], loader)
    assert sorted(variables) == ["gpu-a", "gpu-b"]
    assert variables["gpu-a"]["nvidia_driver_branch"] == "580"
    assert variables["gpu-b"]["nvidia_driver_branch"] == "570"
    assert "nvidia_driver_branch" in variables["gpu-a"] and "no_such_variable" not in variables["gpu-a"]
    assert "inventory_hostname" in set(variables["gpu-b"])


def test_a_plain_mapping_of_variables_is_taken_as_it_is():
    plain = {"gpu-a": {"nvidia_driver_branch": "580"}}
    assert read_variables(plain, ["gpu-a"], None) == plain


def test_hosts_the_inventory_lacks_are_refused_by_name_before_any_read(tmp_path):
    hostvars, loader = _hostvars(tmp_path)
    task_vars = {"hostvars": hostvars}
    assert known_hosts(task_vars, ["gpu-a"]) is hostvars
    assert inventory_variables(task_vars, ["gpu-b"], loader)["gpu-b"]["nvidia_driver_branch"] == "570"
    with pytest.raises(AnsibleActionFail, match="^hosts not in the inventory: gpu-x, gpu-y$"):
        inventory_variables(task_vars, ["gpu-a", "gpu-x", "gpu-y"], loader)
