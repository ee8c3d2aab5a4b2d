"""`ansible localhost -m gpuops.platform.nvml_facts` from the repository root.

Uses the collection installed in collections/ by scripts/bootstrap.sh (ansible.cfg
points there), on this GPU-less machine: live facts say present: false and the run
succeeds; with replay_file every recorded fixture comes back.
"""
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

FIXTURES = ("dgx-a100", "hgx-h100", "h200-mig", "l40s", "no-gpu")
INSTALLED = Path("collections") / "ansible_collections" / "gpuops" / "platform"


def _ansible():
    candidate = Path(sys.executable).parent / "ansible"
    return str(candidate) if candidate.exists() else shutil.which("ansible")


@pytest.fixture(scope="module")
def run_module(repo_root, tmp_path_factory):
    installed = repo_root / INSTALLED
    for source in ("plugins/modules/nvml_facts.py", "plugins/module_utils/_nvml/collect.py"):
        copy = installed / source
        if not copy.exists() or not filecmp.cmp(str(repo_root / source), str(copy), shallow=False):
            pytest.fail("the installed collection is missing or older than %s: run scripts/bootstrap.sh" % source)

    def run(args=None):
        command = [_ansible(), "localhost", "-m", "gpuops.platform.nvml_facts"]
        if args:
            command += ["-a", args]
        # The default callback prints "localhost | SUCCESS => {json}" in json result format.
        env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
        proc = subprocess.run(command, cwd=str(repo_root), env=env, check=False, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
        match = re.search(r"^localhost \| (\w+) => (\{.*\})\s*$", proc.stdout, re.S | re.M)
        result = json.loads(match.group(2)) if match else None
        return proc.returncode, result, proc.stdout + proc.stderr
    return run


def test_no_gpu_here_gives_present_false_and_success(run_module):
    rc, result, output = run_module()
    assert rc == 0, output
    assert "DEPRECATION" not in output
    facts = result["ansible_facts"]["nvidia"]
    assert result["changed"] is False
    assert facts["present"] is False
    assert facts["reason"]
    assert facts["gpus"] == [] and facts["gpu_count"] == 0


@pytest.mark.parametrize("name", FIXTURES)
def test_replay_of_every_fixture(run_module, fixtures_dir, name):
    path = fixtures_dir / "nvml" / (name + ".json")
    rc, result, output = run_module("replay_file=%s" % path)
    assert rc == 0, output
    facts = result["ansible_facts"]["nvidia"]
    recorded = json.loads(path.read_text())
    assert facts.pop("source") == "replay"
    recorded.pop("source")
    assert facts == recorded


def test_bad_replay_file_fails_with_a_message(run_module, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("[]")
    rc, _result, output = run_module("replay_file=%s" % path)
    assert rc != 0
    assert "not a recorded nvml_facts result" in output
