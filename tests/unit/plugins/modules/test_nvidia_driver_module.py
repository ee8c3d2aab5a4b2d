"""The nvidia_driver and gpu_node_preflight modules end to end, through AnsibleModule."""

import functools
import json
import os

import pytest

from ansible.module_utils import basic

from fakes.gpu_node import FakeApt, FakeNode

from ansible_collections.gpuops.platform.plugins.module_utils._driver import converge as driver_converge
from ansible_collections.gpuops.platform.plugins.module_utils._driver import host as driver_host
from ansible_collections.gpuops.platform.plugins.module_utils._node import preflight as node_preflight
from ansible_collections.gpuops.platform.plugins.modules import gpu_node_preflight, nvidia_driver

KERNEL = "6.1.0-37-amd64"


def run_module(main, args, capsys):
    """Run a module's main() with ``args``; return (rc, result)."""
    payload = json.dumps({"ANSIBLE_MODULE_ARGS": args})
    try:
        from support.module_args import patch_module_args
    except ImportError:  # ansible-core < 2.19
        patch_module_args = None
    with pytest.raises(SystemExit) as exc:
        if patch_module_args is not None:
            with patch_module_args(args):
                main()
        else:
            basic._ANSIBLE_ARGS = payload.encode()
            main()
    return exc.value.code, json.loads(capsys.readouterr().out)


@pytest.fixture
def node(tmp_path, monkeypatch):
    monkeypatch.setattr(driver_host, "kernel_release", lambda: KERNEL)
    monkeypatch.setattr(driver_host, "machine_arch", lambda: "x86_64")
    n = FakeNode(tmp_path).os("debian", "12").modules("ext4")
    monkeypatch.setattr(nvidia_driver, "Converger", functools.partial(driver_converge.Converger, root=n.root))
    return n


@pytest.fixture
def apt(node, monkeypatch):
    fake = FakeApt(node, available={"nvidia-open-570": ["570.172.08-1"], "nvidia-driver": ["570.172.08-1"]})
    fake.depends = {"nvidia-open-570": ["nvidia-driver"]}
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: fake(argv, **kw))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, tool, required=False, opt_dirs=None: "/usr/sbin/" + tool)
    return fake


MIRROR = {"source": "mirror", "mirror_url": "file:/srv/nvidia-mirror", "mirror_trusted": True,
          "install_prerequisites": False}


def test_check_mode_plans_with_diff_and_changes_nothing(node, apt, capsys):
    apt.check_mode = True
    rc, result = run_module(nvidia_driver.main, dict(MIRROR, version="570.172.08", _ansible_check_mode=True,
                                                     _ansible_diff=True), capsys)
    assert rc == 0
    assert result["changed"] and result["check_mode"]
    assert "install nvidia-open-570=570.172.08-1" in result["plan"]
    assert "/etc/apt/preferences.d/gpuops-nvidia-driver" in [d["after_header"] for d in result["diff"]]
    assert [c for c in apt.calls if apt.mutating(c)] == []
    assert apt.installed == {}
    assert not os.path.exists(os.path.join(node.root, "etc/apt"))


def test_converge_then_idempotent(node, apt, capsys):
    rc, first = run_module(nvidia_driver.main, dict(MIRROR, version="570.172.08"), capsys)
    assert rc == 0 and first["changed"] and first["installed_version"] == "570.172.08"
    assert "diff" not in first  # only with --diff
    assert apt.held == {"nvidia-open-570", "nvidia-driver"}
    rc, second = run_module(nvidia_driver.main, dict(MIRROR, version="570.172.08"), capsys)
    assert rc == 0 and not second["changed"] and second["actions"] == []


@pytest.mark.parametrize("args,message", [
    ({"version": "570.x"}, "version '570.x' is not a driver version"),
    # Unquoted in YAML, 570.190 is the float 570.19: refused, never planned as "570.19" (a downgrade).
    ({"version": 570.19}, "version is the number 570.19, not a string: YAML reads an unquoted version as a number"),
    ({"version": 570}, "version is the number 570, not a string"),
    ({"branch": True}, "branch is the boolean True, not a string: YAML reads an unquoted yes, no, true or false"),
    ({"branch": 570.0}, "branch is the number 570.0, not a string"),
    ({"version": ["570.172.08"]}, "version must be a string such as \"570.172.08\", got a list"),
    ({"branch": "570", "nvswitch_count": -8}, "nvswitch_count is -8: a count is 0 or more. Nothing was changed."),
    ({"branch": "570", "source": "mirror"}, "source is mirror but all of the following are missing: mirror_url"),
    ({"source": "runfile", "runfile": "/opt/NVIDIA-Linux-x86_64-570.172.08.run"},
     "runfile /opt/NVIDIA-Linux-x86_64-570.172.08.run does not exist on the node"),
    ({"branch": "570", "mok_signing_key": "/k"}, "parameters are required together: mok_signing_key, mok_certificate"),
])
def test_bad_input_fails_clearly_with_no_change(node, apt, capsys, args, message):
    rc, result = run_module(nvidia_driver.main, args, capsys)
    assert rc == 1 and result["failed"]
    assert message in result["msg"]
    assert not result.get("changed")
    assert apt.calls == []
    assert not os.path.exists(os.path.join(node.root, "etc/modprobe.d"))


def test_a_whole_number_branch_reads_as_text(node, apt, capsys):
    apt.check_mode = True
    rc, result = run_module(nvidia_driver.main, dict(MIRROR, branch=570, _ansible_check_mode=True), capsys)
    assert rc == 0, result
    assert "install nvidia-open-570=570.172.08-1" in result["plan"]


def test_unknown_distro(node, apt, capsys):
    node.write("etc/os-release", 'ID=arch\nPRETTY_NAME="Arch Linux"\n')
    rc, result = run_module(nvidia_driver.main, {"branch": "570"}, capsys)
    assert rc == 1 and "unsupported distribution 'Arch Linux'" in result["msg"]
    assert apt.calls == []


def test_preflight_module_reports_problems_without_failing(node, monkeypatch, capsys):
    monkeypatch.setattr(node_preflight, "run", functools.partial(node_preflight.run, root=node.root))
    node.modules("nouveau")
    rc, result = run_module(gpu_node_preflight.main, {"disk_paths": ["/"], "min_free_mib": 1}, capsys)
    assert rc == 0 and not result["changed"]
    assert not result["ok"]
    assert result["problems"] == ["no NVIDIA GPU (PCI vendor 0x10de, display class) found under /sys/bus/pci/devices"]
    assert "nouveau is loaded: the driver role blacklists it and reboots" in result["warnings_list"]
    node.hgx_h100()
    rc, result = run_module(gpu_node_preflight.main, {"disk_paths": ["/"], "min_free_mib": 1,
                                                      "_ansible_check_mode": True}, capsys)
    assert result["ok"] and len(result["gpus"]) == 8 and len(result["nvswitches"]) == 4


def test_a_failure_after_changes_reports_them(node, apt, capsys):
    rc, result = run_module(nvidia_driver.main, dict(MIRROR, branch="575"), capsys)
    assert rc == 1
    assert "nvidia-open-575 is not available from the configured repositories" in result["msg"]
    # The files written before the failure are reported, so the run is honest about what changed.
    assert result["changed"]
    assert "write /etc/apt/preferences.d/gpuops-nvidia-driver" in result["actions"]
    assert apt.commands(["apt-get", "install"]) == []
