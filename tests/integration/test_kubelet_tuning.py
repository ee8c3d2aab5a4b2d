"""playbooks/kubelet_tuning.yml on a node double: file edits, restart only on change, the reset order.

The node is this machine over a local connection with its kubelet files in a
temporary folder, systemctl is the MIG tests' stub (units in units.json) wrapped
to record, at each stop/start, which policy the config holds and whether the
CPU manager checkpoint is still there; kubernetes.core is the upgrade tests' stub.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
SYSTEMCTL = """#!%s
import json, os, sys
import yaml
import mig_harness
args = [a.strip("'") for a in sys.argv[1:] if not a.startswith("--")]
if args and args[0] in ("start", "stop", "restart"):
    root = os.environ["MIG_FAKE_STATE"]
    with open(os.path.join(root, "config.yaml")) as handle:
        config = yaml.safe_load(handle)
    mig_harness.event("snapshot", verb=args[0], policy=config.get("cpuManagerPolicy", "none"),
                      cpu_state=os.path.exists(os.path.join(root, "cpu_manager_state")))
sys.exit(mig_harness.systemctl(sys.argv[1:]))
"""


class Node(object):
    def __init__(self, root, repo_root, fixtures_dir):
        self.root, self.repo_root = root, repo_root
        (root / "bin").mkdir()
        tool = root / "bin" / "systemctl"
        tool.write_text(SYSTEMCTL % sys.executable)
        tool.chmod(0o755)
        (root / "config.yaml").write_text((fixtures_dir / "kubelet" / "kubeadm-config.yaml").read_text())
        (root / "units.json").write_text(json.dumps({"kubelet": {"active": True}}))
        self.checkpoint()

    def checkpoint(self):
        (self.root / "cpu_manager_state").write_text('{"policyName":"none","defaultCpuSet":"","checksum":1}')

    def config(self):
        return yaml.safe_load((self.root / "config.yaml").read_text())

    def play(self, extra=(), **hostvars):
        inventory = {"all": {"vars": dict({
            "kubelet_tuning_config_path": str(self.root / "config.yaml"),
            "kubelet_tuning_state_dir": str(self.root), "kubelet_tuning_become": False}, **hostvars),
            "children": {
                "gpu_nodes": {"hosts": {"gpu1": {"ansible_connection": "local",
                                                 "ansible_python_interpreter": sys.executable}}},
                "k8s_control": {"hosts": {"control": {"ansible_connection": "local",
                                                      "ansible_python_interpreter": sys.executable}}}}}}
        (self.root / "inventory.json").write_text(json.dumps(inventory))
        events = self.root / "events.jsonl"
        if events.exists():
            events.unlink()
        env = dict(os.environ)
        env.update({
            "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join([str(HERE / "upgrade" / "stubs" / "k8s"),
                                                         str(self.repo_root / ".cache" / "src"),
                                                         str(self.repo_root / "collections")]),
            "PYTHONPATH": str(HERE / "mig" / "stubs" / "python"),
            "PATH": os.pathsep.join([str(self.root / "bin"), env["PATH"]]),
            "MIG_FAKE_STATE": str(self.root), "MIG_EVENTS_DIR": str(self.root),
            "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": str(self.root / "tmp"),
        })
        proc = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(self.root / "inventory.json"),
             str(self.repo_root / "playbooks" / "kubelet_tuning.yml")] + list(extra),
            cwd=str(self.repo_root), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            universal_newlines=True, timeout=600, check=False)
        lines = events.read_text().splitlines() if events.exists() else []
        return proc, [json.loads(line) for line in lines]


def steps(events):
    out = []
    for e in events:
        if e["event"] == "k8s_drain":
            out.append("%s %s" % (e["args"]["state"], e["args"]["name"]))
        elif e["event"] == "snapshot":
            out.append("%s kubelet (config %s, checkpoint %s)" % (
                e["verb"], e["policy"], "present" if e["cpu_state"] else "gone"))
    return out


@pytest.fixture
def node(tmp_path, repo_root, fixtures_dir):
    return Node(tmp_path, repo_root, fixtures_dir)


def test_policy_change_drains_writes_stops_removes_starts_uncordons_once(node):
    before = node.config()
    static = {"kubelet_tuning_cpu_manager_policy": "static", "kubelet_tuning_reserved_system_cpus": "0",
              "kubelet_tuning_topology_manager_policy": "single-numa-node"}

    proc, events = node.play(extra=["--check", "--diff"], **static)       # the plan: a diff, nothing else
    assert proc.returncode == 0, proc.stdout
    assert "+cpuManagerPolicy: static" in proc.stdout and events == [] and node.config() == before

    proc, events = node.play(**static)
    assert proc.returncode == 0, proc.stdout
    assert steps(events) == ["drain gpu1",
                             "stop kubelet (config static, checkpoint present)",
                             "start kubelet (config static, checkpoint gone)",
                             "uncordon gpu1"]
    after = node.config()
    assert after.pop("cpuManagerPolicy") == "static" and after.pop("reservedSystemCPUs") == "0"
    assert after.pop("topologyManagerPolicy") == "single-numa-node" and after == before   # the rest kept

    node.checkpoint()                                       # the kubelet wrote a new one
    proc, events = node.play(**static)                      # the same again: no drain, no restart
    assert proc.returncode == 0, proc.stdout
    assert events == [] and "changed=0" in proc.stdout

    # Only the topology policy: a restart, no drain, the checkpoint stays.
    proc, events = node.play(**dict(static, kubelet_tuning_topology_manager_policy="restricted"))
    assert proc.returncode == 0, proc.stdout
    assert steps(events) == ["restart kubelet (config static, checkpoint present)"]


def test_drop_in_mode_leaves_the_kubeadm_file_and_bad_cpus_change_nothing(node):
    before = (node.root / "config.yaml").read_text()
    conf_d = node.root / "kubelet.conf.d"
    conf_d.mkdir()
    proc, events = node.play(kubelet_tuning_config_dir=str(conf_d), kubelet_tuning_topology_manager_policy="best-effort")
    assert proc.returncode == 0, proc.stdout
    assert (node.root / "config.yaml").read_text() == before
    assert yaml.safe_load((conf_d / "90-gpuops-tuning.conf").read_text())["topologyManagerPolicy"] == "best-effort"
    assert steps(events) == ["restart kubelet (config none, checkpoint present)"]

    proc, events = node.play(kubelet_tuning_cpu_manager_policy="static", kubelet_tuning_reserved_system_cpus="4096")
    assert proc.returncode != 0 and events == []
    assert "reservedSystemCPUs 4096 names CPU(s) 4096 that this node does not have" in " ".join(proc.stdout.split())
    assert (node.root / "config.yaml").read_text() == before


def test_a_missing_config_file_is_the_error_and_names_the_role_variable(node):
    (node.root / "config.yaml").unlink()
    proc, events = node.play(["--check"], kubelet_tuning_cpu_manager_policy="static", kubelet_tuning_reserved_system_cpus="0")
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "has no attribute 'restart_required'" not in proc.stdout
    assert "cannot read the kubelet config %s" % (node.root / "config.yaml") in proc.stdout
    assert "kubelet_tuning_config_path" in proc.stdout and not events


def test_recorded_facts_plan_from_a_recorded_config_on_the_controller_and_change_nothing(node, fixtures_dir):
    recorded = node.root / "recorded-config.yaml"
    recorded.write_text(node.root.joinpath("config.yaml").read_text())
    (node.root / "config.yaml").write_text("not: the node's\n")     # the machine running the play is not the node
    before = recorded.read_text()
    replay = {"gpuops_nvml_replay_file": str(fixtures_dir / "nvml" / "hgx-h100.json"),
              "kubelet_tuning_cpu_manager_policy": "static", "kubelet_tuning_reserved_system_cpus": "0-1"}
    proc, events = node.play(["--check", "--diff"], kubelet_tuning_replay_config=str(recorded),
                             kubelet_tuning_replay_online_cpus="0-111", **replay)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "+cpuManagerPolicy: static" in proc.stdout and "changed=1" in proc.stdout and not events
    assert recorded.read_text() == before and node.config() == {"not": "the node's"}
    # The reserved CPUs are checked against the node's recorded CPUs, not this machine's.
    proc, _events = node.play(["--check"], kubelet_tuning_replay_config=str(recorded),
                              kubelet_tuning_replay_online_cpus="0-1", **dict(replay, kubelet_tuning_reserved_system_cpus="4-5"))
    assert proc.returncode == 2 and "kubelet config not changed" in proc.stdout, proc.stdout[-3000:]
    # Without a recorded config: reported as not planned, nothing read, the run succeeds.
    proc, events = node.play(["--check"], **replay)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "kubelet not planned" in proc.stdout and "kubelet_tuning_replay_config" in proc.stdout and not events
    # Never without --check.
    proc, events = node.play(**replay)
    assert proc.returncode == 2 and "is planned from recorded facts" in proc.stdout and not events
