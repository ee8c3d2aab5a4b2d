"""Test stub of kubernetes.core.k8s_drain with the upstream module's outcomes.

Upstream (plugins/modules/k8s_drain.py): drain cordons, then evicts every pod
that is not a DaemonSet or mirror pod; an eviction the API server refuses fails
the module ("Failed to delete pod ns/name due to: ...") and leaves the node
cordoned; a pod still there when wait_timeout runs out is only a warning
("timeout reached while pods were still running."), the module succeeds.

A pod flagged ``x_hang`` makes the eviction hang while the file ``hang`` exists in
$MIG_EVENTS_DIR (at most two minutes), after the cordon: the test kills the run
there, as a controller lost in the middle of a drain.
"""
import os
import sys
import time

from ansible_collections.kubernetes.core.plugins.module_utils.cluster import (
    load_node, load_pods, params, record, save_node, save_pods)

if __name__ == "__main__":
    ARGS = params()
    NAME = ARGS["name"]
    NODE = load_node(NAME)
    STATE = ARGS.get("state", "drain")
    NODE["spec"]["unschedulable"] = STATE != "uncordon"
    save_node(NODE)
    if STATE != "drain":
        record("k8s_drain", ARGS, changed=True, result="node %s marked %s." % (
            NAME, "schedulable" if STATE == "uncordon" else "unschedulable"))
    LEFT, WARNINGS = [], []
    if any(p.get("x_hang") for p in load_pods(NAME)):
        DEADLINE = time.time() + 120
        while os.path.exists(os.path.join(os.environ["MIG_EVENTS_DIR"], "hang")):
            if time.time() > DEADLINE:
                record("k8s_drain", ARGS, failed=True, msg="the test did not interrupt the hanging drain")
            time.sleep(0.1)
        # The run was killed (the module may outlive it, as on a real controller): nothing more happens.
        sys.exit(1)
    for pod in load_pods(NAME):
        owners = [r.get("kind") for r in pod["metadata"].get("ownerReferences") or []]
        if "DaemonSet" in owners:
            LEFT.append(pod)
            continue
        if pod.get("x_pdb_blocked"):
            save_pods(NAME, LEFT + [pod])
            record("k8s_drain", ARGS, failed=True, msg=(
                "Failed to delete pod %s/%s due to: Too Many Requests: Cannot evict pod as it would violate the "
                "pod's disruption budget." % (pod["metadata"]["namespace"], pod["metadata"]["name"])))
        if pod.get("x_stuck"):
            LEFT.append(pod)
            WARNINGS = ["timeout reached while pods were still running."]
    save_pods(NAME, LEFT)
    record("k8s_drain", ARGS, changed=True, warnings=WARNINGS, result="node %s marked unschedulable." % NAME)
