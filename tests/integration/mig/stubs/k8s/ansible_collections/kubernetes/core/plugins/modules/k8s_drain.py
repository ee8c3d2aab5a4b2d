"""Test stub of kubernetes.core.k8s_drain: records its arguments, changes nothing."""
from ansible_collections.kubernetes.core.plugins.module_utils.recorder import record

if __name__ == "__main__":
    record("k8s_drain", changed=True)
