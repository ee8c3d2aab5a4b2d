"""The helm_releases module on what helm printed (fixtures/helm of the filter tests): which helm
commands it runs, what it decides, and that neither a result nor a failure carries the values."""
import json
import threading
from pathlib import Path
from unittest import mock

import pytest

from support.module_args import ExitJson, FailJson, patch_module_args

from ansible.module_utils import basic
from ansible.module_utils.ansible_release import __version__ as ANSIBLE_CORE
from ansible_collections.gpuops.platform.plugins.filter.k8s_helm import k8s_helm_wanted
from ansible_collections.gpuops.platform.plugins.modules import helm_releases

pytestmark = pytest.mark.usefixtures("module_exits")

FIXTURES = Path(__file__).resolve().parents[1] / "filter" / "fixtures" / "helm"
VALUES = {"driver": {"enabled": False}, "toolkit": {"enabled": False}, "mig": {"strategy": "single"},
          "devicePlugin": {"config": {"name": "nvidia-device-plugin-config", "default": "default"}}}
RELEASE = {"name": "gpu-operator", "namespace": "gpu-operator", "chart": "gpu-operator", "version": "v25.3.0",
           "repo_url": "https://helm.ngc.nvidia.com/nvidia", "values": VALUES}


def recorded(state, what):
    return (FIXTURES / ("%s.%s.json" % (state, what))).read_text()


class FakeHelm:
    """helm's answers for one recorded state; ``broken`` maps a subcommand to (rc, stdout, stderr)."""

    def __init__(self, state, broken=None):
        self.state, self.broken, self.calls = state, broken or {}, []

    def __call__(self, module, args, **kwargs):
        assert kwargs.get("environ_update") is not None  # the connection settings, as kubernetes.core's helm modules
        argv = list(args)
        assert argv[0] == "/usr/local/bin/helm"
        self.calls.append(argv[1:])
        verb = argv[1] if argv[1] != "get" else "get " + argv[2]
        if verb in self.broken:
            return self.broken[verb]
        what = {"list": "list", "get values": "values", "history": "history"}[verb]
        return 0, recorded(self.state, what), ""


# ansible-core 2.19+ adds the invocation when the controller asks for it; older ones always add it.
INJECT_ASKED = tuple(int(p) for p in ANSIBLE_CORE.split(".")[:2]) >= (2, 19)


def run(helm, releases=None, recover=True, check=False, invocation=False):
    args = {"releases": k8s_helm_wanted([RELEASE] if releases is None else releases), "recover": recover}
    if check:
        args["_ansible_check_mode"] = True
    if invocation and INJECT_ASKED:  # as the controller asks at -vvv, or with INJECT_INVOCATION
        args["_ansible_inject_invocation"] = True
    with patch_module_args(args), \
            mock.patch.object(basic.AnsibleModule, "run_command", autospec=True, side_effect=helm), \
            mock.patch.object(basic.AnsibleModule, "get_bin_path", return_value="/usr/local/bin/helm"):
        with pytest.raises((ExitJson, FailJson)) as caught:
            helm_releases.main()
    return caught.type is ExitJson, caught.value.args[0]


def test_deployed_as_wanted_reads_the_values_and_returns_none_of_them():
    helm = FakeHelm("deployed")
    ok, result = run(helm, check=True)
    assert ok and result["changed"] is False
    assert [p["action"] for p in result["plans"]] == ["unchanged"]
    assert [c[:2] for c in helm.calls] == [["list", "--all"], ["get", "values"]]
    assert result["commands"] == helm.calls
    assert "nvidia-device-plugin-config" not in json.dumps(result)


@pytest.mark.parametrize("state, calls, action", [
    ("deployed-other-values", ["list", "get"], "upgrade"),
    ("deployed-old-chart", ["list"], "upgrade"),
    ("failed", ["list"], "upgrade"),
    ("pending-upgrade", ["list", "history"], "upgrade"),
    ("pending-install", ["list", "history"], "install"),
    ("uninstalling", ["list"], "install"),
])
def test_only_what_the_decision_needs_is_read(state, calls, action):
    helm = FakeHelm(state)
    ok, result = run(helm)
    assert ok and [c[0] for c in helm.calls] == calls
    assert result["plans"][0]["action"] == action


def test_no_release_runs_no_helm():
    helm = FakeHelm("deployed")
    ok, result = run(helm, releases=[])
    assert ok and result["plans"] == [] and helm.calls == []


def test_helm_null_values_are_no_values():
    helm = FakeHelm("deployed", broken={"get values": (0, "null\n", "")})
    ok, result = run(helm, releases=[dict(RELEASE, values={})])
    assert ok and result["plans"][0]["action"] == "unchanged"


def test_a_failing_get_values_is_named_without_its_output():
    helm = FakeHelm("deployed", broken={"get values": (1, recorded("deployed", "values"), "Error: timed out")})
    ok, result = run(helm)
    assert not ok
    assert result["msg"] == ("`helm get values gpu-operator --namespace gpu-operator -o json` failed (exit 1): "
                             "Error: timed out")
    assert "nvidia-device-plugin-config" not in json.dumps(result)


def test_helm_printing_no_json_is_named():
    helm = FakeHelm("deployed", broken={"list": (0, "NAME NAMESPACE\n", "")})
    ok, result = run(helm)
    assert not ok and "`helm list --all --all-namespaces" in result["msg"] and "printed no JSON" in result["msg"]
    helm = FakeHelm("deployed", broken={"list": (0, '{"releases": []}', "")})
    ok, result = run(helm)
    assert not ok and result["msg"] == "helm list printed dict, not a list of releases"


def test_without_recovery_a_pending_release_fails_with_the_plans():
    ok, result = run(FakeHelm("pending-rollback"), recover=False)
    assert not ok
    assert "`helm rollback gpu-operator 2 --namespace gpu-operator`" in result["msg"]
    assert [p["action"] for p in result["plans"]] == ["fail"]


def test_a_bad_name_fails_before_helm_runs():
    helm = FakeHelm("deployed")
    args = {"releases": [{"name": "bad|name", "namespace": "x", "chart_version": "1", "values_digest": "sha256:0"}]}
    with patch_module_args(args), mock.patch.object(basic.AnsibleModule, "run_command", autospec=True, side_effect=helm), \
            mock.patch.object(basic.AnsibleModule, "get_bin_path", return_value="/usr/local/bin/helm"):
        with pytest.raises(FailJson) as caught:
            helm_releases.main()
    assert "Helm release name 'bad|name' is invalid" in caught.value.args[0]["msg"] and helm.calls == []


REAL_EXIT_JSON = basic.AnsibleModule.exit_json  # before module_exits patches it: the result as it leaves the module


def test_the_wanted_values_digest_never_leaves_the_module(capsys):
    # exit_json as in a real run: the invocation is added and no_log values are masked (-vvv shows the invocation).
    wanted = k8s_helm_wanted([RELEASE])
    digest = wanted[0]["values_digest"]
    with mock.patch.object(basic.AnsibleModule, "exit_json", REAL_EXIT_JSON), pytest.raises(SystemExit) as done:
        run(FakeHelm("deployed"), check=True, invocation=True)
    assert done.value.code == 0
    printed = capsys.readouterr().out
    result = json.loads(printed)
    assert result["invocation"]["module_args"]["releases"][0]["name"] == "gpu-operator"
    assert digest not in printed and digest.split(":")[-1] not in printed


TWO = [RELEASE, dict(RELEASE, name="second", namespace="second")]
TWO_LISTED = json.dumps([dict(json.loads(recorded("deployed", "list"))[0], name=r["name"], namespace=r["namespace"])
                         for r in TWO])


class Overlap(FakeHelm):
    """FakeHelm whose reads wait for each other: a read returns only once both have started, so the test hangs
    (and fails on its timeout) unless they run side by side. Keeps the environment each run got."""

    def __init__(self, state, broken=None, failing=None):
        super().__init__(state, broken)
        self.both, self.environments, self.failing = threading.Barrier(2, timeout=10), [], failing

    def __call__(self, module, args, **kwargs):
        if args[1] == "list":
            return super().__call__(module, args, **kwargs)
        self.environments.append(kwargs["environ_update"])
        self.both.wait()
        if args[1:4] == self.failing:
            self.calls.append(list(args[1:]))
            return 1, recorded("deployed", "values"), "Error: timed out"
        return super().__call__(module, args, **kwargs)


def test_the_reads_of_several_releases_run_side_by_side_with_the_connection_settings():
    helm = Overlap("deployed", broken={"list": (0, TWO_LISTED, "")})
    with mock.patch.dict("os.environ", {"K8S_AUTH_HOST": "https://10.0.0.1:6443"}):
        ok, result = run(helm, releases=TWO)
    assert ok and [p["action"] for p in result["plans"]] == ["unchanged", "unchanged"]
    # The list, then both values reads at once, each with the connection as helm's environment.
    assert helm.calls[0][:3] == ["list", "--all", "--all-namespaces"]
    assert sorted(c[:3] for c in helm.calls[1:]) == [["get", "values", "gpu-operator"], ["get", "values", "second"]]
    assert [e["HELM_KUBEAPISERVER"] for e in helm.environments] == ["https://10.0.0.1:6443"] * 2
    # The commands in the releases' order, whichever finished first.
    assert [c[:3] for c in result["commands"]] == [["list", "--all", "--all-namespaces"], ["get", "values", "gpu-operator"],
                                                   ["get", "values", "second"]]
    assert "nvidia-device-plugin-config" not in json.dumps(result)


def test_a_failing_read_among_several_is_named_without_its_output():
    helm = Overlap("deployed", broken={"list": (0, TWO_LISTED, "")}, failing=["get", "values", "second"])
    ok, result = run(helm, releases=TWO)
    assert not ok
    assert result["msg"] == "`helm get values second --namespace second -o json` failed (exit 1): Error: timed out"
    assert "nvidia-device-plugin-config" not in json.dumps(result)
