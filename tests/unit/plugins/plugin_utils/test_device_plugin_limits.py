"""The device plugin's own limits on a sharing plan (NVIDIA/k8s-device-plugin v0.20.0, the one the pinned
GPU Operator deploys): MPS clients per GPU by compute capability, and MIG compute-instance sub-profiles.

Each rule is tested on both sides of its edge, with the plugin's numbers and behaviour:
- cmd/mps-control-daemon/mps/device.go: maxClients is 48 when the compute capability is >= 7.5, else 16;
- internal/rm/rm.go (AddDefaultResourcesToConfig): under the mixed strategy only profiles whose compute
  instance is the whole GPU instance (C == G) get a resource pattern; under single "*" matches every device;
- internal/rm/device_map.go (buildMigDeviceMap): a MIG device that matches no pattern fails the whole node.
"""
import copy
import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as collector
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan as fp
from ansible_collections.gpuops.platform.plugins.plugin_utils import gpu_capacity as capacity
from fakes.fake_pynvml import FakeNvml
from fakes.nvml_nodes import NODES

ROOT = Path(__file__).resolve().parents[4]
NVML = ROOT / "tests" / "fixtures" / "nvml"
MIXED = ROOT / "tests" / "integration" / "k8s" / "facts" / "h100-mig-mixed.json"


def facts(name):
    return json.loads((NVML / ("%s.json" % name)).read_text())


def with_capability(data, value):
    """The facts with every GPU's recorded compute capability set to ``value``."""
    data = copy.deepcopy(data)
    for gpu in data["gpus"]:
        gpu["cuda_compute_capability"] = value
    return data


def mps(replicas, name="mps"):
    return capacity.gpu_sharing_configs([{"name": name, "mode": "mps", "replicas": replicas}])


def plan_node(nvidia, config=None, sharing=None, strategy="single"):
    return capacity.gpu_capacity([{"name": "n1", "host": "h1", "nvidia": nvidia, "config": config}],
                                 strategy, sharing or {})["nodes"]["n1"]


# --- MPS clients ---------------------------------------------------------------

@pytest.mark.parametrize("capability", ["9.0", "7.5", "8.9"])
def test_from_compute_capability_7_5_48_mps_clients_are_planned_and_49_refused(capability):
    node = with_capability(facts("hgx-h100"), capability)
    assert plan_node(node, "mps", mps(48))["resources"] == {"nvidia.com/gpu": 8 * 48}
    # No GPU serves 49: the config itself is refused, before any node is looked at.
    with pytest.raises(AnsibleFilterError, match="MPS replicas of nvidia.com/gpu is 49, more than any GPU serves"):
        mps(49)


@pytest.mark.parametrize("capability", ["7.0", "7.2", "6.1"])
def test_below_compute_capability_7_5_16_mps_clients_are_planned_and_17_refused(capability):
    node = with_capability(facts("hgx-h100"), capability)
    assert plan_node(node, "mps", mps(16))["resources"] == {"nvidia.com/gpu": 8 * 16}
    with pytest.raises(AnsibleFilterError) as err:
        plan_node(node, "mps", mps(17))
    message = str(err.value)
    assert "node n1: device-plugin config 'mps' shares nvidia.com/gpu 17 ways with MPS" in message
    assert "GPU 0 allows at most 16 MPS clients (compute capability %s)" % capability in message
    assert "cmd/mps-control-daemon/mps/device.go" in message
    assert "select a config with at most 16 replicas" in message


def test_replicas_64_under_mps_is_refused_naming_config_resource_limit_and_source():
    with pytest.raises(AnsibleFilterError) as err:
        capacity.gpu_sharing_configs([{"name": "mps64", "mode": "mps", "replicas": 64}])
    message = str(err.value)
    for part in ("sharing config 'mps64'", "MPS replicas of nvidia.com/gpu is 64", "at most 48 clients",
                 "16 below", "cmd/mps-control-daemon/mps/device.go", "use at most 48"):
        assert part in message


def test_the_shared_name_length_is_said_to_be_the_collections_own_rule():
    with pytest.raises(AnsibleFilterError) as err:
        capacity.gpu_sharing_configs([{"name": "ts", "mode": "time-slicing", "rename_by_default": True,
                                       "resources": [{"name": "nvidia.com/mig-" + "x" * 42, "replicas": 2}]}], "mixed")
    assert "this collection's own rule" in str(err.value) and "appends .shared without checking" in str(err.value)
    # The plugin's own limit on the name it is given is not called the collection's.
    with pytest.raises(AnsibleFilterError) as err:
        capacity.gpu_sharing_configs([{"name": "ts", "mode": "time-slicing",
                                       "resources": [{"name": "nvidia.com/mig-" + "x" * 60, "replicas": 2}]}], "mixed")
    assert "own rule" not in str(err.value)


def test_time_slicing_has_no_client_limit():
    cfgs = capacity.gpu_sharing_configs([{"name": "ts64", "mode": "time-slicing", "replicas": 64}])
    assert plan_node(with_capability(facts("l40s"), "7.0"), "ts64", cfgs)["resources"] == {"nvidia.com/gpu": 64}


def test_the_lowest_gpu_of_a_node_sets_its_limit():
    node = with_capability(facts("hgx-h100"), "9.0")
    node["gpus"][5]["cuda_compute_capability"] = "7.0"
    with pytest.raises(AnsibleFilterError, match="GPU 5 allows at most 16 MPS clients"):
        plan_node(node, "mps", mps(17))


def test_facts_without_a_compute_capability_fall_back_on_the_architecture(shared_reference):
    # The real H200's recorded facts predate the field; Hopper is 9.0.
    real = json.loads((shared_reference / "real-gpu" / "h200-nvml-facts.json").read_text())
    nvidia = real["nvidia"]
    assert "cuda_compute_capability" not in nvidia["gpus"][0] and nvidia["gpus"][0]["architecture"] == "hopper"
    assert capacity.mps_max_clients(nvidia["gpus"][0]) == (48, "architecture hopper, compute capability at least 7.5")
    assert plan_node(nvidia, "mps", mps(48))["resources"] == {"nvidia.com/gpu": 48}
    volta = dict(nvidia["gpus"][0], architecture="volta")
    assert capacity.mps_max_clients(volta)[0] == 16


def test_facts_with_neither_use_the_lower_limit_and_say_so():
    node = facts("l40s")
    for gpu in node["gpus"]:
        gpu.pop("cuda_compute_capability", None)
        gpu["architecture"] = None
    assert plan_node(node, "mps", mps(16))["resources"] == {"nvidia.com/gpu": 16}
    with pytest.raises(AnsibleFilterError, match=r"at most 16 MPS clients \(no compute capability recorded, so the lower"):
        plan_node(node, "mps", mps(17))
    # A node known only by its GPU count is held to the lower limit too.
    with pytest.raises(AnsibleFilterError, match="its GPUs allow at most 16 MPS clients"):
        plan_node({"present": True, "gpu_count": 2, "gpus": []}, "mps", mps(17))


def test_the_collector_records_the_compute_capability_nvml_reports():
    nvml = FakeNvml(NODES["hgx-h100"]())
    gathered = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    assert [gpu["cuda_compute_capability"] for gpu in gathered["gpus"]] == ["9.0"] * 8
    assert nvml.calls["nvmlDeviceGetCudaComputeCapability"] == 8
    node = NODES["l40s"]()
    node.gpus[0].unsupported.add("nvmlDeviceGetCudaComputeCapability")
    assert collector.collect(FakeNvml(node), kernel_module_paths=(), library_globs=())["gpus"][0][
        "cuda_compute_capability"] is None


@pytest.mark.parametrize("value", [9.0, "9", "nine", "9.0.1"])
def test_a_damaged_compute_capability_is_a_facts_problem(value):
    problems = collector.check_facts(with_capability(facts("l40s"), value))
    assert any("gpus[0].cuda_compute_capability must be" in p for p in problems), problems


# --- MIG compute-instance sub-profiles -------------------------------------------

def sub_profile_node(*profiles):
    data = json.loads(MIXED.read_text())
    gpu = data["gpus"][0]
    gpu["mig"]["devices"] = [dict(gpu["mig"]["devices"][0], profile=p) for p in profiles]
    data["gpus"] = [gpu] + [g for g in data["gpus"][1:] if (g.get("mig") or {}).get("current_mode") != "enabled"]
    return data


@pytest.mark.parametrize("profile, sub", [("1c.3g.40gb", True), ("2c.7g.80gb", True), ("3g.40gb", False),
                                          ("1g.10gb+me", False), ("7c.7g.80gb", False)])
def test_sub_profiles_are_compute_instances_smaller_than_their_gpu_instance(profile, sub):
    assert capacity.is_compute_sub_profile(profile) is sub


def test_a_sub_profile_device_under_the_mixed_strategy_is_refused_for_the_whole_node():
    node = sub_profile_node("1c.3g.40gb", "3g.40gb")
    assert plan_node(sub_profile_node("3g.40gb"), strategy="mixed")["resources"]["nvidia.com/mig-3g.40gb"] == 1
    with pytest.raises(AnsibleFilterError) as err:
        plan_node(node, strategy="mixed")
    message = str(err.value)
    for part in ("node n1: GPU 0 has the MIG device 1c.3g.40gb",
                 "MIG profile '1c.3g.40gb' does not match any resource patterns",
                 "advertises nothing on this node, its full GPUs included",
                 "mig_config_name"):
        assert part in message


def test_under_single_every_uniform_mig_device_is_one_gpu_as_the_plugin_matches_them_all():
    node = sub_profile_node("1c.3g.40gb", "1c.3g.40gb")
    node["gpus"] = node["gpus"][:1]
    assert plan_node(node, strategy="single")["resources"] == {"nvidia.com/gpu": 2}
    with pytest.raises(AnsibleFilterError, match="the single MIG strategy needs every GPU MIG-enabled with one profile"):
        plan_node(sub_profile_node("1c.3g.40gb", "3g.40gb"), strategy="single")


def test_under_none_the_plugin_ignores_mig_and_the_gpu_is_whole():
    node = sub_profile_node("1c.3g.40gb")
    whole = len(node["gpus"])
    assert plan_node(node, strategy="none")["resources"] == {"nvidia.com/gpu": whole}


def test_the_fleet_plan_makes_a_sub_profile_node_a_host_error(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(sub_profile_node("1c.3g.40gb")))
    (tmp_path / "b.json").write_text(json.dumps(facts("l40s")))
    out = fp.plan_fleet([("a", {}), ("b", {})], str(tmp_path), mig_strategy="mixed")
    assert out["hosts"]["b"]["valid"]
    assert not out["hosts"]["a"]["valid"]
    assert any("GPU 0 has the MIG device 1c.3g.40gb" in e for e in out["hosts"]["a"]["errors"])
