"""The node_packages module end to end, through AnsibleModule, against the modelled apt."""

import pytest

from ansible.module_utils import basic

from fakes.gpu_node import FakeApt, FakeNode
from support.module_args import run_main

from ansible_collections.gpuops.platform.plugins.modules import node_packages

pytestmark = pytest.mark.usefixtures("module_exits")


@pytest.fixture
def apt(tmp_path, monkeypatch):
    fake = FakeApt(FakeNode(tmp_path), available={"nvidia-container-toolkit": ["1.17.7-1", "1.17.8-1"]},
                   tools=("apt-get", "dpkg-query"))
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: fake(argv, **kw))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, tool, required=False, opt_dirs=None: (
        "/usr/bin/" + tool if tool in fake.tools else None))
    return fake


def test_check_mode_with_diff_then_install_then_nothing(apt):
    apt.check_mode = True
    ok, result = run_main(node_packages.main, {"name": ["nvidia-container-toolkit=1.17.8-1"]}, check_mode=True,
                          diff=True)
    assert ok and result["changed"] and result["plan"] == ["install nvidia-container-toolkit=1.17.8-1"]
    assert result["diff"]["after"] == "nvidia-container-toolkit 1.17.8-1\n" and apt.installed == {}
    apt.check_mode = False
    ok, result = run_main(node_packages.main, {"name": ["nvidia-container-toolkit=1.17.8-1"]})
    assert ok and result["changed"] and "diff" not in result
    assert apt.installed == {"nvidia-container-toolkit": "1.17.8-1"}
    ok, result = run_main(node_packages.main, {"name": ["nvidia-container-toolkit=1.17.8-1"]})
    assert ok and not result["changed"]


def test_a_refusal_fails_with_no_change(apt):
    apt.installed = {"nvidia-container-toolkit": "1.17.8-1"}
    ok, result = run_main(node_packages.main, {"name": ["nvidia-container-toolkit=1.17.7-1"]})
    assert not ok and not result["changed"]
    assert "Packages were downgraded" in result["msg"] and "set allow_downgrade" in result["msg"]
    assert apt.installed == {"nvidia-container-toolkit": "1.17.8-1"}
