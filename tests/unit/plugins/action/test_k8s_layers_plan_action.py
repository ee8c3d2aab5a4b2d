"""k8s_layers_plan's action: the layers' errors refuse the run, shown and named; a malformed layer fails hidden, since
its objects may hold a Secret's data; nothing is rendered before either."""
from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.gpuops.platform.plugins.action import k8s_layers_plan

SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n"}, "data": {"k": "c2VjcmV0"}}


def _run(layers, tmp_path):
    task = mock.Mock(args={"layers": layers, "roles_dir": str(tmp_path)}, async_val=0, check_mode=False, diff=False)
    action = k8s_layers_plan.ActionModule(task, mock.Mock(), mock.Mock(check_mode=False), loader=None, templar=None,
                                          shared_loader_obj=None)
    with mock.patch.object(action, "_lookup") as lookup:
        try:
            return action.run(task_vars={}), lookup
        finally:
            assert not lookup.called, "nothing may be rendered or read before the layers are checked"


def test_every_layers_errors_refuse_the_run_in_one_shown_message(tmp_path):
    layers = [{"layer": "kueue", "objects": [], "errors": ["no cluster queue"]},
              [{"layer": "gpu_tenants", "objects": [SECRET], "errors": ["team-a: quota above the fleet"]}]]
    with pytest.raises(AnsibleActionFail) as caught:
        _run(layers, tmp_path)
    assert str(caught.value) == "kueue: no cluster queue; gpu_tenants: team-a: quota above the fleet"
    assert "c2VjcmV0" not in str(caught.value)


def test_a_malformed_layer_fails_with_its_message_hidden(tmp_path):
    result, dummy = _run([{"layer": "kueue", "objects": [SECRET], "surprise": SECRET}], tmp_path)
    assert result["failed"] is True and result["_ansible_no_log"] is True
    assert "unknown key(s) surprise" in result["msg"]


def test_a_layer_that_says_template_without_one_fails_hidden_before_any_render(tmp_path):
    result, dummy = _run([{"layer": "kueue", "objects": [], "template": True}], tmp_path)
    assert result["failed"] is True and result["_ansible_no_log"] is True
    assert "layer kueue says template" in result["msg"]
