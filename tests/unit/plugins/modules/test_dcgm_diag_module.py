"""The dcgm_diag module: one argument-list run, check mode runs nothing, fail_on_failure, clear errors."""
import pytest
from unittest import mock

from ansible.module_utils import basic
from support.module_args import ExitJson, FailJson, patch_module_args

from ansible_collections.gpuops.platform.plugins.modules import dcgm_diag

pytestmark = pytest.mark.usefixtures("module_exits")


def run(args, output="", rc=0, check=False, found="/usr/bin/dcgmi"):
    if check:
        args = dict(args, _ansible_check_mode=True)
    calls = []

    def run_command(self, argv, **kwargs):
        calls.append((argv, kwargs))
        return rc, output, ""

    with patch_module_args(args), mock.patch.object(basic.AnsibleModule, "run_command", run_command), \
            mock.patch.object(basic.AnsibleModule, "get_bin_path", return_value=found):
        with pytest.raises((ExitJson, FailJson)) as caught:
            dcgm_diag.main()
    return caught.type is ExitJson, caught.value.args[0], calls


@pytest.fixture
def recorded(fixtures_dir):
    return lambda name: (fixtures_dir / "dcgm" / name).read_text()


def test_runs_once_as_an_argument_list_and_never_reports_a_change(recorded):
    ok, result, calls = run({"level": 2, "gpu_ids": [3, 1]}, recorded("dcgm-3.1.0-nvvs-8gpu-pass.txt"))
    assert ok and result["changed"] is False and result["status"] == "pass" and result["health"]["status"] == "ok"
    assert [argv for argv, _kw in calls] == [["/usr/bin/dcgmi", "diag", "-r", "2", "-j", "-i", "1,3"]]
    assert "use_unsafe_shell" not in calls[0][1]


def test_check_mode_runs_nothing_and_says_so():
    ok, result, calls = run({"level": 4}, check=True)
    assert ok and calls == [] and result["ran"] is False and result["status"] is None
    assert result["command"] == ["dcgmi", "diag", "-r", "4", "-j"] and "not run" in result["msg"]


def test_a_failed_test_fails_with_the_results_and_report_only_does_not(recorded):
    out = recorded("dcgm-4.2.3-gb10-r1-fail.json")
    ok, result, _calls = run({"level": 1}, out, rc=226)
    assert not ok and result["msg"].startswith("DCGM diagnostic level 1 failed: GPU 0: test 'software' (Deployment)")
    assert result["dcgmi_rc"] == 226 and result["gpus"] == {"0": {"software": "fail"}}
    assert result["health"]["status"] == "critical"
    ok, result, _calls = run({"level": 1, "fail_on_failure": False}, out, rc=226)
    assert ok and result["status"] == "fail" and len(result["failures"]) == 1


@pytest.mark.parametrize("args, message", [
    ({"level": 5}, "must be 1, 2, 3 or 4"),
    ({"level": 0}, "must be 1, 2, 3 or 4"),
    ({"level": 1, "gpu_ids": [-1]}, "non-negative integers"),
    ({"level": 1, "hostengine": "-u /tmp/x"}, "hostengine must be HOST or HOST:PORT"),
    ({"level": 1, "hostengine": "host;reboot"}, "hostengine must be HOST or HOST:PORT"),
])
def test_bad_input_fails_before_anything_runs(args, message):
    ok, result, calls = run(args)
    assert not ok and message in result["msg"] and calls == []


def test_a_missing_dcgmi_says_what_to_install():
    ok, result, calls = run({"level": 1}, found=None)
    assert not ok and calls == [] and "install DCGM (datacenter-gpu-manager)" in result["msg"]


def test_the_host_engine_is_passed_as_one_argument(recorded):
    ok, _result, calls = run({"level": 1, "hostengine": "10.0.0.5:5555", "dcgmi_path": "/opt/dcgm/bin/dcgmi"},
                             recorded("dcgm-3.1.0-nvvs-8gpu-pass.txt"))
    assert ok and calls[0][0] == ["/opt/dcgm/bin/dcgmi", "diag", "-r", "1", "-j", "--host", "10.0.0.5:5555"]


def test_output_nested_thousands_deep_fails_with_the_nesting_limit():
    ok, result, calls = run({"level": 1}, '{"DCGM GPU Diagnostic": ' + "[" * 15000 + "]" * 15000 + "}")
    assert not ok and len(calls) == 1
    assert "nesting limit" in result["msg"] and "recursion" not in result["msg"], result["msg"]
