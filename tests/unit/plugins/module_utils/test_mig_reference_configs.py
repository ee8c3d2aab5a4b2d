"""Every MIG config NVIDIA ships, run unchanged against the recorded nodes and every GPU it names.

The files are read at test time from ../shared/reference/mig-parted (see its
SOURCE.txt). The expected outcome comes from an independent model of
mig-parted's rules (api/spec/v1 and cmd/nvidia-mig-parted/apply in
NVIDIA/mig-parted), written out below rather than taken from the module:

* an entry selects a GPU when its device-filter names the GPU's PCI device id (or
  it has none) and ``devices`` is ``all`` or lists the GPU's index;
* a GPU without MIG is skipped when ``devices: all`` selects it or the entry
  disables MIG; an explicit index that enables MIG on it fails;
* a profile the GPU lacks, or more instances than it allows, fails;
* an entry that selects no GPU is passed over.

The profiles per GPU are those of NVIDIA's MIG user guide, spelled out per model
(not generated), so a slip in the module's table generator fails here.
"""
import copy
import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpuops.platform.plugins.module_utils._mig import config as C
from ansible_collections.gpuops.platform.plugins.module_utils._mig import plan as PL

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "nvml"
REFERENCE_FILES = ("systemd-config-default.yaml", "examples-config.yaml", "examples-dgx-station-80gb-config.yaml",
                   "container-example.yaml", "container-example-hopper-blackwell.yaml",
                   "gpu-operator-default-mig-parted-config.yaml")


def _seven(one, one_double, two, three, four, seven):
    return {"1g.%dgb" % one: 7, "1g.%dgb+me" % one: 1, "1g.%dgb" % one_double: 4, "2g.%dgb" % two: 3,
            "3g.%dgb" % three: 2, "4g.%dgb" % four: 1, "7g.%dgb" % seven: 1}


A100_40 = {"1g.5gb": 7, "1g.5gb+me": 1, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1}
A100_80 = {"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}
G96 = {"1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.48gb": 2, "4g.48gb": 1, "7g.96gb": 1}
A30 = {"1g.6gb": 4, "1g.6gb+me": 1, "2g.12gb": 2, "2g.12gb+me": 1, "4g.24gb": 1}
RTX_PRO_6000 = {"1g.24gb": 4, "1g.24gb-me": 4, "1g.24gb+gfx": 4, "1g.24gb+me.all": 1,
                "2g.48gb": 2, "2g.48gb-me": 2, "2g.48gb+gfx": 2, "2g.48gb+me.all": 1,
                "4g.96gb": 1, "4g.96gb+gfx": 1}
# PCI device id -> (product, {profile: instances allowed}); None: a GPU without MIG.
GPUS = {
    "0x20B010DE": ("A100-SXM4-40GB", A100_40), "0x20B110DE": ("A100-PCIE-40GB", A100_40),
    "0x20F110DE": ("A100-PCIE-40GB", A100_40), "0x20F610DE": ("A800-40GB", A100_40),
    "0x20B210DE": ("A100-SXM4-80GB", A100_80), "0x20B510DE": ("A100-PCIE-80GB", A100_80),
    "0x20F310DE": ("A800-SXM4-80GB", A100_80), "0x20F510DE": ("A800-80GB", A100_80),
    "0x20B610DE": ("PG506-96GB", G96), "0x20B710DE": ("A30", A30),
    "0x233010DE": ("H100 80GB HBM3", A100_80), "0x233110DE": ("H100 PCIe", A100_80),
    "0x232210DE": ("H800 PCIe", A100_80), "0x232410DE": ("H800", A100_80),
    "0x232110DE": ("H100 NVL", _seven(12, 24, 24, 47, 47, 94)),
    "0x233A10DE": ("H800 NVL", _seven(12, 24, 24, 47, 47, 94)),
    "0x234210DE": ("GH200 480GB", G96), "0x233D10DE": ("H100 96GB", G96), "0x232910DE": ("H20", G96),
    "0x234810DE": ("GH200 144G HBM3e", _seven(18, 36, 36, 72, 72, 144)),
    "0x233510DE": ("H200", _seven(18, 35, 35, 71, 71, 141)), "0x233B10DE": ("H200 NVL", _seven(18, 35, 35, 71, 71, 141)),
    "0x290110DE": ("B200", _seven(23, 45, 45, 90, 90, 180)),
    "0x294110DE": ("GB200", _seven(23, 47, 47, 93, 93, 186)),
    "0x318210DE": ("B300", _seven(34, 67, 67, 135, 135, 269)),
    "0x31C210DE": ("GB300", _seven(35, 70, 70, 139, 139, 278)),
    "0x2BB510DE": ("RTX PRO 6000 Blackwell Server Edition", RTX_PRO_6000),
    "0x1FB010DE": ("DGX Display", None),
    "0x26B910DE": ("L40S", None),
}


def _gpu(index, device_id):
    name, profiles = GPUS[device_id]
    return {"index": index, "uuid": "GPU-%08d-0000-0000-0000-000000000000" % index, "name": "NVIDIA " + name,
            "pci": {"bus_id": "00000000:%02X:00.0" % (0x18 + index), "device_id": device_id},
            "mig": {"supported": profiles is not None, "current_mode": "disabled" if profiles else None,
                    "pending_mode": "disabled" if profiles else None, "devices": []},
            "compute_processes": 0}


def _node(*gpus):
    return {"present": True, "reason": None, "gpu_count": len(gpus), "gpus": list(gpus)}


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CACHE = {}


def _load(shared_reference, name):
    """A fresh copy of one reference file (parsed once per run: read at test time, not stored here)."""
    path = shared_reference / "mig-parted" / name
    if path not in _CACHE:
        _CACHE[path] = yaml.load(path.read_text(), Loader=_LOADER)
    return copy.deepcopy(_CACHE[path])


def _named_device_ids(shared_reference):
    ids = set()
    for name in REFERENCE_FILES:
        for entries in _load(shared_reference, name)["mig-configs"].values():
            for entry in entries:
                filt = entry.get("device-filter", [])
                ids.update([filt] if isinstance(filt, str) else filt)
    return ids


def nodes(shared_reference):
    """Every recorded fixture, one GPU of every named device id, a DGX Station, and H100s beside an L40S."""
    if "nodes" in _CACHE:
        return _CACHE["nodes"]
    found = dict((path.stem, json.loads(path.read_text())) for path in sorted(FIXTURES.glob("*.json")))
    for device_id in sorted(_named_device_ids(shared_reference)):
        found["one-" + device_id] = _node(_gpu(0, device_id))
    found["dgx-station"] = _node(*[_gpu(i, "0x1FB010DE" if i == 3 else "0x20B210DE") for i in range(5)])
    found["h100-and-l40s"] = _node(_gpu(0, "0x233010DE"), _gpu(1, "0x233010DE"), _gpu(2, "0x26B910DE"))
    _CACHE["nodes"] = found
    return found


def _selects(entry, index, device_id):
    filt = entry.get("device-filter") or []
    filt = [filt] if isinstance(filt, str) else filt
    if filt and device_id.upper() not in [f.upper() for f in filt]:
        return False
    return entry["devices"] == "all" or index in entry["devices"]


def expected(facts, entries):
    """(valid, [(GPU index, message part)]) by mig-parted's rules; see the module docstring."""
    if not facts.get("present"):
        return False, [(None, "no NVIDIA GPU to configure")]
    problems = []
    for gpu in facts["gpus"]:
        device_id = gpu["pci"]["device_id"]
        chosen = [e for e in entries if _selects(e, gpu["index"], device_id)]
        if not chosen:
            continue
        entry = chosen[0]
        profiles = GPUS[device_id][1]
        if profiles is None:
            if entry["mig-enabled"] and entry["devices"] != "all":
                problems.append((gpu["index"], "MIG is not supported on this GPU"))
            continue
        if not entry["mig-enabled"]:
            continue
        devices = dict((p, n) for p, n in (entry.get("mig-devices") or {}).items() if n)
        unknown = sorted(p for p in devices if p not in profiles)
        if unknown:
            problems.extend((gpu["index"], "%s is not a MIG profile of" % p) for p in unknown)
            continue
        problems.extend((gpu["index"], "%s x%d exceeds the %d allowed" % (p, n, profiles[p]))
                        for p, n in sorted(devices.items()) if n > profiles[p])
    return not problems, problems


def _outcome_mismatches(document, node_facts, file_name):
    configs = C.parse(document)
    mismatches = []
    for config_name in sorted(document["mig-configs"]):
        raw = document["mig-configs"][config_name]
        for node_name, facts in node_facts.items():
            result = PL.plan(facts, C.select(configs, config_name), config_name)
            valid, problems = expected(facts, raw)
            got = result["errors"]
            ok = result["valid"] == valid and len(got) == len(problems) and all(
                any(part in error and (index is None or "GPU %s (" % index in error) for error in got)
                for index, part in problems)
            if not ok:
                mismatches.append("%s %s on %s: expected %s, got %s" % (file_name, config_name, node_name,
                                                                        problems or "valid", got or "valid"))
    return mismatches


@pytest.mark.parametrize("file_name", REFERENCE_FILES)
def test_every_shipped_config_parses_on_its_own(shared_reference, file_name):
    configs = C.parse(_load(shared_reference, file_name))
    assert configs.invalid == {}
    assert sorted(configs) == sorted(_load(shared_reference, file_name)["mig-configs"])


@pytest.mark.parametrize("file_name", REFERENCE_FILES)
def test_every_shipped_config_behaves_as_mig_parted_on_every_node(shared_reference, file_name):
    mismatches = _outcome_mismatches(_load(shared_reference, file_name), nodes(shared_reference), file_name)
    assert mismatches == []


def test_the_model_covers_every_device_id_nvidia_names(shared_reference):
    named = _named_device_ids(shared_reference)
    assert named - set(GPUS) == set()
    # and the module's offline table knows every MIG GPU among them
    for device_id in named:
        table = PL.table_rules({"pci": {"device_id": device_id}})
        assert (table is None) == (GPUS[device_id][1] is None), device_id
        if table is not None:
            assert dict((n, p.max_count) for n, p in table.profiles.items()) == GPUS[device_id][1], device_id


def test_each_filtered_entry_is_valid_on_every_gpu_it_names(shared_reference):
    """NVIDIA wrote these entries for these GPUs: each one must plan cleanly there."""
    seen = 0
    for file_name in REFERENCE_FILES:
        document = _load(shared_reference, file_name)
        configs = C.parse(document)
        for config_name, raw in document["mig-configs"].items():
            for position, entry in enumerate(raw, 1):
                filt = entry.get("device-filter") or []
                for device_id in [filt] if isinstance(filt, str) else filt:
                    facts = _node(*[_gpu(i, device_id) for i in range(8)])
                    result = PL.plan(facts, C.select(configs, config_name), config_name)
                    assert result["valid"], (file_name, config_name, device_id, result["errors"])
                    mine = [g for g in result["gpus"] if g["entry"] == position]
                    assert mine, (file_name, config_name, position, device_id)
                    if entry["mig-enabled"] and GPUS[device_id][1]:
                        assert all(g["after"]["mig"] == "enabled" and g["after"]["layout"] == entry["mig-devices"]
                                   for g in mine), (file_name, config_name, position, device_id)
                    seen += 1
    assert seen > 40


def test_dgx_station_configs_skip_the_display_gpu_and_use_the_a100s(shared_reference):
    document = _load(shared_reference, "examples-dgx-station-80gb-config.yaml")
    station = nodes(shared_reference)["dgx-station"]
    result = PL.plan(station, C.select(C.parse(document), "balanced-k8s-dgx-station-80"),
                     "balanced-k8s-dgx-station-80")
    assert result["valid"] and result["errors"] == []
    layouts = dict((g["index"], (g["after"]["mig"], g["after"]["layout"])) for g in result["gpus"])
    assert layouts == {0: ("disabled", {}), 1: ("enabled", {"3g.40gb": 2}),
                       2: ("enabled", {"2g.20gb": 3, "1g.10gb": 1}), 3: (None, {}),
                       4: ("enabled", {"1g.10gb": 7})}


def test_devices_all_skips_a_gpu_without_mig_with_a_note(shared_reference):
    document = _load(shared_reference, "gpu-operator-default-mig-parted-config.yaml")
    node = nodes(shared_reference)["h100-and-l40s"]
    result = PL.plan(node, C.select(C.parse(document), "all-1g.10gb"), "all-1g.10gb")
    assert result["valid"]
    assert [g["after"]["layout"] for g in result["gpus"]] == [{"1g.10gb": 7}, {"1g.10gb": 7}, {}]
    # all-1g.10gb's first entry filters on the H100s, so the L40S is selected by none
    assert "config 'all-1g.10gb' entry 2 (devices all, device-filter 0x20B010DE, 0x20B110DE, 0x20F110DE, " \
           "0x20F610DE) selects no GPU on this node" in result["notes"]
    result = PL.plan(node, C.select(C.parse(document), "all-disabled"), "all-disabled")
    assert result["valid"] and result["notes"] == [
        "config 'all-disabled' entry 1, GPU 2 (NVIDIA L40S, unknown MIG family): skipped, the GPU does not support MIG"]


def test_a_broken_config_fails_only_when_it_is_the_one_applied(shared_reference):
    document = copy.deepcopy(_load(shared_reference, "gpu-operator-default-mig-parted-config.yaml"))
    document["mig-configs"]["all-7g.80gb"][0]["mig-devices"]["7g.80gb"] = 2
    document["mig-configs"]["all-2g.20gb"][0]["colour"] = "blue"
    configs = C.parse(document)
    h100 = nodes(shared_reference)["hgx-h100"]
    broken = PL.plan(h100, C.select(configs, "all-7g.80gb"), "all-7g.80gb")
    assert not broken["valid"]
    assert broken["errors"][0] == ("config 'all-7g.80gb' entry 1, GPU 0 (NVIDIA H100 80GB HBM3, H100 80GB): "
                                   "7g.80gb x2 exceeds the 1 allowed on H100 80GB")
    assert all("all-7g.80gb" in e for e in broken["errors"])
    with pytest.raises(C.MigConfigError) as err:
        C.select(configs, "all-2g.20gb")
    assert err.value.problems == ["config 'all-2g.20gb' entry 1: unknown key 'colour' "
                                  "(allowed: devices, device-filter, mig-enabled, mig-devices)"]
    fine = PL.plan(h100, C.select(configs, "all-1g.10gb"), "all-1g.10gb")
    assert fine["valid"] and fine["errors"] == []
