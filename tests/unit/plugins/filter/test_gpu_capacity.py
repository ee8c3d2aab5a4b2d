"""Capacity from node facts: GPU count x replicas, MIG plans and facts, and the errors."""
import json
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter import gpu_capacity as f
from ansible_collections.gpuops.platform.plugins.plugin_utils import gpu_capacity as capacity_model

TESTS = Path(__file__).resolve().parents[3]
# Recorded nvml_facts fixtures first, then the few layouts no recording has (MIG mixed).
FACT_DIRS = [TESTS / "fixtures" / "nvml", TESTS / "integration" / "k8s" / "facts"]


def facts(name):
    for folder in FACT_DIRS:
        path = folder / ("%s.json" % name)
        if path.is_file():
            return json.loads(path.read_text())
    raise FileNotFoundError(name)


def node(name, facts_name=None, **kw):
    n = {"name": name, "host": name, "nvidia": facts(facts_name) if facts_name else None}
    n.update(kw)
    return n


def sharing(*configs, **kw):
    return f.gpu_sharing_configs(list(configs), **kw)


def test_plain_gpus_counted_from_facts():
    cap = f.gpu_capacity([node("a", "hgx-h100"), node("b", "l40s")])
    assert cap["nodes"]["a"]["resources"] == {"nvidia.com/gpu": 8}
    assert cap["nodes"]["b"]["resources"] == {"nvidia.com/gpu": 1}
    assert cap["resources"] == {"nvidia.com/gpu": 9}
    assert cap["by_product"] == {"NVIDIA-H100-80GB-HBM3": {"nvidia.com/gpu": 8}, "NVIDIA-L40S": {"nvidia.com/gpu": 1}}
    assert cap["nodes"]["a"]["product"] == "NVIDIA-H100-80GB-HBM3"


def test_time_slicing_multiplies_by_replicas_and_renames():
    cfgs = sharing({"name": "ts4", "mode": "time-slicing", "replicas": 4},
                   {"name": "ts2r", "mode": "time-slicing", "replicas": 2, "rename_by_default": True})
    cap = f.gpu_capacity([node("a", "hgx-h100", config="ts4"), node("b", "l40s", config="ts2r")], sharing=cfgs)
    assert cap["nodes"]["a"]["resources"] == {"nvidia.com/gpu": 32}
    assert cap["nodes"]["b"]["resources"] == {"nvidia.com/gpu.shared": 2}
    assert cap["resources"] == {"nvidia.com/gpu": 32, "nvidia.com/gpu.shared": 2}


def test_default_config_applies_to_nodes_without_a_label():
    cfgs = sharing({"name": "mps3", "mode": "mps", "replicas": 3})
    cap = f.gpu_capacity([node("a", "l40s")], sharing=cfgs, default_config="mps3")
    assert cap["nodes"]["a"]["resources"] == {"nvidia.com/gpu": 3}
    assert cap["nodes"]["a"]["config"] == "mps3"


def test_mig_single_from_facts():
    cap = f.gpu_capacity([node("m", "h200-mig")], mig_strategy="single")
    assert cap["nodes"]["m"]["resources"] == {"nvidia.com/gpu": 7}
    assert cap["nodes"]["m"]["mig"] is True


def test_mig_mixed_from_facts_counts_profiles_and_full_gpus():
    cap = f.gpu_capacity([node("m", "h100-mig-mixed")], mig_strategy="mixed")
    assert cap["nodes"]["m"]["resources"] == {
        "nvidia.com/gpu": 1, "nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-2g.20gb": 1, "nvidia.com/mig-1g.10gb": 2}


# The device plugin's mixed strategy (k8s-device-plugin internal/rm/rm.go, AddDefaultResourcesToConfig):
# strings.ReplaceAll("mig-"+profile.String(), "+", "."), under the nvidia.com/ prefix; go-nvlib writes the
# attributes after "+" (+me, +me.all, +gfx) and the negative ones after "-" (-me).
DEVICE_PLUGIN_NAMES = {
    "1g.10gb": "nvidia.com/mig-1g.10gb",
    "1g.10gb+me": "nvidia.com/mig-1g.10gb.me",
    "1g.23gb+me.all": "nvidia.com/mig-1g.23gb.me.all",
    "1g.23gb-me": "nvidia.com/mig-1g.23gb-me",
    "1g.24gb+gfx": "nvidia.com/mig-1g.24gb.gfx",
}


def _with_profiles(*profiles):
    data = facts("h100-mig-mixed")
    gpu = dict(data["gpus"][0])
    gpu["mig"] = dict(gpu["mig"], devices=[dict(gpu["mig"]["devices"][0], profile=p) for p in profiles])
    data["gpus"] = [gpu]
    return data


@pytest.mark.parametrize("profile", sorted(DEVICE_PLUGIN_NAMES))
def test_mig_resource_names_from_facts_follow_the_device_plugin(profile):
    cap = f.gpu_capacity([{"name": "m", "host": "m", "nvidia": _with_profiles(profile)}], mig_strategy="mixed")
    assert cap["nodes"]["m"]["resources"] == {DEVICE_PLUGIN_NAMES[profile]: 1}


def test_mig_resource_names_from_facts_and_from_a_plan_agree():
    from ansible_collections.gpuops.platform.plugins.module_utils._mig import plan as mig_plan
    profiles = sorted(DEVICE_PLUGIN_NAMES)
    from_facts = f.gpu_capacity([{"name": "m", "host": "m", "nvidia": _with_profiles(*profiles)}],
                                mig_strategy="mixed")["nodes"]["m"]["resources"]
    planned = mig_plan.k8s_resources([{"index": 0, "after": {"mig": "enabled", "instances": [
        {"profile": p, "start": None} for p in profiles]}}])["mixed"]["resources"]
    assert from_facts == planned == dict((name, 1) for name in DEVICE_PLUGIN_NAMES.values())


def test_mig_single_with_mixed_profiles_is_refused():
    with pytest.raises(AnsibleFilterError, match="node m: the single MIG strategy needs every GPU MIG-enabled with one profile"):
        f.gpu_capacity([node("m", "h100-mig-mixed")], mig_strategy="single")


def test_mig_plan_wins_over_facts():
    plan = {"single": {"nvidia.com/gpu": 7}, "mixed": {"nvidia.com/mig-1g.10gb": 7}}
    single = f.gpu_capacity([node("m", "hgx-h100", mig_k8s_resources=plan)], mig_strategy="single")
    mixed = f.gpu_capacity([node("m", "hgx-h100", mig_k8s_resources=plan)], mig_strategy="mixed")
    assert single["nodes"]["m"]["resources"] == {"nvidia.com/gpu": 7}
    assert single["nodes"]["m"]["mig"] is True
    assert mixed["resources"] == {"nvidia.com/mig-1g.10gb": 7}


def test_time_slicing_mig_devices_under_mixed():
    cfgs = sharing({"name": "mig-ts", "mode": "time-slicing",
                    "resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 3}]}, mig_strategy="mixed")
    cap = f.gpu_capacity([node("m", "h100-mig-mixed", config="mig-ts")], mig_strategy="mixed", sharing=cfgs)
    assert cap["nodes"]["m"]["resources"]["nvidia.com/mig-1g.10gb"] == 6
    assert cap["nodes"]["m"]["resources"]["nvidia.com/gpu"] == 1


def test_mps_on_a_mig_node_is_refused():
    cfgs = sharing({"name": "mps", "mode": "mps", "replicas": 2})
    with pytest.raises(AnsibleFilterError, match="node m: MPS sharing .* cannot be used with MIG"):
        f.gpu_capacity([node("m", "h200-mig", config="mps")], sharing=cfgs)


def test_unknown_config_on_a_node_is_refused():
    with pytest.raises(AnsibleFilterError, match="selects device-plugin config 'nope', which is not defined"):
        f.gpu_capacity([node("a", "l40s", config="nope")], sharing=sharing({"name": "ts", "mode": "time-slicing", "replicas": 2}))


def test_nodes_without_gpus_or_facts():
    cap = f.gpu_capacity([node("cpu", "no-gpu"), node("unknown")])
    assert cap["resources"] == {}
    assert cap["nodes"]["cpu"]["resources"] == {}
    assert cap["missing_facts"] == ["unknown"]


TS = {"name": "x", "mode": "time-slicing"}


@pytest.mark.parametrize("cfg, strategy, message", [
    # The device plugin's own rules (api/config/v1 replicas.go, resources.go; cmd/nvidia-device-plugin/main.go).
    (dict(TS, replicas=1), "single", r"replicas of nvidia.com/gpu is 1, but the device plugin refuses it \(\"number of replicas must be >= 2\"\)"),
    (dict(TS, replicas=0), "single", "number of replicas must be >= 2"),
    (dict(TS, replicas=-2), "single", "replicas of nvidia.com/gpu is -2, but the device plugin refuses it"),
    (dict(TS, replicas=2.7), "single", "replicas of nvidia.com/gpu must be a whole number, got 2.7"),
    (dict(TS, replicas="2.7"), "single", "must be a whole number, got '2.7'"),
    (dict(TS, replicas=True), "single", "must be an integer, got True"),
    (dict(TS, replicas="many"), "single", "must be a whole number, got 'many'"),
    (dict(TS), "single", "time-slicing needs replicas"),
    (dict(TS, resources=[]), "single", "no resources specified"),
    (dict(TS, resources={"name": "nvidia.com/gpu", "replicas": 2}), "single", "resources must be a list"),
    (dict(TS, resources=[{"replicas": 2}]), "single", "no resource name specified"),
    (dict(TS, resources=[{"name": "nvidia.com/gpu"}]), "single", "no replicas specified for nvidia.com/gpu"),
    (dict(TS, replicas=2, resources=[{"name": "nvidia.com/gpu", "replicas": 2}]), "single", "set either replicas .* or resources, not both"),
    (dict(TS, resources=[{"name": "nvidia.com/gpu", "replicas": 2}, {"name": "gpu", "replicas": 3}]), "single",
     "resource nvidia.com/gpu is listed twice"),
    (dict(TS, resources=[{"name": "nvidia.com/GPU", "replicas": 2}]), "single", "incorrect format for resource name 'nvidia.com/GPU'"),
    (dict(TS, resources=[{"name": "nvidia.com/mig_1g", "replicas": 2}]), "mixed", "incorrect format for resource name"),
    (dict(TS, resources=[{"name": "nvidia.com/mig-" + "x" * 60, "replicas": 2}]), "mixed",
     "fully-qualified resource name must be 63 characters or less"),
    (dict(TS, resources=[{"name": "nvidia.com/mig-" + "x" * 42, "replicas": 2}], rename_by_default=True), "mixed",
     r"\(rename_by_default\): fully-qualified resource name must be 63 characters or less: nvidia.com/mig-x+\.shared"),
    (dict(TS, resources=[{"name": "nvidia.com/tpu", "replicas": 2}]), "single", "the device plugin advertises no resource nvidia.com/tpu"),
    (dict(TS, resources=[{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]), "single",
     "nvidia.com/mig-1g.10gb exists only under the mixed MIG strategy"),
    (dict(TS, resources=[{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]), "none", "exists only under the mixed MIG strategy"),
    (dict(TS, resources=[{"name": "nvidia.com/gpu", "replicas": 2, "rename": "nvidia.com/shared"}]), "single",
     "the device plugin ignores 'rename' in sharing resources"),
    (dict(TS, replicas=2, rename_by_default="maybe"), "single", "rename_by_default must be true or false, got 'maybe'"),
    (dict(TS, replicas=2, fail_requests_greater_than_one=2), "single", "fail_requests_greater_than_one must be true or false"),
    ({"name": "x", "mode": "mps", "replicas": 2}, "mixed", "using --mig-strategy=mixed is not supported with MPS"),
    ({"name": "x", "mode": "none", "replicas": 4}, "single", "mode none shares nothing, so replicas would be ignored"),
    ({"name": "x", "mode": "sliced", "replicas": 2}, "single", "unknown mode 'sliced'"),
    ({"name": "x y", "mode": "none"}, "single", "name must be"),
    # Unknown keys name the typo and list the known keys.
    (dict(TS, replicas=2, rename_by_defualt=True), "single",
     "sharing config 'x': unknown key rename_by_defualt; known keys: name, mode, replicas, resources, rename_by_default, "
     "fail_requests_greater_than_one"),
    (dict(TS, resources=[{"name": "nvidia.com/gpu", "replica": 2}]), "single",
     "sharing config 'x', resource nvidia.com/gpu: unknown key replica; known keys: name, replicas"),
    (dict(TS, resources=[{"name": "nvidia.com/gpu", "replicas": 2, "devices": [0]}]), "single", "unknown key devices"),
])
def test_bad_sharing_configs(cfg, strategy, message):
    with pytest.raises(AnsibleFilterError, match=message):
        f.gpu_sharing_configs([cfg], mig_strategy=strategy)


@pytest.mark.parametrize("replicas", [2, 4.0, "3", 16])
def test_whole_number_replicas_are_rendered_as_integers(replicas):
    doc = sharing(dict(TS, replicas=replicas))["x"]["document"]
    (res,) = doc["sharing"]["timeSlicing"]["resources"]
    assert res == {"name": "nvidia.com/gpu", "replicas": int(float(replicas))}
    assert isinstance(res["replicas"], int) and not isinstance(res["replicas"], bool)


def test_short_resource_names_get_the_plugin_prefix():
    cfgs = sharing(dict(TS, resources=[{"name": "gpu", "replicas": 2}, {"name": "mig-1g.10gb", "replicas": 3}]),
                   mig_strategy="mixed")
    assert cfgs["x"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 2}, {"name": "nvidia.com/mig-1g.10gb", "replicas": 3}]


def test_mps_fail_requests_is_rendered_only_when_set():
    cfgs = sharing({"name": "a", "mode": "mps", "replicas": 2},
                   {"name": "b", "mode": "mps", "replicas": 2, "fail_requests_greater_than_one": False},
                   {"name": "c", "mode": "time-slicing", "replicas": 2, "fail_requests_greater_than_one": "yes"})
    assert "failRequestsGreaterThanOne" not in cfgs["a"]["document"]["sharing"]["mps"]
    assert cfgs["b"]["document"]["sharing"]["mps"]["failRequestsGreaterThanOne"] is False
    assert cfgs["c"]["document"]["sharing"]["timeSlicing"]["failRequestsGreaterThanOne"] is True


def test_bad_config_fails_without_returning_a_partial_result():
    good = {"name": "ok", "mode": "time-slicing", "replicas": 2}
    with pytest.raises(AnsibleFilterError, match="sharing config 'bad'"):
        f.gpu_sharing_configs([good, {"name": "bad", "mode": "time-slicing", "replicas": 1}])


def test_unknown_mig_strategy():
    with pytest.raises(AnsibleFilterError, match="unknown MIG strategy 'double'"):
        f.gpu_sharing_configs([], mig_strategy="double")
    with pytest.raises(AnsibleFilterError, match="unknown MIG strategy 'double'"):
        f.gpu_capacity([], mig_strategy="double")


def test_sharing_documents_match_the_device_plugin_format():
    cfgs = sharing({"name": "default", "mode": "none"},
                   {"name": "ts", "mode": "time-slicing", "replicas": 4, "fail_requests_greater_than_one": True},
                   {"name": "mps", "mode": "mps", "replicas": 2, "rename_by_default": True})
    assert cfgs["default"]["document"] == {"version": "v1", "flags": {"migStrategy": "single"}}
    assert cfgs["ts"]["document"]["sharing"] == {"timeSlicing": {
        "renameByDefault": False, "failRequestsGreaterThanOne": True,
        "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}
    assert cfgs["mps"]["document"]["sharing"] == {"mps": {
        "renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}


def test_quota_check():
    cap = f.gpu_capacity([node("a", "hgx-h100")])
    assert f.gpu_quota_check({"requests.nvidia.com/gpu": 8, "pods": 100}, cap) == {"requests.nvidia.com/gpu": 8, "pods": 100}
    with pytest.raises(AnsibleFilterError, match=r"tenant team-a quota is larger than the fleet: requests.nvidia.com/gpu=9 but the fleet has 8"):
        f.gpu_quota_check({"requests.nvidia.com/gpu": 9}, cap, what="tenant team-a quota")


def test_product_label():
    assert f.gpu_product_label("NVIDIA A100-SXM4-40GB") == "NVIDIA-A100-SXM4-40GB"
    assert f.gpu_product_label(" weird / name ") == "weird-name"
    assert len(f.gpu_product_label("x" * 100)) == 63


def test_tolerations_for_taints():
    assert f.gpu_tolerations([{"key": "gpu", "value": "true", "effect": "NoSchedule"},
                              {"key": "dedicated", "effect": "NoExecute"},
                              {"key": "gpu", "value": "true", "effect": "NoSchedule"}]) == [
        {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]
    with pytest.raises(AnsibleFilterError, match="a taint needs key and effect"):
        f.gpu_tolerations([{"key": "gpu"}])


def test_tenant_quota_defaults_from_the_fleet_share():
    cfgs = sharing({"name": "ts4", "mode": "time-slicing", "replicas": 4})
    cap = f.gpu_capacity([node("a", "hgx-h100", config="ts4")], sharing=cfgs)
    hard = f.gpu_tenant_quota({"name": "t", "gpu_share": 0.25, "quota": {"requests.cpu": "64", "pods": 50}}, cap)
    assert hard == {"requests.nvidia.com/gpu": 8, "requests.cpu": "64", "pods": 50}
    assert f.gpu_tenant_quota({"name": "t"}, cap)["requests.nvidia.com/gpu"] == 32


def test_tenant_quota_mig_resources_and_explicit_values():
    cap = f.gpu_capacity([node("m", "h100-mig-mixed")], mig_strategy="mixed")
    hard = f.gpu_tenant_quota({"name": "t", "gpu_share": 0.5, "quota": {"requests.nvidia.com/mig-1g.10gb": 2}}, cap)
    assert hard == {"requests.nvidia.com/gpu": 0, "requests.nvidia.com/mig-1g.10gb": 2,
                    "requests.nvidia.com/mig-2g.20gb": 0, "requests.nvidia.com/mig-3g.40gb": 0}


@pytest.mark.parametrize("tenant, message", [
    ({"name": "t", "quota": {"requests.nvidia.com/gpu": 9}}, "tenant t quota is larger than the fleet: requests.nvidia.com/gpu=9 but the fleet has 8"),
    ({"name": "t", "gpu_share": 1.5}, "gpu_share must be between 0 and 1"),
    ({"name": "t", "quota": {"requests.nvidia.com/mig-1g.10gb": 1}}, "mig-1g.10gb=1 but the fleet has 0"),
])
def test_tenant_quota_errors(tenant, message):
    cap = f.gpu_capacity([node("a", "hgx-h100")])
    with pytest.raises(AnsibleFilterError, match=message):
        f.gpu_tenant_quota(tenant, cap)


def test_allocatable_diff_names_node_and_numbers():
    cfgs = sharing({"name": "ts4", "mode": "time-slicing", "replicas": 4})
    cap = f.gpu_capacity([node("a", "hgx-h100", config="ts4"), node("b", "l40s"), node("cpu", "no-gpu")], sharing=cfgs)
    k8s = [{"metadata": {"name": "a"}, "status": {"allocatable": {"cpu": "96", "nvidia.com/gpu": "8"}}},
           {"metadata": {"name": "b"}, "status": {"allocatable": {"nvidia.com/gpu": "1"}}}]
    assert f.gpu_allocatable_diff(k8s, cap) == [
        "node a: allocatable nvidia.com/gpu is 8, expected 32 (8 GPU(s), device-plugin config ts4)"]
    k8s[0]["status"]["allocatable"]["nvidia.com/gpu"] = "32"
    assert f.gpu_allocatable_diff(k8s, cap) == []
    assert f.gpu_allocatable_diff(k8s[:1], cap) == ["node b (host b) is not in the cluster"]


def test_tenants_plan_defaults_and_errors():
    cap = f.gpu_capacity([node("a", "hgx-h100")])
    tenants = [{"name": "team-a", "gpu_share": 0.5},
               {"name": "b", "namespace": "team-b", "pod_security": "restricted", "quota": {"requests.nvidia.com/gpu": 2}}]
    plans = f.gpu_tenants_plan(tenants, cap, default_quota={"pods": 100})
    assert [(p["namespace"], p["pod_security"], p["quota"]) for p in plans] == [
        ("team-a", "baseline", {"pods": 100, "requests.nvidia.com/gpu": 4}),
        ("team-b", "restricted", {"pods": 100, "requests.nvidia.com/gpu": 2})]
    assert plans[0]["kueue_local_queue"] == "team-a"
    for tenants, message in [([{"name": "x", "namespace": "Bad_NS"}], "not a DNS label"),
                             ([{"name": "x"}, {"name": "y", "namespace": "x"}], "tenants x and y share the namespace x"),
                             ([{"name": "x", "pod_security": "loose"}], "pod_security must be one of"),
                             ([{"name": "x", "quota": {"requests.nvidia.com/gpu": 100}}], "tenant x quota is larger than the fleet")]:
        with pytest.raises(AnsibleFilterError, match=message):
            f.gpu_tenants_plan(tenants, cap)


def test_mig_plan_in_the_mig_roles_form():
    """The mig role publishes {strategy: {valid, reason, resources}}."""
    plan = {"single": {"valid": False, "reason": "the single strategy needs one profile on the node; the layout has 1g.10gb, 3g.40gb",
                       "resources": {}},
            "mixed": {"valid": True, "reason": None, "resources": {"nvidia.com/mig-1g.10gb": 4, "nvidia.com/mig-3g.40gb": 1,
                                                                   "nvidia.com/gpu": 1}}}
    cap = f.gpu_capacity([node("m", "hgx-h100", mig_k8s_resources=plan)], mig_strategy="mixed")
    assert cap["nodes"]["m"]["resources"] == {"nvidia.com/mig-1g.10gb": 4, "nvidia.com/mig-3g.40gb": 1, "nvidia.com/gpu": 1}
    assert cap["nodes"]["m"]["mig"] is True
    with pytest.raises(AnsibleFilterError, match="node m: the MIG layout cannot be used with the single strategy: the single strategy needs one profile"):
        f.gpu_capacity([node("m", "hgx-h100", mig_k8s_resources=plan)], mig_strategy="single")
    ok = {"single": {"valid": True, "reason": None, "resources": {"nvidia.com/gpu": 14}, "profile": "1g.10gb"},
          "mixed": {"valid": True, "reason": None, "resources": {"nvidia.com/mig-1g.10gb": 14}}}
    single = f.gpu_capacity([node("m", "hgx-h100", mig_k8s_resources=ok)], mig_strategy="single")
    assert single["nodes"]["m"]["resources"] == {"nvidia.com/gpu": 14} and single["nodes"]["m"]["mig"] is True


# DRA nodes: labelled nvidia.com/gpu.deploy.device-plugin=false, the GPU
# Operator runs no device plugin there and the DRA driver publishes the GPUs.
DRA_LABEL = {"nvidia.com/gpu.deploy.device-plugin": "false"}


def dra_fleet(**kw):
    """One DRA H100 node and two device-plugin nodes (H100 and L40S), all selecting ts4 by default."""
    cfgs = sharing({"name": "ts4", "mode": "time-slicing", "replicas": 4})
    return f.gpu_capacity([node("dra", "hgx-h100", labels=dict(DRA_LABEL, pool="dra")),
                           node("a", "hgx-h100"), node("b", "l40s")],
                          sharing=cfgs, default_config="ts4", **kw)


def test_dra_node_advertises_nothing_and_is_listed_apart():
    cap = dra_fleet()
    assert cap["nodes"]["dra"] == {"host": "dra", "product": "NVIDIA-H100-80GB-HBM3", "gpu_count": 8, "mig": False,
                                   "config": None, "resources": {}, "dra": True, "driver": "570.172.08"}
    assert cap["dra_nodes"] == {"dra": {"host": "dra", "product": "NVIDIA-H100-80GB-HBM3", "gpu_count": 8, "mig": False}}
    # Only the device-plugin nodes count: (8 + 1) GPUs x 4 replicas.
    assert cap["resources"] == {"nvidia.com/gpu": 36}
    assert cap["by_product"] == {"NVIDIA-H100-80GB-HBM3": {"nvidia.com/gpu": 32}, "NVIDIA-L40S": {"nvidia.com/gpu": 4}}
    assert cap["nodes"]["a"]["dra"] is False and cap["nodes"]["a"]["config"] == "ts4"


def test_dra_host_switch_equals_the_label_and_conflicts_are_refused():
    by_flag = f.gpu_capacity([node("dra", "hgx-h100", dra=True), node("a", "hgx-h100")])
    by_label = f.gpu_capacity([node("dra", "hgx-h100", labels=DRA_LABEL), node("a", "hgx-h100")])
    assert by_flag == by_label
    assert list(by_flag["dra_nodes"]) == ["dra"] and by_flag["resources"] == {"nvidia.com/gpu": 8}
    # Any other value of the label keeps the device plugin.
    plain = f.gpu_capacity([node("a", "hgx-h100", labels={"nvidia.com/gpu.deploy.device-plugin": "true"})])
    assert plain["dra_nodes"] == {} and plain["resources"] == {"nvidia.com/gpu": 8}
    with pytest.raises(AnsibleFilterError, match="node dra is a DRA node .gpu_nodes_dra. but its labels set "
                                                 "nvidia.com/gpu.deploy.device-plugin=true"):
        f.gpu_capacity([node("dra", "hgx-h100", dra=True, labels={"nvidia.com/gpu.deploy.device-plugin": "true"})])
    with pytest.raises(AnsibleFilterError, match="node dra: labels must be a mapping"):
        f.gpu_capacity([node("dra", "hgx-h100", labels=["nvidia.com/gpu.deploy.device-plugin=false"])])


def test_dra_node_is_free_of_the_device_plugin_mig_rules():
    # Two MIG profiles would be refused under the single strategy with the device plugin.
    with pytest.raises(AnsibleFilterError, match="single MIG strategy needs every GPU MIG-enabled with one profile"):
        f.gpu_capacity([node("m", "h100-mig-mixed")], mig_strategy="single")
    cap = f.gpu_capacity([node("m", "h100-mig-mixed", labels=DRA_LABEL)], mig_strategy="single")
    assert cap["dra_nodes"]["m"]["mig"] is True and cap["resources"] == {}


def test_tenant_quota_leaves_dra_gpus_out():
    cap = dra_fleet()
    assert f.gpu_tenant_quota({"name": "t", "gpu_share": 0.5}, cap) == {"requests.nvidia.com/gpu": 18}
    # 8 DRA GPUs x 4 would make 68; the device-plugin fleet has 36.
    with pytest.raises(AnsibleFilterError, match="requests.nvidia.com/gpu=37 but the fleet has 36"):
        f.gpu_tenant_quota({"name": "t", "quota": {"requests.nvidia.com/gpu": 37}}, cap)


def test_allocatable_diff_expects_nothing_from_the_device_plugin_on_dra_nodes():
    cap = dra_fleet()
    k8s = [{"metadata": {"name": "dra"}, "status": {"allocatable": {"cpu": "96", "memory": "2Ti"}}},
           {"metadata": {"name": "a"}, "status": {"allocatable": {"nvidia.com/gpu": "32"}}},
           {"metadata": {"name": "b"}, "status": {"allocatable": {"nvidia.com/gpu": "4"}}}]
    assert f.gpu_allocatable_diff(k8s, cap) == []
    # Zero is what the kubelet keeps once the device plugin has gone.
    k8s[0]["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    assert f.gpu_allocatable_diff(k8s, cap) == []
    # The device plugin still runs on the DRA node.
    k8s[0]["status"]["allocatable"]["nvidia.com/gpu"] = "8"
    assert f.gpu_allocatable_diff(k8s, cap) == [
        "node dra is a DRA node (nvidia.com/gpu.deploy.device-plugin=false, 8 GPU(s) through the DRA driver) but "
        "advertises nvidia.com/gpu=8: the device plugin must not run on a DRA node; check the node's labels and "
        "the GPU Operator's device plugin DaemonSet"]
    # The other way: a device-plugin node that advertises nothing is still reported, a missing DRA node too.
    k8s[0]["status"]["allocatable"].pop("nvidia.com/gpu")
    k8s[2]["status"]["allocatable"] = {}
    assert f.gpu_allocatable_diff(k8s, cap) == [
        "node b: allocatable nvidia.com/gpu is 0, expected 4 (1 GPU(s), device-plugin config ts4)"]
    assert f.gpu_allocatable_diff(k8s[1:], cap) == [
        "node b: allocatable nvidia.com/gpu is 0, expected 4 (1 GPU(s), device-plugin config ts4)",
        "node dra (host dra) is not in the cluster"]


# ---- The device plugin's resources per MIG strategy (internal/rm in NVIDIA/k8s-device-plugin) ----

def test_mig_strategy_none_counts_mig_enabled_gpus_as_whole_gpus():
    """Under none the plugin ignores MIG: every GPU, MIG-enabled or not, is one nvidia.com/gpu."""
    one = f.gpu_capacity([node("m", "h200-mig")], mig_strategy="none")
    assert one["nodes"]["m"]["resources"] == {"nvidia.com/gpu": 1}
    assert one["nodes"]["m"]["mig"] is True
    both = f.gpu_capacity([node("m", "h100-mig-mixed"), node("h", "hgx-h100")], mig_strategy="none")
    assert both["nodes"]["m"]["resources"] == {"nvidia.com/gpu": 2}
    assert both["resources"] == {"nvidia.com/gpu": 10}
    assert both["by_product"]["NVIDIA-H100-80GB-HBM3"] == {"nvidia.com/gpu": 10}


def test_mig_strategy_none_with_time_slicing_multiplies_every_gpu():
    cfgs = sharing(dict(TS, replicas=3), mig_strategy="none")
    cap = f.gpu_capacity([node("m", "h100-mig-mixed", config="x")], mig_strategy="none", sharing=cfgs)
    assert cap["nodes"]["m"]["resources"] == {"nvidia.com/gpu": 6}


def test_mig_strategy_none_ignores_the_mig_plan_counts():
    plan = {"single": {"valid": True, "reason": None, "resources": {"nvidia.com/gpu": 56}},
            "mixed": {"valid": True, "reason": None, "resources": {"nvidia.com/mig-1g.10gb": 56}}}
    cap = f.gpu_capacity([node("m", "hgx-h100", mig_k8s_resources=plan)], mig_strategy="none")
    assert cap["resources"] == {"nvidia.com/gpu": 8}


def test_mig_single_with_time_slicing_shares_the_mig_devices_as_gpus():
    """Under single, MIG devices are nvidia.com/gpu, so a time-slicing config of nvidia.com/gpu replicates them."""
    cfgs = sharing(dict(TS, replicas=4, rename_by_default=True))
    cap = f.gpu_capacity([node("m", "h200-mig", config="x")], mig_strategy="single", sharing=cfgs)
    assert cap["nodes"]["m"]["resources"] == {"nvidia.com/gpu.shared": 28}


def test_mig_mixed_with_rename_by_default_renames_only_the_shared_resources():
    cfgs = sharing(dict(TS, rename_by_default=True, resources=[{"name": "nvidia.com/mig-1g.10gb", "replicas": 2},
                                                               {"name": "nvidia.com/gpu", "replicas": 3}]),
                   mig_strategy="mixed")
    cap = f.gpu_capacity([node("m", "h100-mig-mixed", config="x")], mig_strategy="mixed", sharing=cfgs)
    assert cap["nodes"]["m"]["resources"] == {
        "nvidia.com/mig-1g.10gb.shared": 4, "nvidia.com/gpu.shared": 3,
        "nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-2g.20gb": 1}


def test_renamed_resources_add_up_across_nodes_and_configs():
    """Time-slicing and MPS configs that both rename to nvidia.com/gpu.shared sum, per node, product and fleet."""
    cfgs = sharing({"name": "ts", "mode": "time-slicing", "replicas": 4, "rename_by_default": True},
                   {"name": "mps", "mode": "mps", "replicas": 2, "rename_by_default": True})
    cap = f.gpu_capacity([node("a", "hgx-h100", config="ts"), node("b", "hgx-h100", config="mps"),
                          node("c", "l40s", config="ts"), node("d", "l40s", config="ts")], sharing=cfgs)
    assert cap["nodes"]["a"]["resources"] == {"nvidia.com/gpu.shared": 32}
    assert cap["nodes"]["b"]["resources"] == {"nvidia.com/gpu.shared": 16}
    assert cap["resources"] == {"nvidia.com/gpu.shared": 32 + 16 + 4 + 4}
    assert cap["by_product"] == {"NVIDIA-H100-80GB-HBM3": {"nvidia.com/gpu.shared": 48},
                                 "NVIDIA-L40S": {"nvidia.com/gpu.shared": 8}}


def test_renamed_and_plain_resources_stay_apart():
    cfgs = sharing({"name": "ts", "mode": "time-slicing", "replicas": 2, "rename_by_default": True},
                   {"name": "plain", "mode": "time-slicing", "replicas": 2})
    cap = f.gpu_capacity([node("a", "l40s", config="ts"), node("b", "l40s", config="plain"), node("c", "l40s")],
                         sharing=cfgs)
    assert cap["resources"] == {"nvidia.com/gpu.shared": 2, "nvidia.com/gpu": 3}


# ---- Tenants: unknown keys, names, duplicates ----

@pytest.mark.parametrize("tenants, message", [
    ([{"name": "x", "gpu_shares": 0.5}], "tenant x: unknown key gpu_shares; known keys: name, namespace, pod_security, gpu_share"),
    ([{"name": "x", "pod_securty": "restricted", "quotas": {}}], "tenant x: unknown keys pod_securty, quotas; known keys"),
    ([{"name": "Team_A", "namespace": "team-a"}], "tenant 'Team_A': name must be a DNS-1123 label"),
    ([{"name": "team-a-", "namespace": "team-a"}], "name must be a DNS-1123 label"),
    ([{"name": "t" * 64, "namespace": "team-a"}], "name must be a DNS-1123 label"),
    ([{"name": "x", "namespace": "ns-1"}, {"name": "x", "namespace": "ns-2"}], "tenant x is defined twice \\(tenant #2\\)"),
])
def test_tenants_plan_refuses_typos_bad_names_and_duplicates(tenants, message):
    cap = f.gpu_capacity([node("a", "hgx-h100")])
    with pytest.raises(AnsibleFilterError, match=message):
        f.gpu_tenants_plan(tenants, cap)


def test_tenant_name_with_its_own_namespace_is_the_label_value():
    cap = f.gpu_capacity([node("a", "hgx-h100")])
    (plan,) = f.gpu_tenants_plan([{"name": "research", "namespace": "ml-research"}], cap)
    assert (plan["name"], plan["namespace"], plan["kueue_local_queue"]) == ("research", "ml-research", "research")


# ---- DRA needs driver 580 or newer on the nodes that run its kubelet plugin ----

def _with_driver(facts_name, version):
    return dict(facts(facts_name), driver_version=version)


DRA_SELECTOR = {"nvidia.com/gpu.deploy.device-plugin": "false"}


def test_dra_driver_check_names_old_drivers_on_dra_nodes_only():
    nodes = [node("old", nvidia=_with_driver("hgx-h100", "570.172.08"), dra=True),
             node("minor", nvidia=_with_driver("hgx-h100", "575.99.99"), dra=True),
             node("ok", nvidia=_with_driver("hgx-h100", "580.65.06"), dra=True),
             node("plugin", nvidia=_with_driver("l40s", "550.54.15")),
             node("nofacts", dra=True)]
    cap = f.gpu_capacity(nodes)
    plan = [{"name": n["name"], "host": "h-" + n["name"], "labels": dict(DRA_SELECTOR) if n.get("dra") else {"x": "y"}}
            for n in nodes]
    assert f.gpu_dra_driver_check(plan, cap, DRA_SELECTOR) == [
        "old (host h-old) has driver 570.172.08", "minor (host h-minor) has driver 575.99.99"]
    # A finer minimum compares minor and patch parts too.
    assert f.gpu_dra_driver_check(plan, cap, DRA_SELECTOR, "580.65.07") == [
        "old (host h-old) has driver 570.172.08", "minor (host h-minor) has driver 575.99.99",
        "ok (host h-ok) has driver 580.65.06"]
    assert f.gpu_dra_driver_check(plan, cap, DRA_SELECTOR, "570.172.08") == []
    # A selector entry the node lacks means no kubelet plugin there.
    assert f.gpu_dra_driver_check(plan, cap, dict(DRA_SELECTOR, pool="dra")) == []


def test_dra_driver_check_compares_numbers_not_text():
    cap = f.gpu_capacity([node("n", nvidia=_with_driver("l40s", "1000.1"), dra=True)])
    plan = [{"name": "n", "host": "n", "labels": DRA_SELECTOR}]
    assert f.gpu_dra_driver_check(plan, cap, DRA_SELECTOR) == []
    cap = f.gpu_capacity([node("n", nvidia=_with_driver("l40s", "58.0"), dra=True)])
    assert f.gpu_dra_driver_check(plan, cap, DRA_SELECTOR) == ["n (host n) has driver 58.0"]


@pytest.mark.parametrize("minimum", ["", "580.x", "r580"])
def test_dra_driver_check_refuses_a_bad_minimum(minimum):
    with pytest.raises(AnsibleFilterError, match="the minimum driver version must be a driver version"):
        f.gpu_dra_driver_check([], {}, DRA_SELECTOR, minimum)


def test_mig_strategies_are_the_cluster_policys_and_the_roles(shared_reference):
    """The GPU Operator's ClusterPolicy enum (none, single, mixed) is what the filter and gpu_operator accept."""
    crd = yaml.safe_load((shared_reference / "gpu-operator" / "crds" / "nvidia.com_clusterpolicies.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert sorted(spec["mig"]["properties"]["strategy"]["enum"]) == sorted(capacity_model.MIG_STRATEGIES)
    role_vars = yaml.safe_load((TESTS.parent / "roles" / "gpu_operator" / "vars" / "main.yml").read_text())
    assert sorted(role_vars["gpu_operator__mig_strategies"]) == sorted(capacity_model.MIG_STRATEGIES)


def test_a_default_sharing_config_must_be_one_of_the_configs():
    configs = [{"name": "ts4", "mode": "time-slicing", "replicas": 4}]
    assert list(f.gpu_sharing_configs(configs, "single", "ts4")) == ["ts4"]
    assert list(f.gpu_sharing_configs(configs, "single", "")) == ["ts4"]
    with pytest.raises(AnsibleFilterError, match=r"gpu_sharing_default_config ts8 is not one of the configs in "
                                                 r"gpu_sharing_configs \(ts4\)"):
        f.gpu_sharing_configs(configs, "single", "ts8")
    with pytest.raises(AnsibleFilterError, match=r"\(none defined\)"):
        f.gpu_sharing_configs([], "single", "ts4")


@pytest.mark.parametrize("call", [
    lambda: f.gpu_sharing_configs([{"name": "ts4\n", "mode": "time-slicing", "replicas": 4}]),
    lambda: f.gpu_dra_driver_check([], {"nodes": {}}, {"a": "b"}, "５８０"),
], ids=["config-name-with-a-line-break", "full-width-digits"])
def test_names_and_versions_are_matched_whole_and_in_ascii(call):
    """A trailing line break is not part of a valid name, and other scripts' digits are not a version."""
    with pytest.raises(AnsibleFilterError):
        call()


def test_nodes_allocatable_keeps_only_the_name_and_allocatable_of_each_node():
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "gpu-a", "labels": {"a": "b"}, "managedFields": [{"manager": "kubelet"}]},
            "status": {"allocatable": {"nvidia.com/gpu": "32", "cpu": "96"}, "conditions": [{"type": "Ready"}]}}
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpu-b"}}
    slim = f.gpu_nodes_allocatable([node, other, "junk", {"kind": "Node", "metadata": "x", "status": {"allocatable": []}}])
    assert slim == [{"metadata": {"name": "gpu-a"}, "status": {"allocatable": {"nvidia.com/gpu": "32", "cpu": "96"}}}]
    assert f.gpu_nodes_allocatable([{"kind": "Node", "metadata": {"name": "b"}, "status": {"allocatable": []}}]) \
        == [{"metadata": {"name": "b"}, "status": {"allocatable": {}}}]
    # What the allocatable check makes of it is what it makes of the whole objects.
    capacity = {"nodes": {"gpu-a": {"host": "a", "resources": {"nvidia.com/gpu": 8}, "gpu_count": 8}}}
    assert f.gpu_allocatable_diff(slim, capacity) == f.gpu_allocatable_diff([node], capacity) \
        == ["node gpu-a: allocatable nvidia.com/gpu is 32, expected 8 (8 GPU(s))"]
    assert f.gpu_nodes_allocatable(None) == []
