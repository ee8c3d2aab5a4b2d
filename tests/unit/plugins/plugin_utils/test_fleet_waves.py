"""The upgrade waves from the hosts' own variables, and the approved plan: inputs recorded, stale plans refused."""
import json

import pytest

from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_approval as fa
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_schema, recorded_facts
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_views as fv
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_waves as fw

from test_fleet_plan import NVML, fixture, write
from test_fleet_plan import plan as planned


def _hosts(count, **variables):
    return [("n%02d" % i, dict(variables)) for i in range(count)]


# --- waves ---------------------------------------------------------------------------

def test_serial_and_canary_come_from_the_hosts_variables():
    out = fw.rollout(_hosts(12, gpuops_upgrade_serial=5, gpuops_upgrade_canary=True))
    assert [len(w) for w in out["waves"]] == [1, 5, 5, 1] and out["serial"] == ["1", "5"] and out["canary"] is True
    assert out["waves"][0] == ["n00"] and out["waves"][-1] == ["n11"]
    assert out["max_fail_percentage"] == 0


def test_unset_is_one_host_at_a_time_and_percentages_follow_ansible():
    assert fw.rollout(_hosts(3))["waves"] == [["n00"], ["n01"], ["n02"]]
    out = fw.rollout(_hosts(10, gpuops_upgrade_serial="30%", gpuops_upgrade_max_fail_percentage="25%"))
    assert [len(w) for w in out["waves"]] == [3, 3, 3, 1] and out["max_fail_percentage"] == 25


@pytest.mark.parametrize("variable, value, message", [
    ("gpuops_upgrade_serial", "ten", "gpuops_upgrade_serial 'ten' is neither a number of hosts nor a percentage such as 10%"),
    ("gpuops_upgrade_serial", "5 hosts", "gpuops_upgrade_serial '5 hosts' is neither"),
    ("gpuops_upgrade_serial", 0, "gpuops_upgrade_serial '0' is not above 0: set a number of hosts per wave, or "
                                 "\"100%\" for every host at once"),
    ("gpuops_upgrade_serial", -1, "gpuops_upgrade_serial '-1' is not above 0"),
    ("gpuops_upgrade_serial", "0%", "gpuops_upgrade_serial '0%' is not above 0"),
    ("gpuops_upgrade_canary", "maybe", "gpuops_upgrade_canary 'maybe' is not true or false"),
    ("gpuops_upgrade_max_fail_percentage", 150, "gpuops_upgrade_max_fail_percentage 150 is not a percentage from 0 to 100"),
    ("gpuops_upgrade_max_fail_percentage", "some", "gpuops_upgrade_max_fail_percentage 'some' is not a percentage"),
])
def test_an_unusable_setting_is_refused_naming_the_variable_and_the_hosts(variable, value, message):
    hosts = _hosts(3)
    hosts[1][1][variable] = value
    with pytest.raises(fw.WavesError) as caught:
        fw.rollout(hosts)
    assert message in str(caught.value) and "(host n01)" in str(caught.value)


def test_one_hundred_percent_is_every_host_in_one_wave():
    assert fw.rollout(_hosts(4, gpuops_upgrade_serial="100%"))["waves"] == [["n00", "n01", "n02", "n03"]]


def test_hosts_that_disagree_are_refused_rather_than_one_value_picked():
    hosts = _hosts(4, gpuops_upgrade_serial=5)
    hosts[3][1]["gpuops_upgrade_serial"] = "5"           # the same value, written as text
    hosts[2][1]["gpuops_upgrade_serial"] = 2
    with pytest.raises(fw.WavesError, match=r"gpuops_upgrade_serial is not the same for every host.*'5' for 3 hosts: "
                                            r"n00, n01, n03; '2' for host n02"):
        fw.rollout(hosts)


def test_wave_lines_number_each_wave():
    assert fw.wave_lines([["a"], ["b", "c"]]) == ["wave 1/2: a", "wave 2/2: b, c"]


# --- the approved plan ---------------------------------------------------------------

HOSTS = {"a": ("l40s", {"nvidia_driver_version": "570.195.03", "gpuops_upgrade_serial": 2}),
         "b": ("hgx-h100", {"nvidia_driver_version": "570.195.03", "gpuops_upgrade_serial": 2}),
         "c": ("l40s", {"nvidia_driver_version": "570.195.03", "gpuops_upgrade_serial": 2})}


def _approved(tmp_path):
    inputs = {}
    out = planned(tmp_path, HOSTS, inputs=inputs)
    names = list(HOSTS)
    rollout = fw.rollout([(n, HOSTS[n][1]) for n in names])
    fv.enrich(out, names, {}, rollout["serial"][-1], rollout["canary"], planned_waves=rollout["waves"])
    fa.record_inputs(out, inputs)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(out))
    return path, json.loads(path.read_text())


def _now(tmp_path, variables=None):
    """The hosts' inputs as they are now (the recorded facts in tmp_path)."""
    out = {}
    for name, (_facts, hostvars) in HOSTS.items():
        hostvars = dict(hostvars, **(variables or {}).get(name, {}))
        record = recorded_facts.read_file(str(tmp_path / ("%s.json" % name)))
        out[name] = (fa.facts_digest(record), fa.settings_digests(hostvars))
    return out


def test_the_plan_records_each_hosts_inputs_and_hosts_alike_share_their_settings(tmp_path):
    path, plan = _approved(tmp_path)
    assert fleet_schema.check(plan) and plan["version"] == 3 and fa.load(str(path))["order"] == ["a", "b", "c"]
    a, b, c = (plan["hosts"][n]["inputs"] for n in "abc")
    assert a["settings"] == b["settings"] == c["settings"] and len(plan["inputs"]["settings"]) == 1
    assert a["facts"] == c["facts"] != b["facts"]
    assert fa.changes(plan, _now(tmp_path)) == {}


def test_changed_facts_and_settings_name_each_host_and_what_changed(tmp_path):
    _path, plan = _approved(tmp_path)
    moved = fixture("l40s")
    moved["gpus"][0]["temperature_c"] = 91                 # a reading that always moves is not a change
    write(tmp_path, "a", moved)
    assert fa.changes(plan, _now(tmp_path)) == {}
    moved["driver_version"] = "570.195.03"                 # someone upgraded the node since
    write(tmp_path, "c", moved)
    now = _now(tmp_path, {"b": {"nvidia_driver_version": "580.82.07", "gpuops_upgrade_canary": True}})
    del now["a"]
    # A host this run does not hold (an AWX job slice, --limit) is not a change: it is not run here.
    assert fa.changes(plan, now) == {"b": ["gpuops_upgrade_canary", "nvidia_driver_version"], "c": ["facts"]}
    assert fa.outside(plan, ["c", "b"]) == ["a"] and fa.outside(plan, ["a", "b", "c"]) == []
    message = fa.refusal("plan.json", fa.changes(plan, now))
    assert "is stale: the inputs of 2 host(s) changed" in message and "nothing was changed" in message
    assert "  - b: changed: gpuops_upgrade_canary, nvidia_driver_version" in message and "  - c: changed: facts" in message


def test_a_plan_without_inputs_or_with_invalid_hosts_cannot_be_approved(tmp_path):
    path, plan = _approved(tmp_path)
    older = dict(plan, version=2)
    del older["inputs"]
    path.write_text(json.dumps(older))
    with pytest.raises(fa.ApprovalError, match="is of plan.json version 2, which does not record what each host"):
        fa.load(str(path))
    del plan["hosts"]["b"]["inputs"]
    path.write_text(json.dumps(plan))
    with pytest.raises(fa.ApprovalError, match=r"does not record what these hosts were \(b\) planned from"):
        fa.load(str(path))
    _path, plan = _approved(tmp_path)
    plan["valid"] = False
    plan["summary"]["hosts_invalid"] = ["c"]
    path.write_text(json.dumps(plan))
    with pytest.raises(fa.ApprovalError, match=r"has hosts that cannot be planned \(c\)"):
        fa.load(str(path))
    path.write_text("{}")
    with pytest.raises(fa.ApprovalError, match="has version None"):
        fa.load(str(path))


def test_the_plans_waves_are_run_of_the_selected_hosts_only(tmp_path):
    _path, plan = _approved(tmp_path)
    assert fa.waves(plan) == [["a", "b"], ["c"]]
    assert fa.waves(plan, {"b", "c", "z"}) == [["b"], ["c"]] and fa.waves(plan, {"c"}) == [["c"]]


def test_digesting_a_record_leaves_the_record_as_it_was():
    record = recorded_facts.read_file(str(NVML / "hgx-h100.json"))
    before = json.dumps(record, sort_keys=True)
    assert fa.facts_digest(record) == fa.facts_digest(json.loads(before))
    assert json.dumps(record, sort_keys=True) == before and "temperature_c" in before


def test_a_setting_that_refers_to_itself_still_digests():
    loop = []
    loop.append(loop)
    assert fa.settings_digests({"mig_config": {"x": loop}})["mig_config"] != fa.settings_digests({})["mig_config"]
    assert fa.digest({"a": 1, "b": [2]}) == fa.digest({"b": [2], "a": 1}) != fa.digest({"b": [2], "a": 2})


@pytest.mark.parametrize("text, says", [
    ("[" * 5000 + "]" * 5000, "nested more than 64 levels deep"),
    (json.dumps({"version": 3, "hosts": [1]}), "does not follow the plan.json schema"),
    ('{"version": "\uff13"}', "has version '\uff13'"),
])
def test_a_hostile_approved_plan_is_refused_naming_it(tmp_path, text, says):
    path = tmp_path / "approved.json"
    path.write_text(text)
    with pytest.raises(fa.ApprovalError) as err:
        fa.load(str(path))
    assert says in str(err.value) and str(path) in str(err.value)


def test_an_approved_plan_path_with_a_nul_byte_is_refused_and_named_escaped():
    with pytest.raises(fa.ApprovalError) as err:
        fa.load("/srv/plans/a\x00b.json")
    assert "\x00" not in str(err.value) and "'/srv/plans/a\\x00b.json'" in str(err.value)


# --- the approved plan, whole or refused ---------------------------------------------

def _edited(tmp_path, edit):
    path, plan = _approved(tmp_path)
    edit(plan)
    path.write_text(json.dumps(plan))
    return path


def _one_wave(plan):
    plan["waves"]["batches"] = [dict(plan["waves"]["batches"][0], first=0, size=3)]
    for host in plan["hosts"].values():
        host["wave"] = 1


@pytest.mark.parametrize("edit, says", [
    # Every host in one wave: the plan's own serial 2 cuts 2, then 1.
    (_one_wave, "holds waves that its own settings (serial 2, 3 host(s)) do not give: it says 1 wave(s) of 3 "
                "host(s) (serial 2/2), and they give 2 wave(s) of 2, 1 host(s) (serial 2/2)"),
    (lambda p: p["waves"]["batches"][1].update(first=1), "it says 2 wave(s) of 2, 1 host(s)"),
    (lambda p: p["hosts"]["c"].update(wave=1), "hosts in another wave than their batch: c"),
    (lambda p: p["waves"].update(canary=True), "(serial 2, a canary wave of one first, 3 host(s))"),
    (lambda p: p["waves"].update(serial=["ten"]), "has wave settings no wave can be cut from "
                                                  "(gpuops_upgrade_serial 'ten' is neither a number of hosts"),
    (lambda p: p["waves"].update(max_fail_percentage=100.5), "does not follow the plan.json schema"),
    (lambda p: p.update(order=["a", "b", "c", "a"]), "lists a more than once in its order"),
    (lambda p: p.update(order=["a", "b"]), "does not hold the same hosts in its order and its hosts; planned but "
                                           "in no wave: c"),
    (lambda p: p.update(order=["a", "b", "c", "z"]), "in its order without a plan: z"),
    (lambda p: p.update(order=[], hosts={}), "has no hosts: there is nothing it approves"),
])
def test_an_edited_plan_is_refused_naming_what_is_not_whole(tmp_path, edit, says):
    path = _edited(tmp_path, edit)
    with pytest.raises(fa.ApprovalError) as err:
        fa.load(str(path))
    assert says in str(err.value) and str(path) in str(err.value), str(err.value)
    assert "nothing was changed" in str(err.value) or "schema" in str(err.value)


def test_a_whole_plan_gives_its_waves_through_the_one_waves_function(tmp_path):
    path, plan = _approved(tmp_path)
    assert fa.check_whole(plan, str(path))["waves"] == fa.waves(plan) == [["a", "b"], ["c"]]
    # Re-cut from its settings, with a canary: the same function the planner and upgrade.yml use.
    rollout = fw.rollout([(n, {"gpuops_upgrade_serial": 2, "gpuops_upgrade_canary": True}) for n in "abc"])
    fv.enrich(plan, ["a", "b", "c"], {}, 2, True, planned_waves=rollout["waves"])
    assert fa.check_whole(plan, str(path))["waves"] == [["a"], ["b", "c"]]


def test_the_approved_digest_must_be_the_files(tmp_path):
    path, _plan = _approved(tmp_path)
    digest = fa.hashlib.sha256(path.read_bytes()).hexdigest()
    assert fa.load(str(path), digest)["order"] == ["a", "b", "c"]
    assert fa.load(str(path), " %s\n" % digest.upper())["order"] == ["a", "b", "c"]
    path.write_text(path.read_text() + "\n")                                     # the same plan, other bytes
    with pytest.raises(fa.ApprovalError) as err:
        fa.load(str(path), digest)
    assert ("the approved plan %s is not the plan that was approved: its SHA-256 is %s, and "
            "gpuops_approved_plan_sha256 is %s" % (path, fa.hashlib.sha256(path.read_bytes()).hexdigest(), digest)
            in str(err.value)) and "nothing was changed" in str(err.value)
    for bad in ("", "ab" * 31, "zz" * 32, "x" * 500):
        with pytest.raises(fa.ApprovalError, match="is not a SHA-256 digest") as err:
            fa.load(str(path), bad)
        assert len(str(err.value)) < 400


def test_a_plan_that_names_no_host_of_the_run_is_refused_unless_the_run_is_a_job_slice(tmp_path):
    _path, plan = _approved(tmp_path)
    plan["unplanned"] = ["localhost", "x"]
    assert fa.of_this_run(plan, "p.json", ["c", "x", "a"], ["a", "b", "c", "x"]) == ["a", "c"]
    # Another inventory: none of its hosts was the planner's.
    with pytest.raises(fa.ApprovalError) as err:
        fa.of_this_run(plan, "p.json", ["y1", "y2"], ["y1", "y2"])
    assert ("the approved plan p.json names none of this run's hosts (y1, y2): none of this run's hosts is one the "
            "plan's inventory held" in str(err.value)) and "Nothing was changed" in str(err.value)
    # --limit to hosts outside the plan: the group still holds the plan's hosts, so it is no slice.
    with pytest.raises(fa.ApprovalError, match="this run's inventory holds 3 of its hosts, but the run"):
        fa.of_this_run(plan, "p.json", ["x"], ["a", "b", "c", "x"])
    # A job slice of the plan's inventory that holds none of the plan's hosts: nothing of it runs here.
    assert fa.of_this_run(plan, "p.json", ["x"], ["x"]) == []
    # ... but not one with a host the planner's inventory did not hold, nor one of a plan that records no inventory.
    for plan_, names in ((plan, ["x", "new"]), (dict(plan, unplanned=None), ["x"])):
        with pytest.raises(fa.ApprovalError, match="names none of this run's hosts"):
            fa.of_this_run(plan_, "p.json", names, names)
    with pytest.raises(fa.ApprovalError, match=r"names none of this run's hosts \(no hosts\)"):
        fa.of_this_run(plan, "p.json", [], [])


def test_a_huge_setting_is_cut_in_the_message():
    hosts = _hosts(2, gpuops_upgrade_max_fail_percentage="9" * (1024 * 1024))
    with pytest.raises(fw.WavesError) as caught:
        fw.rollout(hosts)
    assert len(str(caught.value)) < 1000 and "(1048576 characters)" in str(caught.value)
