"""Every playbook under playbooks/ runs --check on inventories/demo, from the demo's recorded facts, and agrees with plan.json.

The demo's GPU nodes are this machine under other names, each pinned to a
recorded fixture (gpuops_nvml_replay_file): every playbook must plan them from
those facts through the one facts source (gpuops.platform.recorded_facts), and
where two playbooks plan the same thing they must say the same: upgrade.yml
plans exactly the hosts, upgrades and reboots of plan.json, and health.yml
labels each node with plan.json's health.
"""
import json
import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def _playbooks(root):
    return sorted(p.stem for p in (root / "playbooks").glob("*.yml"))


@pytest.fixture(scope="module")
def demo(repo_root, tmp_path_factory):
    installed = repo_root / "collections" / "ansible_collections" / "gpuops" / "platform"
    assert installed.is_dir(), "run scripts/bootstrap.sh first: ansible-playbook needs the installed collection"
    tmp = tmp_path_factory.mktemp("demo")
    runs = {}

    def run(playbook):
        if playbook not in runs:
            command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i",
                       "inventories/demo/hosts.yml", "playbooks/%s.yml" % playbook, "--check",
                       "-e", "gpuops_fleet_report_dir=%s" % (tmp / "fleet"), "-e", "gpuops_k8s_render_dir=%s" % (tmp / "render")]
            proc = subprocess.run(command, cwd=str(repo_root), capture_output=True, text=True, check=False, timeout=900,
                                  env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
            runs[playbook] = (proc.returncode, proc.stdout + proc.stderr)
        return runs[playbook]
    run.tmp = tmp
    return run


def test_the_list_is_every_playbook(repo_root):
    assert set(_playbooks(repo_root)) >= {"nodes", "mig", "upgrade", "health", "kubelet_tuning", "dcgm_diag", "cluster",
                                          "plan_fleet", "record_facts", "site"}


@pytest.mark.parametrize("playbook", _playbooks(__import__("pathlib").Path(__file__).resolve().parents[2]))
def test_every_playbook_plans_the_demo_in_check_mode(demo, playbook):
    rc, out = demo(playbook)
    assert rc == 0, "%s.yml --check failed:\n%s" % (playbook, out[-4000:])
    # Nothing is read from this machine as if it were a node.
    assert "libnvidia-ml.so.1 not found" not in out and "no NVIDIA GPU facts" not in out


def _plan(demo):
    rc, out = demo("plan_fleet")
    assert rc == 0, out[-4000:]
    return json.loads((demo.tmp / "fleet" / "plan.json").read_text())


def test_upgrade_plans_what_plan_json_shows(demo):
    plan = _plan(demo)
    rc, out = demo("upgrade")
    assert rc == 0, out[-4000:]
    lines = dict((m.group(1), m.group(2)) for m in re.finditer(
        r"msg: '?([\w.-]+): (skip|upgrade and reboot|upgrade|reboot) \(", " ".join(out.split())))
    assert sorted(lines) == sorted(plan["hosts"]), lines
    upgrades = sorted(h for h, action in lines.items() if action.startswith("upgrade"))
    reboots = sorted(h for h, action in lines.items() if action.endswith("reboot"))
    assert upgrades == sorted(plan["summary"]["driver_changes"]) == ["hgx-h100-0%d" % i for i in range(1, 5)]
    assert reboots == sorted(plan["summary"]["reboot"])


def test_health_labels_what_plan_json_says(demo):
    plan = _plan(demo)
    rc, out = demo("health")
    assert rc == 0, out[-4000:]
    labelled = dict(re.findall(r"- '?([\w.-]+): (ok|warning|critical)\b", out))
    assert labelled == dict((h, p["health"]["status"]) for h, p in plan["hosts"].items())
    for host, status in labelled.items():
        assert "%s: %s; would change: label gpuops.io/gpu-health=%s" % (host, status, status) in " ".join(out.split())
