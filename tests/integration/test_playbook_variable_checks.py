"""Every playbook checks its variables first: a typo stops the run before any task that could change anything.

Each case copies inventories/demo (with a link to tests/ so its fixture paths
resolve), misspells one variable in a group_vars file, and runs one playbook
with --check. Without the check the misspelt variable is simply never read:
upgrade.yml --check returned 0 and the H100 upgrades disappeared. The message
is check_variables' own (the same as plan_fleet.yml's): the misspelt name, the
variable meant, the hosts and the file; and no other task ran.
"""
import os
import re
import subprocess
import sys

import pytest

# The same copy of inventories/demo, and the same way to break one of its group_vars files.
from test_plan_fleet_refusals import _append, site  # noqa: F401 pylint: disable=unused-import

pytestmark = pytest.mark.slow
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
H100 = "4 hosts: hgx-h100-01, hgx-h100-02, hgx-h100-03, hgx-h100-04"
CHECK_TASK = "Refuse unknown role and gpuops_* variables"


def _run(repo_root, site, playbook):
    out = site / "out"
    proc = subprocess.run(
        [PLAYBOOK, "-i", str(site / "inventories" / "demo" / "hosts.yml"), "playbooks/%s.yml" % playbook, "--check",
         "-e", "gpuops_k8s_render_dir=%s" % (out / "render")],
        cwd=str(repo_root), capture_output=True, text=True, check=False, timeout=300,
        env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    return proc, out


@pytest.mark.parametrize("playbook, group, typo, value, meant, where, hosts", [
    ("upgrade", "hgx_h100", "nvidia_driver_verison", '"580.82.07"', "nvidia_driver_version", "role nvidia_driver", H100),
    ("upgrade", "all", "gpuops_upgrade_serail", '"25%"', "gpuops_upgrade_serial", "platform-wide (meta/variables.yml)",
     "11 hosts: "),
    ("health", "all", "gpu_health_taint_efect", "NoExecute", "gpu_health_taint_effect", "role gpu_health",
     "11 hosts: "),
    ("kubelet_tuning", "hgx_h100", "kubelet_tuning_cpu_manager_polcy", "static", "kubelet_tuning_cpu_manager_policy",
     "role kubelet_tuning", H100),
    ("dcgm_diag", "gpu_nodes", "dcgm_diag_levle", "3", "dcgm_diag_level", "role dcgm_diag", "10 hosts: "),
    ("mig", "h200_mig", "mig_configs", "[]", "mig_config", "role mig", "host h200-mig-01"),
])
def test_a_typo_stops_the_playbook_before_any_change(repo_root, site, playbook, group, typo, value, meant, where, hosts):
    vars_file = _append(site, group, "%s: %s\n" % (typo, value))
    proc, out = _run(repo_root, site, playbook)
    assert proc.returncode == 2, proc.stdout[-3000:]
    text = proc.stdout
    line = re.search(r"^\s*(%s \(.*)$" % re.escape(typo), text, re.M)
    assert line, text[-3000:]
    line = line.group(1)
    assert line.startswith("%s (%s" % (typo, hosts)), line
    assert line.endswith("; set in %s): no such variable in %s, so it would be ignored; did you mean %s?"
                         % (vars_file, where, meant)), line
    # The check is the only task that ran: nothing was loaded, rendered, drained or planned.
    tasks = re.findall(r"^TASK \[(.*?)\]", text, re.M)
    assert tasks == [CHECK_TASK], tasks
    assert not out.exists(), sorted(str(p) for p in out.rglob("*"))


ROLLING = ("nodes.yml", "upgrade.yml", "health.yml", "kubelet_tuning.yml", "dcgm_diag.yml", "mig.yml")


def test_the_check_is_the_first_play_of_every_playbook(repo_root):
    """A play of its own, first, with one task run once for every host of the run: the batches below (serial)
    start only after every host's variables passed, and a merge of the plays below cannot reorder it."""
    import yaml

    seen = []
    for path in sorted((repo_root / "playbooks").glob("*.yml")):
        plays = yaml.safe_load(path.read_text())
        first = plays[0]
        imported = first.get("ansible.builtin.import_playbook", first.get("import_playbook"))
        if imported:
            assert imported in ROLLING, path.name  # site.yml: nodes.yml checks first
            continue
        tasks = first.get("pre_tasks", []) + first.get("tasks", [])
        if path.name == "cluster.yml":
            # One play on the control host: the check follows only the API discovery, before the first plan or change.
            tasks = first["tasks"][0]["block"]
            assert "gpuops.platform.check_variables" in tasks[1], path.name
            continue
        assert "gpuops.platform.check_variables" in tasks[0], path.name
        if path.name in ROLLING:
            seen.append(path.name)
            assert len(tasks) == 1 and tasks[0].get("run_once") is True, path.name
            assert "ansible_play_hosts_all" in tasks[0]["gpuops.platform.check_variables"]["hosts"], path.name
            assert plays[1]["hosts"] == first["hosts"] or path.name == "health.yml", path.name
    assert sorted(seen) == sorted(ROLLING)
