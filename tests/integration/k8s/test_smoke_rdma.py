"""gpu_smoke_test's two-node RDMA test in apply mode: the objects run.yml
applies (checked against the Kubernetes schemas), the pods' scripts (checked
by bash and shellcheck), the run's SSH key kept out of output, and the
settings that would reach a shell refused."""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from k8s_support import ROOT, validate_builtin

pytestmark = pytest.mark.slow

PLAYBOOK = Path(__file__).with_name("smoke_objects.yml")
TWO_NODES = [{"name": "gpu-a"}, {"name": "gpu-b"}]
RDMA = {"gpu_smoke_test_rdma": True, "gpu_smoke_test_nodes": TWO_NODES, "gpu_smoke_test_rdma_gpus_per_node": 4,
        "gpu_smoke_test_rdma_env": {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "UCX_NET_DEVICES": "mlx5_0:1"},
        "gpu_smoke_test_rdma_networks": "rdma-net", "network_operator_rdma_resources": [{"name": "rdma_ib"}]}


def build(installed_collection, tmp_path, extra, verbosity="-v"):
    out = tmp_path / "objects.json"
    (tmp_path / "vars.json").write_text(json.dumps(dict(extra, smoke_out=str(out))))
    bindir = Path(sys.executable).parent
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(installed_collection), str(ROOT / "collections")]))
    proc = subprocess.run([str(bindir / "ansible-playbook"), verbosity, "-i", "localhost,", "-c", "local",
                           "-e", "ansible_python_interpreter=%s" % sys.executable, "-e", "@%s" % (tmp_path / "vars.json"),
                           str(PLAYBOOK)], cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=300, check=False)
    data = json.loads(out.read_text()) if proc.returncode == 0 else None
    return proc.returncode, proc.stdout, data


@pytest.fixture(scope="module")
def rdma(installed_collection, tmp_path_factory):
    rc, output, data = build(installed_collection, tmp_path_factory.mktemp("rdma"), RDMA, verbosity="-vvv")
    assert rc == 0, output[-4000:]
    return output, data


def _one(objects, kind, name):
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, [(o["kind"], o["metadata"]["name"]) for o in objects])
    return found[0]


def test_every_object_is_valid_kubernetes(rdma):
    output, data = rdma
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in data["objects"] if "rdma" in o["metadata"]["name"])
    assert kinds == [("Pod", "nccl-rdma-launcher"), ("Pod", "nccl-rdma-worker"), ("Secret", "nccl-rdma-ssh"),
                     ("Service", "nccl-rdma")]
    for obj in data["objects"]:
        validate_builtin(obj)


def test_the_private_key_never_reaches_the_output(rdma):
    output, data = rdma
    key = data["key"]["private_key"]
    body = key.splitlines()[1]
    assert len(body) > 20 and body not in output and base64.b64encode(key.encode()).decode()[:40] not in output
    for task in ("Make the RDMA test pods' SSH key for this run", "Build the smoke-test objects"):
        assert re.search(r"%s\] \*+\ntask path: [^\n]+\nok: \[localhost\] => \n\s+censored: " % re.escape(task), output), task


def test_the_pods_share_the_runs_key_pair(rdma):
    output, data = rdma
    secret = _one(data["objects"], "Secret", "nccl-rdma-ssh")
    assert base64.b64decode(secret["data"]["id_ed25519"]).decode() == data["key"]["private_key"]
    assert base64.b64decode(secret["data"]["id_ed25519.pub"]).decode() == data["key"]["public_key"]
    assert data["key"]["public_key"].startswith("ssh-ed25519 ")
    for role in ("launcher", "worker"):
        spec = _one(data["objects"], "Pod", "nccl-rdma-" + role)["spec"]
        assert {"name": "ssh", "secret": {"secretName": "nccl-rdma-ssh", "defaultMode": 0o400}} in spec["volumes"]


def test_two_pods_on_two_nodes_with_gpus_rdma_and_ipc_lock(rdma):
    output, data = rdma
    service = _one(data["objects"], "Service", "nccl-rdma")
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    for role in ("launcher", "worker"):
        pod = _one(data["objects"], "Pod", "nccl-rdma-" + role)
        meta, spec = pod["metadata"], pod["spec"]
        # The Service's selector picks both pods; their DNS names come from hostname.subdomain.
        assert all(meta["labels"][k] == v for k, v in service["spec"]["selector"].items())
        assert (spec["hostname"], spec["subdomain"]) == ("nccl-rdma-" + role, "nccl-rdma")
        assert meta["annotations"] == {"k8s.v1.cni.cncf.io/networks": "rdma-net"}
        anti = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert anti == [{"topologyKey": "kubernetes.io/hostname",
                         "labelSelector": {"matchLabels": service["spec"]["selector"]}}]
        container = spec["containers"][0]
        assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
        assert container["resources"]["limits"] == {"nvidia.com/gpu": 4, "rdma/rdma_ib": 1}
        assert container["env"] == [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "NCCL_IB_HCA", "value": "mlx5_0,mlx5_1"},
                                    {"name": "UCX_NET_DEVICES", "value": "mlx5_0:1"}]
        assert spec["restartPolicy"] == "Never" and spec["activeDeadlineSeconds"] == 600
        assert {"key": "gpu", "value": "true", "effect": "NoSchedule", "operator": "Equal"} in spec["tolerations"]
    # IPC_LOCK is outside the baseline level: the namespace enforces privileged, and still warns about baseline.
    labels = _one(data["objects"], "Namespace", "gpu-smoke-test")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "baseline"


def _script(data, role):
    command = _one(data["objects"], "Pod", "nccl-rdma-" + role)["spec"]["containers"][0]["command"]
    assert command[:2] == ["bash", "-c"]
    return command[2]


def test_the_launcher_runs_all_reduce_perf_over_both_pods(rdma):
    output, data = rdma
    script = _script(data, "launcher")
    assert "-np 8 \\\n  -H nccl-rdma-launcher.nccl-rdma:4,\"$worker\":4 $exports" in script
    assert "/opt/nccl-tests/build/all_reduce_perf -b 8 -e 1G -f 2 -g 1" in script
    assert "for v in NCCL_DEBUG PATH LD_LIBRARY_PATH NCCL_IB_HCA UCX_NET_DEVICES; do" in script
    assert "worker=nccl-rdma-worker.nccl-rdma" in script and 'ssh "$worker" touch /tmp/nccl-done' in script
    worker = _script(data, "worker")
    assert "/usr/sbin/sshd -p 2222" in worker and "until [ -e /tmp/nccl-done ]" in worker
    assert "install -m 600 /etc/nccl-ssh/id_ed25519.pub /root/.ssh/authorized_keys" in worker


@pytest.mark.parametrize("role", ["launcher", "worker"])
def test_the_scripts_are_valid_bash(rdma, role, tmp_path):
    output, data = rdma
    path = tmp_path / ("%s.sh" % role)
    path.write_text("#!/bin/bash\n" + _script(data, role))
    subprocess.run(["bash", "-n", str(path)], check=True)
    if shutil.which("shellcheck"):
        proc = subprocess.run(["shellcheck", "-s", "bash", str(path)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout


def test_one_gpu_node_gets_no_rdma_pods_and_no_key(installed_collection, tmp_path):
    rc, output, data = build(installed_collection, tmp_path, dict(RDMA, gpu_smoke_test_nodes=[{"name": "gpu-a"}]))
    assert rc == 0, output[-4000:]
    assert not [o for o in data["objects"] if "rdma" in o["metadata"]["name"]] and data["key"] == {}
    labels = _one(data["objects"], "Namespace", "gpu-smoke-test")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"


def test_without_rdma_the_namespace_stays_baseline(installed_collection, tmp_path):
    rc, output, data = build(installed_collection, tmp_path, {"gpu_smoke_test_nodes": TWO_NODES})
    assert rc == 0, output[-4000:]
    assert not [o for o in data["objects"] if "rdma" in o["metadata"]["name"]] and data["key"] == {}
    labels = _one(data["objects"], "Namespace", "gpu-smoke-test")["metadata"]["labels"]
    assert labels == {"app.kubernetes.io/managed-by": "gpuops.platform", "app.kubernetes.io/part-of": "gpu-smoke-test",
                      "pod-security.kubernetes.io/enforce": "baseline"}


REFUSED = {
    "binary": ({"gpu_smoke_test_rdma_test_binary": "/opt/all_reduce_perf; reboot"}, "(got /opt/all_reduce_perf; reboot)"),
    "env-name": ({"gpu_smoke_test_rdma_env": {"NCCL_IB_HCA": "x", "A;B": "y"}}, "(got ['NCCL_IB_HCA', 'A;B'])"),
    "nccl-debug": ({"gpu_smoke_test_rdma_env": {"NCCL_DEBUG": "WARN"}}, "without NCCL_DEBUG"),
    "max-bytes": ({"gpu_smoke_test_rdma_max_bytes": "1G $(id)"}, "(got 1G $(id))"),
    "gpus": ({"gpu_smoke_test_rdma_gpus_per_node": 9}, "from 1 to 8 (got 9)"),
    "resource": ({"gpu_smoke_test_rdma_resource": "rdma/a b"}, "(got rdma/a b)"),
}


@pytest.fixture(scope="module")
def refused(installed_collection, tmp_path_factory):
    """Every hostile value in one ansible-playbook run: one inventory host per
    case, with the RDMA settings, the value and its own smoke_out as host
    variables. Results as JSON, so each host's failure is one line."""
    tmp = tmp_path_factory.mktemp("refused")
    hosts = {name: dict(RDMA, **case[0], smoke_out=str(tmp / ("%s.json" % name)), ansible_connection="local",
                        ansible_python_interpreter=sys.executable) for name, case in REFUSED.items()}
    (tmp / "inventory.json").write_text(json.dumps({"all": {"hosts": hosts}}))
    bindir = Path(sys.executable).parent
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json",
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(installed_collection), str(ROOT / "collections")]))
    proc = subprocess.run([str(bindir / "ansible-playbook"), "-i", str(tmp / "inventory.json"), str(PLAYBOOK)],
                          cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300, check=False)
    failures = {m.group(1): json.loads(m.group(2))
                for m in re.finditer(r"^fatal: \[([^\]]+)\]: FAILED! => (\{.*\})$", proc.stdout, re.M)}
    recap = {m.group(1): int(m.group(2))
             for m in re.finditer(r"^(\S+)\s+:\s+ok=\d+\s+changed=\d+\s+unreachable=\d+\s+failed=(\d+)", proc.stdout, re.M)}
    return proc.returncode, proc.stdout, failures, recap, tmp


@pytest.mark.parametrize("name", list(REFUSED))
def test_values_that_reach_the_scripts_are_refused(refused, name):
    rc, output, failures, recap, tmp = refused
    shown = REFUSED[name][1]
    assert rc != 0 and recap.get(name) == 1 and not (tmp / ("%s.json" % name)).exists(), output[-3000:]
    flat = " ".join(failures[name]["msg"].split())
    assert "gpu_smoke_test: the RDMA test needs" in flat and shown in flat, flat
