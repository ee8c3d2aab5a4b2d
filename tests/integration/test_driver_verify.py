"""The nvidia_driver role's NVML check, against nvml_facts replaying recorded nodes."""

import json
import os
import subprocess

import pytest

pytestmark = pytest.mark.slow

PLAY = """
- name: The role's NVML check
  hosts: localhost
  connection: local
  gather_facts: false
  module_defaults:
    gpuops.platform.nvml_facts:
      replay_file: {fixture}
  vars:
    nvidia_driver_version: "{wanted}"
    nvidia_driver_branch: "{branch}"
    nvidia_driver_result:
      installed_version: "{wanted}"
  tasks:
    - name: Run the role's verify tasks
      ansible.builtin.include_tasks: {tasks}
"""


def run_verify(repo_root, tmp_path, fixture, wanted):
    assert fixture.exists(), "recorded NVML fixture %s is missing" % fixture.name
    play = tmp_path / "play.yml"
    play.write_text(PLAY.format(fixture=fixture, wanted=wanted, branch=wanted.split(".")[0],
                                tasks=repo_root / "roles" / "nvidia_driver" / "tasks" / "verify.yml"))
    # tests/conftest.py links this checkout as ansible_collections/gpuops/platform under .cache/src.
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH="%s:%s" % (repo_root / ".cache" / "src", repo_root / "collections"),
               ANSIBLE_NOCOLOR="1")
    return subprocess.run(["ansible-playbook", "-i", "localhost,", str(play)], cwd=str(tmp_path),
                          capture_output=True, text=True, env=env, check=False)


def loaded_version(fixture):
    data = json.loads(fixture.read_text())
    facts = data.get("ansible_facts", {}).get("nvidia") or data.get("nvidia") or data
    return facts["driver_version"]


def test_the_wanted_driver_loaded_passes(repo_root, fixtures_dir, tmp_path):
    fixture = fixtures_dir / "nvml" / "hgx-h100.json"
    proc = run_verify(repo_root, tmp_path, fixture, loaded_version(fixture) if fixture.exists() else "0")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_another_driver_loaded_fails_with_both_versions(repo_root, fixtures_dir, tmp_path):
    fixture = fixtures_dir / "nvml" / "hgx-h100.json"
    proc = run_verify(repo_root, tmp_path, fixture, "570.999.01")
    assert proc.returncode != 0
    assert "Wanted 570.999.01" in proc.stdout
    assert "NVML reports driver %s" % loaded_version(fixture) in proc.stdout.replace("\n        ", " ")
