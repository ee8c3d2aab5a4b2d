"""playbooks/mig.yml --check on a node whose PCI bus shows NVIDIA GPUs that NVML cannot read.

Such a node is not a node without GPUs: the mig role says why MIG is not planned
(the facts' reason: binding, library, driver) instead of "No NVIDIA GPU here", which
stays for a node without any. Both hosts are planned from recorded facts on the
local connection.
"""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

REASON = "NVML cannot read the 1 NVIDIA GPU(s) on the PCI bus: libnvidia-ml.so.1 not found: the NVIDIA driver is not installed"


def test_gpus_nvml_cannot_read_are_named_not_called_missing(repo_root, fixtures_dir, tmp_path):
    installed = repo_root / "collections" / "ansible_collections" / "gpuops" / "platform" / "roles" / "mig" / "tasks"
    assert (installed / "main.yml").read_text() == (repo_root / "roles" / "mig" / "tasks" / "main.yml").read_text(), \
        "the installed collection is older than roles/mig: rebuild it (scripts/bootstrap.sh)"
    unread = json.loads((fixtures_dir / "nvml" / "no-gpu.json").read_text())
    unread.update(pci_gpu_count=1, reason=REASON, health={"status": "critical", "reasons": [REASON]})
    (tmp_path / "unread.json").write_text(json.dumps(unread))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("""
all:
  vars:
    ansible_connection: local
    ansible_python_interpreter: %(python)s
    gpuops_nodes_plan_only: true
    mig_kubernetes: false
    mig_config_name: all-disabled
    mig_config: {version: v1, mig-configs: {all-disabled: [{devices: all, mig-enabled: false}]}}
  children:
    gpu_nodes:
      hosts:
        unread:
          gpuops_nvml_replay_file: %(unread)s
        cpu:
          gpuops_nvml_replay_file: %(cpu)s
""" % {"python": sys.executable, "unread": tmp_path / "unread.json", "cpu": fixtures_dir / "nvml" / "no-gpu.json"})
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
                           "playbooks/mig.yml", "--check"], cwd=str(repo_root), capture_output=True, text=True,
                          check=False, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert '"msg": "MIG is not planned here: %s"' % REASON in out
    assert out.count("No NVIDIA GPU here") == 1 and "No NVIDIA GPU here (libnvidia-ml.so.1 not found" in out
    note = out.split("TASK [gpuops.platform.mig : Note a node without NVIDIA GPU, or whose GPUs NVML cannot read]",
                     1)[1].split("TASK [", 1)[0]
    # Each host's result, from its "ok: [host] =>" line to the next host's.
    results = dict((part.split("]", 1)[0], part) for part in note.split("ok: [")[1:])
    assert sorted(results) == ["cpu", "unread"]
    assert "MIG is not planned here" in results["unread"] and "No NVIDIA GPU here" not in results["unread"]
    assert "No NVIDIA GPU here" in results["cpu"] and "MIG is not planned here" not in results["cpu"]
