"""The rolling upgrade's decisions: plan per node, verification after it, pods that block a drain."""
import copy
import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter import gpu_upgrade as f

OLD, NEW = "570.172.08", "580.82.07"


@pytest.fixture
def h100(fixtures_dir):
    return json.loads((fixtures_dir / "nvml" / "hgx-h100.json").read_text())


def test_plan_from_the_recorded_node(h100):
    plan = f.gpu_upgrade_plan(h100, NEW)
    assert plan["action"] == "upgrade" and plan["reboot"] is True
    assert plan["installed"] == plan["loaded"] == OLD and len(plan["gpus"]) == 8
    assert plan["gpus"] == sorted(plan["gpus"])
    assert f.gpu_upgrade_plan(h100, OLD)["action"] == "skip"


@pytest.mark.parametrize("installed, loaded, action, reboot", [
    (NEW, NEW, "skip", False),
    (NEW, OLD, "reboot", True),          # installed, the old module still loaded
    (OLD, NEW, "upgrade", False),        # the module is already the wanted one
    (OLD, None, "upgrade", True),        # no module loaded
    (None, None, "skip", False),         # no driver at all: nodes.yml installs, this upgrades
])
def test_plan_actions(installed, loaded, action, reboot):
    plan = f.gpu_upgrade_plan({"driver_version": installed, "kernel_module_version": loaded, "gpus": []}, NEW)
    assert (plan["action"], plan["reboot"]) == (action, reboot)


@pytest.mark.parametrize("wanted", ["", "580", "580.82.07; reboot", None, "latest"])
def test_a_wanted_version_that_is_not_exact_fails(wanted):
    with pytest.raises(AnsibleFilterError, match="exact driver version such as 580.82.07"):
        f.gpu_upgrade_plan({}, wanted)


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
