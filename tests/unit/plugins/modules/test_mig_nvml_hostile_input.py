"""Hostile input to nvidia_mig and nvml_facts: a clear message naming the option, no traceback, no change.

Bad YAML and JSON shapes, wrong types, encodings, directories, symlinks, huge and
deeply nested files, and injection strings in every free-text option. Neither
module writes a file; each case also proves the input file is left as it was.
"""
import json
import os

import pytest
from unittest import mock

from ansible_collections.gpuops.platform.plugins.modules import nvidia_mig, nvml_facts
from conftest import FIXTURES
from support.module_args import ExitJson, FailJson, patch_module_args

pytestmark = pytest.mark.usefixtures("module_exits")

GOOD_CONFIG = "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n"


def _run(module, args):
    """(ok, result) of module.main(); never a Python exception escaping the module."""
    with patch_module_args(dict(args, _ansible_check_mode=True)), \
            mock.patch.object(module, "HAS_PYNVML", False):
        with pytest.raises((ExitJson, FailJson)) as caught:
            module.main()
    return caught.type is ExitJson, caught.value.args[0]


def _state(path):
    """Bytes, mode, owner and mtime of a file (or the link itself), to prove nothing changed."""
    st = os.lstat(str(path))
    data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return data, st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns


def _fails_clearly(module, args, path, *parts):
    before = _state(path) if path is not None and os.path.lexists(str(path)) else None
    ok, result = _run(module, args)
    assert not ok, result
    assert "exception" not in result and "Traceback" not in result["msg"]
    for part in parts:
        assert part in result["msg"], result["msg"]
    assert result.get("changed") is not True
    if before is not None:
        assert _state(path) == before
    return result


# -- files, for both modules ---------------------------------------------------------

def _bad_files(tmp_path):
    """(label, path, message parts) for every hostile file; paths are made on demand."""
    def write(name, data):
        path = tmp_path / name
        path.write_bytes(data)
        return path

    def directory():
        path = tmp_path / "a-directory"
        path.mkdir()
        return path

    def dangling():
        path = tmp_path / "dangling"
        path.symlink_to(tmp_path / "nowhere")
        return path

    def huge():
        path = tmp_path / "huge.json"
        with open(str(path), "wb") as handle:
            handle.truncate(17 * 1024 * 1024)   # sparse: no disk, no time
        return path

    return [
        ("directory", directory, ["is a directory, not a file"]),
        ("dangling symlink", dangling, ["does not exist (a symlink to a missing target)"]),
        ("missing", lambda: tmp_path / "missing.json", ["it does not exist"]),
        ("latin-1", lambda: write("latin1.yaml", u"version: v1 # caf\u00e9\n".encode("latin-1")),
         ["is not UTF-8 text (byte 17)"]),
        ("utf-16", lambda: write("utf16.json", u'{"a": 1}'.encode("utf-16")), ["is not UTF-8 text"]),
        ("huge", huge, ["is 17825792 bytes, more than the 16777216 this module reads"]),
    ]


@pytest.mark.parametrize("index", range(6))
def test_nvidia_mig_config_file_bad_files(tmp_path, index):
    label, make, parts = _bad_files(tmp_path)[index]
    path = make()
    _fails_clearly(nvidia_mig, {"config_file": str(path), "config_name": "off", "facts": {}}, path,
                   "config_file", str(path), "nothing was changed", *parts)


@pytest.mark.parametrize("index", range(6))
def test_nvidia_mig_facts_file_bad_files(tmp_path, index):
    label, make, parts = _bad_files(tmp_path)[index]
    path = make()
    _fails_clearly(nvidia_mig, {"config": {"version": "v1", "mig-configs": {"off": [
        {"devices": "all", "mig-enabled": False}]}}, "config_name": "off", "facts_file": str(path)}, path,
        "facts_file", str(path), *parts)


@pytest.mark.parametrize("index", range(6))
def test_nvml_facts_replay_file_bad_files(tmp_path, index):
    label, make, parts = _bad_files(tmp_path)[index]
    path = make()
    _fails_clearly(nvml_facts, {"replay_file": str(path)}, path, "replay_file", str(path), *parts)


def test_a_symlink_to_a_good_file_is_read_through(tmp_path, fixtures_dir):
    target = tmp_path / "config.yaml"
    target.write_text(GOOD_CONFIG)
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    before = _state(target), _state(link)
    ok, result = _run(nvidia_mig, {"config_file": str(link), "config_name": "all-disabled",
                                   "facts_file": str(fixtures_dir / "nvml" / "hgx-h100.json")})
    assert ok and result["changed"] is False
    assert (_state(target), _state(link)) == before


# -- document shapes -----------------------------------------------------------------

@pytest.mark.parametrize("text,parts", [
    ("version: v1\nmig-configs: [\n", ["neither JSON nor YAML"]),
    ("- 1\n- 2\n", ["the MIG config must be a mapping with 'version' and 'mig-configs', got list"]),
    ("", ["the MIG config must be a mapping with 'version' and 'mig-configs', got NoneType"]),
    ("just text\n", ["got str"]),
    ("version: v1\nmig-configs: [a, b]\n", ["'mig-configs' must map config names to lists of entries"]),
    ("version: v1\nmig-configs:\n  all-disabled: {devices: all}\n",
     ["config 'all-disabled': must be a non-empty list of entries"]),
    ("version: v1\nmig-configs:\n  off: [{devices: all, mig-enabled: false}]\n",
     ["config name False is not a string: YAML reads off, on, yes and no as booleans; quote the name"]),
    ("version: v1\nmig-configs:\n  all-disabled: [{devices: all, mig-enabled: false, mig-devices: {1g.10gb: 1}}]\n",
     ["'mig-devices' must be empty or left out when mig-enabled is false"]),
    ("version: v1\nmig-configs:\n  all-disabled: [{devices: '$(reboot)', mig-enabled: false}]\n",
     ["'devices' must be 'all' or a list of GPU indices, got '$(reboot)'"]),
    ("version: v1\nmig-configs:\n  all-disabled: [{devices: all, device-filter: \"0x233010DE\\nall\", mig-enabled: false}]\n",
     ["device-filter '0x233010DE\\nall' is not a PCI device id"]),
    ("version: v1\nmig-configs:\n  all-disabled: [{devices: all, mig-enabled: true, mig-devices: {'1g.10gb;reboot': 1}}]\n",
     ["'1g.10gb;reboot' is not a MIG profile name"]),
    ("a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n", ["unknown top-level key 'a'"]),
    ("version: v1\nmig-configs:\n  all-disabled: [{devices: all, mig-enabled: false}]\n\x00\n", ["neither JSON nor YAML"]),
    # JSON on Python 3.12+, YAML before: refused for its depth either way.
    ("[" * 5000 + "]" * 5000, ["more than 64 levels deep (nesting limit)"]),
])
def test_nvidia_mig_config_file_bad_shapes(tmp_path, fixtures_dir, text, parts):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    _fails_clearly(nvidia_mig, {"config_file": str(path), "config_name": "all-disabled",
                                "facts_file": str(fixtures_dir / "nvml" / "hgx-h100.json")}, path, *parts)


@pytest.mark.parametrize("name,parts", [
    ("$(reboot)", ["config '$(reboot)' is not in mig-configs (available: all-disabled)"]),
    ("all-disabled; rm -rf /", ["config 'all-disabled; rm -rf /' is not in mig-configs"]),
    ("x\nall-enabled", ["config_name 'x\\nall-enabled' must be a non-empty name without control characters"]),
    ("x\x1b[2J", ["config_name 'x\\x1b[2J' must be a non-empty name without control characters"]),
    ("", ["config_name '' must be a non-empty name"]),
])
def test_nvidia_mig_config_name_injection(tmp_path, fixtures_dir, name, parts):
    path = tmp_path / "config.yaml"
    path.write_text(GOOD_CONFIG)
    _fails_clearly(nvidia_mig, {"config_file": str(path), "config_name": name,
                                "facts_file": str(fixtures_dir / "nvml" / "hgx-h100.json")}, path, *parts)


def _gpu(**override):
    gpu = {"index": 0, "uuid": "GPU-0", "name": "NVIDIA H100 80GB HBM3",
           "pci": {"bus_id": "00000000:18:00.0", "device_id": "0x233010DE"},
           "mig": {"supported": True, "current_mode": "disabled", "pending_mode": "disabled", "devices": []}}
    gpu.update(override)
    return gpu


def _facts(*gpus):
    return {"present": True, "gpu_count": len(gpus), "gpus": list(gpus)}


BAD_FACTS = [
    (_facts({"foo": 1}), ["gpus[0] lacks index, pci, mig (has: foo)"]),
    (_facts(_gpu(mig="enabled")), ["gpus[0].mig must be a mapping, got str"]),
    (_facts(_gpu(index="0")), ["gpus[0].index must be an integer, got str"]),
    (_facts(_gpu(index=True)), ["gpus[0].index must be an integer, got bool"]),
    (_facts(_gpu(index=-1)), ["gpus[0].index must be >= 0, got -1"]),
    (_facts(_gpu(), _gpu()), ["gpus[1].index 0 is used by another GPU"]),
    (_facts(_gpu(pci="0x233010DE")), ["gpus[0].pci must be a mapping, got str"]),
    (_facts(_gpu(pci={"bus_id": 5, "device_id": "0x2330; reboot"})),
     ["gpus[0].pci.bus_id must be a string or null, got int",
      "gpus[0].pci.device_id must be a PCI device id such as 0x233010DE, got '0x2330; reboot'"]),
    (_facts(_gpu(name=["x"], memory={"total_mib": "80GB"})),
     ["gpus[0].name must be a string or null, got list", "gpus[0].memory.total_mib must be an integer or null, got str"]),
    (_facts(_gpu(mig={"supported": "yes", "current_mode": "on", "devices": {}})),
     ["gpus[0].mig.supported must be true or false, got str",
      "gpus[0].mig.current_mode must be enabled, disabled or null, got 'on'",
      "gpus[0].mig.devices must be a list or null, got dict"]),
    (_facts(_gpu(mig={"supported": True, "current_mode": "enabled", "pending_mode": "enabled",
                      "devices": [{"gpu_instance_id": "7", "profile": 1, "placement": [0, 1]}]})),
     ["gpus[0].mig.devices[0].gpu_instance_id must be an integer or null, got str",
      "gpus[0].mig.devices[0].profile must be a string or null, got int",
      "gpus[0].mig.devices[0].placement must be a mapping or null, got list"]),
    ({"present": "yes", "gpu_count": 1.5, "gpus": "none"},
     ["present must be true or false, got str", "gpu_count must be an integer, got float",
      "gpus must be a list, got str"]),
    ({"present": True, "gpu_count": 2, "gpus": [_gpu()]}, ["gpu_count (2) does not match the gpus list (1)"]),
    ([1, 2], ["the facts must be a mapping, got list"]),
    ({"ansible_facts": {"nvidia": {"gpus": []}}}, ["lacks present, gpu_count"]),
]


@pytest.mark.parametrize("index", range(len(BAD_FACTS)))
def test_replayed_facts_of_the_wrong_shape(tmp_path, index):
    facts, parts = BAD_FACTS[index]
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    config = {"version": "v1", "mig-configs": {"x": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}}
    # one message lists every problem, for each way the facts come in
    result = _fails_clearly(nvidia_mig, {"config": config, "config_name": "x", "facts_file": str(path)}, path,
                            "facts_file %s is not a recorded nvml_facts result" % path, *parts)
    assert result["msg"].count("gpus[") >= sum(p.count("gpus[") for p in parts)
    _fails_clearly(nvml_facts, {"replay_file": str(path)}, path, "replay_file %s" % path, *parts)
    if isinstance(facts, dict):
        _fails_clearly(nvidia_mig, {"config": config, "config_name": "x", "facts": facts}, None,
                       "facts is not a recorded nvml_facts result", *parts)


@pytest.mark.parametrize("text,parts", [
    ("{not json", ["is not JSON"]),
    ("[" * 100000, ["nested too deeply"]),
    ("[" * 100000 + "]" * 100000, ["nested too deeply"]),
    ("null", ["the facts must be a mapping, got null"]),
    ('{"present": true, "gpu_count": 0, "gpus": [], "driver_version": 570}',
     ["driver_version must be a string or null, got int"]),
])
def test_replay_file_bad_json(tmp_path, text, parts):
    path = tmp_path / "facts.json"
    path.write_text(text)
    _fails_clearly(nvml_facts, {"replay_file": str(path)}, path, "replay_file", *parts)


# -- what nvml_facts itself records when NVML cannot say ------------------------------

@pytest.mark.parametrize("devices, changed", [("all", True), ("[7]", False)])
def test_a_replayed_mig_device_without_a_profile_name_is_planned(tmp_path, devices, changed):
    """nvml_facts writes "profile": null when NVML names no profile: nvidia_mig plans it, never a traceback.

    A config that selects the GPU replaces the device; one that leaves it alone keeps it, exposing nothing
    Kubernetes could name.
    """
    facts = json.loads((FIXTURES / "nvml" / "h200-mig.json").read_text())
    nvidia = facts.get("ansible_facts", {}).get("nvidia", facts)
    device = nvidia["gpus"][0]["mig"]["devices"][0]
    device["profile"] = None
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    config = tmp_path / "config.yaml"
    config.write_text("version: v1\nmig-configs:\n  mig-off:\n    - devices: %s\n      mig-enabled: false\n" % devices)
    ok, result = _run(nvidia_mig, dict(config_file=str(config), config_name="mig-off", facts_file=str(path)))
    assert ok, result
    assert result["changed"] is changed
    assert "unnamed@%s" % device["placement"]["start"] in result["diff"]["before"]
    assert ("unnamed@" in result["diff"]["after"]) is not changed
