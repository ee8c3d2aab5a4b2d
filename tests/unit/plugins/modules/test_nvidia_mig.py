"""The nvidia_mig module: offline planning from recorded facts, live check mode, apply, errors."""
import json

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._mig import apply as mig_apply
from ansible_collections.gpuops.platform.plugins.modules import nvidia_mig
from fakes import nvml_nodes
from fakes.fake_pynvml_mig import FakeMigNvml
from support.module_args import ExitJson, FailJson, patch_module_args

pytestmark = pytest.mark.usefixtures("module_exits")

ALL_1G = {"version": "v1", "mig-configs": {
    "all-1g": [
        {"device-filter": ["0x233010DE", "0x20B210DE"], "devices": "all", "mig-enabled": True,
         "mig-devices": {"1g.10gb": 7}},
        {"device-filter": "0x233510DE", "devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}},
    ],
    "mixed": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.71gb": 1, "1g.18gb": 4}}],
    "two-7g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"7g.80gb": 2}}],
    "off": [{"devices": "all", "mig-enabled": False}],
}}


def run(args, check=False, diff=False, expect=ExitJson):
    with patch_module_args(dict(args, _ansible_check_mode=check, _ansible_diff=diff)):
        with pytest.raises(expect) as err:
            nvidia_mig.main()
    return err.value.args[0]


@pytest.fixture
def live(monkeypatch):
    """Point the module at a fake NVML; returns a function that installs a node."""
    def install(node, **kwargs):
        fake = FakeMigNvml(node, **kwargs)
        monkeypatch.setattr(nvidia_mig, "pynvml", fake)
        monkeypatch.setattr(nvidia_mig, "HAS_PYNVML", True)

        monkeypatch.setattr(nvidia_mig, "nvidia_smi_reset", lambda _module: fake.reset_callable())
        return fake
    return install


# -- offline, from the recorded fixtures ---------------------------------------

def test_offline_plan_for_hgx_h100_in_check_mode(fixtures_dir):
    result = run({"config": ALL_1G, "config_name": "all-1g",
                  "facts_file": str(fixtures_dir / "nvml" / "hgx-h100.json")}, check=True, diff=True)
    assert result["changed"] is True
    gpus = result["plan"]["gpus"]
    assert len(gpus) == 8 and all(g["set_mode"] and g["reset_required"] for g in gpus)
    assert all(len(g["create"]) == 7 for g in gpus)
    assert result["k8s_resources"]["single"]["resources"] == {"nvidia.com/gpu": 56}
    assert result["k8s_resources"]["mixed"]["resources"] == {"nvidia.com/mig-1g.10gb": 56}
    assert "MIG disabled" in result["diff"]["before"] and "1g.10gb@6" in result["diff"]["after"]
    assert result["reboot_required"] is False and result["actions"] == []


def test_offline_already_applied_is_unchanged_without_check_mode(fixtures_dir):
    result = run({"config": ALL_1G, "config_name": "all-1g",
                  "facts_file": str(fixtures_dir / "nvml" / "h200-mig.json")})
    assert result["changed"] is False
    assert result["plan"]["gpus"][0]["keep"] and not result["plan"]["gpus"][0]["destroy"]


def test_offline_change_outside_check_mode_is_refused(fixtures_dir):
    result = run({"config": ALL_1G, "config_name": "mixed",
                  "facts_file": str(fixtures_dir / "nvml" / "h200-mig.json")}, expect=FailJson)
    assert result["msg"].startswith("replayed facts can only be planned")
    assert [c["start"] for c in result["plan"]["gpus"][0]["create"]] == [4]


def test_offline_inline_facts_and_wrapped_result(fixtures_dir):
    recorded = json.loads((fixtures_dir / "nvml" / "dgx-a100.json").read_text())
    result = run({"config": ALL_1G, "config_name": "all-1g", "facts": {"ansible_facts": {"nvidia": recorded}}},
                 check=True)
    assert result["changed"] and result["plan"]["gpus"][0]["family"] == "A100 80GB"


def test_invalid_layout_fails_with_every_problem(fixtures_dir):
    result = run({"config": ALL_1G, "config_name": "two-7g",
                  "facts_file": str(fixtures_dir / "nvml" / "hgx-h100.json")}, check=True, expect=FailJson)
    assert len(result["errors"]) == 8
    assert result["errors"][3] == ("config 'two-7g' entry 1, GPU 3 (NVIDIA H100 80GB HBM3, H100 80GB): "
                                   "7g.80gb x2 exceeds the 1 allowed on H100 80GB")
    assert "nothing was changed" in result["msg"]


def test_mig_on_l40s_is_skipped_with_a_note_for_devices_all_and_a_warning(fixtures_dir):
    from unittest import mock
    from ansible.module_utils import basic

    # mig-parted skips a GPU without MIG that "devices: all" selects; a node where no GPU
    # can do MIG, asked for MIG devices, is warned about
    with mock.patch.object(basic.AnsibleModule, "warn") as warn:
        result = run({"config": ALL_1G, "config_name": "mixed",
                      "facts_file": str(fixtures_dir / "nvml" / "l40s.json")}, check=True)
    assert result["changed"] is False and result["plan"]["valid"] is True
    assert result["plan"]["notes"] == ["config 'mixed' entry 1, GPU 0 (NVIDIA L40S, unknown MIG family): "
                                       "skipped, the GPU does not support MIG"]
    assert result["plan"]["gpus"][0]["after"]["mig"] is None
    assert result["plan"]["warnings"] == [
        "config 'mixed' asks for MIG (entry 1) but no GPU on this node supports MIG (NVIDIA L40S x1): mig-parted "
        "skips such GPUs, so the node keeps its whole GPUs; give it a config without MIG (mig-enabled: false) or "
        "check which config this node gets"]
    assert [c.args[0] for c in warn.call_args_list] == result["plan"]["warnings"]


def test_mig_on_l40s_by_index_is_refused(fixtures_dir):
    document = {"version": "v1", "mig-configs": {
        "x": [{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 1}}]}}
    result = run({"config": document, "config_name": "x",
                  "facts_file": str(fixtures_dir / "nvml" / "l40s.json")}, check=True, expect=FailJson)
    assert "MIG is not supported on this GPU, but the entry enables it for GPU index 0" in result["errors"][0]


def test_no_gpu_fixture_is_an_error(fixtures_dir):
    result = run({"config": ALL_1G, "config_name": "off",
                  "facts_file": str(fixtures_dir / "nvml" / "no-gpu.json")}, check=True, expect=FailJson)
    assert result["errors"][0].startswith("no NVIDIA GPU to configure")


def test_bad_config_and_bad_files(tmp_path, fixtures_dir):
    result = run({"config": {"version": "v1", "mig-configs": {"x": [{"devices": "all"}]}}, "config_name": "x",
                  "facts_file": str(fixtures_dir / "nvml" / "h200-mig.json")}, expect=FailJson)
    assert result["errors"] == ["config 'x' entry 1: 'mig-enabled' is required and must be true or false, got None"]
    result = run({"config": ALL_1G, "config_name": "nope",
                  "facts_file": str(fixtures_dir / "nvml" / "h200-mig.json")}, expect=FailJson)
    assert "config 'nope' is not in mig-configs (available: all-1g, mixed, off, two-7g)" in result["msg"]
    broken = tmp_path / "facts.json"
    broken.write_text("{}")
    result = run({"config": ALL_1G, "config_name": "off", "facts_file": str(broken)}, expect=FailJson)
    assert "not a recorded nvml_facts result" in result["msg"]
    result = run({"config_file": str(tmp_path / "missing.yaml"), "config_name": "off"}, expect=FailJson)
    assert result["msg"] == ("cannot read config_file %s: it does not exist; nothing was changed"
                             % (tmp_path / "missing.yaml"))


def test_config_file_in_mig_parted_yaml(tmp_path, fixtures_dir):
    path = tmp_path / "config.yaml"
    path.write_text("version: v1\nmig-configs:\n  all-1g.18gb:\n    - devices: all\n      mig-enabled: true\n"
                    "      mig-devices:\n        \"1g.18gb\": 7\n")
    result = run({"config_file": str(path), "config_name": "all-1g.18gb",
                  "facts_file": str(fixtures_dir / "nvml" / "h200-mig.json")})
    assert result["changed"] is False


# -- live, through the fake NVML -----------------------------------------------

def test_live_check_mode_plans_without_touching(live):
    fake = live(nvml_nodes.h200_mig())
    result = run({"config": ALL_1G, "config_name": "mixed"}, check=True)
    assert result["changed"] and fake.log == []
    assert result["plan"]["gpus"][0]["rules"] == "nvml"
    assert fake.refcount == 0      # nvmlShutdown after the work


def test_live_apply_then_idempotent(live):
    fake = live(nvml_nodes.h200_mig())
    result = run({"config": ALL_1G, "config_name": "mixed", "clients_stopped": True})
    assert result["changed"] and result["reboot_required"] is False
    assert result["actions"] == ["GPU 0: destroyed 1g.18gb at 4 (GPU instance 11)",
                                 "GPU 0: destroyed 1g.18gb at 5 (GPU instance 12)",
                                 "GPU 0: destroyed 1g.18gb at 6 (GPU instance 13)",
                                 "GPU 0: created 3g.71gb at 4"]
    assert result["k8s_resources"]["mixed"]["resources"] == {"nvidia.com/mig-1g.18gb": 4,
                                                             "nvidia.com/mig-3g.71gb": 1}
    fake.log[:] = []
    again = run({"config": ALL_1G, "config_name": "mixed", "clients_stopped": True})
    assert again["changed"] is False and fake.log == []


def test_live_enable_on_dgx_with_reset(live):
    fake = live(nvml_nodes.dgx_a100())
    result = run({"config": ALL_1G, "config_name": "all-1g", "clients_stopped": True})
    assert result["changed"] and fake.resets == list(range(8))
    assert all(len(g.mig.gpu_instances) == 7 for g in fake.node.gpus)


def test_live_reboot_required_when_reset_not_allowed(live):
    fake = live(nvml_nodes.hgx_h100())
    result = run({"config": ALL_1G, "config_name": "all-1g", "allow_reset": False, "clients_stopped": True})
    assert result["changed"] and result["reboot_required"]
    assert len(result["reboot_reasons"]) == 8 and "allow_reset is false" in result["reboot_reasons"][0]
    assert all(not g.mig.gpu_instances for g in fake.node.gpus)


def test_live_refuses_with_processes(live):
    fake = live(nvml_nodes.h200_mig())
    fake.node.gpus[0].processes = [(777, 1 << 30)]
    result = run({"config": ALL_1G, "config_name": "mixed"}, expect=FailJson)
    assert "runs 1 compute process(es) (pid 777)" in result["msg"] and fake.log == []
    assert result["actions"] == []


def test_live_invalid_changes_nothing(live):
    fake = live(nvml_nodes.hgx_h100())
    result = run({"config": ALL_1G, "config_name": "two-7g", "clients_stopped": True}, expect=FailJson)
    assert len(result["errors"]) == 8 and fake.log == []


def test_live_verification_failure_is_reported(live, monkeypatch):
    fake = live(nvml_nodes.h200_mig())
    real = fake.nvmlGpuInstanceCreateComputeInstance

    def no_device(gpu_instance, profile_id):
        handle = real(gpu_instance, profile_id)
        handle.gpu_instance.compute_instances.clear()   # returns success, yet no MIG device exists
        return handle
    monkeypatch.setattr(fake, "nvmlGpuInstanceCreateComputeInstance", no_device)
    result = run({"config": ALL_1G, "config_name": "mixed", "clients_stopped": True}, expect=FailJson)
    assert result["msg"].startswith("MIG layout 'mixed' was applied but does not verify")
    assert "1 GPU instance(s) have no MIG device" in result["msg"]


def test_live_without_driver(live):
    live(nvml_nodes.no_gpu())
    result = run({"config": ALL_1G, "config_name": "off"}, expect=FailJson)
    assert result["msg"].startswith("NVML is not available on this node")


def test_missing_pynvml(monkeypatch):
    monkeypatch.setattr(nvidia_mig, "HAS_PYNVML", False)
    result = run({"config": ALL_1G, "config_name": "off"}, expect=FailJson)
    assert "nvidia-ml-py" in result["msg"]


class FakeModule(object):
    """Just what nvidia_smi_reset uses of AnsibleModule."""

    def __init__(self, binary, rc, out="", err=""):
        self.binary, self.answer, self.commands = binary, (rc, out, err), []

    def get_bin_path(self, name):
        return self.binary if name == "nvidia-smi" else None

    def run_command(self, args):
        self.commands.append(args)
        return self.answer


def test_reset_runs_nvidia_smi_on_the_gpu_uuid():
    module = FakeModule("/usr/bin/nvidia-smi", 0, "GPU 00000000:18:00.0 was successfully reset.")
    nvidia_mig.nvidia_smi_reset(module)(0, {"uuid": "GPU-1234"})
    assert module.commands == [["/usr/bin/nvidia-smi", "--gpu-reset", "-i", "GPU-1234"]]


def test_reset_refusal_and_missing_tool_raise_reset_blocked():
    module = FakeModule("/usr/bin/nvidia-smi", 255, "GPU 00000000:18:00.0 is currently in use by another process.")
    with pytest.raises(mig_apply.ResetBlocked) as err:
        nvidia_mig.nvidia_smi_reset(module)(3, {"uuid": None})
    assert str(err.value) == "GPU 00000000:18:00.0 is currently in use by another process."
    assert module.commands[0][-1] == "3"
    with pytest.raises(mig_apply.ResetBlocked) as err:
        nvidia_mig.nvidia_smi_reset(FakeModule(None, 0))(0, {})
    assert str(err.value) == "nvidia-smi is not installed"


# -- live, profiles with attributes (+gfx, -me, +me.all) -------------------------------

RTX_PRO = {"version": "v1", "mig-configs": {
    "all-1g.24gb.gfx": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.24gb+gfx": 4}}],
    "mixed-attrs": [{"devices": "all", "mig-enabled": True,
                     "mig-devices": {"2g.48gb+me.all": 1, "1g.24gb-me": 2}}],
    "two-me-all": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.24gb+me.all": 2}}],
}}


def test_live_rules_read_attribute_profiles_from_nvml(live):
    live(nvml_nodes.rtx_pro_6000_mig())
    result = run({"config": RTX_PRO, "config_name": "mixed-attrs"}, check=True)
    gpu0 = result["plan"]["gpus"][0]
    assert gpu0["rules"] == "nvml" and gpu0["family"] == "RTX PRO 6000 Blackwell 96GB"
    assert gpu0["create"] == [{"profile": "2g.48gb+me.all", "start": 0, "size": 2},
                              {"profile": "1g.24gb-me", "start": 2, "size": 1},
                              {"profile": "1g.24gb-me", "start": 3, "size": 1}]
    result = run({"config": RTX_PRO, "config_name": "two-me-all"}, check=True, expect=FailJson)
    assert result["errors"] == ["config 'two-me-all' entry 1, GPU 0 (NVIDIA RTX PRO 6000 Blackwell Server Edition, "
                                "RTX PRO 6000 Blackwell 96GB): 1g.24gb+me.all x2 exceeds the 1 allowed on "
                                "RTX PRO 6000 Blackwell 96GB"]


def test_live_apply_creates_gfx_instances_with_their_own_profile_id(live):
    fake = live(nvml_nodes.rtx_pro_6000_mig())
    result = run({"config": RTX_PRO, "config_name": "all-1g.24gb.gfx", "clients_stopped": True})
    assert result["changed"] is True
    created = [entry for entry in fake.log if entry[0] == "create_gi"]
    assert [(name, start) for _op, _gpu, _gi, name, start in created] == [("MIG 1g.24gb+gfx", s) for s in range(4)]
    again = run({"config": RTX_PRO, "config_name": "all-1g.24gb.gfx", "clients_stopped": True})
    assert again["changed"] is False


def test_a_config_that_selects_no_gpu_is_reported(fixtures_dir):
    from unittest import mock
    from ansible.module_utils import basic

    document = {"version": "v1", "mig-configs": {"b200-only": [
        {"device-filter": "0x290110DE", "devices": "all", "mig-enabled": True, "mig-devices": {"7g.180gb": 1}},
        {"devices": [9], "mig-enabled": False}]}}
    with mock.patch.object(basic.AnsibleModule, "warn") as warn:
        result = run({"config": document, "config_name": "b200-only",
                      "facts_file": str(fixtures_dir / "nvml" / "hgx-h100.json")}, check=True)
    assert result["changed"] is False
    plan = result["plan"]
    assert plan["notes"] == [
        "config 'b200-only' entry 1 (devices all, device-filter 0x290110DE) selects no GPU on this node",
        "config 'b200-only' entry 2 (devices 9) selects no GPU on this node"]
    assert plan["warnings"] == [
        "config 'b200-only' entry 2 selects GPU 9, which this node does not have",
        "config 'b200-only' selects no GPU on this node (device ids: 0x233010DE); nothing would change"]
    assert [c.args[0] for c in warn.call_args_list] == plan["warnings"]
