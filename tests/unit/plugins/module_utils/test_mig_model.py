"""The MIG model's types: MigProfile parsed once, GpuMigPlan and its dict form, MigError failing once in main()."""
import ast
import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpuops.platform.plugins.module_utils._mig import apply as A
from ansible_collections.gpuops.platform.plugins.module_utils._mig import config as C
from ansible_collections.gpuops.platform.plugins.module_utils._mig import module as mig_module
from ansible_collections.gpuops.platform.plugins.module_utils._mig import plan as PL
from ansible_collections.gpuops.platform.plugins.module_utils._mig import profiles as P
from ansible_collections.gpuops.platform.plugins.module_utils._mig.model import (
    GpuMigPlan, MigError, MigProfile, NodeMigPlan, parse_profile)
from ansible_collections.gpuops.platform.plugins.modules import nvidia_mig
from support.module_args import ExitJson, FailJson, patch_module_args

ROOT = Path(__file__).resolve().parents[4]
FIXTURES = ROOT / "tests" / "fixtures"
MIG_SOURCES = [ROOT / "plugins" / "modules" / "nvidia_mig.py"] + sorted((ROOT / "plugins" / "module_utils" / "_mig").glob("*.py"))


# -- MigProfile ------------------------------------------------------------------

def _reference_names(shared_reference):
    """Every profile name in NVIDIA's shipped mig-parted configs (mig-devices keys)."""
    names = set()
    for path in sorted((shared_reference / "mig-parted").glob("*.yaml")):
        for entries in (yaml.safe_load(path.read_text()).get("mig-configs") or {}).values():
            for entry in entries:
                names.update(entry.get("mig-devices") or {})
    return names


def _hardware_names():
    """Every profile name the recorded hardware reports: nvidia-smi -lgip, nvml_facts and the recorded plans."""
    names = set()
    for path in sorted((FIXTURES / "hardware").glob("*/nvidia-smi-mig-lgip.txt")):
        names.update(re.findall(r"^\|\s+\d+\s+MIG (\S+)\s", path.read_text(), re.M))
    for path in sorted((FIXTURES / "hardware").glob("*/*.json")) + sorted((FIXTURES / "nvml").glob("*.json")):
        names.update(re.findall(r'"profile": ?"([^"]+)"', path.read_text()))
        names.update(re.findall(r'"([0-9]+(?:c\.[0-9]+)?g\.[0-9]+gb[^"]*)": ?[0-9]', path.read_text()))
    return names


def test_every_shipped_and_recorded_profile_name_round_trips(shared_reference):
    reference, hardware = _reference_names(shared_reference), _hardware_names()
    table = set(name for family in P.FAMILIES.values() for name in family.profiles)
    assert len(reference) > 40 and len(hardware) >= 7 and "1g.10gb+me" in hardware
    for name in sorted(reference | hardware | table):
        profile = parse_profile(name)
        assert str(profile) == profile.name == name
        assert parse_profile(str(profile)) == profile
        assert P.mig_resource_name(name) == "nvidia.com/mig-" + name.replace("+", ".")


@pytest.mark.parametrize("name,fields,media", [
    ("1g.10gb", (None, 1, 10, (), ()), False),
    ("1g.10gb+me", (None, 1, 10, ("me",), ()), True),
    ("2g.48gb+me.all", (None, 2, 48, ("me.all",), ()), True),
    ("1g.24gb+gfx", (None, 1, 24, ("gfx",), ()), False),
    ("1g.24gb-me", (None, 1, 24, (), ("me",)), False),
    ("1c.2g.20gb", (1, 2, 20, (), ()), False),
    ("1c.1g.10gb+me", (1, 1, 10, ("me",), ()), True),
])
def test_profile_fields_follow_mig_parted(name, fields, media):
    profile = parse_profile(name)
    assert tuple(profile) == fields and profile.media_extensions is media
    assert profile.is_sub_profile is (fields[0] is not None)
    assert str(profile.gpu_instance) == re.sub(r"^[0-9]+c\.", "", name)


@pytest.mark.parametrize("name,message", [
    ("", "a profile name must be a string such as 1g.10gb"),
    (None, "a profile name must be a string such as 1g.10gb"),
    (7, "a profile name must be a string such as 1g.10gb"),
    ("1g10gb", "'1g10gb' is not a MIG profile name such as 1g.10gb"),
    ("1g.10gb+", "'1g.10gb+' is not a MIG profile name"),
    ("1g.10gb+me+gfx", "'1g.10gb+me+gfx' is not a MIG profile name"),
    ("1g.10gb+xx", "1g.10gb+xx: attribute +xx is not one of +me, +me.all, +gfx"),
    ("1g.10gb+me,me", "1g.10gb+me,me: attribute +(repeated) is not one of"),
    ("1g.24gb-gfx", "1g.24gb-gfx: attribute -gfx is not one of -me"),
    ("0g.10gb", "0g.10gb: slices and memory must be at least 1"),
    ("1g.0gb", "1g.0gb: slices and memory must be at least 1"),
    ("0c.1g.10gb", "0c.1g.10gb: slices and memory must be at least 1"),
])
def test_a_bad_name_is_a_mig_error_naming_it(name, message):
    with pytest.raises(MigError) as err:
        parse_profile(name)
    assert str(err.value).startswith(message) and err.value.message == str(err.value)
    assert err.value.details == {"profile": name}


def test_a_sub_profile_is_refused_where_a_gpu_instance_is_asked_for():
    assert parse_profile("1c.3g.40gb").gpu_instance == parse_profile("3g.40gb")
    with pytest.raises(MigError, match=r"^1c\.3g\.40gb is a compute instance sub-profile"):
        parse_profile("1c.3g.40gb", gpu_instance=True)
    with pytest.raises(C.MigConfigError) as err:
        C.parse_config("x", [{"devices": "all", "mig-enabled": True, "mig-devices": {"1c.3g.40gb": 1, "1g.1gb+no": 1}}])
    assert err.value.problems == [
        "config 'x' entry 1: 1c.3g.40gb is a compute instance sub-profile; this module manages whole GPU instances "
        "(one compute instance each)",
        "config 'x' entry 1: 1g.1gb+no: attribute +no is not one of +me, +me.all, +gfx"]


ATTRS = st.one_of(st.just(("+", ())), st.tuples(st.just("+"), st.permutations(["me", "me.all", "gfx"]).flatmap(
    lambda p: st.integers(1, 3).map(lambda n: tuple(p[:n])))), st.just(("-", ("me",))))


@given(c=st.one_of(st.none(), st.integers(1, 8)), g=st.integers(1, 8), gb=st.integers(1, 999), attrs=ATTRS)
def test_any_well_formed_name_round_trips(c, g, gb, attrs):
    sign, items = attrs
    profile = MigProfile(c, g, gb, items if sign == "+" else (), items if sign == "-" else ())
    assert parse_profile(str(profile)) == profile


# -- GpuMigPlan --------------------------------------------------------------------

def _pinned_plans():
    pinned = json.loads((FIXTURES / "mig" / "plan-shape.json").read_text())["full"]
    return [(key, value["result"]) for key, value in sorted(pinned.items())]


def test_a_gpu_plan_reads_back_from_its_dict_form_key_for_key():
    seen = 0
    for key, result in _pinned_plans():
        for gp in result["gpus"]:
            plan = GpuMigPlan.from_dict(gp)
            assert json.dumps(plan.to_dict()) == json.dumps(gp), key
            assert plan.describe("after") == PL.describe(gp, "after") and GpuMigPlan.of(plan) is plan
            seen += 1
    assert seen > 100


def test_the_planner_returns_the_typed_model_and_plan_its_dict_form(fixtures_dir):
    facts = json.loads((fixtures_dir / "nvml" / "h200-mig.json").read_text())
    entries = C.select(C.parse({"version": "v1", "mig-configs": {"x": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.71gb": 1, "1g.18gb": 4}}]}}), "x")
    node = PL.plan_node(facts, entries, "x")
    assert isinstance(node, NodeMigPlan) and all(isinstance(gp, GpuMigPlan) for gp in node.gpus)
    gp = node.gpus[0]
    assert (gp.wanted_mode, gp.changed, len(gp.keep), len(gp.destroy), gp.create) == (
        "enabled", True, 4, 3, [{"profile": "3g.71gb", "start": 4, "size": 4}])
    assert gp.after.layout == {"1g.18gb": 4, "3g.71gb": 1}
    assert json.dumps(node.to_dict()) == json.dumps(PL.plan(facts, entries, "x"))
    assert PL.diff(node) == PL.diff(node.to_dict())


# -- MigError: one type, one fail path -------------------------------------------------

def _calls(name):
    found = []
    for path in MIG_SOURCES:
        tree = ast.parse(path.read_text())
        for func in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
            found.extend((path.name, func.name) for call in ast.walk(func) if isinstance(call, ast.Call) and
                         isinstance(call.func, ast.Attribute) and call.func.attr == name)
    return found


def test_main_is_the_one_place_that_fails_or_exits():
    assert _calls("fail_json") == [("nvidia_mig.py", "main")]
    assert _calls("exit_json") == [("nvidia_mig.py", "main")]


def test_the_mig_errors_are_one_type():
    for error in (C.MigConfigError(["a", "b"]), A.MigApplyError("m", ["done"]), A.ResetBlocked("busy")):
        assert isinstance(error, MigError)
    assert C.MigConfigError(["a", "b"]).result() == {"msg": "a; b", "errors": ["a", "b"]}
    assert A.MigApplyError("m", ["done"]).result() == {"msg": "m", "actions": ["done"]}


def _main_with(monkeypatch, run):
    monkeypatch.setattr(mig_module, "run", run)
    with patch_module_args({"config": {}, "config_name": "x", "_ansible_check_mode": True}):
        nvidia_mig.main()


@pytest.mark.usefixtures("module_exits")
def test_main_fails_with_any_mig_error_and_its_details(monkeypatch):
    def raising(error):
        def run(*_args):
            raise error
        return run
    for error, expected in [
            (MigError("bad", errors=["e"], plan={"gpus": []}), {"msg": "bad", "errors": ["e"], "plan": {"gpus": []}}),
            (C.MigConfigError(["p"]), {"msg": "p", "errors": ["p"]}),
            (A.MigApplyError("GPU 0: failed", ["GPU 0: destroyed"]), {"msg": "GPU 0: failed", "actions": ["GPU 0: destroyed"]})]:
        with pytest.raises(FailJson) as err:
            _main_with(monkeypatch, raising(error))
        assert dict((k, v) for k, v in err.value.args[0].items() if k in expected) == expected
    # anything else is a defect, not a MIG problem: main() does not turn it into a failed result
    with pytest.raises(KeyError):
        _main_with(monkeypatch, raising(KeyError("gpus")))
    with pytest.raises(ExitJson) as err:
        _main_with(monkeypatch, lambda *_args: {"changed": False, "plan": {}})
    assert err.value.args[0]["changed"] is False
