"""One health verdict per node, for the fleet planner and for health.yml (the gpu_health_plan filter)."""
import copy
import json
from pathlib import Path

import pytest

from ansible_collections.gpuops.platform.plugins.filter import gpu_health
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan
from ansible_collections.gpuops.platform.plugins.plugin_utils.health_verdict import HealthVerdictError, health_verdict

NVML = Path(__file__).resolve().parents[3] / "fixtures" / "nvml"


def fixture(name):
    return json.loads((NVML / ("%s.json" % name)).read_text())


def health_yml_status(facts):
    """What health.yml labels the node (render mode: no API server)."""
    return gpu_health.gpu_health_plan([{"name": "n", "nvidia": facts}], render=True)[0]["status"]


def test_a_counter_the_recorded_summary_does_not_show_makes_the_node_critical():
    facts = fixture("hgx-h100")
    facts["gpus"][0]["ecc"]["volatile_uncorrectable"] = 1          # the summary recorded beside it says ok
    assert facts["health"]["status"] == "ok"
    verdict = health_verdict(facts)
    assert verdict["status"] == "critical" and verdict["unhealthy_gpus"] == 1 and verdict["judged"]
    assert verdict["reasons"] == ["GPU 0: 1 uncorrectable ECC errors since the driver loaded"]


def test_the_recorded_summary_counts_for_what_the_fields_cannot_show():
    # NVML could not start: no GPU fields, the summary nvml_facts recorded is all there is.
    mismatch = dict(fixture("no-gpu"), health={"status": "critical", "reasons": ["NVML cannot start"]})
    assert health_verdict(mismatch)["status"] == "critical" and health_verdict(mismatch)["judged"]
    hot = dict(fixture("l40s"), health={"status": "warning", "reasons": ["GPU 0: over temperature: 70 C"]})
    assert health_verdict(hot)["status"] == "warning" and health_verdict(hot)["reasons"] == ["GPU 0: over temperature: 70 C"]


def test_a_pending_reboot_is_a_warning_and_a_node_without_gpu_is_not_judged():
    pending = dict(fixture("l40s"), reboot_required=True, reboot_reasons=["the loaded module is 570.158.01"])
    assert (health_verdict(pending)["status"], health_verdict(pending)["reasons"]) == (
        "warning", ["the loaded module is 570.158.01"])
    idle = health_verdict(fixture("no-gpu"))
    assert (idle["status"], idle["judged"]) == ("ok", False)


def test_reasons_are_not_repeated_when_the_summary_agrees_with_the_fields():
    facts = fixture("hgx-h100")
    facts["gpus"][2]["remapped_rows"]["pending"] = True
    facts["health"] = {"status": "warning", "reasons": ["GPU 2: a row remap is pending: reset the GPU to apply it"]}
    assert health_verdict(facts)["reasons"] == ["GPU 2: a row remap is pending: reset the GPU to apply it"]


@pytest.mark.parametrize("facts, words", [
    ({"present": True, "health": {"status": "bad"}}, "unknown health status 'bad'"),
    ({"present": True, "health": "ok"}, "health in the node's facts must be a mapping"),
    ("ok", "must be a mapping"),
    # A string would be read letter by letter, a bool or number not at all: the field is named.
    ({"present": True, "health": {"status": "ok", "reasons": True}},
     r"health.reasons in the node's facts must be a list of strings, got True"),
    ({"present": True, "health": {"status": "ok", "reasons": "ECC"}}, r"health.reasons .* got 'ECC'"),
    ({"present": True, "health": {"status": "ok", "reasons": [3]}}, r"health.reasons .* got \[3\]"),
    ({"present": True, "reboot_required": True, "reboot_reasons": 1, "health": {"status": "ok"}},
     "reboot_reasons in the node's facts must be a list of strings, got 1"),
    ({"present": True, "gpus": {"0": {}}, "health": {"status": "ok"}}, "gpus in the node's facts must be a list of mappings"),
    ({"present": True, "gpus": ["GPU-0"], "health": {"status": "ok"}}, "gpus in the node's facts must be a list of mappings"),
])
def test_unreadable_health_is_refused(facts, words):
    with pytest.raises(HealthVerdictError, match=words):
        health_verdict(facts)


def _variants():
    base = fixture("hgx-h100")
    out = []
    for change in ({}, {"ecc": {"volatile_uncorrectable": 3}}, {"ecc": {"aggregate_uncorrectable": 2}},
                   {"remapped_rows": {"failure": True}}, {"retired_pages": {"pending": True}}, {"lost": True}):
        facts = copy.deepcopy(base)
        for key, value in change.items():
            if isinstance(value, dict):
                facts["gpus"][1][key] = dict(facts["gpus"][1].get(key) or {}, **value)
            else:
                facts["gpus"][1][key] = value
        out.append(facts)
    return out


@pytest.mark.parametrize("facts", _variants(), ids=["ok", "ecc-volatile", "ecc-aggregate", "remap-failure",
                                                    "retired-pending", "lost"])
def test_the_planner_and_health_yml_give_the_same_verdict(facts):
    assert fleet_plan.plan_health(facts)["status"] == health_yml_status(facts) == health_verdict(facts)["status"]


def _nested(depth):
    value = []
    for dummy in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("field, value", [
    ("reasons", _nested(100000)),
    ("reasons", [1] * 100000),
    ("reasons", "x" * 1000000),
    ("status", _nested(100000)),
    ("status", "y" * 1000000),
])
def test_a_huge_or_deep_refused_value_gives_a_short_error_naming_the_field(field, value):
    """The error shows a bounded sketch of the value: not megabytes, and no RecursionError from its repr."""
    with pytest.raises(HealthVerdictError) as raised:
        health_verdict({"present": True, "health": dict({"status": "ok"}, **{field: value})})
    message = str(raised.value)
    assert len(message) < 200 and ("health.reasons" in message if field == "reasons" else "health status" in message)
