"""The driver decision shared by the fleet planner, the nvidia_driver role's replayed plan and the rolling upgrade."""
import json
from pathlib import Path

import pytest

from ansible_collections.gpuops.platform.plugins.plugin_utils import driver_action as da

NVML = Path(__file__).resolve().parents[3] / "fixtures" / "nvml"


def facts(installed="570.172.08", loaded="570.172.08", **extra):
    out = {"present": True, "driver_version": installed, "kernel_module_version": loaded, "gpus": []}
    out.update(extra)
    return out


def decide(version="", branch="570", state="present", allow_downgrade=False, **kw):
    return da.driver_action({"nvidia_driver_version": version, "nvidia_driver_branch": branch,
                             "nvidia_driver_state": state, "nvidia_driver_allow_downgrade": allow_downgrade}, facts(**kw))


# --- values -------------------------------------------------------------------------

@pytest.mark.parametrize("value, kind, words", [
    (570.19, "version", "nvidia_driver_version is the number 570.19, not a string: YAML reads an unquoted version "
                        "as a number (570.190 becomes 570.19, 570.10 becomes 570.1), so quote it, such as "
                        "nvidia_driver_version: \"570.172.08\""),
    (570, "version", "nvidia_driver_version is the number 570, not a string"),
    (True, "version", "nvidia_driver_version is the boolean True, not a string"),
    (570.0, "branch", "nvidia_driver_branch is the number 570.0, not a string"),
    ("570.172.08\n", "version", "nvidia_driver_version '570.172.08\\n' has whitespace or a line break around the "
                                "version (a YAML block scalar or an untrimmed lookup): set the version alone, quoted"),
    ("570\n", "branch", "nvidia_driver_branch '570\\n' has whitespace or a line break around the branch"),
    (" 570.172.08", "version", "has whitespace or a line break"),
    ("570.172.08x", "version", "nvidia_driver_version '570.172.08x' is not a driver version"),
    ("５７０.172.08", "version", "is not a driver version"),
    ("570.172", "branch", "nvidia_driver_branch '570.172' is not a driver branch"),
    (["570"], "version", "nvidia_driver_version must be a string such as \"570.172.08\", got a list"),
])
def test_a_value_that_is_not_an_exact_string_is_refused_with_the_variable_named(value, kind, words):
    problem = da.value_problem("nvidia_driver_%s" % kind, value, kind)
    assert problem is not None and words in problem


@pytest.mark.parametrize("value, kind", [("570.172.08", "version"), ("570.86", "version"), ("", "version"),
                                         (None, "version"), ("570", "branch"), (570, "branch")])
def test_exact_strings_and_a_whole_branch_number_pass(value, kind):
    assert da.value_problem("v", value, kind) is None


def test_every_setting_is_checked_and_named():
    errors = da.driver_setting_errors({"nvidia_driver_state": "installed", "nvidia_driver_version": 570.19,
                                       "nvidia_driver_branch": "R570"})
    assert [variable for variable, _message in errors] == ["nvidia_driver_state", "nvidia_driver_version",
                                                           "nvidia_driver_branch"]
    assert da.driver_setting_errors({"nvidia_driver_branch": ""})[0][1].startswith("nvidia_driver_branch is empty")
    named = da.driver_setting_errors({"nvidia_driver_version": "580\n"}, "gpu_upgrade_driver_version")
    assert named[0][0] == "gpu_upgrade_driver_version" and named[0][1].startswith("gpu_upgrade_driver_version '580")


# --- the decision ---------------------------------------------------------------------

@pytest.mark.parametrize("settings, installed, loaded, action, reboot", [
    ({}, "570.172.08", "570.172.08", "none", False),                          # on the branch followed
    ({"version": "570.172.08"}, "570.172.08", "570.172.08", "none", False),
    ({"version": "570.172.8"}, "570.172.08", "570.172.08", "none", False),     # the same build, written otherwise
    ({"version": "570.195.03"}, "570.172.08", "570.172.08", "upgrade", True),
    ({"version": "570.86.10", "allow_downgrade": True}, "570.172.08", "570.172.08", "downgrade", True),  # 86 < 172
    ({"version": "570.195.03"}, "570.172.08", None, "upgrade", False),          # no module loaded: no reboot
    ({"version": "570.172.08"}, "570.172.08", "570.158.01", "none", True),      # the old module still loaded
    ({"branch": "580"}, "570.172.08", "570.172.08", "upgrade", True),
    ({"branch": "550", "allow_downgrade": True}, "570.172.08", "570.172.08", "downgrade", True),
    ({"state": "latest"}, "570.172.08", "570.172.08", "none", False),
    ({"state": "absent"}, "570.172.08", "570.172.08", "remove", True),
    ({"state": "absent"}, None, None, "none", False),
    ({}, None, None, "install", False),
    ({"version": "570.195.03"}, "unknown", "unknown", "upgrade", True),         # unreadable: upgraded to the wanted
])
def test_wanted_against_installed_and_loaded(settings, installed, loaded, action, reboot):
    decision, errors = decide(installed=installed, loaded=loaded, **settings)
    assert errors == [] and (decision["action"], decision["reboot_required"]) == (action, reboot)
    assert decision["action"] in da.ACTIONS


@pytest.mark.parametrize("settings, installed", [
    ({"version": "570.86.10"}, "570.172.08"),  # 86 < 172 as numbers, not text
    ({"branch": "550"}, "570.172.08"),
    ({"branch": "570"}, "580.159.04"),          # the old default branch on a current host
])
def test_a_downgrade_without_consent_is_refused_naming_both_versions_and_the_variable(settings, installed):
    decision, errors = decide(installed=installed, loaded=installed, **settings)
    assert decision["action"] == "invalid" and not decision["reboot_required"] and len(errors) == 1
    assert errors[0].startswith("driver %s is installed and the wanted %s is older" % (installed, decision["wanted"]))
    assert "nvidia_driver_allow_downgrade: true" in errors[0] and 'nvidia_driver_version: "%s"' % installed in errors[0]
    decision, errors = decide(installed=installed, loaded=installed, allow_downgrade="yes", **settings)
    assert errors == [] and decision["action"] == "downgrade"


def test_allow_downgrade_that_is_no_boolean_is_refused():
    errors = da.driver_setting_errors(dict(da.DRIVER_DEFAULTS, nvidia_driver_allow_downgrade="maybe"))
    assert errors == [("nvidia_driver_allow_downgrade", "nvidia_driver_allow_downgrade 'maybe' is not true or false")]


def test_the_real_h200_pinned_to_an_older_version_is_refused_as_a_downgrade_unless_allowed(shared_reference):
    real = json.loads((shared_reference / "real-gpu" / "h200-nvml-facts.json").read_text())["nvidia"]
    assert real["driver_version"] == "580.159.04"
    settings = dict(da.DRIVER_DEFAULTS, nvidia_driver_version="570.172.08")
    decision, errors = da.driver_action(settings, real)
    assert decision["action"] == "invalid" and errors and "is older" in errors[0]
    decision, errors = da.driver_action(dict(settings, nvidia_driver_allow_downgrade=True), real)
    assert errors == [] and (decision["action"], decision["reboot_required"]) == ("downgrade", True)


def test_a_reboot_reason_in_the_facts_always_reboots():
    decision, _errors = decide(reboot_reasons=["an upgrade is waiting for a reboot"])
    assert decision["action"] == "none" and decision["reboot_required"]
    assert decision["reasons"] == ["an upgrade is waiting for a reboot"]


def test_a_refused_setting_plans_nothing_and_shows_what_was_given():
    decision, errors = decide(version=570.19)
    assert decision["action"] == "invalid" and not decision["reboot_required"]
    assert decision["wanted"] == "570.19 (a number)" and len(errors) == 1 and "quote it" in errors[0]
    decision, errors = decide(version="", branch=570)
    assert errors == [] and decision["branch"] == "570" and decision["wanted"] == "branch 570"


def test_the_recorded_fixture_needs_no_change_on_its_own_branch():
    recorded = json.loads((NVML / "hgx-h100.json").read_text())
    decision, errors = da.driver_action(dict(da.DRIVER_DEFAULTS, nvidia_driver_branch="570"), recorded)
    assert errors == [] and (decision["action"], decision["reboot_required"]) == ("none", False)


@pytest.mark.parametrize("decision, installed, loaded, current", [
    ({"version": "580.82.07"}, "580.82.07", "580.82.07", True),
    ({"version": "580.82.07"}, "580.82.07", None, True),
    ({"version": "580.82.07"}, "580.82.07", "570.172.08", False),
    ({"version": "580.82.07"}, "570.172.08", "570.172.08", False),
    ({"version": "", "branch": "580"}, "580.95.05", "580.95.05", True),
    ({"version": "", "branch": "580"}, "570.172.08", "570.172.08", False),
    ({"version": "", "branch": "580"}, None, None, False),
])
def test_driver_is_current(decision, installed, loaded, current):
    assert da.driver_is_current(decision, {"driver_version": installed, "kernel_module_version": loaded}) is current


# --- every host, before anything runs ----------------------------------------------------

def test_problems_are_grouped_over_hosts_and_name_the_file_that_sets_them(tmp_path, monkeypatch):
    monkeypatch.chdir("/")  # files are named relative to the current folder when under it: here, whole
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "h100.yml").write_text("nvidia_driver_version: 570.190\n")
    hosts = {}
    for name, group in (("a", "h100"), ("b", "l40s"), ("c", "h100")):
        hosts[name] = {"inventory_hostname": name, "inventory_dir": str(tmp_path), "group_names": [group]}
        if group == "h100":
            hosts[name]["nvidia_driver_version"] = 570.19
    problems = da.check_driver_settings(sorted(hosts.items()))
    assert [(variable, names) for variable, _message, names in problems] == [("nvidia_driver_version", ["a", "c"])]
    lines = da.refusal_lines(problems, hosts.get)
    assert lines == ["%s (2 hosts: a, c; set in %s)" % (problems[0][1], tmp_path / "group_vars" / "h100.yml")]


def test_the_rollouts_own_version_is_checked_and_named_when_a_host_has_it():
    variables = {"nvidia_driver_version": "570.172.08", "gpu_upgrade_driver_version": 580.82}
    problems = da.check_driver_settings([("a", variables)], "gpu_upgrade_driver_version")
    assert [p[0] for p in problems] == ["gpu_upgrade_driver_version"]
    assert da.check_driver_settings([("a", {"nvidia_driver_version": "570.172.08"})], "gpu_upgrade_driver_version") == []
