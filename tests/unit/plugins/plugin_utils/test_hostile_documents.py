"""Hand-made and damaged documents on the controller: each is the collection's own error naming the file and the
field (or the limit), or the right result; never a bare Python error, never a file outside its folder."""
import json
import os
import re
from pathlib import Path
from unittest import mock

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.gpuops.platform.plugins.action import fleet_plan as fleet_plan_action
from ansible_collections.gpuops.platform.plugins.action import recorded_facts as recorded_facts_action
from ansible_collections.gpuops.platform.plugins.plugin_utils import documents
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan, fleet_schema
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_views as fv
from ansible_collections.gpuops.platform.plugins.plugin_utils import recorded_facts as rf

ROOT = Path(__file__).resolve().parents[4]
NVML = ROOT / "tests" / "fixtures" / "nvml"
DEEP = 100000


def facts(name="hgx-h100"):
    return json.loads((NVML / ("%s.json" % name)).read_text())


def record(name="gpu-a"):
    return rf.make_record(name, facts(), {"kernel": "6.8.0-45-generic"}, "2026-11-25T17:00:00Z", "0.1.0")


def tree(folder):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*"))


# ---------------------------------------------------------------------------
# The shared guards
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, deepest", [
    ("{}", 1), ("[[1], {\"a\": [2]}]", 3), ('{"a": "[[[[[[["}', 1), ('["\\"[[[", [0]]', 2), ("3", 0),
])
def test_the_depth_is_counted_without_parsing_and_brackets_in_strings_do_not_count(text, deepest):
    assert documents.json_depth(text) == deepest
    assert documents.depth(json.loads(text)) == deepest


def test_a_document_deeper_than_the_limit_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * DEEP + "]" * DEEP)
    with mock.patch.object(documents.json, "loads", side_effect=AssertionError("parsed")):
        with pytest.raises(documents.DocumentError, match=r"recorded facts file %s is nested more than 64 levels deep"
                           % path):
            documents.read_json(str(path), "recorded facts file")
    # Just within the limit: read.
    path.write_text("[" * 64 + "]" * 64)
    assert documents.read_json(str(path), "recorded facts file")[1] == json.loads("[" * 64 + "]" * 64)


def test_a_document_larger_than_the_limit_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"a": "x" * 2000}))
    with pytest.raises(documents.DocumentError, match=r"recorded facts file %s is \d+ bytes, more than the 1000" % path):
        documents.read_json(str(path), "recorded facts file", max_bytes=1000)


def test_a_yaml_document_too_deep_or_holding_itself_is_refused(tmp_path):
    path = tmp_path / "mig.yaml"
    path.write_text("a: " + "[" * DEEP + "]" * DEEP + "\n")
    with pytest.raises(documents.DocumentError, match="mig_config_file %s is nested more than 64 levels" % path):
        documents.read_yaml(str(path), "mig_config_file")
    path.write_text("a: &x [1, *x]\n")  # a list that holds itself: endless to any reader that recurses
    with pytest.raises(documents.DocumentError, match="nested more than 64 levels"):
        documents.read_yaml(str(path), "mig_config_file")


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", ".", "", "x\0y"])
def test_a_file_named_after_outside_input_stays_in_its_folder(tmp_path, name):
    with pytest.raises(documents.DocumentError, match="the inventory host name .* cannot name a file in"):
        documents.inside(str(tmp_path), name, ".json", "the inventory host name")
    assert documents.inside(str(tmp_path), "..gpu-a", ".json", "x") == str(tmp_path / "..gpu-a.json")


def test_a_symlink_loop_is_reported_as_a_loop(tmp_path):
    os.symlink(str(tmp_path / "b.json"), str(tmp_path / "a.json"))
    os.symlink(str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    with pytest.raises(rf.RecordedFactsError, match=r"it does not exist \(a symlink loop: it leads back to itself\)"):
        rf.load({"gpuops_nvml_replay_file": str(tmp_path / "a.json")}, "gpu-a")
    os.symlink(str(tmp_path / "gone.json"), str(tmp_path / "c.json"))
    with pytest.raises(rf.RecordedFactsError, match=r"\(a symlink to a missing target\)"):
        rf.load({"gpuops_nvml_replay_file": str(tmp_path / "c.json")}, "gpu-a")


# ---------------------------------------------------------------------------
# Recorded facts: damaged records, hostile host names, NUL bytes
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("change, field", [
    (lambda r: r.update(nvidia="x"), "nvidia must be a mapping"),
    (lambda r: r.update(nvidia=[1]), "nvidia must be a mapping"),
    (lambda r: r["nvidia"].update(gpus="x"), "nvidia.gpus must be a list"),
    (lambda r: r["nvidia"]["gpus"][1].update(clocks=None, mig=7), r"nvidia.gpus\[1\].mig must be a mapping"),
    (lambda r: r.update(node={"kernel": 6}), "node.kernel must be a string or null, got int"),
    (lambda r: r.update(recorded_at=["x"]), "recorded_at must be a string or null, got list"),
])
def test_a_damaged_record_names_the_file_and_the_field(tmp_path, change, field):
    bad = record()
    change(bad)
    (tmp_path / "gpu-a.json").write_text(json.dumps(bad))
    with pytest.raises(rf.RecordedFactsError, match=r"recorded facts file %s is not a facts record .*%s"
                       % (tmp_path / "gpu-a.json", field)):
        rf.load({"gpuops_fleet_facts_dir": str(tmp_path)}, "gpu-a")
    # The same record in the fact cache.
    with pytest.raises(rf.RecordedFactsError, match=field):
        rf.load({"gpuops_fleet_facts_cache": True, "ansible_facts": {rf.CACHE_FACT: bad}}, "gpu-a")


def test_recording_over_a_damaged_record_replaces_it_and_says_why(tmp_path):
    path = tmp_path / "gpu-a.json"
    path.write_text('{"format": 1, "nvidia": "x"}')
    notes = []
    assert rf.write(str(path), record(), notes=notes) == "written"
    assert json.loads(path.read_text())["nvidia"]["gpu_count"] == 8
    assert len(notes) == 1 and "the existing record %s is not a facts record: nvidia must be a mapping" % path in notes[0]
    # Check mode: the same answer, nothing written.
    path.write_text('{"format": 1, "nvidia": {"gpus": 3}}')
    assert rf.write(str(path), record(), check_mode=True, notes=notes) == "written"
    assert path.read_text() == '{"format": 1, "nvidia": {"gpus": 3}}' and "nvidia.gpus must be a list" in notes[1]


def test_recording_over_a_record_nested_too_deeply_replaces_it(tmp_path):
    path = tmp_path / "gpu-a.json"
    path.write_text('{"format": 1, "nvidia": ' + "[" * DEEP + "]" * DEEP + "}")
    notes = []
    assert rf.write(str(path), record(), notes=notes) == "written"
    assert "nested more than 64 levels deep" in notes[0]


def _record_action(tmp_path, name, hostvars=None, check=False):
    task = mock.Mock(args={"record": True, "nvidia": facts(), "facts_dir": str(tmp_path / "facts")}, async_val=0,
                     check_mode=check, diff=False)
    action = recorded_facts_action.ActionModule(task, mock.Mock(), mock.Mock(check_mode=check), loader=None,
                                                templar=None, shared_loader_obj=None)
    return action.run(task_vars={"inventory_hostname": name, "hostvars": {name: hostvars or {}}})


@pytest.mark.parametrize("name", ["../escape", "sub/../../escape", "a\0b"])
def test_a_host_name_that_leaves_the_facts_folder_records_nothing(tmp_path, name):
    (tmp_path / "facts").mkdir()
    with pytest.raises(AnsibleActionFail, match=r"nothing was recorded: the inventory host name .* cannot name a file in %s"
                       % (tmp_path / "facts")):
        _record_action(tmp_path, name)
    assert tree(tmp_path) == ["facts"]


def test_recording_over_a_damaged_record_warns_and_a_damaged_cached_record_is_no_crash(tmp_path):
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / "gpu-a.json").write_text('{"format": 1, "nvidia": "x"}')
    result = _record_action(tmp_path, "gpu-a", {"ansible_facts": {rf.CACHE_FACT: {"format": 1, "nvidia": "x"}}})
    assert result["changed"] is True and result["state"] == "written"
    assert any("nvidia must be a mapping" in w for w in result["warnings"])
    assert result["ansible_facts"][rf.CACHE_FACT]["nvidia"]["gpu_count"] == 8


def test_a_nul_in_a_replay_file_is_that_hosts_error_and_the_fleet_is_planned(tmp_path):
    good = str(NVML / "l40s.json")
    hosts = [("bad", {"gpuops_nvml_replay_file": "/srv/facts/a\0b.json"}), ("good", {"gpuops_nvml_replay_file": good})]
    plan = fleet_plan.plan_fleet(hosts, None)
    fv.enrich(plan, ["bad", "good"], {})  # the facts-age step
    assert plan["hosts"]["good"]["valid"] and plan["hosts"]["good"]["facts_time_source"] == "mtime"
    assert not plan["hosts"]["bad"]["valid"]
    assert "gpuops_nvml_replay_file '/srv/facts/a\\x00b.json' is not a path: it holds a NUL byte" in \
        plan["hosts"]["bad"]["errors"][0]
    assert plan["hosts"]["bad"]["facts_recorded_at"] is None
    assert fv.facts_time("/srv/a\0b.json") == (None, None)


@pytest.mark.parametrize("value", ["５７０", "٥٧٠", "1795161600\n", "nan", "inf", "1e999", "2026-11-20T08:00:00Z\n"
                                   "x", "９９９９-１１-２０"])
def test_a_recording_time_is_ascii_digits_only_else_the_mtime_counts(tmp_path, value):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"recorded_at": value, "gpus": []}, ensure_ascii=False), encoding="utf-8")
    os.utime(str(path), (1000, 1000))
    assert fv.facts_time(str(path)) == (1000.0, "mtime")


# ---------------------------------------------------------------------------
# plan.json: the planner's own earlier output, damaged
# ---------------------------------------------------------------------------

def _plan():
    plan = fleet_plan.plan_fleet([("good", {"gpuops_nvml_replay_file": str(NVML / "l40s.json")})], None)
    return fv.enrich(plan, ["good"], {})


def test_an_old_plan_json_nested_100000_deep_is_no_diff_and_the_plan_is_written(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text("[" * DEEP + "]" * DEEP)
    text, kept, _same = fleet_plan_action._with_diff(_plan(), str(plan_file), None)
    diff = json.loads(text)["diff"]
    assert diff["previous"] is None and kept is None
    assert "the plan.json already in report_dir %s is nested more than 64 levels deep" % plan_file in diff["problem"]


@pytest.mark.parametrize("content, message", [
    ("[" * DEEP + "]" * DEEP, "is nested more than 64 levels deep"),
    ('{"version": 2, "diff": ' + "[" * 70 + "]" * 70 + "}", "is nested more than 64 levels deep"),
    ('{"version": 2, "diff": "x"}', "does not follow the plan.json schema|lacks"),
    ("\0", "is not JSON"),
])
def test_a_damaged_previous_plan_is_refused_naming_the_file(tmp_path, content, message):
    path = tmp_path / "old.json"
    path.write_text(content)
    with pytest.raises(fleet_schema.FleetPlanDataError, match="previous_plan %s .*(%s)" % (path, message)):
        fleet_schema.load(str(path), "previous_plan %s" % path)
    # The same in plan.json of the report folder: a problem of the diff, the new plan written.
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(content)
    text, dummy, _same = fleet_plan_action._with_diff(_plan(), str(plan_file), None)
    assert json.loads(text)["diff"]["problem"].startswith("no diff: ")


def test_a_previous_plan_path_with_a_nul_is_refused():
    with pytest.raises(fleet_schema.FleetPlanDataError, match="holds a NUL byte"):
        fleet_schema.load("/srv/plan\0.json", "previous_plan")


def test_a_parsed_plan_too_deep_for_the_schema_check_is_refused():
    deep = {"version": 2}
    holder = deep
    for dummy in range(5000):
        holder["x"] = {}
        holder = holder["x"]
    with pytest.raises(fleet_schema.FleetPlanDataError, match="plan.json is nested more than 64 levels deep"):
        fleet_schema.check(deep)


def test_an_old_plan_json_that_is_json_null_is_no_diff_with_a_problem(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text("null\n")
    text, dummy, _same = fleet_plan_action._with_diff(_plan(), str(plan_file), None)
    assert json.loads(text)["diff"]["problem"] == ("no diff: the plan.json already in report_dir %s is not a JSON object"
                                                   % plan_file)


# ---------------------------------------------------------------------------
# Inventory variable files, read to name where a refused variable was set
# ---------------------------------------------------------------------------

def test_variable_sources_reads_no_file_outside_host_vars_and_skips_a_file_too_deep(tmp_path, monkeypatch):
    monkeypatch.chdir("/")  # files are named relative to the current folder when under it: here, whole
    from ansible_collections.gpuops.platform.plugins.plugin_utils import variable_sources as vs

    inventory = tmp_path / "inventory"
    (inventory / "host_vars").mkdir(parents=True)
    (inventory / "group_vars").mkdir()
    (inventory / "escape.yml").write_text("nvidia_driver_branch: '570'\n")  # beside host_vars, not in it
    (inventory / "group_vars" / "all.yml").write_text("nvidia_driver_branch: " + "[" * 1000 + "]" * 1000 + "\n")
    (inventory / "host_vars" / "gpu-a.yml").write_text("nvidia_driver_branch: '570'\n")
    escape = {"inventory_hostname": "../escape", "inventory_dir": str(inventory), "nvidia_driver_branch": "570"}
    assert vs.inventory_files(escape) == [str(inventory / "group_vars" / "all.yml")]
    assert vs.variable_sources(["nvidia_driver_branch"], [escape]) == {}
    good = dict(escape, inventory_hostname="gpu-a")
    assert vs.variable_sources(["nvidia_driver_branch"], [good]) == {
        "nvidia_driver_branch": [str(inventory / "host_vars" / "gpu-a.yml")]}


@pytest.mark.parametrize("text", ['["\\\\", [[]]]', '{"a\\\\\\"[": [1]}', '["\\\\\\\\", "]]]"]', '[{"\\u005b": "\\"}"}]'])
def test_escapes_in_strings_are_read_as_json_reads_them(text):
    assert documents.json_depth(text) == documents.depth(json.loads(text))


# ---------------------------------------------------------------------------
# plan.json's schema without the jsonschema library (the collection does not require it)
# ---------------------------------------------------------------------------

def _fuzz_mutations():
    """tests/fuzz/mutations.py: the fuzz suite's structure-aware mutator."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mutations", str(ROOT / "tests" / "fuzz" / "mutations.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def no_jsonschema(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "jsonschema", None)  # import jsonschema raises ImportError


@pytest.mark.parametrize("change, where", [
    (lambda p: p["hosts"].update(good="x"), "hosts/good: 'x' is not of type 'object'"),
    (lambda p: p["hosts"]["good"].update(driver=[]), "hosts/good/driver: [] is not of type 'object', 'null'"),
    (lambda p: p["hosts"]["good"]["capacity"]["resources"].update({"nvidia.com/gpu": "4"}),
     "hosts/good/capacity/resources/nvidia.com/gpu: '4' is not of type 'integer'"),
    (lambda p: p["summary"].update(reboot=[1]), "summary/reboot/0: 1 is not of type 'string'"),
    (lambda p: p["hosts"]["good"].update(wave=0), "hosts/good/wave: 0 is less than the minimum of 1"),
    (lambda p: p["diff"].update(changed={"good": {"driver": ["a"]}}), "diff/changed/good/driver: ['a'] is too short"),
    (lambda p: p.pop("waves"), "(top): 'waves' is a required property"),
])
def test_a_damaged_plan_is_refused_naming_the_field_without_jsonschema(no_jsonschema, tmp_path, change, where):
    plan = json.loads(json.dumps(_plan()))
    fleet_schema.check(plan)
    change(plan)
    with pytest.raises(fleet_schema.FleetPlanDataError, match="the previous plan does not follow .*%s" % re.escape(where)):
        fleet_schema.check(plan, "the previous plan")
    # The diff against it: the problem, never a bare error.
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    text, dummy, _same = fleet_plan_action._with_diff(_plan(), str(tmp_path / "plan.json"), None)
    assert where in json.loads(text)["diff"]["problem"]


def test_the_fallback_reads_the_schema_as_jsonschema_does():
    """Random damage to a plan: the fallback refuses exactly what jsonschema refuses, at the same paths."""
    import random

    import jsonschema

    mutations = _fuzz_mutations()

    base = json.loads(json.dumps(_plan()))
    validator = jsonschema.Draft202012Validator(fleet_schema.schema(2))
    rng = random.Random(7)
    refused = 0
    for dummy in range(200):
        plan = mutations.mutate_document(base, rng)
        if not isinstance(plan, dict):
            continue
        ours = []
        fleet_schema._problems(plan, fleet_schema.schema(2), (), ours)
        theirs = sorted(tuple(e.absolute_path) for e in validator.iter_errors(plan))
        assert sorted(path for path, _message in ours) == theirs, plan
        refused += bool(theirs)
    assert refused > 20


def _plan_action(tmp_path, **args):
    task = mock.Mock(args=dict(args, hosts=["good"]), async_val=0, check_mode=False, diff=False)
    action = fleet_plan_action.ActionModule(task, mock.Mock(), mock.Mock(check_mode=False), loader=None, templar=None,
                                            shared_loader_obj=None)
    hostvars = {"good": {"gpuops_nvml_replay_file": str(NVML / "l40s.json")}}
    return action.run(task_vars={"groups": {"gpu_nodes": ["good"]}, "hostvars": hostvars})


@pytest.mark.parametrize("option", ["report_dir", "previous_plan", "facts_dir"])
def test_a_nul_in_a_path_option_of_the_planner_is_refused_and_nothing_is_written(tmp_path, option):
    args = {"report_dir": str(tmp_path / "report"), option: str(tmp_path / "x\0y")}
    with pytest.raises(AnsibleActionFail, match="%s '.*' is not a path: it holds a NUL byte; nothing was planned" % option):
        _plan_action(tmp_path, **args)
    assert tree(tmp_path) == []


def test_the_planner_action_writes_a_plan_beside_a_damaged_old_one(tmp_path):
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "plan.json").write_text("[" * DEEP + "]" * DEEP)
    result = _plan_action(tmp_path, report_dir=str(tmp_path / "report"))
    assert result["changed"] and result["valid"], result.get("msg")
    written = json.loads((tmp_path / "report" / "plan.json").read_text())
    assert "is nested more than 64 levels deep" in written["diff"]["problem"]
    assert tree(tmp_path / "report") == ["index.html", "plan.json"]


@pytest.mark.parametrize("text, refused", [
    ("a: " + "[" * 100 + "]" * 100 + "\n", True),            # past the limit, below the quick refusal: counted exactly
    ("- " * 70 + "x\n", True),                               # block sequences nest too
    ("a: '" + "[" * 300 + "'\nb: \"" + "{" * 300 + "\"\n", False),  # brackets in quoted text are text
    ("a: " + "[" * 60 + "]" * 60 + "\n", False),
])
def test_yaml_depth_counts_nesting_not_brackets_in_text(tmp_path, text, refused):
    path = tmp_path / "mig.yaml"
    path.write_text(text)
    if refused:
        with pytest.raises(documents.DocumentError, match="nested more than 64 levels deep"):
            documents.read_yaml(str(path), "mig_config_file")
    else:
        assert isinstance(documents.read_yaml(str(path), "mig_config_file"), dict)
