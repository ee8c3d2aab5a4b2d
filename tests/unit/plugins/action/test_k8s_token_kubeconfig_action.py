"""k8s_token_kubeconfig's action: the removal in the controller's process where the host is the controller itself,
the module everywhere else, with the module's results and refusals."""
import os
import tempfile
from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.gpuops.platform.plugins.action import k8s_token_kubeconfig
from ansible_collections.gpuops.platform.plugins.module_utils._k8s import token_kubeconfig

MODULE_ANSWER = {"changed": True, "path": "/from/the/module"}


@pytest.fixture
def written(tmp_path):
    return token_kubeconfig.write("https://10.0.0.1:6443", "tok-3f9a1c", parent=str(tmp_path))


def _run(args, transport="local", become=False, check=False):
    task = mock.Mock(args=args, async_val=0, check_mode=check, diff=False)
    connection = mock.Mock(transport=transport)
    action = k8s_token_kubeconfig.ActionModule(task, connection, mock.Mock(check_mode=check, become=become),
                                               loader=None, templar=None, shared_loader_obj=None)
    with mock.patch.object(action, "_execute_module", return_value=dict(MODULE_ANSWER)) as module:
        result = action.run(task_vars={})
    return result, module


def test_a_local_removal_runs_in_process_and_takes_the_folder(written):
    result, module = _run({"state": "absent", "path": written})
    assert not module.called
    assert result["changed"] is True and result["path"] == written
    assert not os.path.lexists(os.path.dirname(written))
    again, module = _run({"state": "absent", "path": written})
    assert not module.called and again["changed"] is False


def test_check_mode_removes_nothing_and_says_what_would_go(written):
    result, module = _run({"state": "absent", "path": written}, check=True)
    assert not module.called and result["changed"] is True and os.path.exists(written)


@pytest.mark.parametrize("transport, become", [("ssh", False), ("local", True), ("paramiko", False)])
def test_another_host_or_become_runs_the_module(written, transport, become):
    result, module = _run({"state": "absent", "path": written}, transport=transport, become=become)
    assert module.call_count == 1 and result["path"] == MODULE_ANSWER["path"]
    assert os.path.exists(written)


def test_writing_always_runs_the_module():
    result, module = _run({"server": "https://10.0.0.1:6443", "api_key": "tok-3f9a1c"})
    assert module.call_count == 1 and result["path"] == MODULE_ANSWER["path"]


def test_a_path_it_did_not_write_is_refused_in_process_as_the_module_refuses_it(tmp_path):
    stranger = tmp_path / "gpuops-k8s-x" / "kubeconfig"
    stranger.parent.mkdir()
    stranger.write_text("x")
    (stranger.parent / "other").write_text("y")
    with pytest.raises(AnsibleActionFail) as caught:
        _run({"state": "absent", "path": str(stranger)})
    assert str(caught.value).startswith("k8s_token_kubeconfig: ") and "holds other besides the kubeconfig" in str(caught.value)
    assert stranger.exists()
    with pytest.raises(AnsibleActionFail) as caught:
        _run({"state": "absent", "path": "relative/kubeconfig"})
    assert "is not a kubeconfig that this module wrote" in str(caught.value)


def test_a_missing_path_is_refused_by_the_argument_spec():
    with pytest.raises(AnsibleActionFail) as caught:
        _run({"state": "absent"})
    assert "path" in str(caught.value)


def test_the_action_and_the_module_share_one_argument_spec():
    from ansible_collections.gpuops.platform.plugins.modules import k8s_token_kubeconfig as module
    with open(module.__file__) as handle:
        assert "token_kubeconfig.ARGUMENT_SPEC" in handle.read()
    assert tempfile.gettempdir()  # the module writes under the temporary folder, as before
