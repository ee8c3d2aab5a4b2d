"""playbooks/nodes.yml as the README's demo runs it: a plan on a machine without a GPU.

The run must succeed, write none of the files the driver manages, and end with
the per-host summary saying what would change.
"""

import os
import shutil
import subprocess

import pytest

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not shutil.which("apt-get"), reason="the local inventory plans for Debian")]

MANAGED = ["/etc/modprobe.d/gpuops-blacklist-nouveau.conf", "/etc/apt/preferences.d/gpuops-nvidia-driver",
           "/etc/apt/apt.conf.d/51gpuops-nvidia-driver"]


@pytest.mark.parametrize("extra", [[], ["--check", "-e", "gpuops_nodes_plan_only=false"]])
def test_plan_only_run_changes_nothing(repo_root, extra):
    installed = repo_root / "collections" / "ansible_collections" / "gpuops" / "platform"
    if not installed.is_dir():
        pytest.skip("run scripts/bootstrap.sh first: ansible-playbook needs the installed collection")
    before = {path: os.path.exists(path) for path in MANAGED}
    proc = subprocess.run(
        ["ansible-playbook", "-i", "inventories/local/hosts.yml", "playbooks/nodes.yml"] + extra,
        cwd=str(repo_root), capture_output=True, text=True,
        env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "PLAN:" in proc.stdout and "would change:" in proc.stdout
    assert "failed=0" in proc.stdout
    assert {path: os.path.exists(path) for path in MANAGED} == before
