"""The kubelet_config module: writes only in normal mode, diffs, keeps the file's mode, fails cleanly."""
import os
import stat

import pytest
import yaml
from unittest import mock

from support.module_args import ExitJson, FailJson, patch_module_args

from ansible_collections.gpuops.platform.plugins.modules import kubelet_config

pytestmark = pytest.mark.usefixtures("module_exits")


def run(args, online, check=False):
    if check:
        args = dict(args, _ansible_check_mode=True)
    with patch_module_args(args), mock.patch.object(kubelet_config, "CPU_ONLINE", str(online)):
        with pytest.raises((ExitJson, FailJson)) as caught:
            kubelet_config.main()
    return caught.type is ExitJson, caught.value.args[0]


@pytest.fixture
def node(tmp_path, fixtures_dir):
    config = tmp_path / "config.yaml"
    config.write_text((fixtures_dir / "kubelet" / "kubeadm-config.yaml").read_text())
    config.chmod(0o600)
    online = tmp_path / "online"
    online.write_text("0-15\n")
    return config, online


def test_check_mode_shows_the_diff_and_writes_nothing_then_the_run_writes(node):
    config, online = node
    original = config.read_text()
    args = {"config_path": str(config), "cpu_manager_policy": "static", "reserved_system_cpus": "0-1"}
    ok, result = run(args, online, check=True)
    assert ok and result["changed"] and result["reset_cpu_manager_state"] and config.read_text() == original
    assert "cpuManagerPolicy: static" in result["diff"]["after"] and result["diff"]["before"] == original
    ok, result = run(args, online)
    assert ok and result["changed"] and yaml.safe_load(config.read_text())["reservedSystemCPUs"] == "0-1"
    assert stat.S_IMODE(os.stat(str(config)).st_mode) == 0o600          # the file keeps its mode
    assert [p.name for p in config.parent.iterdir() if p.name.startswith(".")] == []   # no temp file left
    ok, result = run(args, online)
    assert ok and not result["changed"] and not result["reset_cpu_manager_state"] and not result["restart_required"]


def test_drop_in_mode_writes_only_the_drop_in(node, tmp_path):
    config, online = node
    original = config.read_text()
    conf_d = tmp_path / "kubelet.conf.d"
    conf_d.mkdir()
    ok, result = run({"config_path": str(config), "config_dir": str(conf_d),
                      "topology_manager_policy": "single-numa-node"}, online)
    assert ok and result["path"] == str(conf_d / "90-gpuops-tuning.conf")
    assert config.read_text() == original
    assert yaml.safe_load((conf_d / "90-gpuops-tuning.conf").read_text())["topologyManagerPolicy"] == "single-numa-node"
    assert result["restart_required"] and not result["reset_cpu_manager_state"]


def test_reserved_cpus_the_node_lacks_fail_without_change(node):
    config, online = node
    original = config.read_text()
    ok, result = run({"config_path": str(config), "cpu_manager_policy": "static", "reserved_system_cpus": "16-17"},
                     online)
    assert not ok and "names CPU(s) 16,17 that this node does not have (online: 0-15)" in result["msg"]
    assert result["msg"].startswith("kubelet config not changed:") and config.read_text() == original


def test_a_missing_config_says_what_to_set(tmp_path):
    online = tmp_path / "online"
    online.write_text("0-3\n")
    ok, result = run({"config_path": str(tmp_path / "nope.yaml"), "cpu_manager_policy": "none"}, online)
    assert not ok and "Set config_path (kubelet_tuning_config_path in the kubelet_tuning role) to the file the " \
                      "kubelet's --config names" in result["msg"]


def test_online_cpus_replace_the_machines_own(tmp_path):
    """A plan made elsewhere (recorded config) checks the reserved CPUs against the node's, not this machine's."""
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
    online = tmp_path / "online"
    online.write_text("0-3\n")
    args = {"config_path": str(config), "cpu_manager_policy": "static", "reserved_system_cpus": "60-61"}
    ok, result = run(args, online)
    assert not ok and "kubelet config not changed" in result["msg"]
    ok, result = run(dict(args, online_cpus="0-63"), online)
    assert ok and result["changed"], result
    ok, result = run(dict(args, online_cpus=""), online)        # unknown: not checked
    assert ok, result
