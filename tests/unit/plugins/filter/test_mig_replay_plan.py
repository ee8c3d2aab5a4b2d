"""mig_replay_plan: the mig role's plan of recorded facts on the controller is the nvidia_mig module's check-mode
result for the same facts and config, key for key, for every recorded node and a change, a no-op, a skip and a
refusal; bad input is refused with the module's message or a named type error."""
import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter.mig import mig_replay_plan
from ansible_collections.gpuops.platform.plugins.modules import nvidia_mig
from support.module_args import ExitJson, FailJson, patch_module_args

pytestmark = pytest.mark.usefixtures("module_exits")

CONFIG = {"version": "v1", "mig-configs": {
    "all-1g": [
        {"device-filter": ["0x233010DE", "0x20B210DE"], "devices": "all", "mig-enabled": True,
         "mig-devices": {"1g.10gb": 7}},
        {"device-filter": "0x233510DE", "devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}},
    ],
    "off": [{"devices": "all", "mig-enabled": False}],
    "two-7g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"7g.80gb": 2}}],
}}
# The module's own keys, which a filter result has no use for.
MODULE_KEYS = {"invocation", "warnings", "deprecations"}


def module_result(facts, name):
    with patch_module_args({"config": CONFIG, "config_name": name, "facts": facts, "_ansible_check_mode": True}):
        with pytest.raises((ExitJson, FailJson)) as caught:
            nvidia_mig.main()
    return caught.type is ExitJson, caught.value.args[0]


@pytest.mark.parametrize("node", ["hgx-h100", "h200-mig", "dgx-a100", "l40s"])
@pytest.mark.parametrize("name", ["all-1g", "off", "two-7g"])
def test_the_filter_gives_the_modules_result(fixtures_dir, node, name):
    facts = json.loads((fixtures_dir / "nvml" / ("%s.json" % node)).read_text())
    ok, expected = module_result(facts, name)
    if ok:
        got = mig_replay_plan(facts, CONFIG, "", name)
        assert got == dict((k, v) for k, v in expected.items() if k not in MODULE_KEYS)
    else:
        with pytest.raises(AnsibleFilterError) as caught:
            mig_replay_plan(facts, CONFIG, "", name)
        assert str(caught.value) == expected["msg"]


def test_a_config_file_on_the_controller_is_read(fixtures_dir, tmp_path):
    path = tmp_path / "mig.yaml"
    path.write_text(json.dumps(CONFIG))
    facts = json.loads((fixtures_dir / "nvml" / "hgx-h100.json").read_text())
    assert mig_replay_plan(facts, {}, str(path), "all-1g") == mig_replay_plan(facts, CONFIG, "", "all-1g")
    with pytest.raises(AnsibleFilterError, match="config_file .*missing.yaml"):
        mig_replay_plan(facts, {}, str(tmp_path / "missing.yaml"), "all-1g")


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
