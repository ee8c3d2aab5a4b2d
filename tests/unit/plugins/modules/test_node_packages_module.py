"""The node_packages module end to end, through AnsibleModule, against the modelled apt."""

import json

import pytest

from ansible.module_utils import basic

from fakes.gpu_node import FakeApt, FakeNode

from ansible_collections.gpuops.platform.plugins.modules import node_packages


def run_module(args, capsys):
    """Run node_packages' main() with ``args``; return (rc, result)."""
    try:
        from support.module_args import patch_module_args
    except ImportError:  # ansible-core < 2.19
        patch_module_args = None
    with pytest.raises(SystemExit) as exc:
        if patch_module_args is not None:
            with patch_module_args(args):
                node_packages.main()
        else:
            basic._ANSIBLE_ARGS = json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode()
            node_packages.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


@pytest.fixture
def apt(tmp_path, monkeypatch):
    fake = FakeApt(FakeNode(tmp_path), available={"nvidia-container-toolkit": ["1.17.7-1", "1.17.8-1"]},
                   tools=("apt-get", "dpkg-query"))
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: fake(argv, **kw))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, tool, required=False, opt_dirs=None: (
        "/usr/bin/" + tool if tool in fake.tools else None))
    return fake


def test_check_mode_with_diff_then_install_then_nothing(apt, capsys):
    apt.check_mode = True
    rc, result = run_module({"name": ["nvidia-container-toolkit=1.17.8-1"], "_ansible_check_mode": True,
                             "_ansible_diff": True}, capsys)
    assert rc == 0 and result["changed"] and result["plan"] == ["install nvidia-container-toolkit=1.17.8-1"]
    assert result["diff"]["after"] == "nvidia-container-toolkit 1.17.8-1\n" and apt.installed == {}
    apt.check_mode = False
    rc, result = run_module({"name": ["nvidia-container-toolkit=1.17.8-1"]}, capsys)
    assert rc == 0 and result["changed"] and "diff" not in result
    assert apt.installed == {"nvidia-container-toolkit": "1.17.8-1"}
    rc, result = run_module({"name": ["nvidia-container-toolkit=1.17.8-1"]}, capsys)
    assert rc == 0 and not result["changed"]


def test_a_refusal_fails_with_no_change(apt, capsys):
    apt.installed = {"nvidia-container-toolkit": "1.17.8-1"}
    rc, result = run_module({"name": ["nvidia-container-toolkit=1.17.7-1"]}, capsys)
    assert rc == 1 and result["failed"] and not result["changed"]
    assert "Packages were downgraded" in result["msg"] and "set allow_downgrade" in result["msg"]
    assert apt.installed == {"nvidia-container-toolkit": "1.17.8-1"}
