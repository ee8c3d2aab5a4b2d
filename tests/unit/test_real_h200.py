"""The offline code held against readings of a real H200 (../shared/reference/real-gpu, read at test time).

The recorded facts are replayed through the fleet planner, NVML's own profile
answers are fed to family_from_nvml and compared with the offline table (and with
nvidia-smi mig -lgip/-lgipp), and the clocks event (throttle) reasons of
nvidia-smi -q, idle and under load, go through the collector and the health rules.
"""
import json
import re
import types
import xml.etree.ElementTree as ET

import pynvml
import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._mig import profiles as mig_profiles
from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as nvml
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan
from ansible_collections.gpuops.platform.plugins.plugin_utils.health_verdict import health_verdict
from fakes.fake_pynvml import FakeNvml
from fakes.nvml_nodes import h200_mig
from test_recorded_hardware import parse_lgip

DEVICE_ID = "0x233510DE"
# nvidia-smi -q's labels under "Clocks Event Reasons" -> the -q -x tag (clocks_event_reason_<tag>)
SMI_LABELS = {"Idle": "gpu_idle", "Applications Clocks Setting": "applications_clocks_setting",
              "SW Power Cap": "sw_power_cap", "HW Slowdown": "hw_slowdown", "HW Thermal Slowdown": "hw_thermal_slowdown",
              "HW Power Brake Slowdown": "hw_power_brake_slowdown", "Sync Boost": "sync_boost",
              "SW Thermal Slowdown": "sw_thermal_slowdown", "Display Clock Setting": "display_clocks_setting"}
# The -q -x tag -> NVML's bit, from the binding (not from the collector's own table).
NVML_BITS = {"gpu_idle": pynvml.nvmlClocksEventReasonGpuIdle,
             "applications_clocks_setting": pynvml.nvmlClocksEventReasonApplicationsClocksSetting,
             "sw_power_cap": pynvml.nvmlClocksEventReasonSwPowerCap,
             "hw_slowdown": pynvml.nvmlClocksEventReasonHwSlowdown,
             "hw_thermal_slowdown": pynvml.nvmlClocksEventReasonHwThermalSlowdown,
             "hw_power_brake_slowdown": pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown,
             "sync_boost": pynvml.nvmlClocksEventReasonSyncBoost,
             "sw_thermal_slowdown": pynvml.nvmlClocksEventReasonSwThermalSlowdown,
             "display_clocks_setting": pynvml.nvmlClocksEventReasonDisplayClockSetting}


@pytest.fixture(scope="module")
def real(shared_reference):
    return shared_reference / "real-gpu"


# ---------------------------------------------------------------------------
# Recorded facts through the planners
# ---------------------------------------------------------------------------

def test_the_recorded_facts_replay(real):
    facts = nvml.load_replay(str(real / "h200-nvml-facts.json"))
    assert facts["present"] is True and facts["gpu_count"] == 1 and facts["driver_version"] == "580.159.04"
    gpu = facts["gpus"][0]
    assert (gpu["name"], gpu["pci"]["device_id"], gpu["memory"]["total_mib"]) == ("NVIDIA H200", DEVICE_ID, 143771)
    assert gpu["mig"] == {"supported": True, "current_mode": "disabled", "pending_mode": "disabled", "devices": []}


def test_the_fleet_planner_plans_the_recorded_h200(real, tmp_path):
    (tmp_path / "h200.json").write_bytes((real / "h200-nvml-facts.json").read_bytes())
    mig = {"version": "v1", "mig-configs": {
        "mixed": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.71gb": 1, "1g.18gb": 4}}],
        "h100-names": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}}
    out = fleet_plan.plan_fleet([("h200", {"mig_config": mig, "mig_config_name": "mixed"}),
                                 ("wrong", {"mig_config": mig, "mig_config_name": "h100-names",
                                            "gpuops_nvml_replay_file": str(real / "h200-nvml-facts.json")})],
                                str(tmp_path), mig_strategy="mixed")
    host = out["hosts"]["h200"]
    assert host["errors"] == [] and host["gpu_count"] == 1 and host["present"] is True
    assert host["health"]["status"] == "ok"
    assert host["mig"]["valid"] and host["mig"]["changed"]    # MIG is disabled on the recorded GPU
    assert host["capacity"]["resources"] == {"nvidia.com/mig-3g.71gb": 1, "nvidia.com/mig-1g.18gb": 4}
    # H100 profile names on the H200: refused, naming the profile and the GPU.
    wrong = out["hosts"]["wrong"]
    assert wrong["valid"] is False and any("1g.10gb" in e and "H200" in e for e in wrong["errors"]), wrong["errors"]


# ---------------------------------------------------------------------------
# NVML's profile answers equal the offline table
# ---------------------------------------------------------------------------

class _RecordedProfiles(object):
    """nvmlDeviceGetGpuInstanceProfileInfo as the H200 answered it, with the binding's errors."""

    NVMLError = pynvml.NVMLError

    def __init__(self, answers):
        self.answers = answers

    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle, profile):
        answer = self.answers.get(str(profile), {"info": "ERR Invalid Argument"})["info"]
        if isinstance(answer, str):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED if "Not Supported" in answer
                                   else pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return types.SimpleNamespace(**answer)

    def placements(self, handle, profile_id, info):
        return [tuple(p) for p in self.answers[str(profile_id)]["placements"]]


def _rules(family):
    """What the planner reads of each profile (the table holds no NVML instance id, only the profile index)."""
    return dict((name, (p.gi_profile_id, p.compute_slices, p.memory_slices, p.max_count, tuple(p.starts),
                        p.ci_profile_id))
                for name, p in family.profiles.items())


def test_family_from_nvml_equals_the_table(real):
    recorded = json.loads((real / "h200-nvml-profiles.json").read_text())
    gpu = recorded["gpus"][0]
    assert "0x%08X" % gpu["pci"]["pciDeviceId"] == DEVICE_ID
    answers = _RecordedProfiles(gpu["gi_profiles"])
    live = mig_profiles.family_from_nvml(answers, object(), "NVIDIA H200", answers.placements)
    table = mig_profiles.family_for(DEVICE_ID)
    assert live is not None and table is not None
    assert _rules(live) == _rules(table)
    assert len(live.profiles) == 7
    assert (live.compute_slices, live.memory_slices) == (table.compute_slices, table.memory_slices)
    # The ids NVML creates instances with are those nvidia-smi lists.
    hardware = parse_lgip((real / "h200-nvidia-smi-mig-lgip.txt").read_text()
                          + (real / "h200-nvidia-smi-mig-lgipp.txt").read_text())
    assert dict((name, p.nvml_id) for name, p in live.profiles.items()) == \
        dict((name, ids[0]) for name, ids in hardware.items())


def test_nvidia_smi_lgip_equals_the_table(real):
    hardware = parse_lgip((real / "h200-nvidia-smi-mig-lgip.txt").read_text()
                          + (real / "h200-nvidia-smi-mig-lgipp.txt").read_text())
    table = mig_profiles.family_for(DEVICE_ID)
    assert sorted(hardware) == sorted(table.profiles)
    for name, (_nvml_id, total, starts, size) in hardware.items():
        profile = table.profiles[name]
        assert (profile.max_count, tuple(profile.starts), profile.memory_slices) == (total, starts, size), name


# ---------------------------------------------------------------------------
# Clocks event (throttle) reasons from nvidia-smi, idle and under load
# ---------------------------------------------------------------------------

def smi_xml_reasons(text):
    """{tag: active} of <clocks_event_reasons> in nvidia-smi -q -x output, and the utilisation."""
    gpu = ET.fromstring(text).find("gpu")
    reasons = dict((child.tag[len("clocks_event_reason_"):], child.text.strip() == "Active")
                   for child in gpu.find("clocks_event_reasons"))
    util = gpu.find("utilization")
    return reasons, tuple(int(util.find(tag).text.split()[0]) for tag in ("gpu_util", "memory_util"))


def smi_text_reasons(text):
    """{tag: active} of the "Clocks Event Reasons" section of nvidia-smi -q, and the utilisation."""
    section = re.search(r"^    Clocks Event Reasons\n(.*?)^    \S", text, re.M | re.S).group(1)
    reasons = dict((SMI_LABELS[label.strip()], state.strip() == "Active")
                   for label, state in re.findall(r"^\s+([^:\n]+?)\s+:\s+(.+)$", section, re.M))
    util = re.search(r"^    Utilization\n\s+GPU\s+:\s+(\d+) %\n\s+Memory\s+:\s+(\d+) %", text, re.M)
    return reasons, (int(util.group(1)), int(util.group(2)))


def _captures(real):
    return {"idle": smi_xml_reasons((real / "h200-nvidia-smi-q.xml").read_text()),
            "under load": smi_text_reasons((real / "h200-nvidia-smi-q-under-load.txt").read_text())}


def test_both_captures_list_every_reason_the_collector_names(real):
    named = set(name for _bit, name in nvml.CLOCKS_EVENT_REASONS)
    for capture, (reasons, _util) in _captures(real).items():
        assert set(reasons) == set(NVML_BITS), capture
        # board_limit and reliability: older drivers' throttle reasons, no longer listed by nvidia-smi.
        assert set(reasons) == named - {"board_limit", "reliability"}, capture
    assert _captures(real)["idle"][0]["gpu_idle"] is True
    assert [n for n, active in _captures(real)["under load"][0].items() if active] == ["sw_power_cap"]


def _h200_reading(mask, utilization):
    """The H200 model (MIG disabled, as recorded) answering these readings through the fake NVML."""
    node = h200_mig()
    gpu = node.gpus[0]
    gpu.mig.current_mode = gpu.mig.pending_mode = pynvml.NVML_DEVICE_MIG_DISABLE
    gpu.mig.gpu_instances = {}
    gpu.clocks_event_reasons, gpu.utilization = mask, utilization
    return nvml.collect(FakeNvml(node), kernel_module_paths=(), library_globs=(), pci_root="/nonexistent")


@pytest.mark.parametrize("capture,names,util", [
    ("idle", ["gpu_idle"], {"gpu_percent": 0, "memory_percent": 0}),
    ("under load", ["sw_power_cap"], {"gpu_percent": 97, "memory_percent": 24}),
])
def test_the_captured_reasons_through_the_collector_and_health(real, capture, names, util):
    reasons, utilization = _captures(real)[capture]
    mask = 0
    for name, active in reasons.items():
        mask |= NVML_BITS[name] if active else 0
    facts = _h200_reading(mask, utilization)
    gpu = facts["gpus"][0]
    assert gpu["clocks_event_reasons"] == names and gpu["utilization"] == util
    # SW power cap under load is the driver holding the power limit, not a fault.
    assert gpu["health"]["status"] == "ok" and health_verdict(facts)["status"] == "ok"


@pytest.mark.parametrize("name,text", [("hw_slowdown", "HW slowdown"), ("hw_thermal_slowdown", "HW thermal slowdown"),
                                       ("hw_power_brake_slowdown", "HW power brake slowdown")])
def test_a_hardware_slowdown_under_load_is_a_warning_naming_it(real, name, text):
    reasons, utilization = _captures(real)["under load"]
    mask = NVML_BITS[name]
    for other, active in reasons.items():
        mask |= NVML_BITS[other] if active else 0
    verdict = health_verdict(_h200_reading(mask, utilization))
    assert verdict["status"] == "warning"
    assert [r for r in verdict["reasons"] if r.startswith("GPU 0: %s is active" % text)], verdict["reasons"]
