"""Shared body of the kubernetes.core test stubs: record each call and keep a tiny Node store.

Nodes live in $MIG_EVENTS_DIR/nodes.json. Every host is a cluster node except one
named "standalone"; "precordoned" starts unschedulable.
"""
import json
import os
import sys

from ansible.module_utils.basic import _load_params


def params():
    return dict((k, v) for k, v in _load_params().items() if not k.startswith("_"))


def _store():
    return os.path.join(os.environ["MIG_EVENTS_DIR"], "nodes.json")


def load_node(name):
    """The stored Node, or None when the host is not in the cluster."""
    if name == "standalone":
        return None
    nodes = {}
    if os.path.exists(_store()):
        with open(_store()) as handle:
            nodes = json.load(handle)
    return nodes.get(name) or {"kind": "Node", "metadata": {"name": name, "labels": {}},
                               "spec": {"unschedulable": name == "precordoned"}}


def list_nodes():
    """Every Node, as a LIST answers: each GPU host of the run's inventory that is in the cluster, and each one stored."""
    names = set()
    if os.path.exists(_store()):
        with open(_store()) as handle:
            names.update(json.load(handle))
    inventory = os.path.join(os.environ["MIG_EVENTS_DIR"], "inventory.json")
    if os.path.exists(inventory):
        with open(inventory) as handle:
            names.update(json.load(handle).get("all", {}).get("children", {}).get("gpu_nodes", {}).get("hosts", {}))
    return [node for node in (load_node(name) for name in sorted(names)) if node]


def save_node(node):
    nodes = {}
    if os.path.exists(_store()):
        with open(_store()) as handle:
            nodes = json.load(handle)
    nodes[node["metadata"]["name"]] = node
    with open(_store(), "w") as handle:
        json.dump(nodes, handle)


def record(name, args, **result):
    """Append {"event": name, "args": args} to $MIG_EVENTS_DIR/events.jsonl and exit with ``result``."""
    with open(os.path.join(os.environ["MIG_EVENTS_DIR"], "events.jsonl"), "a") as handle:
        handle.write(json.dumps({"event": name, "args": args}, sort_keys=True, default=str) + "\n")
    print(json.dumps(result))
    sys.exit(0)
