"""Test stub of kubernetes.core.k8s_info: one Node by name, every Node, or the Pods of a node (the MIG tests run none)."""
from ansible_collections.kubernetes.core.plugins.module_utils.recorder import list_nodes, load_node, params, record

if __name__ == "__main__":
    ARGS = params()
    if ARGS["kind"] == "Pod":
        record("k8s_info", ARGS, changed=False, resources=[])
    if not ARGS.get("name"):
        record("k8s_info", ARGS, changed=False, resources=list_nodes())
    NODE = load_node(ARGS["name"])
    record("k8s_info", ARGS, changed=False, resources=[NODE] if NODE else [])
