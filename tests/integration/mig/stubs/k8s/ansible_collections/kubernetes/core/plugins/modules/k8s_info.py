"""Test stub of kubernetes.core.k8s_info: records its arguments, returns the node."""
from ansible_collections.kubernetes.core.plugins.module_utils.recorder import node_info, record

if __name__ == "__main__":
    record("k8s_info", changed=False, resources=node_info())
