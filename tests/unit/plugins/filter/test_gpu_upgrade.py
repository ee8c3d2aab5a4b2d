"""The rolling upgrade's decisions: plan per node, verification after it, pods that block a drain."""
import copy
import json
import re

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter import gpu_upgrade as f
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan

OLD, NEW = "570.172.08", "580.82.07"


@pytest.fixture
def h100(fixtures_dir):
    return json.loads((fixtures_dir / "nvml" / "hgx-h100.json").read_text())


def test_plan_from_the_recorded_node(h100):
    plan = f.gpu_upgrade_plan(h100, NEW)
    assert plan["action"] == plan["step"] == "upgrade" and plan["reboot"] is True
    assert plan["installed"] == plan["loaded"] == OLD and len(plan["gpus"]) == 8
    assert plan["gpus"] == sorted(plan["gpus"])
    assert (f.gpu_upgrade_plan(h100, OLD)["action"], f.gpu_upgrade_plan(h100, OLD)["step"]) == ("none", "skip")


@pytest.mark.parametrize("installed, loaded, action, step, reboot", [
    (NEW, NEW, "none", "skip", False),
    (NEW, OLD, "none", "reboot", True),              # installed, the old module still loaded
    (OLD, NEW, "upgrade", "upgrade", False),         # the module is already the wanted one
    (OLD, None, "upgrade", "upgrade", False),        # no module loaded: the new one loads without a reboot
    (None, None, "install", "install", False),       # no driver at all: installed, as the fleet plan says
    ("590.10.01", "590.10.01", "downgrade", "downgrade", True),
])
def test_plan_actions(installed, loaded, action, step, reboot):
    # A downgrade only with consent (nvidia_driver_allow_downgrade): test_a_downgrade_needs_consent.
    plan = f.gpu_upgrade_plan({"driver_version": installed, "kernel_module_version": loaded, "gpus": []}, NEW,
                              allow_downgrade=action == "downgrade")
    assert (plan["action"], plan["step"], plan["reboot"]) == (action, step, reboot)


@pytest.mark.parametrize("installed, action, reboot", [
    ("570.172.08", "none", False),        # on the branch followed: nothing to do
    ("550.163.01", "upgrade", True),      # an older branch: onto the one followed
    ("580.82.07", "downgrade", True),
])
def test_an_empty_version_follows_the_branch_as_the_fleet_plan_does(installed, action, reboot):
    facts = {"present": True, "driver_version": installed, "kernel_module_version": installed, "gpus": []}
    allow = action == "downgrade"  # a downgrade only with consent: test_a_downgrade_needs_consent
    plan = f.gpu_upgrade_plan(facts, "", "570", allow_downgrade=allow)
    assert (plan["action"], plan["reboot"], plan["wanted"], plan["version"]) == (action, reboot, "branch 570", "")
    # Word for word the planner's decision for the same settings and facts.
    decision, errors = fleet_plan.plan_driver(dict(fleet_plan.DEFAULTS, nvidia_driver_branch="570",
                                                   nvidia_driver_allow_downgrade=allow), facts)
    assert errors == [] and (decision["action"], decision["reboot_required"]) == (plan["action"], plan["reboot"])


def test_a_downgrade_needs_consent():
    facts = {"present": True, "driver_version": "580.82.07", "kernel_module_version": "580.82.07", "gpus": []}
    with pytest.raises(AnsibleFilterError, match="driver 580.82.07 is installed and the wanted branch 570 is older"):
        f.gpu_upgrade_plan(facts, "", "570")
    assert f.gpu_upgrade_plan(facts, "", "570", allow_downgrade=True)["action"] == "downgrade"


@pytest.mark.parametrize("wanted, message", [
    ("580", "gpu_upgrade_driver_version '580' is not a driver version"),
    ("580.82.07; reboot", "is not a driver version"),
    ("latest", "is not a driver version"),
    (580.82, "gpu_upgrade_driver_version is the number 580.82, not a string: YAML reads an unquoted version as a "
             "number"),
    (580, "is the number 580, not a string"),
    ("580.82.07\n", "has whitespace or a line break around the version"),
    (" 580.82.07", "has whitespace or a line break around the version"),
    ("５８０.82.07", "is not a driver version"),          # digits, but not ASCII ones
])
def test_a_wanted_version_that_is_not_an_exact_string_fails(wanted, message):
    with pytest.raises(AnsibleFilterError, match=re.escape(message)):
        f.gpu_upgrade_plan({}, wanted)


def test_the_variable_named_is_the_one_given(h100):
    with pytest.raises(AnsibleFilterError, match="^nvidia_driver_version is the number 570.19, not a string"):
        f.gpu_upgrade_plan(h100, 570.19, "570", "present", "nvidia_driver_version")


def test_verify_passes_on_the_same_gpus_and_names_each_problem(h100):
    plan = f.gpu_upgrade_plan(h100, NEW)
    after = copy.deepcopy(h100)
    after.update(driver_version=NEW, kernel_module_version=NEW)
    assert f.gpu_upgrade_verify(after, plan) == []
    lost = copy.deepcopy(after)
    gone = lost["gpus"].pop(5)["uuid"]
    lost["health"] = {"status": "critical", "reasons": ["GPU 5: GPU is lost"]}
    assert f.gpu_upgrade_verify(lost, plan) == [
        "8 GPU(s) before, 7 after; missing: %s" % gone, "GPU health is critical: GPU 5: GPU is lost"]
    # Same count, another GPU: the UUIDs are compared, not only the number.
    swapped = copy.deepcopy(after)
    swapped["gpus"][0]["uuid"] = "GPU-00000000-0000-0000-0000-000000000000"
    assert "new: GPU-00000000-0000-0000-0000-000000000000" in f.gpu_upgrade_verify(swapped, plan)[0]
    assert f.gpu_upgrade_verify(h100, plan) == [
        "driver %s is wanted, but %s is installed and module %s is loaded" % (NEW, OLD, OLD)]
    mismatch = dict(after, kernel_module_version=OLD)
    assert "module %s is loaded" % OLD in f.gpu_upgrade_verify(mismatch, plan)[0]


def test_blocking_pods_leave_out_daemonsets_mirrors_and_finished_pods():
    def pod(name, owner=None, phase="Running", mirror=False):
        meta = {"name": name, "namespace": "ns"}
        if owner:
            meta["ownerReferences"] = [{"kind": owner, "name": "x"}]
        if mirror:
            meta["annotations"] = {"kubernetes.io/config.mirror": "abc"}
        return {"metadata": meta, "status": {"phase": phase}}
    pods = [pod("z-train", "ReplicaSet"), pod("ds", "DaemonSet"), pod("static", mirror=True),
            pod("done", "Job", phase="Succeeded"), pod("a-bare")]
    assert f.k8s_blocking_pods(pods) == ["ns/a-bare", "ns/z-train"]


def test_verify_after_following_a_branch_wants_a_driver_of_that_branch_loaded(h100):
    old = dict(h100, driver_version="550.163.01", kernel_module_version="550.163.01")
    plan = f.gpu_upgrade_plan(old, "", "570")
    assert plan["action"] == "upgrade"
    assert f.gpu_upgrade_verify(h100, plan) == []                     # 570.172.08: the branch's newest
    assert f.gpu_upgrade_verify(old, plan) == [
        "driver branch 570 is wanted, but 550.163.01 is installed and module 550.163.01 is loaded"]
    pending = dict(h100, kernel_module_version="550.163.01")
    assert "module 550.163.01 is loaded" in f.gpu_upgrade_verify(pending, plan)[0]
