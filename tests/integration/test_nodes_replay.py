"""nodes.yml --check from recorded facts: each host planned from its own facts, nothing read from this machine.

Two hosts of different recorded nodes (an HGX H100 through gpuops_fleet_facts_dir,
an L40S through gpuops_nvml_replay_file) run on the local connection, that is
on this very machine: any task that looked at the machine (PCI scan, packages,
services, container runtime) would plan this machine instead of the node. The
test asserts those tasks are skipped, that the commands they would call are
never run (a logging stub of each is first on PATH), and that each host's plan
follows its own facts.
"""
import os
import re
import shutil
import stat
import sys

import subprocess

import pytest

pytestmark = pytest.mark.slow

READERS = ["dpkg-query", "dpkg", "apt-get", "apt-cache", "rpm", "dnf", "systemctl", "lspci", "mokutil", "modinfo",
           "nvidia-smi", "nvidia-ctk", "containerd", "uname"]
# Tasks that read the machine they run on; with replayed facts they must not run.
MACHINE_TASKS = ["gpuops.platform.node_preflight : Check the GPU node",
                 # The driver's node tasks and the container toolkit's role are not even entered: their tasks never show.
                 "gpuops.platform.nvidia_driver : Install, pin and load the driver on the node",
                 "Install the container toolkit and configure the container runtime"]


def _tasks(stdout):
    """{task name: [result lines]} from the default callback's output."""
    out, current = {}, None
    for line in stdout.splitlines():
        head = re.match(r"^TASK \[(.*)\] \**$", line)
        if head:
            current = out.setdefault(head.group(1), [])
        elif current is not None and re.match(r"^(ok|changed|skipping|fatal|failed|included): ", line):
            current.append(line)
    return out


@pytest.fixture(scope="module")
def run(repo_root, fixtures_dir, tmp_path_factory):
    installed = repo_root / "collections" / "ansible_collections" / "gpuops" / "platform"
    assert installed.is_dir(), "run scripts/bootstrap.sh first: ansible-playbook needs the installed collection"
    tmp = tmp_path_factory.mktemp("replay")
    replay_dir, stubs, log = tmp / "facts", tmp / "bin", tmp / "calls.log"
    replay_dir.mkdir()
    stubs.mkdir()
    shutil.copy(str(fixtures_dir / "nvml" / "hgx-h100.json"), str(replay_dir / "gpu-a.json"))
    for name in READERS:
        stub = stubs / name
        stub.write_text("#!/bin/sh\necho \"%s $*\" >> '%s'\nexit 1\n" % (name, log))
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    inventory = tmp / "hosts.yml"
    inventory.write_text("""
all:
  vars:
    ansible_connection: local
    ansible_python_interpreter: %(python)s
    gpuops_nodes_plan_only: true
    gpuops_nodes_become: false
    gpuops_fleet_facts_dir: %(replay_dir)s
    mig_kubernetes: false
  children:
    gpu_nodes:
      hosts:
        gpu-a:
          nvidia_driver_version: "570.195.03"
          mig_config_name: all-1g.10gb
          mig_config:
            version: v1
            mig-configs:
              all-1g.10gb: [{devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 7}}]
        gpu-b:
          gpuops_nvml_replay_file: %(l40s)s
          nvidia_driver_branch: "570"
""" % {"python": sys.executable, "replay_dir": replay_dir, "l40s": fixtures_dir / "nvml" / "l40s.json"})
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", PATH="%s:%s" % (stubs, os.environ["PATH"]))
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
         "playbooks/nodes.yml", "--check", "-e", "gpuops_mig_serial=100%"],
        cwd=str(repo_root), capture_output=True, text=True, check=False, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc.stdout, log, replay_dir


def test_nothing_is_read_from_the_machine_running_the_play(run):
    stdout, log, _replay_dir = run
    assert not log.exists(), "commands run on the controller: %s" % log.read_text()
    tasks = _tasks(stdout)
    for name in MACHINE_TASKS:
        assert tasks[name] and all(line.startswith("skipping: ") for line in tasks[name]), (name, tasks[name])
    assert not [name for name in tasks if name.startswith("gpuops.platform.container_toolkit : ")]
    assert "gpuops.platform.nvidia_driver : Install, pin and check the NVIDIA driver" not in tasks
    # Read on the controller by the one facts source of every playbook (nodes.yml, then mig.yml); nvml_facts never runs.
    loaded = tasks["Load the recorded facts, when the node is planned from them"]
    assert sorted(loaded) == ["ok: [gpu-a]"] * 2 + ["ok: [gpu-b]"] * 2
    gathered = tasks["Gather NVIDIA GPU facts (the Kubernetes layer and MIG read them)"]
    assert sorted(gathered) == ["skipping: [gpu-a]", "skipping: [gpu-b]"]


def _summary(stdout, host):
    block = stdout.split("TASK [Summarize the node]", 1)[1].split("PLAY [", 1)[0]
    part = block.split("ok: [%s] =>" % host, 1)[1]
    return re.split(r"\nok: \[", part, maxsplit=1)[0]


def test_each_host_is_planned_from_its_own_facts(run):
    stdout, _log, replay_dir = run
    a, b = _summary(stdout, "gpu-a"), _summary(stdout, "gpu-b")
    assert "PLAN: 8 GPU(s), 4 NVSwitch(es)" in a and "PLAN: 1 GPU(s), 0 NVSwitch(es)" in b
    assert "installed 570.172.08 -> 570.195.03, loaded 570.172.08" in a and "would change: upgrade" in a
    assert "reboot PENDING" in a and "reboot PENDING" not in b
    assert "no change" in b and "installed 570.172.08 -> 570.172.08" in b
    assert str(replay_dir / "gpu-a.json") in a and "l40s.json" in b
    tasks = _tasks(stdout)
    # Planned on the controller from gpu-a's recorded facts (mig_replay_plan), no module run: a change, as the
    # module reported it; gpu-b has no MIG config.
    planned = tasks["gpuops.platform.mig : Plan the MIG layout from the recorded facts"]
    assert sorted(planned) == ["changed: [gpu-a]", "skipping: [gpu-b]"]
    assert sorted(tasks["gpuops.platform.mig : Plan the MIG layout"]) == ["skipping: [gpu-a]", "skipping: [gpu-b]"]
    assert "nvidia.com/mig-1g.10gb: 56" in stdout


def test_changing_nodes_from_recorded_facts_is_refused(repo_root, run, tmp_path):
    _stdout, _log, replay_dir = run
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("gpu_nodes:\n  hosts:\n    gpu-a:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: %s\n      gpuops_fleet_facts_dir: %s\n"
                         "      gpuops_nodes_become: false\n" % (sys.executable, replay_dir))
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory), "playbooks/nodes.yml"],
        cwd=str(repo_root), capture_output=True, text=True, check=False, timeout=300,
        env=dict(os.environ, ANSIBLE_NOCOLOR="1"))
    assert proc.returncode != 0 and "is planned from recorded facts" in proc.stdout
    assert "Install, pin and check the NVIDIA driver" not in proc.stdout
