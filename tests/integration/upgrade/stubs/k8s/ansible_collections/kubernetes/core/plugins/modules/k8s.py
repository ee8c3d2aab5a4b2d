"""Test stub of kubernetes.core.k8s, state=patched of a Node's labels and annotations.

Upstream patches with a strategic merge patch first (merge_type's default): a
label or annotation given a value is set, one given null is removed, the others
are kept; the module reports changed only when the object changed.
"""
import copy

from ansible_collections.kubernetes.core.plugins.module_utils.cluster import load_node, params, record, save_node

if __name__ == "__main__":
    ARGS = params()
    assert ARGS.get("state") == "patched" and ARGS.get("kind") == "Node", "the stub patches Nodes only: %r" % ARGS
    NODE = load_node(ARGS["name"])
    BEFORE = copy.deepcopy(NODE)
    META = (ARGS.get("definition") or {}).get("metadata") or {}
    for field in ("labels", "annotations"):
        current = NODE["metadata"].setdefault(field, {})
        for key, value in (META.get(field) or {}).items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = str(value)
    save_node(NODE)
    record("k8s", ARGS, changed=NODE != BEFORE, result=NODE)
