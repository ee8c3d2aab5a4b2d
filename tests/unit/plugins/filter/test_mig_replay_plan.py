"""mig_replay_plan: the mig role's plan of recorded facts on the controller is the nvidia_mig module's check-mode
result for the same facts and config, key for key, for every recorded node and every MIG config NVIDIA's GPU Operator
ships; bad input is refused with the module's message or a named type error."""
import json

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter.mig import mig_replay_plan
from ansible_collections.gpuops.platform.plugins.modules import nvidia_mig
from support.module_args import ExitJson, FailJson, patch_module_args

pytestmark = pytest.mark.usefixtures("module_exits")

# NVIDIA's own MIG configs, as the GPU Operator ships them (../shared/reference/mig-parted).
NVIDIA_CONFIG = ("mig-parted", "gpu-operator-default-mig-parted-config.yaml")
CONFIG = {"version": "v1", "mig-configs": {"off": [{"devices": "all", "mig-enabled": False}]}}
# The module's own keys, which a filter result has no use for.
MODULE_KEYS = {"invocation", "warnings", "deprecations"}


def module_result(facts, config, name):
    with patch_module_args({"config": config, "config_name": name, "facts": facts, "_ansible_check_mode": True}):
        with pytest.raises((ExitJson, FailJson)) as caught:
            nvidia_mig.main()
    return caught.type is ExitJson, caught.value.args[0]


@pytest.mark.parametrize("node", ["hgx-h100", "h200-mig", "dgx-a100", "l40s"])
def test_the_filter_gives_the_modules_result_for_every_nvidia_config(fixtures_dir, shared_reference, node):
    config = yaml.safe_load(shared_reference.joinpath(*NVIDIA_CONFIG).read_text())
    facts = json.loads((fixtures_dir / "nvml" / ("%s.json" % node)).read_text())
    outcomes = set()
    for name in config["mig-configs"]:
        ok, expected = module_result(facts, config, name)
        if ok:
            got = mig_replay_plan(facts, config, "", name)
            assert got == dict((k, v) for k, v in expected.items() if k not in MODULE_KEYS), name
            outcomes.add("change" if got["changed"] else "no change")
        else:
            with pytest.raises(AnsibleFilterError) as caught:
                mig_replay_plan(facts, config, "", name)
            assert str(caught.value) == expected["msg"], name
            outcomes.add("refused")
    # Each node meets a change, and a config its GPUs cannot take (another GPU's profiles).
    assert {"change", "refused"} <= outcomes or node == "l40s", outcomes


def test_an_inline_config_plans_as_its_file_and_a_missing_file_is_named(fixtures_dir, tmp_path):
    path = tmp_path / "mig.yaml"
    path.write_text(json.dumps(CONFIG))
    facts = json.loads((fixtures_dir / "nvml" / "hgx-h100.json").read_text())
    assert mig_replay_plan(facts, {}, str(path), "off") == mig_replay_plan(facts, CONFIG, "", "off")
    with pytest.raises(AnsibleFilterError, match="config_file .*missing.yaml"):
        mig_replay_plan(facts, {}, str(tmp_path / "missing.yaml"), "off")


@pytest.mark.parametrize("args, message", [
    (("not facts", CONFIG, "", "all-1g"), "needs the recorded ansible_facts.nvidia"),
    ((None, ["all-1g"], "", "all-1g"), "needs the recorded ansible_facts.nvidia"),
    (({}, ["all-1g"], "", "all-1g"), "mig_config must be a mig-parted document (a mapping), got list"),
    (({}, {}, ["a"], "all-1g"), "mig_config_file must be a path, got list"),
    (({}, CONFIG, "", ["all-1g"]), "mig_config_name must be a string, got list"),
    (({}, CONFIG, "/x.yaml", "all-1g"), "Set exactly one of mig_config"),
    (({}, {}, "", "all-1g"), "Set exactly one of mig_config"),
])
def test_bad_input_is_named(args, message):
    with pytest.raises(AnsibleFilterError) as caught:
        mig_replay_plan(*args)
    assert message in str(caught.value)
