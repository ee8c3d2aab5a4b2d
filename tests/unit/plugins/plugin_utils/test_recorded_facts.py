"""Recorded facts: which store a host's come from, how records are read, and when a record is rewritten."""
import copy
import json
import os
from pathlib import Path

import pytest

from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan
from ansible_collections.gpuops.platform.plugins.plugin_utils import recorded_facts as rf

ROOT = Path(__file__).resolve().parents[4]
NVML = ROOT / "tests" / "fixtures" / "nvml"
NODE = {"distro": {"id": "ubuntu", "version": "24.04", "pretty_name": "Ubuntu 24.04.1 LTS"}, "kernel": "6.8.0-45-generic",
        "arch": "x86_64", "loaded_version": "570.172.08", "free_space": {"/": 1234}, "problems": ["low disk"],
        "changed": False, "gpus": [{"bus_id": "0000:18:00.0", "device_id": "0x2330"}]}


def fixture(name):
    return json.loads((NVML / ("%s.json" % name)).read_text())


def record(name="gpu-a", facts=None, at="2026-11-25T17:00:00Z", version="0.1.0"):
    return rf.make_record(name, facts or fixture("hgx-h100"), NODE, at, version)


# ---------------------------------------------------------------------------
# Where a host's facts come from
# ---------------------------------------------------------------------------

def test_the_stores_in_order_replay_file_then_folder_then_fact_cache(tmp_path):
    assert rf.source({}, "a") == (None, "")
    assert rf.source({"gpuops_fleet_facts_cache": True}, "a")[0] == "cache"
    assert rf.source({"gpuops_fleet_facts_dir": str(tmp_path), "gpuops_fleet_facts_cache": True}, "a") == (
        "file", str(tmp_path / "a.json"))
    assert rf.source({"gpuops_nvml_replay_file": "/x/../y/gpu.json", "gpuops_fleet_facts_dir": str(tmp_path)}, "a") == (
        "file", "/y/gpu.json")
    # The planner's own folder stands for the host's.
    assert rf.source({"gpuops_fleet_facts_dir": "/elsewhere"}, "a", str(tmp_path)) == ("file", str(tmp_path / "a.json"))
    assert rf.source({"gpuops_fleet_facts_cache": "false"}, "a") == (None, "")


def test_a_live_host_has_no_record():
    assert rf.load({}, "a") == ("", None)


def test_a_record_a_module_result_and_bare_facts_all_load(tmp_path):
    facts = fixture("l40s")
    paths = {"record": rf.render(record(facts=facts)), "result": json.dumps({"ansible_facts": {"nvidia": facts}}),
             "bare": json.dumps(facts)}
    loaded = {}
    for kind, text in paths.items():
        (tmp_path / ("%s.json" % kind)).write_text(text)
        where, loaded[kind] = rf.load({"gpuops_fleet_facts_dir": str(tmp_path)}, kind)
        assert where == str(tmp_path / ("%s.json" % kind))
    assert loaded["record"]["nvidia"] == loaded["result"]["nvidia"] == loaded["bare"]["nvidia"]
    assert loaded["record"]["nvidia"]["source"] == "replay"
    assert loaded["record"]["recorded_at"] == "2026-11-25T17:00:00Z" and loaded["record"]["format"] == rf.FORMAT
    assert loaded["record"]["node"]["kernel"] == "6.8.0-45-generic"
    assert loaded["bare"]["node"] == {} and loaded["bare"]["recorded_at"] is None


def test_a_record_keeps_what_preflight_sees_of_the_node_and_not_its_findings():
    node = record()["node"]
    assert node["kernel"] == "6.8.0-45-generic" and node["loaded_version"] == "570.172.08" and node["gpus"]
    assert "free_space" not in node and "problems" not in node and "changed" not in node


def test_the_fact_cache_store(tmp_path):
    cached = {"gpuops_fleet_facts_cache": True, "ansible_facts": {rf.CACHE_FACT: record()}}
    where, loaded = rf.load(cached, "gpu-a")
    assert "fact cache" in where and loaded["nvidia"]["gpu_count"] == 8
    with pytest.raises(rf.RecordedFactsError,
                       match="no recorded facts for this host in the fact cache.*record_facts.yml.*use_fact_cache"):
        rf.load({"gpuops_fleet_facts_cache": True, "ansible_facts": {}}, "gpu-a")


@pytest.mark.parametrize("change, message", [
    (lambda r: r.update(format=rf.FORMAT + 1), "newer than the 1 this collection reads"),
    (lambda r: r.update(format="1"), "format must be a positive integer"),
    (lambda r: r.update(node=["x"]), "node must be a mapping"),
    (lambda r: r["nvidia"].pop("gpus"), "lacks gpus"),
])
def test_a_bad_record_fails_saying_what_is_wrong(tmp_path, change, message):
    bad = record()
    change(bad)
    (tmp_path / "gpu-a.json").write_text(json.dumps(bad))
    with pytest.raises(rf.RecordedFactsError, match=message):
        rf.load({"gpuops_fleet_facts_dir": str(tmp_path)}, "gpu-a")


def test_a_missing_file_names_the_file_and_the_record_playbook(tmp_path):
    with pytest.raises(rf.RecordedFactsError, match=r"no facts file for this host \(%s\).*record_facts.yml"
                       % str(tmp_path / "gpu-z.json")):
        rf.load({"gpuops_fleet_facts_dir": str(tmp_path)}, "gpu-z")


# ---------------------------------------------------------------------------
# Writing: an unchanged host keeps its file
# ---------------------------------------------------------------------------

def test_a_new_record_is_written_then_left_alone_when_only_time_and_readings_change(tmp_path):
    path = str(tmp_path / "gpu-a.json")
    assert rf.write(path, record()) == "written"
    before = (Path(path).read_text(), os.stat(path).st_mtime_ns)
    later = record(at="2026-11-26T09:30:00Z", version="0.2.0")
    for gpu in later["nvidia"]["gpus"]:
        gpu["temperature_c"] += 9
        gpu["clocks"]["sm_mhz"] = 1980
        gpu["power"]["draw_w"] = 412.0
        gpu["memory"]["used_mib"] = 4096
        gpu["compute_processes"] = 3
        gpu["utilization"] = {"gpu_percent": 97, "memory_percent": 24}
        gpu["clocks_event_reasons"] = ["sw_power_cap"]
    assert rf.write(path, later) == "unchanged"
    assert (Path(path).read_text(), os.stat(path).st_mtime_ns) == before
    assert json.loads(before[0])["recorded_at"] == "2026-11-25T17:00:00Z"


@pytest.mark.parametrize("change", [
    lambda f: f.update(driver_version="570.195.03"),
    lambda f: f["gpus"][0]["ecc"].update(volatile_uncorrectable=1),
    lambda f: f["gpus"][2]["mig"].update(current_mode="enabled"),
    lambda f: f["gpus"][0]["health"].update(status="warning"),
])
def test_a_real_change_rewrites_the_record(tmp_path, change):
    path = str(tmp_path / "gpu-a.json")
    rf.write(path, record())
    facts = fixture("hgx-h100")
    change(facts)
    assert rf.write(path, record(facts=facts, at="2026-11-26T09:30:00Z")) == "written"
    data = json.loads(Path(path).read_text())
    assert data["recorded_at"] == "2026-11-26T09:30:00Z" and data["nvidia"] == rf.make_record(
        "gpu-a", facts, {}, "", "")["nvidia"]


def test_check_mode_writes_nothing_but_says_what_would_change(tmp_path):
    path = str(tmp_path / "gpu-a.json")
    assert rf.write(path, record(), check_mode=True) == "written"
    assert not os.path.exists(path) and os.listdir(str(tmp_path)) == []


def test_an_unreadable_old_record_is_replaced(tmp_path):
    path = tmp_path / "gpu-a.json"
    path.write_text("{ half a file")
    assert rf.write(str(path), record()) == "written"
    assert json.loads(path.read_text())["host"] == "gpu-a"


def test_stable_does_not_touch_the_record():
    original = record()
    copied = copy.deepcopy(original)
    rf.stable(original)
    assert original == copied


# ---------------------------------------------------------------------------
# The planner reads through the same mechanism
# ---------------------------------------------------------------------------

def test_the_planner_plans_a_record_a_cached_record_and_a_bare_file_alike(tmp_path):
    facts = fixture("hgx-h100")
    (tmp_path / "rec.json").write_text(rf.render(record("rec", facts)))
    (tmp_path / "bare.json").write_text(json.dumps(facts))
    hv = {"nvidia_driver_version": "570.195.03"}
    plan = fleet_plan.plan_fleet([("rec", hv), ("bare", hv)], str(tmp_path))
    # No folder: the fact cache (a folder, when set, comes first).
    cached = fleet_plan.plan_fleet([("cached", dict(hv, gpuops_fleet_facts_cache=True,
                                                    ansible_facts={rf.CACHE_FACT: record("cached", facts)}))], "")
    assert plan["valid"] and cached["valid"], plan["errors"] + cached["errors"]
    plan["hosts"].update(cached["hosts"])
    # The same facts give the same plan, whichever store they come from (where and when they were recorded aside).
    views = [json.loads(json.dumps(dict((k, v) for k, v in plan["hosts"][n].items()
                                        if k not in ("facts_file", "facts_recorded_at"))).replace(
        '"%s"' % n, '"HOST"')) for n in ("rec", "bare", "cached")]
    assert views[0] == views[1] == views[2]
    assert plan["hosts"]["rec"]["driver"]["action"] == "upgrade"
    assert plan["hosts"]["cached"]["facts_file"].startswith("the fact cache")
    # A record's own time goes with it, from a file or the fact cache; a bare nvml_facts output has none.
    recorded = rf.epoch("2026-11-25T17:00:00Z")
    assert recorded == 1795626000.0
    assert plan["hosts"]["rec"]["facts_recorded_at"] == plan["hosts"]["cached"]["facts_recorded_at"] == recorded
    assert plan["hosts"]["bare"]["facts_recorded_at"] is None


def test_the_planner_names_a_host_without_any_store():
    plan = fleet_plan.plan_fleet([("gpu-x", {})], "")
    assert not plan["valid"]
    assert "gpu-x: no recorded facts for this host: set gpuops_fleet_facts_dir" in plan["errors"][0]
