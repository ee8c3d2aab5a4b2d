"""Shared body of the kubernetes.core test stubs: record the call, answer like the real module."""
import json
import os
import sys

from ansible.module_utils.basic import _load_params


def record(name, **result):
    """Append {"event": name, "args": ...} to $MIG_EVENTS_DIR/events.jsonl and exit with ``result``."""
    args = dict((k, v) for k, v in _load_params().items() if not k.startswith("_"))
    with open(os.path.join(os.environ["MIG_EVENTS_DIR"], "events.jsonl"), "a") as handle:
        handle.write(json.dumps({"event": name, "args": args}, sort_keys=True, default=str) + "\n")
    print(json.dumps(result))
    sys.exit(0)


def node_info():
    """A Node as k8s_info returns it; the node named "precordoned" is already unschedulable."""
    name = _load_params().get("name")
    return [{"kind": "Node", "metadata": {"name": name}, "spec": {"unschedulable": name == "precordoned"}}]
