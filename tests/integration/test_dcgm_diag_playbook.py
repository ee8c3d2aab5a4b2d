"""playbooks/dcgm_diag.yml with a fake dcgmi that prints a recorded output, and its result fed to health.yml.

Each node is this machine over a local connection; its dcgmi is a script that
records its arguments and prints one of tests/fixtures/dcgm/ (a real capture),
exiting non-zero on a failed run as dcgmi does.
"""
import json
import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

DCGMI = """#!%s
import json, sys
with open(%r, "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
with open(%r) as out:
    sys.stdout.write(out.read())
sys.exit(%d)
"""
PERSISTENCE = "Persistence Mode: Persistence mode for GPU 0 is disabled."


class Fleet(object):
    def __init__(self, root, repo_root, fixtures_dir):
        self.root, self.repo_root, self.fixtures = root, repo_root, fixtures_dir / "dcgm"
        self.hosts = {}

    def node(self, name, fixture, rc=0, on_path=False):
        bindir = self.root / name
        bindir.mkdir()
        tool = bindir / "dcgmi"
        # An absolute fixture name (a file the test wrote) is kept as it is.
        output = str(self.fixtures / fixture)
        tool.write_text(DCGMI % (sys.executable, str(self.root / ("%s.argv" % name)), output, rc))
        tool.chmod(0o755)
        hostvars = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
        if on_path:
            self.path_dir = bindir
        else:
            hostvars["dcgm_diag_dcgmi_path"] = str(tool)
        self.hosts[name] = hostvars

    def calls(self, name):
        log = self.root / ("%s.argv" % name)
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def play(self, *args, playbooks=("dcgm_diag.yml",)):
        inventory = {"all": {"children": {
            "gpu_nodes": {"hosts": self.hosts},
            "k8s_control": {"hosts": {"control": {"ansible_connection": "local",
                                                  "ansible_python_interpreter": sys.executable}}}}}}
        (self.root / "inventory.json").write_text(json.dumps(inventory))
        env = dict(os.environ)
        env.update({
            # The working tree (tests/conftest.py links it under .cache/src), then kubernetes.core.
            "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join([str(self.repo_root / ".cache" / "src"),
                                                         str(self.repo_root / "collections")]),
            "PATH": os.pathsep.join([str(getattr(self, "path_dir", self.root)), env["PATH"]]),
            "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
            "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default", "ANSIBLE_LOCAL_TEMP": str(self.root / "tmp"),
            "ANSIBLE_LOCALHOST_WARNING": "0",
        })
        proc = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(self.root / "inventory.json")]
            + [str(self.repo_root / "playbooks" / p) for p in playbooks] + list(args),
            cwd=str(self.repo_root), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            universal_newlines=True, timeout=300, check=False)
        return proc


@pytest.fixture
def fleet(tmp_path, repo_root, fixtures_dir):
    return Fleet(tmp_path, repo_root, fixtures_dir)


def recap(proc, host):
    line = re.search(r"^%s\s+: (.*)$" % host, proc.stdout, re.M).group(1)
    return dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", line))


def test_failed_test_unreadable_output_and_bad_input_each_fail_only_their_node(fleet, tmp_path):
    fleet.node("pass", "dcgm-3.1.0-nvvs-8gpu-pass.txt", on_path=True)          # dcgmi found on the PATH
    fleet.node("fail", "dcgm-4.2.3-gb10-r1-fail.json", rc=226)
    (tmp_path / "refused.txt").write_text("Error: Unable to connect to host engine. Host engine connection invalid.\n")
    fleet.node("refused", str(tmp_path / "refused.txt"), rc=255)
    for name, bad in (("level5", {"dcgm_diag_level": 5}), ("level0", {"dcgm_diag_level": "0"}),
                      ("engine", {"dcgm_diag_hostengine": "--host=evil"}), ("ids", {"dcgm_diag_gpu_ids": ["0,1"]})):
        fleet.node(name, "dcgm-3.1.0-nvvs-8gpu-pass.txt")
        fleet.hosts[name].update(bad)
    for name in ("pass", "fail", "refused"):
        fleet.hosts[name]["dcgm_diag_level"] = 3
    proc = fleet.play()
    out = proc.stdout
    assert proc.returncode != 0, out
    assert fleet.calls("pass") == [["diag", "-r", "3", "-j"]] == fleet.calls("fail") == fleet.calls("refused")
    assert "DCGM 3.1.0 level 3: pass (pass 80, fail 0, warn 0, skip 0, not run 0)" in out
    assert recap(proc, "pass")["failed"] == 0 and recap(proc, "pass")["changed"] == 0
    assert ("DCGM diagnostic level 3 failed: GPU 0: test 'software' (Deployment) failed: %s" % PERSISTENCE) in out
    assert ("dcgmi diag (rc 255) gave no usable result: dcgmi printed no JSON document (was -j honoured?); "
            "its output began with 'Error: Unable to connect to host engine.") in out
    assert "hostengine must be HOST or HOST:PORT (letters, digits, dots, dashes), got '--host=evil'" in out
    assert "value of dcgm_diag_level must be one of: 1, 2, 3, 4, got: 5" in out
    assert "value of dcgm_diag_level must be one of: 1, 2, 3, 4, got: 0" in out
    assert "'dcgm_diag_gpu_ids' is of type str and we were unable to convert to int" in out
    for name in ("fail", "refused", "level5", "level0", "engine", "ids"):
        assert recap(proc, name)["failed"] == 1, name
    for name in ("level5", "level0", "engine", "ids"):                       # refused before dcgmi ran
        assert fleet.calls(name) == [], name


def test_check_mode_runs_nothing(fleet):
    fleet.node("gpu1", "dcgm-4.2.3-gb10-r1-fail.json", rc=226)
    proc = fleet.play("--check", "-e", "dcgm_diag_level=4")
    assert proc.returncode == 0, proc.stdout
    assert fleet.calls("gpu1") == [] and recap(proc, "gpu1")["changed"] == 0
    # ... and says so, with the command it would run.
    text = " ".join(proc.stdout.split())
    assert "DCGM diagnostic level 4 not run on gpu1: check mode never runs dcgmi" in text, proc.stdout[-2000:]
    assert "diag -r 4 -j" in text


def test_report_only_feeds_the_health_role(fleet):
    fleet.node("gpu1", "dcgm-4.5.2-gb10-r2-fail-pass.json", rc=226)
    fleet.node("gpu2", "derived-dcgm-4.2.3-gb10-r1-warn.json")
    fleet.node("gpu3", "dcgm-3.1.0-nvvs-8gpu-pass.txt")
    fleet.hosts["gpu3"]["dcgm_diag_gpu_ids"] = [0, 7]
    proc = fleet.play("-e", '{"dcgm_diag_fail": false, "dcgm_diag_level": 2, "gpu_health_render": true, '
                            '"gpu_health_gather": false}', playbooks=("dcgm_diag.yml", "health.yml"))
    out = proc.stdout
    assert proc.returncode == 0, out
    assert fleet.calls("gpu3") == [["diag", "-r", "2", "-j", "-i", "0,7"]]
    assert "DCGM 4.5.2 level 2: fail (pass 2, fail 1, warn 0, skip 0, not run 0): GPU 0: test 'software'" in out
    assert ("gpu1: critical (DCGM diag level 2: GPU 0: test 'software' (Deployment) failed: %s" % PERSISTENCE) in out
    assert "gpu2: warning (DCGM diag level 2: GPU 0: test 'software' (Deployment) warned: " in out
    assert "gpu3: ok; would change: label gpuops.io/gpu-health=ok (was unset)" in out
    # gpu1's report line says what its patch would change.
    (line,) = [ln for ln in out.splitlines() if "gpu1: critical (DCGM diag level 2" in ln]
    assert line.rstrip('",').endswith("; would change: label gpuops.io/gpu-health=critical (was unset), annotation "
                                      "gpuops.io/gpu-health-reasons set, taint gpuops.io/gpu-unhealthy=true:NoSchedule"), line
