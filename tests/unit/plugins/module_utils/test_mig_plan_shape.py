"""The MIG plan's shape, pinned: what plan() returns (per GPU and for the node) is the same, key for key and in order.

Modules return the plan, fleet_plan writes it into plan.json and the mig role reads
it, so its dict form is a contract. ``tests/fixtures/mig/plan-shape.json`` holds, for
every recorded node and one node of every GPU family in the table, each config of
NVIDIA's shipped mig-parted files and of ``LOCAL`` below, planned: the whole JSON for
the recorded nodes against ``PINNED`` configs, and per config the first 16 hex digits of a
SHA-256 of every node's plan JSON (keys in order). Regenerate it only for an intended change of the plan:
``GPUOPS_WRITE_PLAN_SHAPE=1 python -m pytest tests/unit/plugins/module_utils/test_mig_plan_shape.py``.
"""
import copy
import hashlib
import json
import os
from pathlib import Path

import yaml

from ansible_collections.gpuops.platform.plugins.module_utils._mig import config as C
from ansible_collections.gpuops.platform.plugins.module_utils._mig import plan as PL
from ansible_collections.gpuops.platform.plugins.module_utils._mig import profiles as P

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
SHAPE = FIXTURES / "mig" / "plan-shape.json"
REFERENCE_FILES = ("systemd-config-default.yaml", "examples-config.yaml", "examples-dgx-station-80gb-config.yaml",
                   "container-example.yaml", "container-example-hopper-blackwell.yaml",
                   "gpu-operator-default-mig-parted-config.yaml")
PINNED = ("examples-config.yaml all-disabled", "examples-config.yaml all-1g.10gb", "examples-config.yaml all-balanced",
          "local partial", "local attributes", "local media-engines", "local by-index", "local too-many")
# Configs beside NVIDIA's: partial changes that keep instances, every attribute,
# per-index entries and layouts that do not fit.
H100, H200, A100_40, A100_80, RTX = "0x233010DE", "0x233510DE", "0x20B010DE", "0x20B210DE", "0x2BB510DE"


def _entries(layouts, devices="all"):
    return [{"devices": devices, "device-filter": device_id, "mig-enabled": True, "mig-devices": layout}
            for device_id, layout in layouts]


LOCAL = {"version": "v1", "mig-configs": {
    "partial": _entries([(H100, {"3g.40gb": 1, "1g.10gb": 4}), (H200, {"3g.71gb": 1, "1g.18gb": 3}),
                         (A100_80, {"2g.20gb": 1, "1g.10gb": 2}), (RTX, {"2g.48gb": 1, "1g.24gb": 2})]),
    "attributes": _entries([(H100, {"1g.10gb+me": 1, "1g.10gb": 2}), (H200, {"1g.18gb+me": 1, "3g.71gb": 1}),
                            (RTX, {"1g.24gb-me": 2, "2g.48gb+gfx": 1}), (A100_40, {"1g.5gb+me": 1})]),
    "media-engines": _entries([(RTX, {"1g.24gb+me.all": 1, "2g.48gb+me.all": 1})]),
    "by-index": _entries([(H100, {"7g.80gb": 1}), (H200, {"7g.141gb": 1})], devices=[0]) + [
        {"devices": [1, 2, 9], "mig-enabled": False, "mig-devices": {}}],
    "too-many": _entries([(H100, {"1g.10gb": 8}), (H200, {"3g.71gb": 3}), (A100_80, {"1g.10gb+me": 2}),
                          (RTX, {"4g.96gb": 1, "1g.24gb": 1})]),
}}


def _gpu(index, device_id, instances=None):
    """A GPU of the table; ``instances``: [(profile, start, size)] of a GPU in MIG mode."""
    mode = "disabled" if instances is None else "enabled"
    devices = [{"index": i, "gpu_instance_id": 20 + i, "compute_instance_id": 0, "profile": profile,
                "placement": {"start": start, "size": size}, "uuid": "MIG-%08d-%d" % (index, i)}
               for i, (profile, start, size) in enumerate(instances or [])]
    return {"index": index, "uuid": "GPU-%08d-0000-0000-0000-000000000000" % index, "name": "NVIDIA %s" % device_id,
            "pci": {"bus_id": "00000000:%02X:00.0" % (0x18 + index), "device_id": device_id},
            "mig": {"supported": True, "current_mode": mode, "pending_mode": mode, "devices": devices},
            "compute_processes": 0}


def _node(*gpus):
    return {"present": True, "reason": None, "gpu_count": len(gpus), "gpus": list(gpus)}


def nodes():
    """The recorded nodes (name: facts), nodes with MIG instances, then one MIG-disabled GPU per table family."""
    found = dict(("nvml/" + p.stem, json.loads(p.read_text())) for p in sorted((FIXTURES / "nvml").glob("*.json")))
    for path in sorted((FIXTURES / "hardware").glob("*/nvml_facts.json")):
        found["hardware/" + path.parent.name] = json.loads(path.read_text())["ansible_facts"]["nvidia"]
    found["mig/h100-instances"] = _node(
        _gpu(0, H100, [("1g.10gb", s, 1) for s in range(7)]),
        _gpu(1, H100, [("3g.40gb", 4, 4), ("1g.10gb+me", 0, 1), ("1g.10gb", 2, 1)]),
        _gpu(2, H100, [("7g.80gb", 0, 8)]),
        _gpu(3, H100, [("1c.3g.40gb", 0, 4), (None, 4, 1)]))
    found["mig/rtx-a100"] = _node(_gpu(0, RTX, [("2g.48gb+gfx", 2, 2), ("1g.24gb-me", 0, 1)]),
                                  _gpu(1, A100_80, [("1g.10gb", 0, 1)]), _gpu(2, A100_40))
    recorded = set(found)
    seen = set()
    for pci in sorted(P.FAMILIES):
        if id(P.FAMILIES[pci]) not in seen:
            seen.add(id(P.FAMILIES[pci]))
            found["table/0x%04X10DE" % pci] = _node(_gpu(0, "0x%04X10DE" % pci))
    return found, recorded


def documents(shared_reference):
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    docs = [(name, yaml.load((shared_reference / "mig-parted" / name).read_text(), Loader=loader))
            for name in REFERENCE_FILES]
    return docs + [("local", LOCAL)]


def planned(facts, entries, name):
    """What leaves the planner: the node's plan (as the module returns it) and its diff."""
    result = PL.plan(copy.deepcopy(facts), entries, name)
    return {"result": result, "diff": PL.diff(result)}


def current(shared_reference):
    """({"file config node": plan} of the pinned configs, {"file config": digest of every node's plan})."""
    found, recorded = nodes()
    full, digests = {}, {}
    for file_name, document in documents(shared_reference):
        configs = C.parse(document)
        for config_name in sorted(configs):
            entries = C.select(configs, config_name)
            digest = hashlib.sha256()
            for node_name in sorted(found):
                text = json.dumps(planned(found[node_name], entries, config_name))
                if node_name in recorded and "%s %s" % (file_name, config_name) in PINNED:
                    full["%s %s %s" % (file_name, config_name, node_name)] = json.loads(text)
                digest.update(("%s\n%s\n" % (node_name, text)).encode("utf-8"))
            digests["%s %s" % (file_name, config_name)] = digest.hexdigest()[:16]
    return full, digests


def test_the_plan_keeps_its_shape(shared_reference):
    full, digests = current(shared_reference)
    if os.environ.get("GPUOPS_WRITE_PLAN_SHAPE"):
        SHAPE.write_text(json.dumps({"full": full, "sha256": digests}, separators=(",", ":"), indent=0) + "\n")
    pinned = json.loads(SHAPE.read_text())
    assert len(pinned["full"]) > 40 and len(pinned["sha256"]) > 150
    assert sorted(full) == sorted(pinned["full"])
    for key in sorted(full):
        # key order too: the module's output and plan.json are written in this order
        assert json.dumps(full[key]) == json.dumps(pinned["full"][key]), key
    assert sorted(digests) == sorted(pinned["sha256"])
    changed = sorted(k for k in digests if digests[k] != pinned["sha256"][k])
    assert changed == []
