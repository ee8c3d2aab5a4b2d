"""Test stub of kubernetes.core.k8s_info: one Node by name, or the Pods of a node (none: the MIG tests run no pods)."""
from ansible_collections.kubernetes.core.plugins.module_utils.recorder import load_node, params, record

if __name__ == "__main__":
    ARGS = params()
    if ARGS["kind"] == "Pod":
        record("k8s_info", ARGS, changed=False, resources=[])
    NODE = load_node(ARGS["name"])
    record("k8s_info", ARGS, changed=False, resources=[NODE] if NODE else [])
