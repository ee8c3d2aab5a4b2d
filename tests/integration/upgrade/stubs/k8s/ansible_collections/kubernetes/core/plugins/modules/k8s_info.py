"""Test stub of kubernetes.core.k8s_info: one Node by name, every Node, or the Pods of a node (field selector)."""
from ansible_collections.kubernetes.core.plugins.module_utils.cluster import list_nodes, load_node, load_pods, params, record

if __name__ == "__main__":
    ARGS = params()
    if ARGS["kind"] == "Pod":
        NODE = [s.split("=", 1)[1] for s in ARGS.get("field_selectors") or [] if s.startswith("spec.nodeName=")][0]
        PODS = [dict((k, v) for k, v in p.items() if not k.startswith("x_")) for p in load_pods(NODE)]
        record("k8s_info", ARGS, changed=False, resources=PODS)
    if not ARGS.get("name"):
        record("k8s_info", ARGS, changed=False, resources=list_nodes())
    record("k8s_info", ARGS, changed=False, resources=[load_node(ARGS["name"])])
