"""A plan that is refused writes nothing: typos and bad driver settings stop plan_fleet.yml first.

Each case copies inventories/demo (with a link to tests/ so its fixture paths
resolve), breaks one variable in a group_vars file, and runs plan_fleet.yml
alone or with cluster.yml as `make demo` does. The message is the collection's
own, names the variable, its hosts in one group and the file that sets it.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


@pytest.fixture
def site(repo_root, tmp_path):
    installed = repo_root / "collections" / "ansible_collections" / "gpuops" / "platform"
    assert installed.is_dir(), "run scripts/bootstrap.sh first: ansible-playbook needs the installed collection"
    shutil.copytree(str(repo_root / "inventories" / "demo"), str(tmp_path / "inventories" / "demo"))
    (tmp_path / "tests").symlink_to(repo_root / "tests", target_is_directory=True)
    return tmp_path


def _append(site, group, text):
    path = site / "inventories" / "demo" / "group_vars" / group / "main.yml"
    path.write_text(path.read_text() + text)
    return path


def _run(repo_root, site, *playbooks):
    out = site / "out"
    proc = subprocess.run(
        [PLAYBOOK, "-i", str(site / "inventories" / "demo" / "hosts.yml")] + ["playbooks/%s.yml" % p for p in playbooks] +
        ["--check", "-e", "gpuops_fleet_report_dir=%s" % (out / "fleet"), "-e", "gpuops_k8s_render_dir=%s" % (out / "render")],
        cwd=str(repo_root), capture_output=True, text=True, check=False, timeout=300,
        env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    return proc, out


H100 = "4 hosts: hgx-h100-01, hgx-h100-02, hgx-h100-03, hgx-h100-04"


@pytest.mark.parametrize("playbooks", [["plan_fleet"], ["plan_fleet", "cluster"]])
def test_a_typo_stops_the_planner_before_it_writes_anything(repo_root, site, playbooks):
    vars_file = _append(site, "hgx_h100", 'nvidia_driver_verison: "570.195.03"\n')
    proc, out = _run(repo_root, site, *playbooks)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert not out.exists(), sorted(str(p) for p in out.rglob("*"))
    line = "nvidia_driver_verison (%s; set in %s): no such variable in role nvidia_driver, so it would be ignored; " \
           "did you mean nvidia_driver_version?" % (H100, vars_file)
    # One line for the four hosts, not one per host.
    assert line in proc.stdout and "(host hgx-h100-0" not in proc.stdout, proc.stdout[-3000:]
    assert "Finalization of task args" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("playbooks", [["plan_fleet"], ["plan_fleet", "cluster"]])
def test_a_bad_branch_is_refused_with_a_pinned_version_and_nothing_is_written(repo_root, site, playbooks):
    vars_file = _append(site, "hgx_h100", 'nvidia_driver_branch: "R570"\n')
    proc, out = _run(repo_root, site, *playbooks)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert not out.exists(), sorted(str(p) for p in out.rglob("*"))
    assert ("nvidia_driver_branch 'R570' is not a driver branch: set the major version only, such as \"570\" (%s; set in %s)"
            % (H100, vars_file)) in proc.stdout, proc.stdout[-3000:]
    assert "Finalization of task args" not in proc.stdout + proc.stderr


def test_an_unknown_platform_variable_on_a_gpu_host_is_refused(repo_root, site):
    """gpuops_* of the GPU hosts are read by the planner, so they are checked although those hosts run no play."""
    _append(site, "l40s_inference", "gpuops_nvml_replay_fiel: /nowhere.json\n")
    proc, out = _run(repo_root, site, "plan_fleet")
    assert proc.returncode == 2 and not out.exists(), proc.stdout[-3000:]
    assert "gpuops_nvml_replay_fiel (4 hosts: l40s-01, l40s-02, l40s-03, l40s-04; set in " in proc.stdout
    assert "did you mean gpuops_nvml_replay_file?" in proc.stdout


def test_the_demo_plans_with_normalised_paths(repo_root, site):
    proc, out = _run(repo_root, site, "plan_fleet")
    assert proc.returncode == 0, proc.stdout[-3000:]
    plan = json.loads((out / "fleet" / "plan.json").read_text())
    files = [h["facts_file"] for h in plan["hosts"].values()]
    assert files and all("/../" not in f and f.endswith(".json") for f in files), files


def test_the_summary_explains_replicas(repo_root, site):
    proc, _out = _run(repo_root, site, "plan_fleet")
    assert proc.returncode == 0, proc.stdout[-3000:]
    text = " ".join(proc.stdout.split())
    assert "45 GPUs" in text and "nvidia.com/gpu: 48" in text
    assert "nvidia.com/gpu counts 16 time-slicing replicas of 4 GPUs" in text
    assert "planned: 10 of 10 hosts" in text


def test_the_summary_agrees_with_the_hosts_that_cannot_be_planned(repo_root, tmp_path):
    """The example's half-MIG layout under the single strategy: the summary and the error say the same."""
    proc = subprocess.run(
        [PLAYBOOK, "-i", "inventories/example/hosts.yml", "-i", "inventories/example-offline.yml", "playbooks/plan_fleet.yml",
         "-e", "gpuops_fleet_report_dir=%s" % tmp_path, "-e", "gpuops_k8s_mig_strategy=single"],
        cwd=str(repo_root), capture_output=True, text=True, check=False, timeout=300,
        env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    assert proc.returncode == 2, proc.stdout[-3000:]
    text = " ".join(proc.stdout.split())
    h100 = ", ".join("hgx-h100-%02d.gpu.example.com" % i for i in range(1, 5))
    assert "planned: 6 of 10 hosts; cannot be planned: 4 (%s)" % h100 in text
    assert "invalid MIG layouts: 4 (%s);" % h100 in text and "invalid MIG layouts: none" not in text
    assert "4 host(s) cannot be planned" in text
    assert "set gpuops_k8s_mig_strategy: mixed" in text


def test_a_quota_that_cannot_be_read_is_an_error_of_the_plan(repo_root, site):
    """gpu_tenants_list's 'eight' used to be left out of the plan without a word; now the plan says so and fails."""
    path = site / "inventories" / "demo" / "group_vars" / "k8s_control" / "k8s.yml"
    text = path.read_text()
    assert "requests.nvidia.com/gpu: 16" in text
    path.write_text(text.replace("requests.nvidia.com/gpu: 16", "requests.nvidia.com/gpu: eight"))
    proc, out = _run(repo_root, site, "plan_fleet")
    assert proc.returncode == 2, proc.stdout[-3000:]
    said = " ".join(proc.stdout.replace("\\n", " ").split())
    error = ("gpu_tenants_list: tenant inference: quota requests.nvidia.com/gpu 'eight' is not a whole number of "
             "devices: write a number, such as 8")
    assert "1 quota(s) cannot be read: - %s" % error in said, said[-3000:]
    assert "host(s) cannot be planned" not in said and "planned: 10 of 10 hosts" in said
    plan = json.loads((out / "fleet" / "plan.json").read_text())
    assert plan["valid"] is False and plan["tenants"]["errors"] == [error] and plan["errors"] == []


@pytest.mark.parametrize("inventory", [["inventories/demo/hosts.yml"],
                                       ["inventories/example/hosts.yml", "inventories/example-offline.yml"]])
def test_the_shipped_inventories_do_not_overcommit_their_quotas(repo_root, tmp_path, inventory):
    """A clean run of the demo or the example says 'within capacity', so a real overcommit is never noise."""
    args = [PLAYBOOK]
    for source in inventory:
        args += ["-i", source]
    proc = subprocess.run(args + ["playbooks/plan_fleet.yml", "-e", "gpuops_fleet_report_dir=%s" % tmp_path],
                          cwd=str(repo_root), capture_output=True, text=True, check=False, timeout=300,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    assert proc.returncode == 0, proc.stdout[-3000:]
    plan = json.loads((tmp_path / "plan.json").read_text())
    tenants = plan["tenants"]
    assert [t["name"] for t in tenants["tenants"]] == ["research", "inference"]
    assert tenants["errors"] == [] and not tenants["overcommitted"], [
        r for r in tenants["resources"] + tenants["flavors"] if r["overcommitted"]]
    assert "quotas against capacity: within capacity" in proc.stdout
    # The inventories still give the inference tenant its 16 time-sliced GPUs.
    assert tenants["tenants"][1]["quota"]["nvidia.com/gpu"] == 16


def _laughs():
    """A billion laughs in under 1 KB: ten anchored lists of nine aliases; the last one written out holds 9**10 values."""
    lines = ['lol0: &lol0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += ["lol%d: &lol%d [%s]" % (n, n, ", ".join(["*lol%d" % (n - 1)] * 9)) for n in range(1, 10)]
    return "\n".join(lines) + "\n"


def test_laughs_beside_a_typo_in_group_vars_are_refused_in_seconds_naming_the_file(repo_root, site):
    vars_file = _append(site, "hgx_h100", 'nvidia_driver_verison: "570.195.03"\n' + _laughs())
    proc, out = _run(repo_root, site, "plan_fleet")
    assert proc.returncode == 2 and not out.exists(), proc.stdout[-3000:]
    assert "inventory variables file %s repeats itself through YAML aliases (under 'lol9')" % vars_file in proc.stdout, \
        proc.stdout[-3000:]


def test_a_mig_config_file_of_laughs_is_that_hosts_error_in_seconds(repo_root, site):
    mig_file = site / "laughs-mig.yaml"
    mig_file.write_text("version: v1\nmig-configs:\n  all-balanced:\n" + "".join(
        "    %s\n" % line for line in _laughs().splitlines()))
    _append(site, "dgx_a100", "mig_config: {}\nmig_config_file: %s\n" % mig_file)
    proc, _out = _run(repo_root, site, "plan_fleet")
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert ("dgx-a100-01: invalid MIG config (mig_config_file %s): mig_config_file %s repeats itself through YAML "
            "aliases" % (mig_file, mig_file)) in proc.stdout, proc.stdout[-3000:]
