"""The offline code held against output recorded on a real GPU (tests/fixtures/hardware).

Each folder there was recorded read-only on real hardware (see its README.md). These
tests fail when the offline MIG tables, the offline planner or the replay loader
disagree with what the hardware and the driver really reported.
"""
import json
import re

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._mig import profiles as mig_profiles
from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as nvml
from ansible_collections.gpuops.platform.plugins.modules import nvidia_mig
from support.module_args import ExitJson, FailJson, patch_module_args

pytestmark = pytest.mark.usefixtures("module_exits")

H100 = "h100-80gb-hbm3"
PLANNED_CONFIGS = ("all-disabled", "all-1g.10gb", "all-balanced", "all-3g.40gb", "all-7g.80gb")


@pytest.fixture
def recorded(fixtures_dir):
    return fixtures_dir / "hardware" / H100


def parse_lgip(text):
    """`nvidia-smi mig -lgip` and `-lgipp` output -> {profile name: (nvml id, total, placements)}.

    A placement line reads ``GPU  0 Profile ID 15 Placements: {0,2,4,6}:2``: the starts,
    then the size in memory slices.
    """
    profiles = {}
    for match in re.finditer(r"^\|\s+\d+\s+MIG (\S+)\s+(\d+)\s+\d+/(\d+)\s", text, re.M):
        profiles[match.group(2)] = {"name": match.group(1), "total": int(match.group(3))}
    placements = {}
    for match in re.finditer(r"Profile ID\s+(\d+) Placements?\s*: \{([\d,]+)\}:(\d+)", text):
        starts = tuple(int(s) for s in match.group(2).split(","))
        placements[match.group(1)] = (starts, int(match.group(3)))
    assert profiles and set(profiles) == set(placements), "unparsable nvidia-smi output"
    return dict((p["name"], (int(pid), p["total"]) + placements[pid]) for pid, p in profiles.items())


def test_lgip_parser_reads_every_profile(recorded):
    parsed = parse_lgip((recorded / "nvidia-smi-mig-lgip.txt").read_text())
    assert parsed["1g.20gb"] == (15, 4, (0, 2, 4, 6), 2)
    assert parsed["7g.80gb"] == (0, 1, (0,), 8)
    assert len(parsed) == 7


def test_offline_h100_table_equals_the_hardware(recorded):
    """Every profile the H100 reports, with its count and placements, is in the table, and
    the table has no profile the hardware lacks."""
    facts = json.loads((recorded / "nvml_facts.json").read_text())["ansible_facts"]["nvidia"]
    device_id = facts["gpus"][0]["pci"]["device_id"]
    family = mig_profiles.family_for(device_id)
    assert family is not None, "no offline MIG table for %s" % device_id
    hardware = parse_lgip((recorded / "nvidia-smi-mig-lgip.txt").read_text())
    assert sorted(family.profiles) == sorted(hardware)
    for name, (_nvml_id, total, starts, size) in hardware.items():
        profile = family.profiles[name]
        assert (profile.max_count, tuple(profile.starts), profile.memory_slices) == (total, starts, size), name


def test_recorded_facts_replay(recorded):
    facts = nvml.load_replay(str(recorded / "nvml_facts.json"))
    assert facts["source"] == "replay" and facts["present"] is True
    assert facts["gpu_count"] == 1 and facts["driver_version"] == "580.159.04"
    gpu = facts["gpus"][0]
    assert gpu["name"] == "NVIDIA H100 80GB HBM3" and gpu["pci"]["device_id"] == "0x233010DE"
    assert gpu["mig"]["supported"] is True and gpu["health"]["status"] == "ok"
    assert facts["reboot_required"] is False


def _essentials(result):
    """What must be the same whether the rules came from NVML or from the table."""
    gpus = [dict((k, g[k]) for k in ("index", "mode", "set_mode", "reset_required", "create",
                                     "destroy", "after", "changed"))
            for g in result["plan"]["gpus"]]
    return {"valid": result["plan"]["valid"], "changed": result["changed"], "gpus": gpus,
            "k8s_resources": result["k8s_resources"]}


@pytest.mark.parametrize("config_name", PLANNED_CONFIGS)
def test_offline_plan_equals_the_plan_made_on_the_gpu(recorded, shared_reference, config_name):
    """The recorded plans were made in check mode on the H100 through NVML (rules: nvml),
    from mig-parted's config-default.yaml; planning offline from the recorded facts must
    give the same instances at the same placements and the same Kubernetes resources."""
    live = json.loads((recorded / ("mig-plan-%s.json" % config_name)).read_text())
    assert live["plan"]["gpus"][0]["rules"] == "nvml"
    args = {"config_file": str(shared_reference / "mig-parted" / "systemd-config-default.yaml"),
            "config_name": config_name, "facts_file": str(recorded / "nvml_facts.json"),
            "_ansible_check_mode": True}
    with patch_module_args(args):
        with pytest.raises(ExitJson) as err:
            nvidia_mig.main()
    offline = err.value.args[0]
    assert _essentials(offline) == _essentials(live)


def _offline_essentials(result, failed):
    if failed:
        return {"failed": True, "msg": result["msg"]}
    gpus = [dict((k, g.get(k)) for k in ("index", "mode", "set_mode", "reset_required", "create",
                                         "destroy", "after", "changed"))
            for g in result["plan"]["gpus"]]
    # Kubernetes resource names are derived from the layout by code, not read from the
    # GPU, so they are not part of the recording.
    return {"changed": result["changed"], "valid": result["plan"]["valid"], "gpus": gpus,
            "notes": result["plan"].get("notes"), "warnings": result["plan"].get("warnings")}


def _live_cases():
    from conftest import FIXTURES
    recorded = json.loads((FIXTURES / "hardware" / H100 / "mig-plans-nvidia-configs.json").read_text())
    return [(name, config, want) for name, configs in sorted(recorded.items())
            for config, want in sorted(configs.items())]


LIVE_CASES = _live_cases()


def test_every_nvidia_config_was_planned_on_the_gpu():
    files = set(name for name, _config, _want in LIVE_CASES)
    assert len(files) == 6 and len(LIVE_CASES) == 254
    assert sum(1 for _n, _c, want in LIVE_CASES if not want.get("failed")) == 54
    assert all(g["rules"] == "nvml" for _n, _c, want in LIVE_CASES for g in want.get("gpus", []))


@pytest.mark.parametrize("name,config_name,live", LIVE_CASES,
                         ids=["%s:%s" % (n, c) for n, c, _w in LIVE_CASES])
def test_offline_plan_of_every_nvidia_config_equals_the_gpu(recorded, shared_reference, name,
                                                            config_name, live):
    """Every config of every file NVIDIA ships (../shared/reference/mig-parted), planned in
    check mode on the H100 through NVML, and planned offline from the recorded facts and
    the offline table: the same instances, placements, notes and errors."""
    args = {"config_file": str(shared_reference / "mig-parted" / name), "config_name": config_name,
            "facts_file": str(recorded / "nvml_facts.json"), "_ansible_check_mode": True}
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as err:
            nvidia_mig.main()
    want = dict(live, gpus=[dict((k, v) for k, v in g.items() if k != "rules") for g in live.get("gpus", [])])
    if not live.get("gpus"):
        want.pop("gpus")
    assert _offline_essentials(err.value.args[0], err.type is FailJson) == want
