"""A value of the wrong type stops every playbook at its first task, named as the operator set it.

`gpuops_driver_version: 570.190` in an extra-vars file is the YAML float 570.19:
plan_fleet.yml, upgrade.yml --check and nodes.yml --check copied it with
`{{ gpuops_driver_version | string }}` and planned a downgrade of every node to
"570.19". Now check_variables refuses it before any play copies it, naming
gpuops_driver_version (not nvidia_driver_version, which it would have been
copied to) and the file or the command line that set it; no other task runs
and nothing is written. The same for batch sizes of 0 and for any other
version written as a number.
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
CHECK_TASK = "Refuse unknown role and gpuops_* variables"
FLOAT = ("gpuops_driver_version is the number 570.19, not a string: YAML reads an unquoted version as a number "
         "(570.190 becomes 570.19, 570.10 becomes 570.1), so quote it, such as gpuops_driver_version: \"570.172.08\"")


def _run(repo_root, site, playbook, *extra):
    out = site / "out"
    proc = subprocess.run(
        [PLAYBOOK, "-i", str(site / "inventories" / "demo" / "hosts.yml"), "playbooks/%s.yml" % playbook, "--check",
         "-e", "gpuops_fleet_report_dir=%s" % (out / "fleet"), "-e", "gpuops_k8s_render_dir=%s" % (out / "render")]
        + list(extra),
        cwd=str(repo_root), capture_output=True, text=True, check=False, timeout=300,
        env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    return proc, out


def _refused_first(proc, out):
    """Refused (rc 2) by the check, the only task that ran, with nothing written."""
    assert proc.returncode == 2, proc.stdout[-3000:]
    tasks = re.findall(r"^TASK \[(.*?)\]", proc.stdout, re.M)
    assert tasks == [CHECK_TASK], tasks
    assert not out.exists(), sorted(str(p) for p in out.rglob("*"))
    assert "Finalization of task args" not in proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.parametrize("playbook", ["plan_fleet", "upgrade", "nodes"])
def test_a_float_driver_version_in_an_extra_vars_file_is_refused_before_it_is_copied(repo_root, site, playbook):
    extra = site / "survey.yml"
    extra.write_text("gpuops_driver_version: 570.190\n")
    text = _refused_first(*_run(repo_root, site, playbook, "-e", "@%s" % extra))
    assert "%s (set in extra vars file %s)" % (FLOAT, extra) in text, text[-3000:]
    # Reported as the operator's variable, never as the one a play would have copied it to.
    assert "nvidia_driver_version is" not in text and "570.19-" not in text


def test_a_float_driver_version_on_the_command_line_is_refused(repo_root, site):
    text = _refused_first(*_run(repo_root, site, "plan_fleet", "-e", '{"gpuops_driver_version": 570.190}'))
    assert "%s (set in extra vars (-e on the command line))" % FLOAT in text, text[-3000:]


def test_a_driver_version_that_is_no_version_is_reported_as_gpuops_driver_version(repo_root, site):
    """Not as nvidia_driver_version with the pools' group_vars as its source (what the copy gave)."""
    extra = site / "survey.yml"
    extra.write_text('gpuops_driver_version: "570.x"\n')
    text = _refused_first(*_run(repo_root, site, "upgrade", "-e", "@%s" % extra))
    assert ("gpuops_driver_version '570.x' is not a driver version: set the full version, quoted, such as "
            "\"570.172.08\" (set in extra vars file %s)" % extra) in text, text[-3000:]
    assert "group_vars" not in text


def test_a_chart_version_written_as_a_number_is_refused_naming_its_file(repo_root, site):
    vars_file = site / "inventories" / "demo" / "group_vars" / "k8s_control" / "k8s.yml"
    vars_file.write_text(vars_file.read_text() + "kueue_chart_version: 0.20\n")
    text = _refused_first(*_run(repo_root, site, "plan_fleet"))
    assert ("kueue_chart_version is a number 0.2, not a string: YAML reads an unquoted version as a number (1.10 "
            "becomes 1.1), so quote it as written, such as kueue_chart_version: \"1.10\" (host localhost; set in %s)"
            % vars_file) in text, text[-3000:]


@pytest.mark.parametrize("serial, playbooks", [("0", ["plan_fleet", "upgrade"]), ("-1", ["upgrade"]),
                                               ('"0%"', ["upgrade"])])
def test_an_upgrade_serial_of_zero_or_less_is_refused(repo_root, site, serial, playbooks):
    """0 or less put every node in one wave; "100%" says that. Refused where the waves are cut, before any change."""
    vars_file = _append(site, "gpu_nodes", "gpuops_upgrade_serial: %s\n" % serial)
    for playbook in playbooks:
        proc, out = _run(repo_root, site, playbook)
        assert proc.returncode == 2, proc.stdout[-3000:]
        assert ("gpuops_upgrade_serial '%s' is not above 0: set a number of hosts per wave, or \"100%%\" for every "
                "host at once (10 hosts: " % serial.strip('"')) in proc.stdout, proc.stdout[-3000:]
        assert "; set in %s)" % vars_file in proc.stdout
        assert "PLAY [Upgrade the NVIDIA driver and toolkit, wave by wave]" not in proc.stdout
        assert not out.exists(), sorted(str(p) for p in out.rglob("*"))


@pytest.mark.parametrize("playbook", ["nodes", "mig"])
def test_a_play_serial_of_zero_is_refused_at_the_first_task(repo_root, site, playbook):
    variable = "gpuops_%s_serial" % playbook
    vars_file = _append(site, "gpu_nodes", "%s: 0\n" % variable)
    text = _refused_first(*_run(repo_root, site, playbook))
    assert "%s '0' is not above 0" % variable in text and "; set in %s)" % vars_file in text, text[-3000:]


def _add_host(site, name):
    hosts = site / "inventories" / "demo" / "hosts.yml"
    text = hosts.read_text()
    assert "            l40s-[01:04]:\n" in text
    hosts.write_text(text.replace("            l40s-[01:04]:\n", "            l40s-[01:04]:\n            %s:\n" % name))


NODE_NAME = ("Kubernetes node name 'L40S-01' (the inventory host name) is not a lowercase RFC 1123 name (a-z, 0-9, '-' "
             "and '.', starting and ending with a letter or digit, at most 253 characters), so no node of the cluster "
             "has it: name the host as its Kubernetes node is named, or set gpu_nodes_node_name (host L40S-01")


def test_an_upper_case_node_name_is_refused_by_the_plan(repo_root, site):
    """L40S-01 beside l40s-01 was planned and put in a wave: no Kubernetes node has that name."""
    _add_host(site, "L40S-01")
    proc, out = _run(repo_root, site, "plan_fleet")
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert NODE_NAME in proc.stdout, proc.stdout[-3000:]
    assert not out.exists(), sorted(str(p) for p in out.rglob("*"))


@pytest.mark.parametrize("playbook", ["upgrade", "nodes"])
def test_an_upper_case_node_name_is_refused_in_check_mode(repo_root, site, playbook):
    _add_host(site, "L40S-01")
    text = _refused_first(*_run(repo_root, site, playbook))
    assert NODE_NAME in text, text[-3000:]


def test_a_node_name_variable_is_checked_and_named_with_its_file(repo_root, site):
    vars_file = _append(site, "h200_mig", "gpu_nodes_node_name: H200_MIG\n")
    text = _refused_first(*_run(repo_root, site, "upgrade"))
    assert ("Kubernetes node name 'H200_MIG' (gpu_nodes_node_name) is not a lowercase RFC 1123 name" in text
            and "set gpu_nodes_node_name to the node's name as Kubernetes has it (host h200-mig-01; set in %s)"
            % vars_file in text), text[-3000:]


def test_the_plans_last_failure_has_real_line_breaks(repo_root, site):
    """Its items were joined with a backslash and an n, shown as such."""
    path = site / "inventories" / "demo" / "group_vars" / "k8s_control" / "k8s.yml"
    path.write_text(path.read_text().replace("requests.nvidia.com/gpu: 16", "requests.nvidia.com/gpu: eight"))
    proc, _out = _run(repo_root, site, "plan_fleet")
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert re.search(r"1 quota\(s\) cannot be read:\n +- gpu_tenants_list: tenant inference:", proc.stdout), \
        proc.stdout[-3000:]
    assert "cannot be read:\\n" not in proc.stdout


def _k8s_vars(site, old, new):
    path = site / "inventories" / "demo" / "group_vars" / "k8s_control" / "k8s.yml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return path


def test_a_sharing_config_that_is_no_list_is_named_with_its_file_by_the_plan(repo_root, site):
    """gpu_sharing_configs: 3 gave "Elements value for option 'sharing_configs' is of type str"."""
    path = site / "inventories" / "demo" / "group_vars" / "k8s_control" / "k8s.yml"
    path.write_text(path.read_text() + "gpu_sharing_configs: 3\n")
    text = _refused_first(*_run(repo_root, site, "plan_fleet"))
    assert ("gpu_sharing_configs must be a list of mappings, got a whole number 3 (host localhost; set in %s)" % path
            in text), text[-3000:]
    assert "sharing_configs' is of type str" not in text


@pytest.mark.parametrize("old, new, line", [
    ("    replicas: 4\n", "    replicas: 1\n",
     "gpu_sharing_configs: sharing config 'ts4': replicas of nvidia.com/gpu is 1, but the device plugin refuses it"),
    ("    pod_security: baseline\n", "    pod_security: lax\n",
     "gpu_tenants_list: tenant research: pod_security must be one of privileged, baseline, restricted, got 'lax'"),
])
def test_a_sharing_or_tenant_refusal_is_the_collections_own_message(repo_root, site, old, new, line):
    path = _k8s_vars(site, old, new)
    proc, out = _run(repo_root, site, "cluster")
    assert proc.returncode == 2, proc.stdout[-3000:]
    said = re.search(r"^(?:\[ERROR\]: Task failed: Action failed: )?(%s.*)$" % re.escape(line), proc.stdout, re.M)
    assert said and said.group(1).endswith("(host localhost; set in %s)" % path), proc.stdout[-3000:]
    assert "Finalization of task args" not in proc.stdout + proc.stderr


def test_a_gpu_hosts_version_written_as_a_number_is_refused_by_the_planner(repo_root, site):
    """The GPU hosts run no play of plan_fleet.yml: the planner checks their versions as check_variables would."""
    vars_file = _append(site, "gpu_nodes", "container_toolkit_version: 1.17\n")
    proc, out = _run(repo_root, site, "plan_fleet")
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert ("container_toolkit_version is a number 1.17, not a string: YAML reads an unquoted version as a number "
            "(1.10 becomes 1.1), so quote it as written, such as container_toolkit_version: \"1.10\" (10 hosts: "
            in proc.stdout and "; set in %s)" % vars_file in proc.stdout), proc.stdout[-3000:]
    assert not out.exists(), sorted(str(p) for p in out.rglob("*"))
