"""Shared body of the kubernetes.core test stubs for the upgrade: a tiny cluster in two JSON files.

$MIG_EVENTS_DIR/nodes.json holds the Nodes (every host is one, schedulable,
unless the test stored it otherwise) and pods.json the Pods by node. A pod may
carry, outside its Kubernetes fields, ``x_pdb_blocked`` (its eviction is refused
with 429, as the API server does when a PodDisruptionBudget allows no disruption)
or ``x_stuck`` (evicted, but it never terminates). Every call is recorded.
"""
import contextlib
import fcntl
import json
import os
import sys
import tempfile

from ansible.module_utils.basic import _load_params


def params():
    return dict((k, v) for k, v in _load_params().items() if not k.startswith("_"))


def _path(name):
    return os.path.join(os.environ["MIG_EVENTS_DIR"], name)


def _load(name):
    if os.path.exists(_path(name)):
        with open(_path(name)) as handle:
            return json.load(handle)
    return {}


def _save(name, data):
    # Atomic: the stubs of several hosts run at once, and a reader must never see half a file.
    fd, tmp = tempfile.mkstemp(dir=os.environ["MIG_EVENTS_DIR"], prefix=".%s." % name)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle)
    os.replace(tmp, _path(name))


@contextlib.contextmanager
def _locked():
    """One read-modify-write of the cluster files at a time, as the API server serialises writes."""
    with open(_path(".cluster.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def load_node(name):
    return _load("nodes.json").get(name) or {"kind": "Node", "metadata": {"name": name, "labels": {}},
                                             "spec": {"unschedulable": False}}


def list_nodes():
    """Every Node, as a LIST answers: each GPU host of the run's inventory, and each one stored."""
    names = set(_load("nodes.json"))
    names.update(_load("inventory.json").get("all", {}).get("children", {}).get("gpu_nodes", {}).get("hosts", {}))
    return [load_node(name) for name in sorted(names)]


def save_node(node):
    with _locked():
        nodes = _load("nodes.json")
        nodes[node["metadata"]["name"]] = node
        _save("nodes.json", nodes)


def load_pods(node):
    return _load("pods.json").get(node, [])


def save_pods(node, pods):
    with _locked():
        data = _load("pods.json")
        data[node] = pods
        _save("pods.json", data)


def record(name, args, **result):
    with open(_path("events.jsonl"), "a") as handle:
        handle.write(json.dumps({"event": name, "args": args}, sort_keys=True, default=str) + "\n")
    print(json.dumps(result))
    sys.exit(0)
