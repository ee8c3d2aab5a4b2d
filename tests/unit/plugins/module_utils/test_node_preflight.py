"""node_preflight evaluation: every problem at once, warnings where the driver role copes."""

import pytest

from fakes.gpu_node import FakeNode

from ansible_collections.gpuops.platform.plugins.module_utils._driver import host as driver_host
from ansible_collections.gpuops.platform.plugins.module_utils._node import preflight as node_preflight

DEFAULTS = dict(require_gpu=True, require_supported_os=True, require_kernel_headers=False, allow_secure_boot=True,
                min_free_mib=2048, disk_paths=["/"], expected_nvswitches=None, expected_driver=None,
                fail_on_nouveau=False, fail_on_other_driver=False)


@pytest.fixture
def node(tmp_path, monkeypatch):
    monkeypatch.setattr(driver_host, "kernel_release", lambda: "6.1.0-37-amd64")
    monkeypatch.setattr(driver_host, "machine_arch", lambda: "x86_64")
    return FakeNode(tmp_path)


def run(node, **overrides):
    params = dict(DEFAULTS, **overrides)
    return node_preflight.run(params, node.root)


def test_ready_hgx_node(node):
    node.os("ubuntu", "22.04").modules("ext4").headers("6.1.0-37-amd64").hgx_h100().loaded_driver("570.172.08")
    result = run(node, expected_nvswitches=4, expected_driver="570")
    assert result["ok"] and result["problems"] == []
    assert result["warnings_list"] == []
    assert len(result["gpus"]) == 8 and len(result["nvswitches"]) == 4


def test_every_problem_is_listed_at_once(node):
    node.os("sles", "15.5").modules("nouveau").secure_boot(True).loaded_driver("550.163.01")
    result = run(node, allow_secure_boot=False, require_kernel_headers=True, expected_nvswitches=4,
                 min_free_mib=10 ** 9, fail_on_nouveau=True, fail_on_other_driver=True, expected_driver="570.172.08")
    text = "\n".join(result["problems"])
    assert not result["ok"]
    for needle in ["SUSE Linux Enterprise Server 15 SP5 is not supported", "no NVIDIA GPU",
                   "found 0 NVSwitches, expected 4", "kernel headers for the running kernel 6.1.0-37-amd64",
                   "Secure Boot is enabled", "MiB free on /", "nouveau is loaded",
                   "nvidia kernel module 550.163.01 is loaded, the wanted driver is 570.172.08"]:
        assert needle in text
    assert len(result["problems"]) == 8


def test_relaxed_checks_become_warnings(node):
    node.os("debian", "12").modules("nouveau").secure_boot(True)
    result = run(node, require_gpu=False)
    assert result["ok"]
    assert any("no NVIDIA GPU" in w for w in result["warnings_list"])
    assert any("nouveau is loaded" in w for w in result["warnings_list"])
    assert any("Secure Boot" in w for w in result["warnings_list"])
    assert any("kernel headers" in w for w in result["warnings_list"])


def test_loaded_driver_on_the_wanted_branch_is_fine(node):
    node.os("rocky", "8.10").headers("6.1.0-37-amd64").hgx_h100().loaded_driver("570.158.01")
    assert run(node, expected_driver="570", fail_on_other_driver=True)["ok"]
    assert not run(node, expected_driver="575", fail_on_other_driver=True)["ok"]
