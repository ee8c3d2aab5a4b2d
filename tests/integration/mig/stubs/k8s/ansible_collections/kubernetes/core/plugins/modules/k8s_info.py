"""Test stub of kubernetes.core.k8s_info for one Node."""
from ansible_collections.kubernetes.core.plugins.module_utils.recorder import load_node, params, record

if __name__ == "__main__":
    ARGS = params()
    NODE = load_node(ARGS["name"])
    record("k8s_info", ARGS, changed=False, resources=[NODE] if NODE else [])
