"""Capacity from node facts: GPU count x replicas, MIG plans and facts, and the errors."""
import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter import gpu_capacity as f

FACTS = Path(__file__).resolve().parents[3] / "integration" / "k8s" / "facts"


def facts(name):
    return json.loads((FACTS / ("%s.json" % name)).read_text())


def node(name, facts_name=None, **kw):
    n = {"name": name, "host": name, "nvidia": facts(facts_name) if facts_name else None}
    n.update(kw)
    return n


def sharing(*configs, **kw):
    return f.gpu_sharing_configs(list(configs), **kw)


def test_plain_gpus_counted_from_facts():
    cap = f.gpu_capacity([node("a", "hgx-h100"), node("b", "l40s")])
    assert cap["nodes"]["a"]["resources"] == {"nvidia.com/gpu": 8}
    assert cap["nodes"]["b"]["resources"] == {"nvidia.com/gpu": 4}
    assert cap["resources"] == {"nvidia.com/gpu": 12}
    assert cap["by_product"] == {"NVIDIA-H100-80GB-HBM3": {"nvidia.com/gpu": 8}, "NVIDIA-L40S": {"nvidia.com/gpu": 4}}
    assert cap["nodes"]["a"]["product"] == "NVIDIA-H100-80GB-HBM3"


def test_time_slicing_multiplies_by_replicas_and_renames():
    cfgs = sharing({"name": "ts4", "mode": "time-slicing", "replicas": 4},
                   {"name": "ts2r", "mode": "time-slicing", "replicas": 2, "rename_by_default": True})
    cap = f.gpu_capacity([node("a", "hgx-h100", config="ts4"), node("b", "l40s", config="ts2r")], sharing=cfgs)
    assert cap["nodes"]["a"]["resources"] == {"nvidia.com/gpu": 32}
    assert cap["nodes"]["b"]["resources"] == {"nvidia.com/gpu.shared": 8}
    assert cap["resources"] == {"nvidia.com/gpu": 32, "nvidia.com/gpu.shared": 8}


def test_default_config_applies_to_nodes_without_a_label():
    cfgs = sharing({"name": "mps3", "mode": "mps", "replicas": 3})
    cap = f.gpu_capacity([node("a", "l40s")], sharing=cfgs, default_config="mps3")
    assert cap["nodes"]["a"]["resources"] == {"nvidia.com/gpu": 12}
    assert cap["nodes"]["a"]["config"] == "mps3"


def test_mig_single_from_facts():
    cap = f.gpu_capacity([node("m", "h100-mig-single")], mig_strategy="single")
    assert cap["nodes"]["m"]["resources"] == {"nvidia.com/gpu": 14}
    assert cap["nodes"]["m"]["mig"] is True


def test_mig_mixed_from_facts_counts_profiles_and_full_gpus():
    cap = f.gpu_capacity([node("m", "h100-mig-mixed")], mig_strategy="mixed")
    assert cap["nodes"]["m"]["resources"] == {
        "nvidia.com/gpu": 1, "nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-2g.20gb": 1, "nvidia.com/mig-1g.10gb": 2}


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
        f.gpu_capacity([node("m", "h100-mig-single", config="mps")], sharing=cfgs)


def test_unknown_config_on_a_node_is_refused():
    with pytest.raises(AnsibleFilterError, match="selects device-plugin config 'nope', which is not defined"):
        f.gpu_capacity([node("a", "l40s", config="nope")], sharing=sharing({"name": "ts", "mode": "time-slicing", "replicas": 2}))


def test_nodes_without_gpus_or_facts():
    cap = f.gpu_capacity([node("cpu", "no-gpu"), node("unknown")])
    assert cap["resources"] == {}
    assert cap["nodes"]["cpu"]["resources"] == {}
    assert cap["missing_facts"] == ["unknown"]


@pytest.mark.parametrize("cfg, message", [
    ({"name": "x", "mode": "time-slicing", "replicas": -1}, "replicas of nvidia.com/gpu must be at least 1, got -1"),
    ({"name": "x", "mode": "time-slicing", "replicas": 0}, "must be at least 1, got 0"),
    ({"name": "x", "mode": "time-slicing", "replicas": "many"}, "must be an integer"),
    ({"name": "x", "mode": "time-slicing"}, "needs replicas"),
    ({"name": "x", "mode": "sliced", "replicas": 2}, "unknown mode 'sliced'"),
    ({"name": "x y", "mode": "none"}, "name must be"),
    ({"name": "x", "mode": "mps", "resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]}, "MPS cannot share MIG devices"),
])
def test_bad_sharing_configs(cfg, message):
    with pytest.raises(AnsibleFilterError, match=message):
        f.gpu_sharing_configs([cfg], mig_strategy="mixed")


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
