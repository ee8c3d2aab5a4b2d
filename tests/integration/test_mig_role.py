"""playbooks/mig.yml end to end on doubles: the order of operations, no-op runs, failures.

Each inventory host is a fake GPU node: its modules import a fake pynvml backed by
a saved hardware model (tests/unit/fakes), systemctl and nvidia-smi are stubs, and
kubernetes.core is a stub collection. Every effect lands in one events file, in order.
"""
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fakes import nvml_nodes

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent / "mig"
STUBS = HERE / "stubs"

MIXED = {"version": "v1", "mig-configs": {
    "inference": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.71gb": 1, "1g.18gb": 4}}],
    "full-7g": [{"devices": [0], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}],
}}
UNITS = {"nvidia-persistenced": {"active": True, "holds_gpus": True},
         "dcgm": {"active": False, "holds_gpus": True},
         "kubelet": {"active": True}}


class Site(object):
    """A temporary fleet: hosts with fake GPUs, a control host, stub tools."""

    def __init__(self, root, repo_root):
        self.root = root
        self.repo_root = repo_root
        (root / "bin").mkdir()
        for tool, func in (("systemctl", "systemctl"), ("nvidia-smi", "nvidia_smi")):
            path = root / "bin" / tool
            path.write_text("#!%s\nimport sys\nimport mig_harness\nsys.exit(mig_harness.%s(sys.argv[1:]))\n"
                            % (sys.executable, func))
            path.chmod(0o755)
        self.hosts = {}

    def node(self, name, model, units=None, processes=()):
        state = self.root / name
        state.mkdir()
        for gpu in model.gpus:
            gpu.processes = list(processes)
        (state / "node.pickle").write_bytes(pickle.dumps(model))
        (state / "units.json").write_text(json.dumps(UNITS if units is None else units))
        python = state / "python"
        python.write_text('#!/bin/sh\nMIG_FAKE_STATE=%s\nexport MIG_FAKE_STATE\nexec %s "$@"\n' % (state, sys.executable))
        python.chmod(0o755)
        self.hosts[name] = str(python)

    def model(self, name):
        return pickle.loads((self.root / name / "node.pickle").read_bytes())

    def units(self, name):
        return json.loads((self.root / name / "units.json").read_text())

    def play(self, config_name, extra=(), config=None, **hostvars):
        inventory = {"all": {
            "vars": dict({"ansible_connection": "local", "mig_become": False, "mig_config_name": config_name,
                          "mig_config": config or MIXED}, **hostvars),
            "children": {
                "gpu_nodes": {"hosts": dict((h, {"ansible_python_interpreter": p}) for h, p in self.hosts.items())},
                "k8s_control": {"hosts": {"control": {"ansible_python_interpreter": sys.executable}}},
            }}}
        (self.root / "inventory.json").write_text(json.dumps(inventory))
        events = self.root / "events.jsonl"
        if events.exists():
            events.unlink()
        env = dict(os.environ)
        env.update({
            "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join([str(STUBS / "k8s"),
                                                         str(self.repo_root / ".cache" / "src"),
                                                         str(self.repo_root / "collections")]),
            "PYTHONPATH": os.pathsep.join([str(STUBS / "python"), str(self.repo_root / "tests" / "unit")]),
            "PATH": os.pathsep.join([str(self.root / "bin"), env["PATH"]]),
            "MIG_EVENTS_DIR": str(self.root),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOCAL_TEMP": str(self.root / "tmp"),
        })
        proc = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(self.root / "inventory.json"),
             str(self.repo_root / "playbooks" / "mig.yml")] + list(extra),
            cwd=str(self.repo_root), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            universal_newlines=True, timeout=600, check=False)
        lines = events.read_text().splitlines() if events.exists() else []
        return proc, [json.loads(line) for line in lines]


def effects(events):
    """The events that change something or mark a step, as short strings."""
    out = []
    for e in events:
        kind = e["event"]
        if kind == "k8s_drain":
            out.append("%s %s" % (e["args"]["state"], e["args"]["name"]))
        elif kind == "k8s":
            labels = e["args"]["definition"]["metadata"]["labels"]
            out.append("label %s %s" % (e["args"]["name"], json.dumps(labels, sort_keys=True)))
        elif kind in ("stop", "start"):
            out.append("%s %s" % (kind, e["unit"]))
        elif kind == "mig":
            out.append("mig %s" % e["change"][0])
        elif kind == "nvml" and "nvml_facts" in e["module"]:
            out.append("nvml_facts")
    return out


@pytest.fixture
def site(tmp_path, repo_root):
    return Site(tmp_path, repo_root)


def test_change_runs_drain_stop_apply_start_verify_label_uncordon(site):
    site.node("gpu1", nvml_nodes.h200_mig())
    proc, events = site.play("inference")
    assert proc.returncode == 0, proc.stdout
    assert effects(events) == [
        "nvml_facts",                                     # discovery
        "drain gpu1",
        "stop nvidia-persistenced", "stop kubelet",      # dcgm was not running: left alone
        "mig destroy_ci", "mig destroy_gi", "mig destroy_ci", "mig destroy_gi", "mig destroy_ci", "mig destroy_gi",
        "mig create_gi", "mig create_ci",
        "start nvidia-persistenced", "start kubelet",
        "nvml_facts",                                     # verification reads the GPUs again
        'label gpu1 {"nvidia.com/mig.config": "inference"}',
        "uncordon gpu1",
    ]
    drain = [e for e in events if e["event"] == "k8s_drain"][0]["args"]
    assert drain["delete_options"]["ignore_daemonsets"] is True
    gis = site.model("gpu1").gpus[0].mig.gpu_instances
    assert sorted((gi.start, gi.size) for gi in gis.values()) == [(0, 1), (1, 1), (2, 1), (3, 1), (4, 4)]
    assert site.units("gpu1")["kubelet"]["active"] and site.units("gpu1")["nvidia-persistenced"]["active"]
    assert "nvidia.com/mig-3g.71gb: 1" in proc.stdout and "nvidia.com/mig-1g.18gb: 4" in proc.stdout

    # the same config again: nothing is drained, stopped, changed or labelled (the label is right)
    proc, events = site.play("inference")
    assert proc.returncode == 0, proc.stdout
    assert effects(events) == ["nvml_facts"]
    assert [e["event"] for e in events if e["event"].startswith("k8s")] == ["k8s_info"]


def test_check_mode_plans_and_changes_nothing(site):
    site.node("gpu1", nvml_nodes.h200_mig())
    site.node("gpu2", nvml_nodes.h200_mig())
    # a plan-only inventory refuses to run without --check
    proc, events = site.play("inference", extra=["-e", "gpuops_nodes_plan_only=true"])
    assert proc.returncode != 0 and "This inventory is plan-only" in " ".join(proc.stdout.split())
    assert effects(events) == []
    proc, events = site.play("inference", extra=["--check", "-e", "gpuops_nodes_plan_only=true"])
    assert proc.returncode == 0, proc.stdout
    assert effects(events) == ["nvml_facts", "nvml_facts"]
    assert "1g.18gb@3, 3g.71gb@4" in " ".join(proc.stdout.split())    # the plan is shown
    assert len(site.model("gpu1").gpus[0].mig.gpu_instances) == 7
    # A plan drains nothing: both nodes in one batch (a change takes one node at a time, as below).
    batches = proc.stdout.split("PLAY [Partition the GPUs with MIG]")[1:]
    assert len(batches) == 1 and all("[gpu%d]" % n in batches[0] for n in (1, 2)), proc.stdout[-3000:]


def test_stopped_clients_let_the_reset_through(site):
    site.node("gpu1", nvml_nodes.hgx_h100())
    proc, events = site.play("full-7g")
    assert proc.returncode == 0, proc.stdout
    steps = effects(events)
    assert steps.index("stop nvidia-persistenced") < steps.index("mig reset") < steps.index("start nvidia-persistenced")
    assert steps[steps.index("mig set_mode"):steps.index("start nvidia-persistenced")] == [
        "mig set_mode", "mig reset", "mig create_gi", "mig create_ci"]
    gpus = site.model("gpu1").gpus
    assert [len(g.mig.gpu_instances) for g in gpus] == [1, 0, 0, 0, 0, 0, 0, 0]


def test_reset_blocked_by_a_client_stops_the_rollout(site):
    site.node("gpu1", nvml_nodes.hgx_h100())
    site.node("gpu2", nvml_nodes.hgx_h100())
    proc, events = site.play("full-7g", mig_gpu_clients=["kubelet"])   # persistenced keeps holding the GPU
    assert proc.returncode != 0
    out = " ".join(proc.stdout.split())
    assert "MIG config 'full-7g' failed on gpu1" in out
    assert "needs a reboot" in out and "drained and left cordoned" in out
    steps = effects(events)
    assert steps[-1] == "start kubelet"                  # started again although the change failed
    assert not any("gpu2" in s for s in steps)           # the next node was never touched
    assert "uncordon gpu1" not in steps and not any(s.startswith("label") for s in steps)


def test_apply_failure_restarts_clients_and_reports_the_node_state(site):
    site.node("gpu1", nvml_nodes.h200_mig(), processes=[(4242, 1 << 30)])
    proc, events = site.play("inference")
    assert proc.returncode != 0
    assert ("destroying GPU instance 11 (1g.18gb at 4) failed: In use by another client"
            in " ".join(proc.stdout.split()))
    assert "MIG layout now: GPU 0 NVIDIA H200: MIG enabled: 1g.18gb@0" in " ".join(proc.stdout.split())
    steps = effects(events)
    assert steps == ["nvml_facts", "drain gpu1", "stop nvidia-persistenced", "stop kubelet",
                     "start nvidia-persistenced", "start kubelet"]


def test_local_inventory_plans_a_recorded_node_without_a_gpu(repo_root, tmp_path):
    """The README's demo inventory: a plan for the recorded HGX H100, no change, no cluster."""
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path),
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(repo_root / ".cache" / "src"),
                                                         str(repo_root / "collections")]))
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "inventories/local/hosts.yml",
         "playbooks/mig.yml", "--check"], cwd=str(repo_root), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout
    out = " ".join(proc.stdout.split())
    assert "nvidia.com/mig-1g.10gb: 56" in out
    assert "GPU 7 NVIDIA H100 80GB HBM3: MIG enabled: 1g.10gb@0" in out
    assert re.search(r"Change the layout safely\] \**\s*skipping: \[localhost\]", out)
    assert "PLAY RECAP" in out and "failed=0" in out


def test_a_node_cordoned_before_the_run_stays_cordoned(site):
    site.node("precordoned", nvml_nodes.h200_mig())      # the k8s_info stub reports it unschedulable
    proc, events = site.play("inference")
    assert proc.returncode == 0, proc.stdout
    steps = effects(events)
    assert "drain precordoned" in steps and 'label precordoned {"nvidia.com/mig.config": "inference"}' in steps
    assert "uncordon precordoned" not in steps


def test_a_host_outside_the_cluster_is_changed_without_kubernetes_calls(site):
    site.node("standalone", nvml_nodes.h200_mig())     # the k8s_info stub finds no such Node
    proc, events = site.play("inference")
    assert proc.returncode == 0, proc.stdout
    steps = effects(events)
    assert steps[:3] == ["nvml_facts", "stop nvidia-persistenced", "stop kubelet"]
    assert "mig create_gi" in steps and not any(s.split()[0] in ("drain", "label", "uncordon") for s in steps)
    assert "node standalone is not in the cluster" in " ".join(proc.stdout.split())
