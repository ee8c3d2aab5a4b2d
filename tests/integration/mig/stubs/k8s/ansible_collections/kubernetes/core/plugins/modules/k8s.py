"""Test stub of kubernetes.core.k8s: merge-patches the labels of the stored Node."""
from ansible_collections.kubernetes.core.plugins.module_utils.recorder import load_node, params, record, save_node

if __name__ == "__main__":
    ARGS = params()
    NODE = load_node(ARGS["name"])
    if NODE is None:
        record("k8s", ARGS, failed=True, msg="nodes %s not found" % ARGS["name"])
    NODE["metadata"]["labels"].update(ARGS["definition"]["metadata"]["labels"])
    save_node(NODE)
    record("k8s", ARGS, changed=True)
