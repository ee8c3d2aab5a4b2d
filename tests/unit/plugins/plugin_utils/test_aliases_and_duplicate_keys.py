"""YAML aliases are counted, not expanded; a JSON key given twice is an error naming the key.

A kilobyte of aliases of aliases ("billion laughs") is a few dozen nodes that,
written out, hold a billion values. Every check walks each shared node once,
and a document that would hold more than the budget written out is refused,
naming the file, before anything builds, compares or templates it.
"""
import contextlib
import json
import signal
from pathlib import Path
from unittest import mock

import pytest
import yaml
from ansible.errors import AnsibleActionFail
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.gpuops.platform.plugins.action import fleet_plan as fleet_plan_action
from ansible_collections.gpuops.platform.plugins.module_utils._common import input_guard
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import ConfigError
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.docker import plan_docker
from ansible_collections.gpuops.platform.plugins.module_utils._mig import module as mig_module
from ansible_collections.gpuops.platform.plugins.module_utils._mig.model import MigError
from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as nvml
from ansible_collections.gpuops.platform.plugins.plugin_utils import documents, fleet_plan
from ansible_collections.gpuops.platform.plugins.plugin_utils import recorded_facts as rf
from ansible_collections.gpuops.platform.plugins.plugin_utils import variable_sources as vs
from ansible_collections.gpuops.platform.plugins.plugin_utils.variable_check import check_hosts, load_catalog

ROOT = Path(__file__).resolve().parents[4]
NVML = ROOT / "tests" / "fixtures" / "nvml"
# Seconds a refusal may take on a loaded machine; the expansion itself takes minutes to hours.
WITHIN = 30


def laughs(prefix="lol", levels=10):
    """A billion laughs: ``levels`` anchored lists of nine aliases each; the last written out holds 9**levels values."""
    lines = ['%s0: &%s0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]' % (prefix, prefix)]
    for level in range(1, levels):
        aliases = ", ".join(["*%s%d" % (prefix, level - 1)] * 9)
        lines.append("%s%d: &%s%d [%s]" % (prefix, level, prefix, level, aliases))
    return "\n".join(lines) + "\n"


def laughs_under(variable):
    """The laughs inside one variable (a mapping of them), so no other variable name is involved."""
    return "%s:\n%s" % (variable, "".join("  %s\n" % line for line in laughs().splitlines()))


class TookTooLong(AssertionError):
    pass


@contextlib.contextmanager
def within(seconds=WITHIN):
    """Fail (not hang) when the body takes longer than ``seconds``."""
    def stop(_signum, _frame):
        raise TookTooLong("took more than %d s: the aliases were expanded" % seconds)
    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_the_laughs_are_a_kilobyte():
    assert len(laughs()) < 1024
    assert yaml.safe_load(laughs())["lol9"][0][0][0][0][0][0][0][0][0][0] == "lol"


# ---------------------------------------------------------------------------
# The walk: each shared node once
# ---------------------------------------------------------------------------

def test_shared_containers_are_walked_once_and_counted_as_often_as_used():
    leaf = [1, 2, 3]
    data = {"a": [leaf, leaf], "b": leaf}
    depth, values, distinct = input_guard.shape(data)
    assert depth == 3
    assert values == 1 + (1 + 4 + 4) + 4  # the mapping, "a" with leaf twice, "b" as leaf
    assert distinct == 1 + 1 + 4  # the mapping, "a", leaf once
    seen = []

    def children(node):
        kids = input_guard.data_children(node)
        if kids is not None:
            seen.append(id(node))
        return kids
    input_guard.shape(yaml.safe_load(laughs()), children)
    # each of the 11 containers asked for its children at most a few times, never once per use
    assert len(seen) < 11 * 20


def test_depth_of_the_laughs_is_counted_in_no_time():
    data = yaml.safe_load(laughs())
    with within():
        assert documents.depth(data) == 11
        with pytest.raises(documents.ExpansionError, match=r"\(under 'lol9'\): written out it would hold more than 100000 values"):
            documents.check_depth(data, "the record")


def test_a_value_that_holds_itself_is_still_too_deep():
    loop = []
    loop.append(loop)
    with pytest.raises(documents.DocumentError, match="nested more than 64 levels deep"):
        documents.check_depth({"a": loop}, "the record")


def test_a_document_with_a_few_aliases_is_read():
    text = "defaults: &d {a: 1, b: [1, 2]}\nx: *d\ny: {<<: *d, c: 3}\n"
    assert documents.check_depth(yaml.safe_load(text), "doc")["y"] == {"a": 1, "b": [1, 2], "c": 3}


# ---------------------------------------------------------------------------
# Every YAML the collection reads
# ---------------------------------------------------------------------------

def test_a_mig_config_file_of_laughs_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "mig.yaml"
    path.write_text(laughs())
    with within():
        with pytest.raises(documents.ExpansionError) as caught:
            documents.read_yaml(str(path), "mig_config_file")
    assert "mig_config_file %s repeats itself through YAML aliases (under 'lol9')" % path in str(caught.value)


def test_plan_fleet_refuses_a_mig_config_file_of_laughs_as_that_hosts_error(tmp_path):
    path = tmp_path / "mig.yaml"
    path.write_text("version: v1\nmig-configs:\n  all-laughs:\n" + "".join(
        "    " + line + "\n" for line in laughs().splitlines()))
    hostvars = {"mig_config_name": "all-laughs", "mig_config_file": str(path),
                "gpuops_nvml_replay_file": str(NVML / "hgx-h100.json")}
    with within():
        plan = fleet_plan.plan_fleet([("gpu-a", hostvars)], None, mig_strategy="mixed")
    errors = plan["hosts"]["gpu-a"]["errors"]
    assert not plan["hosts"]["gpu-a"]["valid"]
    assert any("mig_config_file %s repeats itself through YAML aliases" % path in e for e in errors), errors


def test_nvidia_mig_refuses_a_config_file_of_laughs(tmp_path):
    path = tmp_path / "mig.yaml"
    path.write_text(laughs())
    with within():
        with pytest.raises(MigError, match="config_file %s repeats itself through YAML aliases" % path):
            mig_module.read_document(str(path), "config_file")


def test_planned_labels_of_laughs_are_that_hosts_error():
    labels = yaml.safe_load(laughs())["lol9"]  # as Ansible's loader builds it: each alias shared
    hostvars = {"gpu_nodes_host_labels": {"team": labels}, "gpuops_nvml_replay_file": str(NVML / "hgx-h100.json")}
    with within():
        plan = fleet_plan.plan_fleet([("gpu-a", hostvars)], None, mig_strategy="mixed")
    errors = plan["hosts"]["gpu-a"]["errors"]
    assert any("gpu_nodes_host_labels repeats itself through YAML aliases" in e for e in errors), errors


def _inventory(tmp_path, group_vars="", host_vars=""):
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "hosts.yml").write_text("all:\n  children:\n    gpu_nodes:\n      hosts:\n        gpu-a:\n")
    (tmp_path / "group_vars" / "all.yml").write_text(group_vars or "nvidia_driver_branch: '570'\n")
    (tmp_path / "host_vars" / "gpu-a.yml").write_text(
        host_vars or "gpuops_nvml_replay_file: %s\n" % (NVML / "hgx-h100.json"))
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(tmp_path / "hosts.yml")])
    manager = VariableManager(loader=loader, inventory=inventory)
    return HostVars(inventory, manager, loader), manager, loader


def test_laughs_beside_a_misspelt_variable_in_group_vars_are_refused_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    hostvars, manager, loader = _inventory(tmp_path, group_vars="nvidia_driver_verison: '570'\n" + laughs())
    variables = fleet_plan_action.read_variables(hostvars, ["gpu-a"], loader)
    with within():
        with pytest.raises(AnsibleActionFail) as caught:
            check_hosts([("gpu-a", variables["gpu-a"], True)], manager, load_catalog())
    message = str(caught.value)
    assert "inventory variables file group_vars/all.yml repeats itself through YAML aliases" in message
    assert "Nothing was changed" in message


def test_the_planner_refuses_laughs_in_a_planned_variable_before_ansible_templates_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    host_vars = ("gpuops_nvml_replay_file: %s\n" % (NVML / "hgx-h100.json")) + laughs_under("gpu_nodes_host_labels")
    hostvars, _manager, loader = _inventory(tmp_path, host_vars=host_vars)
    task = mock.Mock(args={"hosts": ["gpu-a"], "report_dir": str(tmp_path / "report")}, async_val=0,
                     check_mode=False, diff=False)
    action = fleet_plan_action.ActionModule(task, mock.Mock(), mock.Mock(check_mode=False), loader=loader,
                                            templar=None, shared_loader_obj=None)
    with within():
        with pytest.raises(AnsibleActionFail, match="inventory variables file host_vars/gpu-a.yml repeats itself"):
            action.run(task_vars={"groups": {"gpu_nodes": ["gpu-a"]}, "hostvars": hostvars})
    assert not (tmp_path / "report").exists()


def test_inventory_files_without_aliases_are_not_parsed(tmp_path, monkeypatch):
    hostvars, _manager, loader = _inventory(tmp_path)
    variables = fleet_plan_action.read_variables(hostvars, ["gpu-a"], loader)
    with mock.patch.object(documents, "compose_yaml", side_effect=AssertionError("parsed")):
        vs.check_inventory_files([variables["gpu-a"]])


def test_an_inventory_file_ansible_reads_but_pyyaml_does_not_is_left_to_ansible(tmp_path):
    hostvars, _manager, loader = _inventory(tmp_path, group_vars="a: &x [1]\nb: *x\nc: !unsafe '{{ x }}'\n")
    variables = fleet_plan_action.read_variables(hostvars, ["gpu-a"], loader)
    vs.check_inventory_files([variables["gpu-a"]])  # no error: tags are not read, the aliases are few


# ---------------------------------------------------------------------------
# Duplicate JSON keys
# ---------------------------------------------------------------------------

def _facts_with_hidden_errors():
    """A recorded facts file whose second ECC counter hides the first (7 uncorrectable errors)."""
    text = (NVML / "hgx-h100.json").read_text()
    data = json.loads(text)
    gpu = (data.get("ansible_facts", {}).get("nvidia") or data)["gpus"][0]
    assert "ecc" in gpu, sorted(gpu)
    marker = '"ecc": '
    assert marker in text
    return text.replace(marker, '"ecc": {"volatile": {"uncorrectable": 7}}, ' + marker, 1)


def test_loads_json_names_a_key_given_twice():
    with pytest.raises(documents.DocumentError, match=r"plan\.json gives the key 'waves' twice in one object"):
        documents.loads_json('{"waves": 1, "hosts": {}, "waves": 2}', "plan.json")
    assert documents.loads_json('{"a": {"x": 1}, "b": {"x": 2}}', "plan.json") == {"a": {"x": 1}, "b": {"x": 2}}


def test_a_facts_file_with_a_key_given_twice_is_that_hosts_error(tmp_path):
    path = tmp_path / "gpu-a.json"
    path.write_text(_facts_with_hidden_errors())
    plan = fleet_plan.plan_fleet([("gpu-a", {"gpuops_nvml_replay_file": str(path)})], None, mig_strategy="mixed")
    errors = plan["hosts"]["gpu-a"]["errors"]
    assert not plan["hosts"]["gpu-a"]["valid"]
    assert any("gives the key 'ecc' twice in one object" in e and str(path) in e for e in errors), errors


def test_a_recorded_facts_file_with_a_key_given_twice_is_refused(tmp_path):
    path = tmp_path / "gpu-a.json"
    record = rf.make_record("gpu-a", json.loads((NVML / "hgx-h100.json").read_text()), {}, "2026-11-25T17:00:00Z",
                            "0.1.0")
    text = json.dumps(record)
    path.write_text(text.replace('"gpus": ', '"gpus": [], "gpus": ', 1))
    with pytest.raises(documents.DocumentError, match="gives the key 'gpus' twice in one object"):
        documents.read_json(str(path), "recorded facts file")


def test_nvml_replay_with_a_key_given_twice_is_refused(tmp_path):
    path = tmp_path / "facts.json"
    path.write_text(_facts_with_hidden_errors())
    with pytest.raises(nvml.ReplayError, match="facts_file %s gives the key 'ecc' twice" % path):
        nvml.load_replay(str(path), "facts_file")


def test_nvidia_mig_refuses_a_json_config_with_a_key_given_twice(tmp_path):
    path = tmp_path / "mig.json"
    path.write_text('{"version": "v1", "mig-configs": {"a": [], "a": []}}')
    with pytest.raises(MigError, match="config_file %s gives the key 'a' twice" % path):
        mig_module.read_document(str(path), "config_file")


def test_a_daemon_json_with_a_key_given_twice_is_refused_and_not_rewritten():
    files = {"/etc/docker/daemon.json": '{"runtimes": {}, "log-driver": "journald", "log-driver": "local"}'}
    with pytest.raises(ConfigError, match="/etc/docker/daemon.json gives the key 'log-driver' twice"):
        plan_docker("/etc/docker/daemon.json", reader=files.get)


def test_a_long_or_foreign_duplicate_key_is_shown_cut_and_escaped():
    key = "\u202e" + "k" * 300
    with pytest.raises(documents.DocumentError) as caught:
        documents.loads_json(json.dumps({"a": 1}).replace("}", ', "%s": 1, "%s": 2}' % (key, key)), "x.json")
    message = str(caught.value)
    assert "\\u202e" in message and "(301 characters)" in message and "k" * 100 not in message
