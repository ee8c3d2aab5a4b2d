"""ApplySet bookkeeping (KEP-3659) as kubectl does it: id, group-kinds, what may be pruned."""
import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import applyset as aset

SET = aset.applyset_id("gpuops-gpu-tenants", "gpuops-system")


def obj(kind, name, namespace=None, api="v1", labels=None, **meta):
    m = {"name": name}
    if namespace:
        m["namespace"] = namespace
    if labels is not None:
        m["labels"] = labels
    m.update(meta)
    return {"apiVersion": api, "kind": kind, "metadata": m}


def member(kind, name, namespace=None, api="v1", set_id=SET):
    return obj(kind, name, namespace, api, labels={aset.PART_OF_LABEL: set_id})


def test_id_is_kubectls():
    # kubectl's own test (pkg/cmd/apply/apply_test.go): parent Secret my-set in namespace test.
    assert aset.applyset_id("my-set", "test") == "applyset-0eFHV8ySqp7XoShsGvyWFQD3s96yqwHmzc4e0HR1dsY-v1"
    assert aset.applyset_id("my-set", "test2") != aset.applyset_id("my-set", "test")


def test_group_kinds_as_kubectl_writes_them():
    objs = [obj("ConfigMap", "a", "x"), obj("ClusterQueue", "q", api="kueue.x-k8s.io/v1beta2"),
            obj("ClusterQueue", "r", api="kueue.x-k8s.io/v1beta1"), obj("Node", "gpu-a"),
            obj("RoleBinding", "rb", "x", api="rbac.authorization.k8s.io/v1")]
    assert aset.group_kinds(objs) == ["ClusterQueue.kueue.x-k8s.io", "ConfigMap", "RoleBinding.rbac.authorization.k8s.io"]
    assert aset.parse_group_kinds(" ConfigMap,,Namespace ,ConfigMap") == ["ConfigMap", "Namespace"]


def test_membership_labels_all_but_nodes_and_copies():
    original = [obj("Namespace", "team-a", labels={"keep": "me"}), obj("Node", "gpu-a")]
    out = aset.with_membership(original, SET)
    assert out[0]["metadata"]["labels"] == {"keep": "me", aset.PART_OF_LABEL: SET,
                                            "app.kubernetes.io/managed-by": "gpuops.platform"}
    assert "labels" not in out[1]["metadata"]
    assert original[0]["metadata"]["labels"] == {"keep": "me"}


def test_prune_candidates_are_only_this_sets_members_the_plan_dropped_in_delete_order():
    found = [member("Namespace", "team-b"), member("ResourceQuota", "gpuops-tenant", "team-b"),
             member("ClusterQueue", "team-b", api="kueue.x-k8s.io/v1beta2"),
             member("Namespace", "team-a"),
             member("ConfigMap", "other-set", "team-b", set_id=aset.applyset_id("gpuops-x", "gpuops-system")),
             obj("ConfigMap", "unlabelled", "team-b"),
             member("Namespace", "kube-system")]
    # team-a is still planned, under another API version of the same group: not a candidate.
    planned = [member("Namespace", "team-a"), member("ClusterQueue", "team-a", api="kueue.x-k8s.io/v1beta1")]
    got = [aset.describe(o) for o in aset.prune_candidates(found, planned, SET)]
    assert got == ["ResourceQuota team-b/gpuops-tenant", "ClusterQueue.kueue.x-k8s.io team-b", "Namespace team-b"]


def test_same_name_other_group_is_not_the_planned_object():
    found = [member("Queue", "team-a", api="scheduling.volcano.sh/v1beta1")]
    planned = [member("Queue", "team-a", api="scheduling.run.ai/v2")]
    assert [aset.describe(o) for o in aset.prune_candidates(found, planned, SET)] == [
        "Queue.scheduling.volcano.sh team-a"]


def test_foreign_objects_in_a_namespace():
    objs = [member("ResourceQuota", "q", "team-b"), obj("ServiceAccount", "default", "team-b"),
            obj("ConfigMap", "kube-root-ca.crt", "team-b"), obj("Event", "e1", "team-b"),
            obj("Pod", "owned", "team-b", ownerReferences=[{"kind": "Job", "name": "j"}]),
            obj("ConfigMap", "users-data", "team-b"), obj("ServiceAccount", "builder", "team-b")]
    assert [aset.describe(o) for o in aset.foreign_objects(objs, [SET])] == [
        "ConfigMap team-b/users-data", "ServiceAccount team-b/builder"]


@pytest.mark.parametrize("ns", sorted(aset.PROTECTED_NAMESPACES))
def test_protected_namespaces_are_never_candidates(ns):
    assert aset.prune_candidates([member("Namespace", ns)], [], SET) == []


def test_objects_being_deleted_are_finalizing_not_candidates():
    """ObjectMeta.deletionTimestamp (API reference): deletion has begun; the object waits for its finalizers."""
    found = [member("Namespace", "team-b"), member("ResourceQuota", "gpuops-tenant", "team-b")]
    found[0]["metadata"]["deletionTimestamp"] = "2026-11-01T10:00:00Z"
    assert [aset.describe(o) for o in aset.prune_candidates(found, [], SET)] == ["ResourceQuota team-b/gpuops-tenant"]
    assert [aset.describe(o) for o in aset.finalizing(found, [], SET)] == ["Namespace team-b"]
    # Planned again (the tenant came back while its namespace was finalizing): not reported here.
    assert aset.finalizing(found, [member("Namespace", "team-b")], SET) == []
