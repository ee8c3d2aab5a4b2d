"""Applying plans through the fake NVML: order, partial changes, resets, refusals, verification."""
import pynvml
import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._mig import apply as A
from ansible_collections.gpuops.platform.plugins.module_utils._mig import config as C
from ansible_collections.gpuops.platform.plugins.module_utils._mig import plan as PL
from fakes import nvml_nodes
from fakes.fake_pynvml_mig import FakeMigNvml


def entries(**layout):
    body = {"devices": "all", "mig-enabled": bool(layout) or layout == {}}
    body.update(layout)
    return C.select(C.parse({"version": "v1", "mig-configs": {"x": [body]}}), "x")


ENABLE = dict((("mig-enabled", True),))


def setup(node, **kwargs):
    nvml = FakeMigNvml(node, **kwargs)
    nvml.nvmlInit()
    mig = A.NvmlMig(nvml)
    families = dict((i, mig.rules(h, "GPU")) for i, h in enumerate(mig.handles()))
    return nvml, mig, families


def plan_and_apply(nvml, mig, families, config, allow_reset=True, clients_stopped=True):
    facts = mig.facts()
    rules = dict((g["index"], families.get(g["index"]) or PL.table_rules(g)) for g in facts["gpus"])
    result = PL.plan(facts, config, "x", rules_for=lambda gpu: rules[gpu["index"]], offline=False)
    assert result["valid"], result["errors"]
    done, reasons = [], []
    for gp in result["gpus"]:
        actions, reason = mig.apply_gpu(gp["index"], gp, rules[gp["index"]], allow_reset, clients_stopped,
                                        nvml.reset_callable())
        done.extend(actions)
        if reason:
            reasons.append(reason)
    return result, done, reasons


MIXED = {"mig-enabled": True, "mig-devices": {"3g.71gb": 1, "1g.18gb": 4}}


def test_partial_change_destroys_and_creates_only_what_is_needed():
    nvml, mig, families = setup(nvml_nodes.h200_mig())
    result, actions, reasons = plan_and_apply(nvml, mig, families, C.select(C.parse(
        {"version": "v1", "mig-configs": {"x": [dict(devices="all", **MIXED)]}}), "x"))
    assert reasons == []
    assert nvml.log == [
        ("destroy_ci", 0, 11, 0), ("destroy_gi", 0, 11), ("destroy_ci", 0, 12, 0), ("destroy_gi", 0, 12),
        ("destroy_ci", 0, 13, 0), ("destroy_gi", 0, 13), ("create_gi", 0, 1, "MIG 3g.71gb", 4), ("create_ci", 0, 1, 0)]
    gis = nvml.node.gpus[0].mig.gpu_instances
    assert sorted(gis) == [1, 7, 8, 9, 10]          # the four kept 1g instances keep their ids
    assert actions[-1] == "GPU 0: created 3g.71gb at 4"
    assert nvml.resets == []                         # no mode change, no reset


def test_apply_twice_is_a_no_op_the_second_time():
    nvml, mig, families = setup(nvml_nodes.h200_mig())
    config = C.select(C.parse({"version": "v1", "mig-configs": {"x": [dict(devices="all", **MIXED)]}}), "x")
    plan_and_apply(nvml, mig, families, config)
    nvml.log[:] = []
    result, actions, _reasons = plan_and_apply(nvml, mig, families, config)
    assert not result["changed"] and actions == [] and nvml.log == []
    problems, _verified = A.verify(mig.facts(), config, "x", lambda g: families[g["index"]], mig)
    assert problems == []


def test_enable_from_disabled_sets_mode_resets_and_creates():
    nvml, mig, families = setup(nvml_nodes.dgx_a100())
    config = C.select(C.parse({"version": "v1", "mig-configs": {"x": [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "1g.10gb": 4}}]}}), "x")
    # MIG is disabled: NVML lists no profiles, so the table's rules apply
    assert families[0] is None
    result, actions, reasons = plan_and_apply(nvml, mig, families, config)
    assert reasons == [] and result["gpus"][0]["reset_required"]
    assert [entry[0] for entry in nvml.log] == ["set_mode", "reset"] + ["create_gi", "create_ci"] * 5
    assert actions[:2] == ["GPU 0: MIG mode set to enabled", "GPU 0: reset to activate MIG mode enabled"]
    after = mig.facts()["gpus"]
    assert [d["profile"] for d in after[0]["mig"]["devices"]] == ["1g.10gb"] * 4 + ["3g.40gb"]
    assert after[1]["mig"]["current_mode"] == "disabled"   # not selected: untouched
    assert A.verify(mig.facts(), config, "x", PL.table_rules, mig)[0] == []


def test_pending_mode_without_reset_returns_reboot_required_and_creates_nothing():
    nvml, mig, families = setup(nvml_nodes.hgx_h100())
    config = C.select(C.parse({"version": "v1", "mig-configs": {"x": [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]}}), "x")
    _result, _actions, reasons = plan_and_apply(nvml, mig, families, config, allow_reset=False)
    assert reasons == ["MIG mode enabled is pending on GPU 0 until a GPU reset (allow_reset is false); reboot the node"]
    assert [e[0] for e in nvml.log] == ["set_mode"]
    assert nvml.node.gpus[0].mig.pending_mode == pynvml.NVML_DEVICE_MIG_ENABLE


def test_reset_refused_by_clients_returns_reboot_required():
    nvml, mig, families = setup(nvml_nodes.hgx_h100())
    nvml.clients[0] = ["nvidia-persistenced"]
    config = C.select(C.parse({"version": "v1", "mig-configs": {"x": [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]}}), "x")
    _result, _actions, reasons = plan_and_apply(nvml, mig, families, config)
    assert len(reasons) == 1 and "the reset was refused: In use by another client" in reasons[0]
    assert nvml.resets == [] and not nvml.node.gpus[0].mig.gpu_instances


def test_mode_activated_by_the_driver_needs_no_reset():
    nvml, mig, families = setup(nvml_nodes.hgx_h100(), immediate_mode_change=True)
    config = C.select(C.parse({"version": "v1", "mig-configs": {"x": [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]}}), "x")
    _result, actions, reasons = plan_and_apply(nvml, mig, families, config)
    assert reasons == [] and nvml.resets == []
    assert actions == ["GPU 0: MIG mode set to enabled", "GPU 0: created 7g.80gb at 0"]


def test_refuses_while_compute_processes_run_unless_clients_stopped():
    nvml, mig, families = setup(nvml_nodes.h200_mig())
    nvml.node.gpus[0].processes = [(4242, 1 << 30)]
    config = C.select(C.parse({"version": "v1", "mig-configs": {"x": [dict(devices="all", **MIXED)]}}), "x")
    with pytest.raises(A.MigApplyError) as err:
        plan_and_apply(nvml, mig, families, config, clients_stopped=False)
    assert "GPU 0 runs 1 compute process(es) (pid 4242)" in str(err.value)
    assert nvml.log == []
    # told the clients were stopped, it tries, and NVML's own refusal is reported
    with pytest.raises(A.MigApplyError) as err:
        plan_and_apply(nvml, mig, families, config, clients_stopped=True)
    assert "destroying GPU instance 11 (1g.18gb at 4) failed: In use by another client" in str(err.value)


def test_create_failure_reports_what_was_done():
    nvml, mig, families = setup(nvml_nodes.h200_mig())
    nvml.fail("nvmlDeviceCreateGpuInstanceWithPlacement", pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
    config = C.select(C.parse({"version": "v1", "mig-configs": {"x": [dict(devices="all", **MIXED)]}}), "x")
    with pytest.raises(A.MigApplyError) as err:
        plan_and_apply(nvml, mig, families, config)
    assert str(err.value) == "GPU 0: creating 3g.71gb at 4 failed: Insufficient Resources"
    assert len(err.value.actions) == 3 and err.value.actions[0].startswith("GPU 0: destroyed 1g.18gb at 4")


def test_disable_destroys_everything_then_resets():
    nvml, mig, families = setup(nvml_nodes.h200_mig())
    config = C.select(C.parse({"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": False}]}}), "x")
    _result, actions, reasons = plan_and_apply(nvml, mig, families, config)
    assert reasons == []
    kinds = [e[0] for e in nvml.log]
    assert kinds == ["destroy_ci", "destroy_gi"] * 7 + ["set_mode", "reset"]
    assert mig.mig_mode(mig.handles()[0]) == ("disabled", "disabled")


def test_verify_catches_instances_without_mig_devices():
    nvml, mig, families = setup(nvml_nodes.h200_mig())
    gpu = nvml.node.gpus[0]
    for gi in gpu.mig.gpu_instances.values():
        gi.compute_instances.clear()     # "applied", but CUDA sees no device
    config = C.select(C.parse({"version": "v1", "mig-configs": {"x": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}}]}}), "x")
    problems, _result = A.verify(mig.facts(), config, "x", lambda g: families[0], mig)
    assert "GPU 0: 7 GPU instance(s) have no MIG device (no compute instance or not visible to CUDA)" in problems
    assert any(p.startswith("GPU 0: expected GPU 0 NVIDIA H200: MIG enabled: 1g.18gb@0") for p in problems)


def test_live_rules_come_from_nvml_placements():
    nvml, mig, families = setup(nvml_nodes.h200_mig())
    fam = families[0]
    assert fam.source == "nvml"
    assert fam.profiles["3g.71gb"].starts == (0, 4) and fam.profiles["3g.71gb"].nvml_id == 9
    assert fam.profiles["1g.35gb"].memory_slices == 2 and fam.max_instances == 7
    # the driver narrows a placement: the plan follows NVML, not the table
    nvml.node.gpus[0].mig.profiles[pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE].placements = [0]
    fam = mig.rules(mig.handles()[0], "H200")
    assert fam.profiles["3g.71gb"].starts == (0,)
    result = PL.plan(mig.facts(), C.select(C.parse({"version": "v1", "mig-configs": {"x": [
        dict(devices="all", **MIXED)]}}), "x"), "x", rules_for=lambda g: fam, offline=False)
    assert result["errors"] == [
        "config 'x' entry 1, GPU 0 (NVIDIA H200, H200): no placement of 1g.18gb x4 + 3g.71gb x1 fits on H200: "
        "the instances would overlap (placements: 1g.18gb at 0/1/2/3/4/5/6; 3g.71gb at 0)"]
    layout = {"mig-enabled": True, "mig-devices": {"3g.71gb": 1, "1g.18gb": 3}}
    result = PL.plan(mig.facts(), C.select(C.parse({"version": "v1", "mig-configs": {"x": [
        dict(devices="all", **layout)]}}), "x"), "x", rules_for=lambda g: fam, offline=False)
    gp = result["gpus"][0]
    assert [(c["profile"], c["start"]) for c in gp["create"]] == [("3g.71gb", 0)]
    assert sorted(d["start"] for d in gp["destroy"]) == [0, 1, 2, 3]


def test_table_plan_is_checked_against_the_driver_once_mig_is_on():
    nvml, mig, families = setup(nvml_nodes.dgx_a100())
    # this driver offers the 3g only at 0: 3g + 4x1g cannot fit, although the table allows it
    nvml.node.gpus[0].mig.profiles[pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE].placements = [0]
    config = C.select(C.parse({"version": "v1", "mig-configs": {"x": [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "1g.10gb": 4}}]}}), "x")
    with pytest.raises(A.MigApplyError) as err:
        plan_and_apply(nvml, mig, families, config)
    assert "GPU 0: the driver's MIG rules reject the layout: no placement of 1g.10gb x4 + 3g.40gb x1" in str(err.value)
    assert err.value.actions == ["GPU 0: MIG mode set to enabled", "GPU 0: reset to activate MIG mode enabled"]
    assert not nvml.node.gpus[0].mig.gpu_instances


def test_instance_lookup_skips_free_ids_and_raises_other_errors():
    nvml, mig, _families = setup(nvml_nodes.h200_mig())
    calls = []

    def lookup(parent, item_id):
        calls.append(item_id)
        if item_id == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        if item_id == 2:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return (parent, item_id)

    assert list(mig._by_id(lookup, "gpu", 4)) == [(0, ("gpu", 0)), (3, ("gpu", 3))]
    assert calls == [0, 1, 2, 3]

    def broken(_parent, _item_id):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)

    with pytest.raises(pynvml.NVMLError):
        list(mig._by_id(broken, "gpu", 4))
