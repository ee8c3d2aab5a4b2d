#!/usr/bin/python
"""Test stub of kubernetes.core.k8s: records its arguments, changes nothing."""
import json
import os
import sys

from ansible.module_utils.basic import _load_params


def main():
    args = dict((k, v) for k, v in _load_params().items() if not k.startswith("_"))
    with open(os.path.join(os.environ["MIG_EVENTS_DIR"], "events.jsonl"), "a") as handle:
        handle.write(json.dumps({"event": "k8s", "args": args}, sort_keys=True, default=str) + "\n")
    result = {"changed": "k8s" != "k8s_info"}
    if "k8s" == "k8s_info":
        result["resources"] = [{"kind": "Node", "metadata": {"name": args.get("name")},
                                "spec": {"unschedulable": args.get("name") == "precordoned"}}]
    print(json.dumps(result))
    sys.exit(0)


if __name__ == "__main__":
    main()
