"""Planning the kubelet's resource managers: merge, drop-in, validation, which checkpoints must go."""
import pytest
import yaml

from ansible_collections.gpuops.platform.plugins.module_utils._node import kubelet_config as kc

ONLINE = set(range(0, 64))
STATIC = {"cpu_manager_policy": "static", "reserved_system_cpus": "0-1", "topology_manager_policy": "single-numa-node"}


@pytest.fixture
def kubeadm(fixtures_dir):
    return (fixtures_dir / "kubelet" / "kubeadm-config.yaml").read_text()


def test_merge_keeps_every_kubeadm_key_and_resets_the_cpu_state_once(kubeadm):
    plan = kc.plan(kubeadm, None, STATIC, online_cpus=ONLINE)
    assert plan["changed"] and plan["target"] is None
    before, after = yaml.safe_load(kubeadm), yaml.safe_load(plan["after"])
    assert dict((k, v) for k, v in after.items() if k not in ("cpuManagerPolicy", "reservedSystemCPUs",
                                                              "topologyManagerPolicy")) == before
    assert after["cpuManagerPolicy"] == "static" and after["reservedSystemCPUs"] == "0-1"
    assert plan["reset_cpu_state"] is True and plan["reset_memory_state"] is False
    # Applied: the same settings again change nothing and reset nothing.
    again = kc.plan(plan["after"], None, STATIC, online_cpus=ONLINE)
    assert again["changed"] is False and again["reset_cpu_state"] is False
    # Only the topology policy changes: a restart, but the CPU checkpoint stays valid.
    topo = kc.plan(plan["after"], None, dict(STATIC, topology_manager_policy="restricted"), online_cpus=ONLINE)
    assert topo["changed"] and topo["reset_cpu_state"] is False
    # Other reserved CPUs under the static policy invalidate the checkpoint as well.
    moved = kc.plan(plan["after"], None, dict(STATIC, reserved_system_cpus="0,32"), online_cpus=ONLINE)
    assert moved["reset_cpu_state"] is True


def test_drop_in_leaves_the_kubeadm_file_alone(kubeadm):
    plan = kc.plan(kubeadm, {"00-base.conf": "kind: KubeletConfiguration\nmaxPods: 50\n"}, STATIC,
                   drop_in_name="90-gpuops-tuning.conf", online_cpus=ONLINE)
    assert plan["target"] == "90-gpuops-tuning.conf" and plan["before"] == ""
    assert yaml.safe_load(plan["after"]) == {"apiVersion": kc.API_VERSION, "kind": kc.KIND, "cpuManagerPolicy": "static",
                                             "reservedSystemCPUs": "0-1", "topologyManagerPolicy": "single-numa-node"}
    assert plan["effective_before"]["cpuManagerPolicy"] == "none" and plan["reset_cpu_state"]
    done = kc.plan(kubeadm, {"90-gpuops-tuning.conf": plan["after"]}, STATIC,
                   drop_in_name="90-gpuops-tuning.conf", online_cpus=ONLINE)
    assert done["changed"] is False and done["reset_cpu_state"] is False


def test_a_later_drop_in_that_overrides_ours_is_an_error(kubeadm):
    with pytest.raises(kc.KubeletConfigError, match="drop-in 99-site.conf comes after 90-gpuops-tuning.conf and sets "
                                                    "cpuManagerPolicy differently"):
        kc.plan(kubeadm, {"99-site.conf": "cpuManagerPolicy: none\n"}, STATIC, drop_in_name="90-gpuops-tuning.conf",
                online_cpus=ONLINE)
    with pytest.raises(kc.KubeletConfigError, match="would win over"):
        kc.plan(kubeadm, {"50-site.conf": "topologyManagerPolicy: best-effort\n"}, STATIC, online_cpus=ONLINE)


def test_a_drop_in_without_the_config_dir_is_refused(kubeadm):
    with pytest.raises(kc.KubeletConfigError, match="runs without --config-dir"):
        kc.plan(kubeadm, None, STATIC, drop_in_name="90-gpuops-tuning.conf", online_cpus=ONLINE)


@pytest.mark.parametrize("settings, message", [
    ({"cpu_manager_policy": "Static"}, "cpuManagerPolicy 'Static' is not a kubelet policy: use one of none, static"),
    ({"topology_manager_policy": "single-numa"}, "use one of none, best-effort, restricted, single-numa-node"),
    ({"memory_manager_policy": "static"}, "use one of None, Static"),
    ({"cpu_manager_policy": "static"}, "cpuManagerPolicy static needs reserved CPUs"),
    ({"cpu_manager_policy": "static", "reserved_system_cpus": "0-1,64-65"},
     "names CPU\\(s\\) 64,65 that this node does not have \\(online: 0-63\\)"),
    ({"cpu_manager_policy": "static", "reserved_system_cpus": "0-63"}, "reserves every CPU of the node"),
    ({"reserved_system_cpus": "0-1;rm -rf /"}, "is not a CPU list such as 0-1 or 0,32"),
    ({"reserved_system_cpus": "3-1"}, "runs backwards"),
    ({"memory_manager_policy": "Static"}, "memoryManagerPolicy Static needs reservedMemory"),
])
def test_bad_values_fail_with_what_to_do(kubeadm, settings, message):
    with pytest.raises(kc.KubeletConfigError, match=message):
        kc.plan(kubeadm, None, settings, online_cpus=ONLINE)


def test_memory_manager_state_resets_with_its_policy(kubeadm):
    settings = {"memory_manager_policy": "Static",
                "reserved_memory": [{"numaNode": 0, "limits": {"memory": "1100Mi"}}]}
    plan = kc.plan(kubeadm, None, settings, online_cpus=ONLINE)
    assert plan["reset_memory_state"] is True and plan["reset_cpu_state"] is False


def test_kube_reserved_cpu_satisfies_the_static_policy():
    config = "kind: KubeletConfiguration\nkubeReserved:\n  cpu: 500m\n"
    assert kc.plan(config, None, {"cpu_manager_policy": "static"}, online_cpus=ONLINE)["changed"]


def test_other_documents_are_refused():
    with pytest.raises(kc.KubeletConfigError, match="holds a KubeProxyConfiguration"):
        kc.plan("kind: KubeProxyConfiguration\n", None, STATIC, online_cpus=ONLINE)
    with pytest.raises(kc.KubeletConfigError, match="not valid YAML"):
        kc.plan("kind: [\n", None, STATIC, online_cpus=ONLINE)


def test_cpusets_round_trip():
    assert kc.parse_cpuset("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    assert kc.format_cpuset({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"


def test_effective_merges_maps_replaces_lists_and_changes_no_input():
    import copy
    config = {"a": {"x": 1, "y": [1, 2]}, "b": 1}
    drop_ins = {"20-late.conf": {"a": {"x": 2}}, "10-early.conf": {"a": {"y": [3], "x": 9}}}
    config_before, drop_ins_before = copy.deepcopy(config), copy.deepcopy(drop_ins)
    result = kc.effective(config, drop_ins)
    assert result == {"a": {"x": 2, "y": [3]}, "b": 1}
    assert (config, drop_ins) == (config_before, drop_ins_before)
    result["a"]["y"].append(4)
    assert drop_ins == drop_ins_before
