"""Validation against a node's GPUs, plans, idempotence and Kubernetes resources."""
import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._mig import config as C
from ansible_collections.gpuops.platform.plugins.module_utils._mig import plan as PL
from ansible_collections.gpuops.platform.plugins.module_utils._mig.profiles import mig_resource_name
from mig_helpers import config, facts, gpu, mig_device


def run(node, document, name="test", **kwargs):
    return PL.plan(node, C.select(C.parse(document), name), name, **kwargs)


def seven_1g(index=0):
    return gpu(index, current="enabled", devices=[mig_device(7 + s, "1g.10gb", s, 1) for s in range(7)])


def test_published_two_7g_example_is_rejected_with_model_and_reason():
    node = facts(gpu(0), gpu(1))
    result = run(node, config("two-7g", mig_enabled=True, mig_devices={"7g.80gb": 2}), "two-7g")
    assert not result["valid"] and not result["changed"]
    assert result["errors"] == [
        "config 'two-7g' entry 1, GPU %d (NVIDIA H100 80GB HBM3, H100 80GB): "
        "7g.80gb x2 exceeds the 1 allowed on H100 80GB" % i for i in (0, 1)]


def test_device_filter_applies_each_entry_to_its_model():
    a100 = gpu(1, device_id="0x20B010DE", name="NVIDIA A100-SXM4-40GB")
    node = facts(gpu(0), a100, gpu(2, device_id="0x26B510DE", name="NVIDIA L40S", supported=False))
    doc = {"version": "v1", "mig-configs": {"balanced": [
        {"device-filter": "0x20B010DE", "devices": "all", "mig-enabled": True,
         "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}},
        {"device-filter": "0x233010DE", "devices": "all", "mig-enabled": True,
         "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
    ]}}
    result = run(node, doc, "balanced")
    assert result["valid"], result["errors"]
    h100, a, l40s = result["gpus"]
    assert (h100["entry"], a["entry"], l40s["entry"]) == (2, 1, None)
    assert a["after"]["layout"] == {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
    assert h100["set_mode"] and h100["reset_required"]
    assert not l40s["changed"] and l40s["after"]["mig"] is None
    mixed = result["k8s_resources"]["mixed"]["resources"]
    assert mixed == {"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1, "nvidia.com/mig-3g.40gb": 1,
                     "nvidia.com/mig-1g.5gb": 2, "nvidia.com/mig-2g.10gb": 1, "nvidia.com/mig-3g.20gb": 1,
                     "nvidia.com/gpu": 1}
    assert not result["k8s_resources"]["single"]["valid"]


def test_profile_of_another_model_is_named_in_the_error():
    node = facts(gpu(0, device_id="0x20B710DE", name="NVIDIA A30"))
    result = run(node, config(mig_enabled=True, mig_devices={"1g.10gb": 1, "1g.6gb": 5}))
    assert result["errors"] == [
        "config 'test' entry 1, GPU 0 (NVIDIA A30, A30 24GB): 1g.10gb is not a MIG profile of A30 24GB "
        "(profiles: 1g.6gb, 1g.6gb+me, 2g.12gb, 2g.12gb+me, 4g.24gb)",
        "config 'test' entry 1, GPU 0 (NVIDIA A30, A30 24GB): 1g.6gb x5 exceeds the 4 allowed on A30 24GB"]


def test_mig_on_unsupported_gpu_and_unknown_device_offline():
    node = facts(gpu(0, device_id="0x26B510DE", name="NVIDIA L40S", supported=False),
                 gpu(1, device_id="0x2B8F10DE", name="NVIDIA Future GPU"))
    result = run(node, config(mig_enabled=True, mig_devices={"1g.10gb": 1}))
    # devices: all skips the GPU without MIG (mig-parted's rule) and says so
    assert result["notes"] == ["config 'test' entry 1, GPU 0 (NVIDIA L40S, unknown MIG family): "
                               "skipped, the GPU does not support MIG"]
    assert len(result["errors"]) == 1
    assert "device id 0x2B8F10DE is not in the MIG profile table" in result["errors"][0]
    assert "cannot be validated offline" in result["errors"][0]
    # an explicit index that enables MIG on it is an error
    result = run(node, config(devices=[0], mig_enabled=True, mig_devices={"1g.10gb": 1}))
    assert result["errors"] == ["config 'test' entry 1, GPU 0 (NVIDIA L40S, unknown MIG family): "
                                "MIG is not supported on this GPU, but the entry enables it for GPU index 0"]
    # disabling MIG needs no rules and is a no-op on a GPU without MIG
    result = run(node, config(mig_enabled=False))
    assert result["valid"] and not result["changed"]


L40S = dict(device_id="0x26B510DE", name="NVIDIA L40S", supported=False)
NO_MIG_WARNING = ("config 'test' asks for MIG (entry 1) but no GPU on this node supports MIG (NVIDIA L40S x2): "
                  "mig-parted skips such GPUs, so the node keeps its whole GPUs; give it a config without MIG "
                  "(mig-enabled: false) or check which config this node gets")


def test_mig_asked_of_a_node_where_no_gpu_can_do_mig_is_a_warning():
    node = facts(gpu(0, **L40S), gpu(1, **L40S))
    result = run(node, config(mig_enabled=True, mig_devices={"1g.10gb": 7}))
    assert result["valid"] and not result["changed"]  # mig-parted's rule: skipped, not an error
    assert result["warnings"] == [NO_MIG_WARNING]
    assert result["mig_unsupported"] is True
    assert len(result["notes"]) == 2


@pytest.mark.parametrize("node, document", [
    (facts(gpu(0, **L40S), gpu(1, **L40S)), config(mig_enabled=False)),           # MIG not asked for
    (facts(gpu(0, **L40S), gpu(1)), config(mig_enabled=True, mig_devices={"1g.10gb": 7})),  # the H100 can
    (facts(gpu(0, **L40S)), {"version": "v1", "mig-configs": {"test": [              # no entry selects the L40S
        {"device-filter": "0x233010DE", "devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}}),
])
def test_no_mig_warning_where_mig_is_not_asked_of_a_node_without_it(node, document):
    result = run(node, document)
    assert NO_MIG_WARNING not in result["warnings"] and result["mig_unsupported"] is False


def test_enable_from_disabled_plans_mode_reset_and_creates():
    result = run(facts(gpu(0)), config(mig_enabled=True, mig_devices={"3g.40gb": 1, "1g.10gb": 4}))
    gp = result["gpus"][0]
    assert gp["set_mode"] and gp["reset_required"] and gp["destroy"] == []
    assert gp["create"] == [{"profile": "3g.40gb", "start": 4, "size": 4}] + [
        {"profile": "1g.10gb", "start": s, "size": 1} for s in range(4)]
    assert result["changed"]


def test_same_layout_different_ids_and_placements_is_idempotent():
    node = facts(gpu(0, current="enabled", devices=[
        mig_device(1, "3g.40gb", 4, 4), mig_device(5, "1g.10gb", 3, 1), mig_device(6, "1g.10gb", 0, 1),
        mig_device(2, "1g.10gb", 2, 1), mig_device(9, "1g.10gb", 1, 1)]))
    result = run(node, config(mig_enabled=True, mig_devices={"1g.10gb": 4, "3g.40gb": 1}))
    gp = result["gpus"][0]
    assert not result["changed"] and not gp["changed"]
    assert gp["destroy"] == [] and gp["create"] == [] and len(gp["keep"]) == 5
    assert PL.diff(result)["before"] == PL.diff(result)["after"]


def test_partial_change_7x1g_to_3g_plus_4x1g_destroys_and_creates_only_what_is_needed():
    result = run(facts(seven_1g()), config(mig_enabled=True, mig_devices={"3g.40gb": 1, "1g.10gb": 4}))
    gp = result["gpus"][0]
    assert not gp["set_mode"] and not gp["reset_required"]
    assert [i["gpu_instance_id"] for i in gp["keep"]] == [7, 8, 9, 10]
    assert [(i["gpu_instance_id"], i["start"]) for i in gp["destroy"]] == [(11, 4), (12, 5), (13, 6)]
    assert [(c["profile"], c["start"]) for c in gp["create"]] == [("3g.40gb", 4)]
    diff = PL.diff(result)
    assert "1g.10gb@6" in diff["before"] and "3g.40gb@4" in diff["after"] and "1g.10gb@6" not in diff["after"]


def test_kept_instances_depend_on_placement_not_just_profile():
    # 1g at 0,1,5,6 exist; the 3g must go at 0 or 4, so keeping 5 and 6 forces the 3g to 0
    devices = [mig_device(g, "1g.10gb", s, 1) for g, s in ((3, 0), (4, 1), (5, 5), (6, 6))]
    node = facts(gpu(0, current="enabled", devices=devices))
    result = run(node, config(mig_enabled=True, mig_devices={"3g.40gb": 1, "1g.10gb": 3}))
    gp = result["gpus"][0]
    assert len(gp["keep"]) + len(gp["destroy"]) == 4
    assert len(gp["keep"]) == 2
    after = [(i["profile"], i["start"]) for i in gp["after"]["instances"]]
    assert sorted(after) == sorted(set(after)) and len(after) == 4
    assert gp["after"]["layout"] == {"3g.40gb": 1, "1g.10gb": 3}


def test_disable_destroys_everything_and_needs_reset():
    result = run(facts(seven_1g()), config(mig_enabled=False))
    gp = result["gpus"][0]
    assert gp["set_mode"] and gp["reset_required"] and len(gp["destroy"]) == 7 and gp["create"] == []
    assert result["k8s_resources"]["single"]["resources"] == {"nvidia.com/gpu": 1}


def test_pending_mode_already_set_needs_only_the_reset():
    node = facts(gpu(0, current="disabled", pending="enabled"))
    gp = run(node, config(mig_enabled=True, mig_devices={"7g.80gb": 1}))["gpus"][0]
    assert not gp["set_mode"] and gp["reset_required"] and gp["changed"]


def test_compute_instance_sub_profiles_are_replaced():
    node = facts(gpu(0, current="enabled", devices=[
        mig_device(1, "1c.3g.40gb", 0, 4, ci=0), mig_device(1, "2c.3g.40gb", 0, 4, ci=1)]))
    gp = run(node, config(mig_enabled=True, mig_devices={"3g.40gb": 1}))["gpus"][0]
    assert gp["changed"] and [d["gpu_instance_id"] for d in gp["destroy"]] == [1]
    assert [(c["profile"], c["start"]) for c in gp["create"]] == [("3g.40gb", 0)]


def test_k8s_single_strategy_counts_and_invalid_mixes():
    node = facts(seven_1g(0), seven_1g(1))
    result = run(node, config(mig_enabled=True, mig_devices={"1g.10gb": 7}))
    assert not result["changed"]
    assert result["k8s_resources"]["single"] == {"valid": True, "reason": None,
                                                 "resources": {"nvidia.com/gpu": 14}, "profile": "1g.10gb"}
    assert result["k8s_resources"]["mixed"]["resources"] == {"nvidia.com/mig-1g.10gb": 14}
    doc = {"version": "v1", "mig-configs": {"half": [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"devices": [1], "mig-enabled": False}]}}
    single = run(node, doc, "half")["k8s_resources"]["single"]
    assert not single["valid"] and "1 of 2 are not" in single["reason"]
    empty = run(node, config(mig_enabled=True, mig_devices={}))["k8s_resources"]["single"]
    assert not empty["valid"] and "without instances" in empty["reason"]


def test_overlapping_entries_and_missing_gpus():
    doc = {"version": "v1", "mig-configs": {"x": [
        {"devices": "all", "mig-enabled": False}, {"devices": [0, 5], "mig-enabled": False}]}}
    result = run(facts(gpu(0)), doc, "x")
    assert result["errors"] == ["config 'x', GPU 0 (NVIDIA H100 80GB HBM3, H100 80GB) is selected by entries 1, 2; "
                                "each GPU may match one entry"]
    assert result["warnings"] == ["config 'x' entry 2 selects GPU 5, which this node does not have"]


def test_node_without_gpu_is_an_error():
    result = run(facts(), config(mig_enabled=False))
    assert result["errors"] == ["no NVIDIA GPU to configure: no GPU"]


def test_gpus_that_nvml_cannot_read_are_not_called_missing():
    node = dict(facts(), pci_gpu_count=1,
                reason="NVML cannot read the 1 NVIDIA GPU(s) on the PCI bus: libnvidia-ml.so.1 not found")
    result = run(node, config(mig_enabled=False))
    assert result["errors"] == ["MIG cannot be planned: NVML cannot read the 1 NVIDIA GPU(s) on the PCI bus: "
                                "libnvidia-ml.so.1 not found"]


@pytest.mark.parametrize("count,valid", [(1, True), (2, False)])
def test_validation_decides_changed(count, valid):
    result = run(facts(gpu(0)), config(mig_enabled=True, mig_devices={"4g.40gb": count}))
    assert result["valid"] is valid and result["changed"] is valid


def test_mixed_resource_names_follow_the_device_plugin_for_attribute_profiles():
    # k8s-device-plugin internal/rm: "mig-" + profile with "+" replaced by "." (a valid resource name)
    rtx = gpu(0, device_id="0x2BB510DE", name="NVIDIA RTX PRO 6000 Blackwell Server Edition")
    doc = {"version": "v1", "mig-configs": {"m": [{"devices": "all", "mig-enabled": True, "mig-devices": {
        "1g.24gb+me.all": 1, "1g.24gb+gfx": 1, "1g.24gb-me": 2}}]}}
    result = run(facts(rtx), doc, "m")
    assert result["valid"], result["errors"]
    assert result["k8s_resources"]["mixed"]["resources"] == {
        "nvidia.com/mig-1g.24gb.me.all": 1, "nvidia.com/mig-1g.24gb.gfx": 1, "nvidia.com/mig-1g.24gb-me": 2}
    assert mig_resource_name("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"


# --- devices NVML could not name (nvml_facts records "profile": null) ---------

def unnamed_node():
    """GPU 0: a 3g.40gb at 0 and a device at 4 whose profile NVML did not name; GPU 1 (an A100): MIG off."""
    unnamed = mig_device(2, None, 4, 4)
    return facts(gpu(0, current="enabled", devices=[mig_device(1, "3g.40gb", 0, 4), unnamed]),
                 gpu(1, device_id="0x20B210DE", name="NVIDIA A100-SXM4-80GB"))


def test_an_unnamed_mig_device_is_a_layout_no_config_asks_for():
    doc = {"version": "v1", "mig-configs": {"two-3g": [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]}}
    result = run(unnamed_node(), doc, "two-3g")
    gp = result["gpus"][0]
    assert result["valid"] and result["changed"] and gp["changed"]
    assert gp["before"]["layout"] == {"3g.40gb": 1, PL.UNNAMED: 1}
    assert [i["gpu_instance_id"] for i in gp["keep"]] == [1]
    assert [(i["gpu_instance_id"], i["profile"]) for i in gp["destroy"]] == [(2, None)]
    assert [(c["profile"], c["start"]) for c in gp["create"]] == [("3g.40gb", 4)]
    assert "unnamed@4" in PL.diff(result)["before"] and "unnamed" not in PL.diff(result)["after"]


def test_an_unnamed_mig_device_left_alone_is_no_kubernetes_resource():
    doc = {"version": "v1", "mig-configs": {"a100-off": [
        {"devices": [1], "mig-enabled": False}]}}
    result = run(unnamed_node(), doc, "a100-off")
    assert result["valid"] and not result["gpus"][0]["changed"]
    k8s = result["k8s_resources"]
    assert k8s["mixed"]["resources"] == {"nvidia.com/mig-3g.40gb": 1, "nvidia.com/gpu": 1}
    assert not k8s["single"]["valid"]
    unnamed_only = run(facts(unnamed_node()["gpus"][0]), doc, "a100-off")["k8s_resources"]["single"]
    assert not unnamed_only["valid"] and "GPU 0 has a MIG device whose profile NVML did not name" in unnamed_only["reason"]


def test_a_mig_device_without_a_gpu_instance_id_is_never_kept():
    unknown = dict(mig_device(0, "3g.40gb", 0, 4), gpu_instance_id=None)
    node = facts(gpu(0, current="enabled", devices=[mig_device(1, "3g.40gb", 0, 4), unknown]))
    gp = run(node, config(mig_enabled=True, mig_devices={"3g.40gb": 2}))["gpus"][0]
    assert gp["changed"]
    assert [i["gpu_instance_id"] for i in gp["keep"]] == [1]
    assert [i["gpu_instance_id"] for i in gp["destroy"]] == [None]
