"""make demo's combined run of plan_fleet.yml and cluster.yml on inventories/demo.

Every playbook's --check run on the demo, and its agreement with plan.json host by
host, are in test_decisions_agree.py, which runs each playbook once per inventory.
"""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_published_mig_resources_reach_the_kubernetes_layer_of_the_same_run(repo_root, tmp_path, fixtures_dir):
    """make demo's combined run: cluster.yml counts the DGX A100 as planned (all-balanced MIG), not as recorded."""
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "inventories/demo/hosts.yml",
               "playbooks/plan_fleet.yml", "playbooks/cluster.yml", "--check",
               "-e", "gpuops_fleet_report_dir=%s" % (tmp_path / "fleet"), "-e", "gpuops_k8s_render_dir=%s" % (tmp_path / "r"),
               "-e", "gpuops_fleet_publish_facts=true"]
    proc = subprocess.run(command, cwd=str(repo_root), capture_output=True, text=True, check=False, timeout=900,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1"))
    assert proc.returncode == 0, proc.stdout[-4000:]
    rendered = "".join(p.read_text() for p in sorted((tmp_path / "r").rglob("*.yaml")))
    plan = json.loads((tmp_path / "fleet" / "plan.json").read_text())
    # The recorded DGX A100 has MIG off (and no other demo GPU has 1g.10gb slices): only its planned
    # layout, published by the planner, gives cluster.yml 1g.10gb slices.
    recorded = json.loads((fixtures_dir / "nvml" / "dgx-a100.json").read_text())
    assert set(g["mig"]["current_mode"] for g in recorded["gpus"]) == {"disabled"}
    assert plan["summary"]["capacity"]["nvidia.com/mig-1g.10gb"] == 16
    assert "nvidia.com/mig-1g.10gb" in rendered
