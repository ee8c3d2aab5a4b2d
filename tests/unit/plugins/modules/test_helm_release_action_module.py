"""helm_release_action: one helm command per action, nothing in check mode, never the values in a result, and a
clear failure before helm runs for bad input. helm is replaced by a recorder (run_command)."""
import json
import os
from unittest import mock

import pytest
import yaml

from support.module_args import ExitJson, FailJson, patch_module_args

from ansible.module_utils import basic
from ansible_collections.gpuops.platform.plugins.filter.k8s_objects import k8s_helm_release
from ansible_collections.gpuops.platform.plugins.module_utils._k8s import helm as helm_utils
from ansible_collections.gpuops.platform.plugins.modules import helm_release_action

pytestmark = pytest.mark.usefixtures("module_exits")

MARKER = "values-marker-0c4e"
RELEASE = k8s_helm_release({"name": "gpu-operator", "namespace": "gpu-operator", "chart": "gpu-operator",
                            "version": "v25.3.0", "repo_url": "https://helm.ngc.nvidia.com/nvidia",
                            "values": {"driver": {"enabled": False}, "secretish": MARKER}})
PLAN = {"name": "gpu-operator", "namespace": "gpu-operator", "state": "deployed", "revision": 2, "recover": "",
        "rollback_to": 0, "action": "upgrade", "reason": "chart or values differ from revision 2", "command": ""}
# What `helm upgrade --install -o json` prints: the release, its values (config) and manifest among it.
PRINTED = {"name": "gpu-operator", "namespace": "gpu-operator", "version": 3, "config": {"secretish": MARKER},
           "manifest": "kind: ConfigMap # %s" % MARKER, "info": {"status": "deployed"},
           "chart": {"metadata": {"name": "gpu-operator", "version": "v25.3.0"}}}


class FakeHelm:
    def __init__(self, answer=(0, json.dumps(PRINTED), "")):
        self.answer, self.calls, self.values = answer, [], []

    def __call__(self, module, args, **kwargs):
        assert kwargs.get("environ_update") is not None  # the connection settings, as kubernetes.core's helm modules
        argv = list(args)
        assert argv[0] == "/usr/local/bin/helm"
        self.calls.append(argv[1:])
        if "--values" in argv:  # the file exists while helm runs, and holds the values
            with open(argv[argv.index("--values") + 1]) as handle:
                self.values.append(yaml.safe_load(handle))
        return self.answer


def run(helm, action="upgrade", release=None, plan=None, check=False, diff=False, **extra):
    args = dict({"action": action, "release": RELEASE if release is None else release, "plan": PLAN if plan is None else plan,
                 "timeout": "10m0s", "_ansible_check_mode": check, "_ansible_diff": diff}, **extra)
    with patch_module_args(args), \
            mock.patch.object(basic.AnsibleModule, "run_command", autospec=True, side_effect=helm), \
            mock.patch.object(basic.AnsibleModule, "get_bin_path", return_value="/usr/local/bin/helm"):
        with pytest.raises((ExitJson, FailJson)) as caught:
            helm_release_action.main()
    return caught.type is ExitJson, caught.value.args[0]


def test_an_upgrade_is_one_helm_upgrade_install_with_the_values_in_a_file_that_goes_away():
    helm = FakeHelm()
    ok, result = run(helm)
    assert ok and result["changed"] is True
    assert len(helm.calls) == 1
    path = helm.calls[0][helm.calls[0].index("--values") + 1]
    assert helm.calls[0] == ["upgrade", "--install", "gpu-operator", "gpu-operator", "--namespace", "gpu-operator",
                             "--version", "v25.3.0", "--repo", "https://helm.ngc.nvidia.com/nvidia", "--create-namespace",
                             "--reset-values", "--wait", "--timeout", "10m0s", "--values", path, "-o", "json"]
    assert helm.values == [{"driver": {"enabled": False}, "secretish": MARKER}]
    assert not os.path.exists(path)
    assert result["command"][-4:] == ["--values", "<values>", "-o", "json"]
    assert result["release"] == {"name": "gpu-operator", "namespace": "gpu-operator", "revision": 3, "status": "deployed",
                                 "chart": "gpu-operator", "chart_version": "v25.3.0"}
    assert MARKER not in json.dumps(result)


def test_a_chart_from_a_path_has_no_version_flag_and_no_values_no_file():
    release = k8s_helm_release({"name": "demo", "namespace": "demo", "chart_path": "/charts/demo", "version": "0.1.0",
                                "create_namespace": False})
    helm = FakeHelm()
    ok, result = run(helm, action="install", release=release, plan={}, wait=False)
    assert ok and helm.calls == [["upgrade", "--install", "demo", "/charts/demo", "--namespace", "demo", "--reset-values",
                                  "--timeout", "10m0s", "-o", "json"]]


@pytest.mark.parametrize("action, argv", [
    ("rollback", ["rollback", "gpu-operator", "2", "--namespace", "gpu-operator", "--wait", "--timeout", "10m0s"]),
    ("uninstall", ["uninstall", "gpu-operator", "--namespace", "gpu-operator", "--wait", "--timeout", "10m0s"]),
])
def test_a_recovery_is_one_helm_command_from_the_plan(action, argv):
    plan = dict(PLAN, state="pending-upgrade", revision=3, recover=action, rollback_to=2 if action == "rollback" else 0,
                reason="pending-upgrade at revision 3: rolled back to revision 2")
    helm = FakeHelm((0, "Rollback was a success! Happy Helming!\n", ""))
    ok, result = run(helm, action=action, release=plan, plan=plan)
    assert ok and result["changed"] and helm.calls == [argv] and result["command"] == argv
    assert result["reason"] == plan["reason"] and result["release"] == {}


def test_check_mode_runs_no_helm_and_diff_shows_chart_and_version_never_values():
    helm = FakeHelm()
    ok, result = run(helm, check=True, diff=True)
    assert ok and result["changed"] is True and helm.calls == [] and result["command"] == []
    assert result["diff"]["before"] == {"status": "deployed", "revision": 2}
    assert result["diff"]["after"]["chart_version"] == "v25.3.0" and result["diff"]["after"]["status"] == "deployed"
    assert result["diff"]["before_header"] == "Helm release gpu-operator/gpu-operator"
    assert MARKER not in json.dumps(result)
    ok, result = run(FakeHelm(), check=True)
    assert ok and "diff" not in result


def test_a_failing_helm_is_named_without_its_output():
    helm = FakeHelm((1, json.dumps(PRINTED), "Error: UPGRADE FAILED: context deadline exceeded"))
    ok, result = run(helm)
    assert not ok
    assert result["msg"].startswith("`helm upgrade --install gpu-operator gpu-operator --namespace gpu-operator")
    assert "--values <values>" in result["msg"] and result["msg"].endswith(
        "failed (exit 1): Error: UPGRADE FAILED: context deadline exceeded")
    assert MARKER not in json.dumps(result)


def test_helm_printing_no_release_is_named():
    ok, result = run(FakeHelm((0, "[]", "")))
    assert not ok and "helm printed list, not a release" in result["msg"]


@pytest.mark.parametrize("action, release, plan, message", [
    ("rollback", dict(PLAN, rollback_to=0), PLAN, "a rollback needs the revision to roll back to"),
    ("upgrade", dict(RELEASE, chart_ref=""), PLAN, "an upgrade needs chart_ref"),
    ("upgrade", dict(RELEASE, name="bad|name"), {}, "Helm release name 'bad|name' is invalid"),
    ("upgrade", RELEASE, dict(PLAN, name="other"), "plan is the decision for gpu-operator/other"),
    ("upgrade", dict(RELEASE, values=["x"]), PLAN, "values must be a mapping"),
])
def test_bad_input_fails_before_helm_runs(action, release, plan, message):
    helm = FakeHelm()
    ok, result = run(helm, action=action, release=release, plan=plan)
    assert not ok and message in result["msg"] and helm.calls == []


def test_every_action_is_one_of_helms():
    with pytest.raises(ValueError, match="action must be one of"):
        helm_utils.action_args("delete", RELEASE, "5m")
