"""The nvml_facts module entry point, run with patched arguments."""
import json

import pynvml
import pytest
from unittest import mock

from support.module_args import ExitJson, FailJson, patch_module_args

from ansible_collections.gpuops.platform.plugins.modules import nvml_facts
from fakes.fake_pynvml import FakeNvml
from fakes.nvml_nodes import h200_mig, hgx_h100

pytestmark = pytest.mark.usefixtures("module_exits")

FIXTURES = ("dgx-a100", "hgx-h100", "h200-mig", "l40s", "no-gpu")


def run(args, nvml=None, has_pynvml=True):
    with patch_module_args(args), \
            mock.patch.object(nvml_facts, "pynvml", nvml), \
            mock.patch.object(nvml_facts, "HAS_PYNVML", has_pynvml), \
            mock.patch.object(nvml_facts.nvml_utils, "KERNEL_MODULE_VERSION_PATHS", ()):
        with pytest.raises((ExitJson, FailJson)) as caught:
            nvml_facts.main()
    return caught.type is ExitJson, caught.value.args[0]


@pytest.mark.parametrize("name", FIXTURES)
def test_replay_returns_the_recorded_facts(fixtures_dir, name):
    path = fixtures_dir / "nvml" / (name + ".json")
    ok, result = run({"replay_file": str(path)}, has_pynvml=False)
    assert ok and result["changed"] is False
    facts = result["ansible_facts"]["nvidia"]
    recorded = json.loads(path.read_text())
    assert facts.pop("source") == "replay"
    recorded.pop("source")
    assert facts == recorded


def test_bad_replay_file_fails_with_what_to_fix(tmp_path):
    path = tmp_path / "facts.json"
    path.write_text('{"hello": "world"}')
    ok, result = run({"replay_file": str(path)})
    assert not ok
    assert "is not a recorded nvml_facts result" in result["msg"]


def test_missing_pynvml_succeeds_with_present_false():
    ok, result = run({}, has_pynvml=False)
    assert ok and result["changed"] is False
    facts = result["ansible_facts"]["nvidia"]
    assert facts["present"] is False
    assert "nvidia-ml-py" in facts["reason"]
    assert facts["gpus"] == [] and facts["health"]["status"] == "ok"


def test_gathers_through_nvml():
    nvml = FakeNvml(h200_mig())
    ok, result = run({}, nvml=nvml)
    assert ok and result["changed"] is False
    facts = result["ansible_facts"]["nvidia"]
    assert facts["present"] is True and facts["source"] == "nvml"
    assert len(facts["gpus"][0]["mig"]["devices"]) == 7
    assert nvml.calls["nvmlInit"] == 1 and nvml.refcount == 0


def test_check_mode_gathers_the_same_facts():
    ok, normal = run({}, nvml=FakeNvml(hgx_h100()))
    ok_check, checked = run({"_ansible_check_mode": True}, nvml=FakeNvml(hgx_h100()))
    assert ok and ok_check and checked["changed"] is False
    assert checked["ansible_facts"] == normal["ansible_facts"]


def test_no_driver_succeeds_with_present_false():
    node = hgx_h100()
    node.init_error = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    ok, result = run({}, nvml=FakeNvml(node))
    assert ok and result["ansible_facts"]["nvidia"]["present"] is False
    assert "kernel module is not loaded" in result["ansible_facts"]["nvidia"]["reason"]


def test_temperature_warning_c_reaches_the_health_rules():
    node = hgx_h100()
    node.gpus[0].temperature_c = 70
    ok, result = run({"temperature_warning_c": 65}, nvml=FakeNvml(node))
    assert ok
    assert result["ansible_facts"]["nvidia"]["gpus"][0]["health"]["status"] == "warning"


def test_nvml_breaking_mid_run_fails_with_a_clear_message():
    nvml = FakeNvml(hgx_h100())
    nvml.fail("nvmlDeviceGetUUID", pynvml.NVML_ERROR_UNINITIALIZED)
    ok, result = run({}, nvml=nvml)
    assert not ok
    assert "Uninitialized during nvmlDeviceGetUUID" in result["msg"]
    assert nvml.refcount == 0


def test_bad_option_type_is_refused():
    ok, result = run({"temperature_warning_c": "hot"}, nvml=FakeNvml(hgx_h100()))
    assert not ok and "temperature_warning_c" in result["msg"]


def test_unknown_option_is_refused():
    ok, result = run({"gather_subset": ["all"]}, nvml=FakeNvml(hgx_h100()))
    assert not ok and "gather_subset" in result["msg"]
