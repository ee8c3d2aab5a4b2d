"""inventories/sample: a Kubespray-style inventory whose commented settings are real variables, and that plans."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpuops.platform.plugins.plugin_utils import variable_check as cv

SAMPLE = "inventories/sample"
COMMENTED = re.compile(r"^# ([a-z][a-z0-9_]*):(.*)$")


def _uncommented(path):
    """The file with every commented-out setting (``# name: value`` and its indented lines) switched on."""
    out, inside = [], False
    for line in path.read_text().splitlines():
        if COMMENTED.match(line):
            out.append(line[2:])
            inside = True
        elif inside and line.startswith("#   "):
            out.append(line[2:])
        else:
            inside = False
    return yaml.safe_load("\n".join(out)) or {}


def test_every_commented_setting_is_a_variable_of_the_collection(repo_root):
    catalog = cv.load_catalog(str(repo_root))
    files = sorted((repo_root / SAMPLE / "group_vars").rglob("*.yml"))
    assert len(files) >= 3
    seen = {}
    for path in files:
        assert yaml.safe_load(path.read_text()) is None, "%s sets something: keep the sample commented" % path
        settings = _uncommented(path)
        assert settings, path
        problems = cv.unknown_variables(settings, catalog)
        assert problems == [], "%s: %s" % (path, problems)
        # gpuops_* and the role variables a site changes first are there.
        seen.update(settings)
    for name in ("gpuops_k8s_mig_strategy", "gpuops_driver_source", "nvidia_driver_branch", "nvidia_driver_version",
                 "mig_config_name", "gpu_sharing_configs", "gpu_tenants_list", "gpu_nodes_device_plugin_config"):
        assert name in seen, name


def test_the_sample_keeps_kubesprays_groups_and_adds_the_collections(repo_root):
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-inventory"), "-i",
                           SAMPLE + "/inventory.ini", "--list"], cwd=str(repo_root), capture_output=True, text=True,
                          check=True, timeout=120)
    groups = json.loads(proc.stdout)
    for group in ("kube_control_plane", "kube_node", "etcd", "k8s_cluster", "k8s_control", "gpu_nodes"):
        assert group in groups, group
    assert groups["k8s_control"]["children"] == ["kube_control_plane"]


@pytest.mark.slow
def test_the_sample_plans_from_recorded_facts(repo_root, fixtures_dir, tmp_path):
    facts = tmp_path / "facts"
    facts.mkdir()
    for host, fixture in (("gpu-a01", "hgx-h100"), ("gpu-a02", "hgx-h100"), ("gpu-b01", "l40s")):
        shutil.copy(str(fixtures_dir / "nvml" / ("%s.json" % fixture)), str(facts / ("%s.json" % host)))
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", SAMPLE + "/inventory.ini",
         "playbooks/plan_fleet.yml", "-e", "gpuops_fleet_facts_dir=%s" % facts,
         "-e", "gpuops_fleet_report_dir=%s" % (tmp_path / "report")],
        cwd=str(repo_root), capture_output=True, text=True, check=False, timeout=300,
        env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    assert proc.returncode == 0, proc.stdout[-3000:]
    plan = json.loads((tmp_path / "report" / "plan.json").read_text())
    assert plan["valid"] and sorted(plan["hosts"]) == ["gpu-a01", "gpu-a02", "gpu-b01"]
    assert plan["summary"]["capacity"] == {"nvidia.com/gpu": 17}
