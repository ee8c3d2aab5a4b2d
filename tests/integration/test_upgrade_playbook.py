"""playbooks/upgrade.yml end to end on node doubles: order of operations, skips, failures, canary, plan.

Each GPU host is a fake node (the MIG tests' fake NVML, tests/integration/mig/stubs)
with a loaded kernel module and an installed user-space driver in files that
nvml_facts reads; the driver and toolkit roles are doubles (tests/integration/upgrade/roles)
that change what a package upgrade changes; hosts are reached over a local connection
that may be rebooted (connection_plugins/fakenode.py); kubernetes.core is a stub
with the upstream drain's outcomes. Every effect lands in one events file, in order.
"""
import json
import os
import pickle
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pynvml
import pytest

from fakes import nvml_nodes

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent / "upgrade"
MIG_STUBS = Path(__file__).resolve().parent / "mig" / "stubs"
OLD, NEW = "570.172.08", "580.82.07"
# Where the upgrade records each node's progress, as the GPU Operator's upgrade controller does.
STATE_LABEL = "gpuops.platform/driver-upgrade-state"
INITIAL = "gpuops.platform/driver-upgrade.node-initial-state.unschedulable"
UNITS = {"nvidia-persistenced": {"active": True, "holds_gpus": True},
         "dcgm": {"active": False, "holds_gpus": True},
         "kubelet": {"active": True}}


class Site(object):
    def __init__(self, root, repo_root):
        self.root = root
        self.repo_root = repo_root
        self.bin = root / "bin"
        self.bin.mkdir()
        scripts = {"systemctl": "import mig_harness\nsys.exit(mig_harness.systemctl(sys.argv[1:]))",
                   "fake-reboot": "import upgrade_harness\nsys.exit(upgrade_harness.reboot(sys.argv[1:]))"}
        for tool, body in scripts.items():
            path = self.bin / tool
            path.write_text("#!%s\nimport sys\n%s\n" % (sys.executable, body))
            path.chmod(0o755)
        self.hosts = {}
        self.pods = {}

    def node(self, name, model=None, loaded=OLD, installed=OLD, flags=None):
        state = self.root / name
        (state / "lib").mkdir(parents=True)
        model = model or nvml_nodes.l40s()
        model.driver_version = installed
        if installed != loaded:
            # What the real library does until the new module is loaded.
            model.init_error = pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH
        (state / "node.pickle").write_bytes(pickle.dumps(model))
        (state / "units.json").write_text(json.dumps(UNITS))
        (state / "kernel_version").write_text(loaded + "\n")
        (state / "lib" / ("libnvidia-ml.so.%s" % installed)).write_text("")
        (state / "boot_id").write_text(str(uuid.uuid4()) + "\n")
        (state / "flags.json").write_text(json.dumps(flags or {}))
        python = state / "python"
        python.write_text('#!/bin/sh\nMIG_FAKE_STATE=%s\nexport MIG_FAKE_STATE\nexec %s "$@"\n' % (state, sys.executable))
        python.chmod(0o755)
        self.hosts[name] = {"ansible_python_interpreter": str(python), "ansible_connection": "fakenode",
                            "ansible_host": str(state)}

    def pod(self, node, name, **flags):
        pod = {"metadata": {"name": name, "namespace": "team-a",
                            "ownerReferences": [{"kind": "ReplicaSet", "name": name[:-4]}]},
               "status": {"phase": "Running"}}
        pod.update(("x_" + k, v) for k, v in flags.items())
        self.pods.setdefault(node, []).append(pod)

    def model(self, name):
        return pickle.loads((self.root / name / "node.pickle").read_bytes())

    def cluster_node(self, name):
        return json.loads((self.root / "nodes.json").read_text())[name]

    def store_node(self, name, unschedulable=False, labels=None, annotations=None):
        """A Node as an earlier run (or an operator) left it in the cluster."""
        path = self.root / "nodes.json"
        nodes = json.loads(path.read_text()) if path.exists() else {}
        nodes[name] = {"kind": "Node", "metadata": {"name": name, "labels": dict(labels or {}),
                                                    "annotations": dict(annotations or {})},
                       "spec": {"unschedulable": unschedulable}}
        path.write_text(json.dumps(nodes))

    def play(self, extra=(), interrupt_when=None, **hostvars):
        """Run upgrade.yml; with ``interrupt_when(site)``, kill it (SIGKILL, every process) once that holds."""
        inventory = {"all": {
            "vars": dict({"gpu_upgrade_driver_version": NEW, "gpu_upgrade_become": False,
                          "gpu_upgrade_driver_role": "fake_driver", "gpu_upgrade_toolkit_role": "fake_toolkit",
                          "gpu_upgrade_toolkit_version": "1.18.0-1", "gpu_upgrade_reboot_timeout": 30,
                          "gpu_upgrade_gpu_clients": ["nvidia-persistenced", "dcgm", "kubelet"]}, **hostvars),
            "children": {
                "gpu_nodes": {"hosts": self.hosts},
                "k8s_control": {"hosts": {"control": {"ansible_connection": "local",
                                                      "ansible_python_interpreter": sys.executable}}},
            }}}
        (self.root / "inventory.json").write_text(json.dumps(inventory))
        (self.root / "pods.json").write_text(json.dumps(self.pods))
        events = self.root / "events.jsonl"
        if events.exists():
            events.unlink()
        env = dict(os.environ)
        env.update({
            "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join([str(HERE / "stubs" / "k8s"),
                                                         str(self.repo_root / ".cache" / "src"),
                                                         str(self.repo_root / "collections")]),
            "ANSIBLE_ROLES_PATH": str(HERE / "roles"),
            "ANSIBLE_CONNECTION_PLUGINS": str(HERE / "connection_plugins"),
            "PYTHONPATH": os.pathsep.join([str(HERE / "stubs" / "python"), str(MIG_STUBS / "python"),
                                           str(self.repo_root / "tests" / "unit")]),
            "PATH": os.pathsep.join([str(self.bin), env["PATH"]]),
            "UPGRADE_BIN": str(self.bin),
            "MIG_EVENTS_DIR": str(self.root),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOCAL_TEMP": str(self.root / "tmp"),
        })
        command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i",
                   str(self.root / "inventory.json"), str(self.repo_root / "playbooks" / "upgrade.yml")] + list(extra)
        if interrupt_when is None:
            proc = subprocess.run(command, cwd=str(self.repo_root), env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, universal_newlines=True, timeout=600, check=False)
        else:
            proc = self._interrupted(command, env, interrupt_when)
        lines = events.read_text().splitlines() if events.exists() else []
        return proc, [json.loads(line) for line in lines]

    def _interrupted(self, command, env, interrupt_when):
        # Its own session, so that the kill reaches the workers and the modules they run, as a lost controller would.
        with open(self.root / "interrupted.log", "w+") as log:
            proc = subprocess.Popen(command, cwd=str(self.repo_root), env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            deadline = time.time() + 300
            while proc.poll() is None and not interrupt_when(self) and time.time() < deadline:
                time.sleep(0.2)
            assert proc.poll() is None, "the run ended before it could be interrupted"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            log.seek(0)
            return subprocess.CompletedProcess(command, proc.returncode, log.read())


def effects(events):
    out = []
    for e in events:
        kind = e["event"]
        if kind == "k8s_drain":
            out.append("%s %s" % (e["args"]["state"], e["args"]["name"]))
        elif kind == "k8s":
            out.append("state %s %s" % (e["args"]["name"], e["args"]["definition"]["metadata"]["labels"][STATE_LABEL]))
        elif kind in ("stop", "start"):
            out.append("%s %s" % (kind, e["unit"]))
        elif kind == "driver":
            out.append("driver %s" % e["version"])
        elif kind == "toolkit":
            out.append("toolkit %s" % e["version"])
        elif kind == "reboot":
            out.append("reboot")
        elif kind == "nvml" and "nvml_facts" in e["module"]:
            out.append("nvml_facts")
    return out


@pytest.fixture
def site(tmp_path, repo_root):
    return Site(tmp_path, repo_root)


def test_upgrade_runs_drain_stop_upgrade_reboot_toolkit_verify_start_uncordon(site):
    site.node("gpu1")
    site.pod("gpu1", "train-7f9c")
    site.node("gpu2", installed=NEW, loaded=NEW)        # already there: no drain, nothing touched
    proc, events = site.play()
    assert proc.returncode == 0, proc.stdout
    assert effects(events) == [
        "nvml_facts",                                   # pre-check
        "state gpu1 drain-required",                    # recorded before the cordon
        "drain gpu1",
        "stop nvidia-persistenced", "stop kubelet",     # dcgm was not running: left alone
        "driver %s" % NEW,
        "nvml_facts",                                   # the loaded module is now older than the driver
        "reboot",
        "toolkit 1.18.0-1",                             # after the reboot: CDI needs the new driver loaded
        "state gpu1 validation-required",
        "nvml_facts",                                   # verify
        # the reboot brought the clients back up: nothing left to start
        "uncordon gpu1",
        "state gpu1 upgrade-done",
        "nvml_facts",                                   # gpu2's pre-check, and nothing else
    ]
    drain = [e for e in events if e["event"] == "k8s_drain"][0]["args"]
    assert drain["delete_options"]["disable_eviction"] is False and drain["delete_options"]["wait_timeout"] == 900
    # The driver role neither reboots nor verifies: the upgrade decides both.
    assert [e["options"] for e in events if e["event"] == "driver"] == [{"reboot": False, "verify": False}]
    out = " ".join(proc.stdout.split())
    assert "gpu1: upgrade and reboot (driver %s -> %s; 1 GPU(s))" % (OLD, NEW) in out
    assert "gpu1: driver %s -> %s, rebooted, 1 GPU(s) verified" % (OLD, NEW) in out
    assert "gpu2: skip (driver %s is installed and loaded; 1 GPU(s))" % NEW in out
    assert site.model("gpu1").kernel_module_version == NEW
    assert site.cluster_node("gpu1")["spec"]["unschedulable"] is False
    # Done: the label says so, and the node's first state is forgotten.
    assert site.cluster_node("gpu1")["metadata"]["labels"][STATE_LABEL] == "upgrade-done"
    assert INITIAL not in site.cluster_node("gpu1")["metadata"].get("annotations", {})


def test_a_failed_canary_stays_cordoned_and_stops_the_rollout(site):
    site.node("gpu1", model=nvml_nodes.hgx_h100(), flags={"lose_gpu": True})   # a GPU does not come back
    site.node("gpu2")
    site.node("gpu3")
    # Batches of two after a canary of one: without the canary gpu2 would go with gpu1.
    proc, events = site.play(extra=["-e", "gpuops_upgrade_canary=true", "-e", "gpuops_upgrade_serial=2"])
    assert proc.returncode != 0
    out = " ".join(proc.stdout.split())
    assert "Driver upgrade to %s failed on gpu1 at step 'verify': 8 GPU(s) before, 7 after; missing: GPU-" % NEW in out
    assert "Node state: cordoned (gpu1)" in out and "The rollout stops here." in out
    steps = effects(events)
    assert steps[-2:] == ["start nvidia-persistenced", "start kubelet"] or "reboot" in steps
    assert "uncordon gpu1" not in steps and not any(("gpu2" in s or "gpu3" in s) for s in steps)
    assert site.cluster_node("gpu1")["spec"]["unschedulable"] is True


def test_drains_that_cannot_finish_and_a_local_node_are_stopped_with_the_reason(site):
    site.node("gpu1")
    site.pod("gpu1", "train-a1b2", stuck=True)          # evicted but never goes: the drain's wait times out
    site.node("gpu2")
    site.pod("gpu2", "serve-c3d4", pdb_blocked=True)    # the eviction is refused by its disruption budget
    site.node("gpu3")
    site.hosts["gpu3"]["ansible_connection"] = "local"  # never rebooted over a local connection
    proc, events = site.play(extra=["-e", "gpuops_upgrade_serial=3", "-e", "gpuops_upgrade_max_fail_percentage=100"],
                             gpu_upgrade_drain_timeout=5)
    assert proc.returncode != 0
    out = " ".join(proc.stdout.split())
    assert ("failed on gpu1 at step 'drain': the drain did not finish within 5 s (timeout reached while pods were "
            "still running.); pods blocking it: team-a/train-a1b2") in out
    assert ("failed on gpu2 at step 'drain': the drain did not finish within 5 s (Failed to delete pod "
            "team-a/serve-c3d4 due to: Too Many Requests: Cannot evict pod as it would violate the pod's disruption "
            "budget.); pods blocking it: team-a/serve-c3d4") in out
    # NVML refuses to start on the new library with the old module: the reason comes from nvml_facts.
    assert ("failed on gpu3 at step 'reboot': the loaded NVIDIA kernel module (%s) does not match the installed "
            "user-space driver (%s): an upgrade is waiting for a reboot, and this node is not rebooted (it is reached "
            "over a local connection)" % (OLD, NEW)) in out
    steps = effects(events)
    assert "reboot" not in steps and "cordon gpu2" in steps           # k8s_drain's own cordon is kept
    assert not any(s.startswith("uncordon") for s in steps)
    for name in ("gpu1", "gpu2", "gpu3"):
        assert site.cluster_node(name)["spec"]["unschedulable"] is True
    # Neither blocked node had its clients stopped or its driver touched.
    assert [s for s in steps if s.startswith("driver")] == ["driver %s" % NEW]


def test_check_mode_gives_the_plan_per_node_from_live_or_replayed_facts(site, fixtures_dir):
    site.node("gpu1")                                   # live: upgrade and reboot
    site.node("gpu2", installed=NEW, loaded=OLD)        # live: installed, waiting for a reboot
    site.node("gpu3")
    site.hosts["gpu3"]["gpuops_nvml_replay_file"] = str(fixtures_dir / "nvml" / "hgx-h100.json")
    # gpu3 reaches the API through a kubeconfig of its own: the plan's LIST, read through the others', is not its.
    site.hosts["gpu3"]["gpu_upgrade_k8s_kubeconfig"] = str(site.root / "other-kubeconfig")
    proc, events = site.play(extra=["--check", "-e", "gpuops_nodes_plan_only=true"])
    assert proc.returncode == 0, proc.stdout
    # A plan reads the Nodes with one LIST for all its waves (one node each here), and gpu3 its own Node.
    node_reads = [e["args"] for e in events if e["event"] == "k8s_info" and e["args"]["kind"] == "Node"]
    assert sorted(a.get("name") or "LIST" for a in node_reads) == ["LIST", "gpu3"], node_reads
    assert [a.get("kubeconfig") for a in node_reads if a.get("name")] == [str(site.root / "other-kubeconfig")]
    out = " ".join(proc.stdout.split())
    assert "gpu1: upgrade and reboot (driver %s -> %s; 1 GPU(s))" % (OLD, NEW) in out
    # The NVML library refuses to start with the old module loaded: no GPU listed.
    assert "gpu2: reboot (driver %s is installed but module %s is loaded; 0 GPU(s))" % (NEW, OLD) in out
    assert "gpu3: upgrade and reboot (driver %s -> %s; 8 GPU(s), from %s)" % (
        OLD, NEW, fixtures_dir / "nvml" / "hgx-h100.json") in out
    # gpu3's recorded facts are read on the controller (gpuops.platform.recorded_facts): no nvml_facts call.
    assert effects(events) == ["nvml_facts"] * 2
    assert site.model("gpu1").driver_version == OLD
    # A plan-only inventory refuses to run without --check.
    proc, events = site.play(extra=["-e", "gpuops_nodes_plan_only=true"])
    assert proc.returncode != 0 and "This inventory is plan-only" in " ".join(proc.stdout.split())
    assert events == []


def test_a_run_killed_in_the_middle_of_a_drain_is_finished_by_the_next_without_draining_finished_nodes(site):
    for name in ("gpu1", "gpu2", "gpu3"):
        site.node(name)
    site.pod("gpu2", "train-5d6e", hang=True)          # its eviction hangs: the run is killed during the drain
    (site.root / "hang").write_text("")

    def draining_gpu2(s):
        path = s.root / "nodes.json"
        return path.exists() and json.loads(path.read_text()).get("gpu2", {}).get("spec", {}).get("unschedulable")

    proc, events = site.play(extra=["-e", "gpuops_upgrade_serial=1"], interrupt_when=draining_gpu2)
    assert proc.returncode == -signal.SIGKILL
    (site.root / "hang").unlink()
    # gpu1 is done; gpu2 was left cordoned by the drain of the run that died; gpu3 was not reached.
    assert site.cluster_node("gpu1")["metadata"]["labels"][STATE_LABEL] == "upgrade-done"
    gpu2 = site.cluster_node("gpu2")
    assert gpu2["spec"]["unschedulable"] is True
    assert gpu2["metadata"]["labels"][STATE_LABEL] == "drain-required"
    assert gpu2["metadata"]["annotations"][INITIAL] == "false"
    assert "gpu3" not in json.loads((site.root / "nodes.json").read_text())

    site.pods["gpu2"] = [dict((k, v) for k, v in p.items() if k != "x_hang") for p in site.pods["gpu2"]]
    proc, events = site.play(extra=["-e", "gpuops_upgrade_serial=1"])
    assert proc.returncode == 0, proc.stdout
    out = " ".join(proc.stdout.split())
    assert ("gpu2: upgrade and reboot (driver %s -> %s; 1 GPU(s)); an earlier run stopped at drain-required and left "
            "it cordoned: this run finishes it, and uncordons it only once it is verified healthy" % (OLD, NEW)) in out
    steps = effects(events)
    # gpu1, finished by the run that died, is neither drained nor touched again.
    assert not any(s.endswith(" gpu1") or s.startswith("state gpu1") for s in steps)
    assert "gpu1: skip (driver %s is installed and loaded; 1 GPU(s))" % NEW in out
    # gpu2 is finished: drained again (its pods were never evicted), upgraded, and uncordoned, since the run
    # that cordoned it recorded that it was schedulable before.
    gpu2_steps = [s for s in steps if "gpu2" in s]
    assert gpu2_steps == ["state gpu2 drain-required", "drain gpu2", "state gpu2 validation-required",
                          "uncordon gpu2", "state gpu2 upgrade-done"]
    gpu2 = site.cluster_node("gpu2")
    assert gpu2["spec"]["unschedulable"] is False and INITIAL not in gpu2["metadata"]["annotations"]
    assert "gpu2: driver %s -> %s, rebooted, 1 GPU(s) verified, finishing the run that stopped at drain-required" % (
        OLD, NEW) in out
    assert site.cluster_node("gpu3")["metadata"]["labels"][STATE_LABEL] == "upgrade-done"


def test_a_node_left_cordoned_after_its_upgrade_is_named_and_uncordoned_only_once_healthy(site):
    site.node("gpu1", installed=NEW, loaded=NEW)        # upgraded and rebooted; the run died before the uncordon
    site.store_node("gpu1", unschedulable=True, labels={STATE_LABEL: "validation-required"},
                    annotations={INITIAL: "false"})
    sick = nvml_nodes.l40s()
    sick.gpus[0].remapped_rows = (0, 0, 0, 1)           # a row remapping failed: the GPU is critical
    site.node("gpu2", model=sick, installed=NEW, loaded=NEW)
    site.store_node("gpu2", unschedulable=True, labels={STATE_LABEL: "upgrade-failed"}, annotations={INITIAL: "false"})
    site.node("gpu3", installed=NEW, loaded=NEW)        # cordoned by an operator before the run that died
    site.store_node("gpu3", unschedulable=True, labels={STATE_LABEL: "validation-required"},
                    annotations={INITIAL: "true"})

    proc, events = site.play(extra=["--check"])
    assert proc.returncode == 0, proc.stdout
    out = " ".join(proc.stdout.split())
    for name, step in (("gpu1", "validation-required"), ("gpu2", "upgrade-failed")):
        assert ("%s: skip (driver %s is installed and loaded; 1 GPU(s)); an earlier run stopped at %s and left it "
                "cordoned: this run finishes it" % (name, NEW, step)) in out
    assert "(it was cordoned before that run: it stays cordoned)" in out
    assert [s for s in effects(events) if not s.startswith("nvml")] == []

    proc, events = site.play(extra=["-e", "gpuops_upgrade_serial=3", "-e", "gpuops_upgrade_max_fail_percentage=100"])
    assert proc.returncode != 0
    steps = effects(events)
    out = " ".join(proc.stdout.split())
    # Finished without a drain: the toolkit, the verification, the uncordon.
    assert [s for s in steps if "gpu1" in s] == ["state gpu1 validation-required", "uncordon gpu1",
                                                 "state gpu1 upgrade-done"]
    assert "gpu1: driver %s -> %s, no reboot, 1 GPU(s) verified, finishing the run that stopped at " \
           "validation-required" % (NEW, NEW) in out
    assert site.cluster_node("gpu1")["spec"]["unschedulable"] is False
    # Not healthy: it stays cordoned, and the failure is recorded again.
    assert "Driver upgrade to %s failed on gpu2 at step 'verify'" % NEW in out and "GPU health is critical" in out
    assert [s for s in steps if "gpu2" in s] == ["state gpu2 validation-required", "state gpu2 upgrade-failed"]
    assert site.cluster_node("gpu2")["spec"]["unschedulable"] is True
    assert site.cluster_node("gpu2")["metadata"]["labels"][STATE_LABEL] == "upgrade-failed"
    # Cordoned before the maintenance began: finished, and left cordoned.
    assert [s for s in steps if "gpu3" in s] == ["state gpu3 validation-required", "state gpu3 upgrade-done"]
    assert site.cluster_node("gpu3")["spec"]["unschedulable"] is True
