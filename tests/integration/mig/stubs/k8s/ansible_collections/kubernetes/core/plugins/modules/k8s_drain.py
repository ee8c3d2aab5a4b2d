"""Test stub of kubernetes.core.k8s_drain: cordons and uncordons the stored Node."""
from ansible_collections.kubernetes.core.plugins.module_utils.recorder import load_node, params, record, save_node

if __name__ == "__main__":
    ARGS = params()
    NODE = load_node(ARGS["name"])
    if NODE is None:
        record("k8s_drain", ARGS, failed=True, msg="node %s not found" % ARGS["name"])
    NODE["spec"]["unschedulable"] = ARGS.get("state", "drain") != "uncordon"
    save_node(NODE)
    record("k8s_drain", ARGS, changed=True)
