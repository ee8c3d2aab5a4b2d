"""The MIG decision shared by the fleet plan (plan.json's disruption) and mig.yml (the mig_disruption filter)."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter import mig as mig_filter
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_views
from ansible_collections.gpuops.platform.plugins.plugin_utils.mig_disruption import mig_disruption

RESET = [{"index": 0, "reset_required": True, "changed": True}, {"index": 1, "reset_required": False}]
NO_RESET = [{"index": 0, "reset_required": False, "changed": True}]


@pytest.mark.parametrize("changed, valid, gpus, drain, reset", [
    (False, True, RESET, False, False),          # nothing changes: nothing is disrupted, whatever a GPU says
    (True, True, NO_RESET, True, False),         # new instances only: drained, no reset
    (True, True, RESET, True, True),             # a mode change: drained and reset
    (True, False, RESET, False, False),          # an invalid plan changes nothing
    (True, True, [], True, False),
])
def test_a_valid_change_drains_and_a_mode_change_resets(changed, valid, gpus, drain, reset):
    assert mig_disruption(changed, valid, gpus) == {"drain": drain, "gpu_reset": reset}


@pytest.mark.parametrize("changed, valid, gpus", [(True, True, RESET), (True, True, NO_RESET), (False, True, RESET),
                                                  (True, False, RESET)])
def test_the_plan_and_mig_yml_say_the_same(changed, valid, gpus):
    """plan.json's disruption of a host with only a MIG change, and the filter over nvidia_mig's result."""
    host = {"driver": {"action": "none", "reboot_required": False},
            "mig": {"config": "x", "changed": changed, "valid": valid, "gpus": gpus}}
    planned = fleet_views.disruption(host)
    acting = mig_filter.mig_disruption({"changed": changed, "plan": {"valid": valid, "gpus": gpus}})
    assert (planned["drain"], planned["gpu_reset"]) == (acting["drain"], acting["gpu_reset"])


def test_the_filter_needs_the_modules_result():
    with pytest.raises(AnsibleFilterError, match="registered result of gpuops.platform.nvidia_mig"):
        mig_filter.mig_disruption({"changed": True})
