"""playbooks/nodes.yml as the README's demo runs it: a plan on a machine without a GPU.

The run must succeed, write none of the files the driver manages, and end with
the per-host summary saying what would change.
"""

import os
import shutil
import subprocess

import pytest

from apt_support import CAN_HIDE, without_apt_pkg

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not shutil.which("apt-get"), reason="the local inventory plans for Debian")]

MANAGED = ["/etc/modprobe.d/gpuops-blacklist-nouveau.conf", "/etc/apt/preferences.d/gpuops-nvidia-driver",
           "/etc/apt/apt.conf.d/51gpuops-nvidia-driver"]


def _run(repo_root, extra, playbook="nodes.yml", wrap=list):
    installed = repo_root / "collections" / "ansible_collections" / "gpuops" / "platform"
    assert installed.is_dir(), "run scripts/bootstrap.sh first: ansible-playbook needs the installed collection"
    return subprocess.run(
        wrap(["ansible-playbook", "-i", "inventories/local/hosts.yml", "playbooks/" + playbook] + extra),
        cwd=str(repo_root), capture_output=True, text=True, check=False,
        env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))


def test_plan_only_inventory_refuses_to_run_without_check(repo_root):
    before = {path: os.path.exists(path) for path in MANAGED}
    proc = _run(repo_root, [])
    assert proc.returncode != 0
    assert "plan-only" in proc.stdout + proc.stderr
    assert "Install, pin and check the NVIDIA driver" not in proc.stdout
    assert {path: os.path.exists(path) for path in MANAGED} == before


@pytest.mark.parametrize("extra", [["--check"], ["--check", "-e", "gpuops_nodes_plan_only=false"]])
def test_plan_only_run_changes_nothing(repo_root, extra):
    before = {path: os.path.exists(path) for path in MANAGED}
    proc = _run(repo_root, extra)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "PLAN:" in proc.stdout and "would change:" in proc.stdout
    assert "failed=0" in proc.stdout
    assert {path: os.path.exists(path) for path in MANAGED} == before


@pytest.mark.skipif(not CAN_HIDE, reason="hiding apt_pkg from every Python takes root and unshare")
def test_the_readme_plan_runs_where_no_python_can_import_apt_pkg(repo_root):
    """site.yml --check on inventories/local on a host without python3-apt (#42): the container toolkit's
    packages are planned by apt-get -s, not by ansible.builtin.apt, which needs apt_pkg in check mode."""
    before = {path: os.path.exists(path) for path in MANAGED}
    proc = _run(repo_root, ["--check"], playbook="site.yml", wrap=without_apt_pkg)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "python3-apt must be installed" not in proc.stdout
    assert "failed=0" in proc.stdout and "Kubernetes layer" in proc.stdout
    assert {path: os.path.exists(path) for path in MANAGED} == before
