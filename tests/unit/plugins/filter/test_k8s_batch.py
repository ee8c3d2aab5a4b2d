"""The phase-by-phase apply of every queued layer (k8s_apply tasks_from=flush):
k8s_batch merges the queue into one call per phase, k8s_batch_layers splits
what those calls returned back into one summary entry per layer."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter.k8s_applyset import k8s_applyset_members
from ansible_collections.gpuops.platform.plugins.filter.k8s_batch import k8s_batch, k8s_batch_layers
from ansible_collections.gpuops.platform.plugins.filter.k8s_objects import k8s_phases


def ns(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def cm(name, namespace, data=None):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": data or {"k": "v"}}


def crd(name):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name}}


def node(name):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"a": "b"}}}


RELEASE = {"name": "kueue", "namespace": "kueue-system", "chart": "kueue", "version": "0.14.1",
           "repo_url": "oci://registry.k8s.io/kueue/charts", "values": {}}


SETTINGS = {"field_manager": "gpuops-platform", "wait_timeout": 300, "helm_timeout": "10m0s", "helm_recover": True,
            "prune": True, "prune_namespaces_with_foreign_objects": False, "applyset_namespace": "gpuops-system"}


def layer(name, order, objects, releases=(), **kw):
    members = k8s_applyset_members(objects, "gpuops-" + name.replace("_", "-"), "gpuops-system")
    entry = {"layer": name, "order": order, "set_name": "gpuops-" + name.replace("_", "-"), "members": members,
             "phases": k8s_phases(members), "releases": list(releases), "wait_crds": [], "wait": False,
             "no_log": False, "force_conflicts": False, "objects": len(objects), "settings": dict(SETTINGS)}
    entry.update(kw)
    return entry


def names(objects):
    return [(o["kind"], o["metadata"]["name"]) for o in objects]


def test_each_phase_of_every_layer_is_one_call_in_layer_order():
    queue = [layer("tenants", 80, [ns("team-a"), cm("q", "team-a")]),
             layer("kueue", 50, [crd("x.kueue.x-k8s.io"), cm("k", "kueue-system")], [RELEASE],
                   wait_crds=["clusterqueues.kueue.x-k8s.io"]),
             layer("sharing", 20, [ns("gpu-operator"), cm("dp", "gpu-operator")])]
    batch = k8s_batch(queue)
    # Queued out of order: the layers' order key decides.
    assert names(batch["namespaces"]) == [("Namespace", "gpu-operator"), ("Namespace", "team-a")]
    assert names(batch["crds"]) == [("CustomResourceDefinition", "x.kueue.x-k8s.io")]
    assert [r["name"] for r in batch["releases"]] == ["kueue"] and batch["release_names"] == ["kueue"]
    assert batch["wait_crds"] == ["clusterqueues.kueue.x-k8s.io"]
    assert len(batch["groups"]) == 1
    assert names(batch["groups"][0]["objects"]) == [("ConfigMap", "dp"), ("ConfigMap", "k"), ("ConfigMap", "q")]
    # The ApplySet run gets each layer's parent and only the identities of its objects.
    assert [s["name"] for s in batch["applysets"]] == ["gpuops-sharing", "gpuops-kueue", "gpuops-tenants"]
    assert batch["applysets"][0]["objects"][1] == {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dp", "namespace": "gpu-operator"}}


def test_without_crds_or_releases_the_namespaces_lead_the_objects_call():
    batch = k8s_batch([layer("tenants", 80, [cm("q", "team-a"), ns("team-a")])])
    assert batch["namespaces"] == []
    assert names(batch["groups"][0]["objects"]) == [("Namespace", "team-a"), ("ConfigMap", "q")]


def test_a_forcing_layer_and_a_hidden_layer_get_calls_of_their_own():
    queue = [layer("nodes", 30, [node("gpu-a")], force_conflicts=True),
             layer("secret", 90, [cm("s", "x")], no_log=True),
             layer("tenants", 80, [cm("q", "team-a")])]
    groups = k8s_batch(queue)["groups"]
    assert [(g["force_conflicts"], g["no_log"], names(g["objects"])) for g in groups] == [
        (False, False, [("ConfigMap", "q")]),
        (True, False, [("Node", "gpu-a")]),
        (False, True, [("ConfigMap", "s")])]
    assert k8s_batch(queue)["no_log"] is True
    assert k8s_batch(queue[:1] + queue[2:])["no_log"] is False


def test_a_sensitive_release_hides_the_helm_calls():
    assert k8s_batch([layer("kueue", 50, [], [dict(RELEASE, sensitive=True)])])["no_log"] is True


def test_check_mode_leaves_out_what_the_server_cannot_dry_run_and_says_so_per_layer():
    queue = [layer("tenants", 80, [ns("team-new"), cm("q", "team-new"), cm("r", "team-old"),
                                   {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                                    "metadata": {"name": "lq", "namespace": "team-old"}}])]
    batch = k8s_batch(queue, ["v1/ConfigMap", "v1/Namespace"], ["team-old"], True)
    assert names(batch["groups"][0]["objects"]) == [("Namespace", "team-new"), ("ConfigMap", "r")]
    assert batch["unchecked"] == [{"layer": "tenants", "count": 2, "kinds": ["ConfigMap", "LocalQueue"]}]
    # Outside check mode everything goes out.
    assert len(k8s_batch(queue, ["v1/ConfigMap"], [], False)["groups"][0]["objects"]) == 4


@pytest.mark.parametrize("bad", ["a,b", "x) ,owner!=helm", "Upper", "a" * 54])
def test_release_names_that_would_break_a_helm_command_line_are_refused(bad):
    with pytest.raises(AnsibleFilterError, match="Helm release name .* is invalid"):
        k8s_batch([layer("kueue", 50, [], [dict(RELEASE, name=bad)])])


def test_a_queue_that_is_not_one_is_refused():
    with pytest.raises(AnsibleFilterError, match="queued layers"):
        k8s_batch({"layer": "x"})
    with pytest.raises(AnsibleFilterError, match="needs layer and phases"):
        k8s_batch([{"layer": "x"}])


def applied(obj, changed, diff=None):
    out = {"changed": changed, "method": "apply", "result": obj}
    if diff is not None:
        out["diff"] = diff
    return out


def test_results_are_counted_for_the_layer_that_planned_each_object():
    queue = [layer("sharing", 20, [cm("dp", "gpu-operator")]),
             layer("tenants", 80, [ns("team-a"), cm("q", "team-a")]),
             layer("kueue", 50, [], [RELEASE])]
    objects_loop = {"changed": True, "results": [{"changed": True, "result": {"results": [
        applied(cm("dp", "gpu-operator", {"k": "new"}), True,
                {"before": {"data": {"k": "v"}}, "after": {"data": {"k": "new"}}}),
        applied(ns("team-a"), False),
        applied(cm("q", "team-a"), False)]}}]}
    skipped = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
    helm = [{"changed": False, "skipped": True, "results": []},
            {"changed": True, "results": [{"changed": True, "item": RELEASE}]}]
    applysets = {"changed": True, "sets": [
        {"name": "gpuops-tenants", "changed": True, "pruned": ["Namespace team-b"], "kept": []},
        {"name": "gpuops-sharing", "changed": False, "pruned": [], "kept": [], "finalizing": ["Namespace x (being deleted)"]},
        {"name": "gpuops-kueue", "changed": False, "pruned": [], "kept": []}]}
    plans = [{"name": "kueue", "namespace": "kueue-system", "action": "upgrade", "recover": "rollback",
              "reason": "pending-upgrade at revision 3: rolled back to revision 2"}]
    got = dict((entry["name"], entry) for entry in
               k8s_batch_layers(queue, [skipped, skipped, objects_loop, skipped], helm, applysets, plans))
    assert [e["name"] for e in k8s_batch_layers(queue, [], helm, applysets, plans)] == ["sharing", "kueue", "tenants"]
    assert got["sharing"]["changed"] is True
    assert got["sharing"]["report"]["changed"] == ["ConfigMap gpu-operator/dp"]
    assert got["sharing"]["report"]["fields"]["ConfigMap gpu-operator/dp"] == ["data.k: v -> new"]
    assert got["tenants"]["report"]["unchanged"] == 2 and got["tenants"]["report"]["changed"] == []
    # Unchanged objects, but a pruned namespace: the layer changed.
    assert got["tenants"]["changed"] is True and got["tenants"]["pruned"] == ["Namespace team-b"]
    assert got["kueue"]["changed"] is True and got["kueue"]["releases"] == ["kueue"]
    assert got["kueue"]["helm"] == ["upgrade"]
    assert got["kueue"]["recovered"] == ["kueue: pending-upgrade at revision 3: rolled back to revision 2"]
    assert got["sharing"]["helm"] == [] and got["sharing"]["recovered"] == []
    assert got["sharing"]["finalizing"] == ["Namespace x (being deleted)"] and got["tenants"]["finalizing"] == []
    assert got["tenants"]["objects"] == 2


def test_a_hidden_layer_reports_field_names_without_values():
    queue = [layer("secret", 90, [cm("s", "x")], no_log=True)]
    loop = {"results": [applied(cm("s", "x", {"k": "new"}), True,
                                {"before": {"data": {"k": "old"}}, "after": {"data": {"k": "new"}}})]}
    entry = k8s_batch_layers(queue, [loop])[0]
    assert entry["report"]["fields"] == {"ConfigMap x/s": ["data.k"]}


def test_the_layers_share_one_set_of_settings_or_the_queue_is_refused():
    queue = [layer("sharing", 20, [cm("dp", "gpu-operator")]), layer("tenants", 80, [cm("q", "team-a")])]
    assert k8s_batch(queue)["settings"] == SETTINGS
    queue[1]["settings"] = dict(SETTINGS, field_manager="someone", prune=False)
    with pytest.raises(AnsibleFilterError, match=r"layer tenants was queued with other k8s_apply settings than layer "
                                                 r"sharing \(field_manager, prune\)"):
        k8s_batch(queue)


def test_the_namespaces_call_forces_conflicts_only_when_every_layer_with_namespaces_does():
    forcing = layer("nodes", 30, [ns("a"), node("gpu-a")], force_conflicts=True)
    plain = layer("tenants", 80, [ns("b"), cm("q", "b")], [RELEASE])
    assert k8s_batch([forcing])["force_namespaces"] is True
    assert k8s_batch([forcing, plain])["force_namespaces"] is False
    # A forcing layer without namespaces does not decide for the others.
    assert k8s_batch([layer("nodes", 30, [node("gpu-a")], force_conflicts=True), plain])["force_namespaces"] is False
    assert k8s_batch([forcing, plain])["force_crds"] is False
