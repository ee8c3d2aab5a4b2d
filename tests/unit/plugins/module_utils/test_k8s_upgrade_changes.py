"""What a chart upgrade changes, on the upstream reference data of the four charts (previous/ -> current).

The expectations are UPGRADES.md's findings (computed there from the upstream git mirrors), so each one is a
fact about the real charts: kuberay 1.6.2 -> 1.7.0 adds workerGroupSpecs[].priority and tlsOptions and renames
metrics.serviceMonitor.selector; gpu-operator v26.3.3 -> v26.7.0 turns the dcgm-exporter ServiceMonitor on and moves
the driver to 595; kueue 0.18 -> 0.19 changes none of the reference CRDs; volcano 1.14 -> 1.15 relaxes two patterns.
"""
import copy
import glob
import os

import pytest
import yaml

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import upgrade as u

CHARTS = ("gpu-operator", "kuberay", "kueue", "volcano")
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(path):
    with open(path) as handle:
        return yaml.load(handle, Loader=LOADER)


@pytest.fixture(scope="module")
def reference(shared_reference):
    """{chart: {"old"/"new": {"crds": [...], "values": {...}}}}, read once (the kuberay CRDs are 6 MB of YAML)."""
    out = {}
    for chart in CHARTS:
        out[chart] = {}
        for side, base in (("old", shared_reference / chart / "previous"), ("new", shared_reference / chart)):
            out[chart][side] = {"crds": [_load(f) for f in sorted(glob.glob(os.path.join(str(base), "crds", "*.yaml")))],
                                "values": _load(str(base / "chart" / "values.yaml"))}
    return out


@pytest.fixture(scope="module")
def crd_changes(reference):
    return dict((chart, u.crd_set_changes(reference[chart]["old"]["crds"], reference[chart]["new"]["crds"]))
                for chart in CHARTS)


def _changed(changes, name):
    found = [c for c in changes["changed"] if c["name"] == name]
    assert len(found) == 1, [c["name"] for c in changes["changed"]]
    return found[0]


def test_kuberay_crds_gain_the_new_fields_at_the_top_and_deprecate_v1alpha1(crd_changes):
    changes = crd_changes["kuberay"]
    assert changes["added"] == [] and changes["removed"] == []
    assert sorted(c["name"] for c in changes["changed"]) == ["rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io"]
    cluster = _changed(changes, "rayclusters.ray.io")
    added = cluster["fields_added"]["v1"]
    for path in ("spec.workerGroupSpecs[].priority", "spec.tlsOptions", "spec.networkPolicy", "spec.historyServerOptions",
                 "spec.headGroupSpec.ingressOptions", "spec.autoscalerOptions.command", "spec.autoscalerOptions.args",
                 "spec.gcsFaultToleranceOptions.backend", "spec.gcsFaultToleranceOptions.storage"):
        assert path in added, path
    # A new object is named once, not with every field below it.
    assert not [p for p in added if p.startswith("spec.tlsOptions.") or p.startswith("spec.networkPolicy.")]
    # The embedded PodSpec: workloadRef goes, schedulingGroup comes (the k8s API bump).
    assert "spec.headGroupSpec.template.spec.workloadRef" in cluster["fields_removed"]["v1"]
    assert "spec.headGroupSpec.template.spec.schedulingGroup" in added
    assert cluster["deprecated"] == ["v1alpha1"]
    assert cluster["storage"] is None and cluster["versions_added"] == [] and cluster["versions_removed"] == []
    assert cluster["served_removed"] == [] and cluster["served_added"] == []
    # redisAddress is no longer required.
    assert "required" in cluster["validation_changed"]["v1"]["spec.gcsFaultToleranceOptions"]
    # The same fields inside the RayJob's and RayService's cluster spec; RayService gains suspend.
    assert "spec.rayClusterSpec.workerGroupSpecs[].priority" in _changed(changes, "rayjobs.ray.io")["fields_added"]["v1"]
    service = _changed(changes, "rayservices.ray.io")["fields_added"]["v1"]
    assert "spec.rayClusterConfig.tlsOptions" in service and "spec.suspend" in service


def test_gpu_operator_crds_gain_fields_and_a_required_default(crd_changes):
    changes = crd_changes["gpu-operator"]
    assert changes["added"] == [] and changes["removed"] == []
    policy = _changed(changes, "clusterpolicies.nvidia.com")
    assert policy["fields_added"] == {"v1": ["spec.dcgmExporter.serviceMonitor.scrapeTimeout", "spec.hostPaths.kubeletRootDir",
                                             "spec.operator.metrics"]}
    assert policy["fields_removed"] == {} and policy["storage"] is None
    assert policy["validation_changed"] == {"v1": {"spec.dcgmExporter.serviceMonitor.relabelings[].modulus": ["minimum"]}}
    driver = _changed(changes, "nvidiadrivers.nvidia.com")
    assert driver["fields_added"] == {"v1alpha1": ["spec.default", "spec.upgradePolicy"]}
    assert driver["validation_changed"]["v1alpha1"]["spec"] == ["required", "x-kubernetes-validations"]


def test_kueue_reference_crds_do_not_change(crd_changes):
    assert crd_changes["kueue"] == {"added": [], "removed": [], "changed": []}


def test_volcano_job_relaxes_two_patterns_and_nothing_else_changes(crd_changes):
    changes = crd_changes["volcano"]
    assert [c["name"] for c in changes["changed"]] == ["jobs.batch.volcano.sh"]
    job = changes["changed"][0]
    assert job["validation_changed"] == {"v1alpha1": {"spec.networkTopology.highestTierName": ["pattern"],
                                                      "spec.tasks[].partitionPolicy.networkTopology.highestTierName": ["pattern"]}}
    assert job["fields_added"] == {"v1alpha1": [
        "spec.tasks[].template.spec.volumes[].projected.sources[].podCertificate.userAnnotations",
        "spec.tasks[].template.spec.workloadRef"]}
    assert job["fields_removed"] == {} and job["storage"] is None and job["versions_removed"] == []


def _crd(name="widgets.example.com", versions=(("v1", True, True),), stored=None):
    group = name.split(".", 1)[1]
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
           "spec": {"group": group, "names": {"plural": name.split(".")[0], "kind": "Widget"}, "scope": "Namespaced",
                    "versions": [{"name": v, "served": served, "storage": storage, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            "size": {"type": "integer"}}}}}}} for v, served, storage in versions]}}
    if stored is not None:
        crd["status"] = {"storedVersions": list(stored)}
    return crd


def test_versions_added_removed_and_a_new_storage_version_are_named():
    old = _crd(versions=(("v1alpha1", True, True), ("v1beta1", True, False)))
    new = _crd(versions=(("v1beta1", True, False), ("v1", True, True)))
    new["spec"]["versions"][0]["served"] = False
    got = u.crd_changes(old, new)
    assert got["versions_added"] == ["v1"] and got["versions_removed"] == ["v1alpha1"]
    assert got["storage"] == ["v1alpha1", "v1"]
    assert got["served_added"] == ["v1"] and got["served_removed"] == ["v1alpha1", "v1beta1"]


def test_a_field_that_disappears_is_named_and_an_unchanged_crd_is_none():
    old, new = _crd(), _crd()
    assert u.crd_changes(old, copy.deepcopy(old)) is None
    del new["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]
    assert u.crd_changes(old, new)["fields_removed"] == {"v1": ["spec.size"]}
    # Only a description changing is no change.
    described = _crd()
    described["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "now documented"
    assert u.crd_changes(old, described) is None


def test_a_crd_the_new_chart_adds_or_drops_is_named():
    got = u.crd_set_changes([_crd("a.example.com"), _crd("b.example.com")], [_crd("b.example.com"), _crd("c.example.com")])
    assert got == {"added": ["c.example.com"], "removed": ["a.example.com"], "changed": []}


def test_the_objects_holding_a_removed_field_are_named_with_the_fields():
    objects = [
        {"metadata": {"name": "gang", "namespace": "v"},
         "spec": {"tasks": [{"template": {"spec": {}}}, {"template": {"spec": {"workloadRef": {"name": "w"}}}}]}},
        {"metadata": {"name": "plain", "namespace": "v"}, "spec": {"tasks": [{"template": {"spec": {}}}]}},
        {"metadata": {"name": "labels"}, "spec": {"selector": {"a": {"deprecated": 1}}, "size": None}},
    ]
    got = u.held_fields(objects, ["spec.tasks[].template.spec.workloadRef", "spec.selector.*.deprecated", "spec.size"])
    # A null is no value (the API server drops nulls of a custom resource).
    assert got == [{"name": "labels", "fields": ["spec.selector.*.deprecated"]},
                   {"name": "v/gang", "fields": ["spec.tasks[].template.spec.workloadRef"]}]
    assert u.held_fields(objects, []) == [] and u.held_fields([], ["spec"]) == []
    # The root is held by every object.
    assert [h["name"] for h in u.held_fields(objects, [""])] == ["labels", "v/gang", "v/plain"]


def test_the_crds_a_chart_ships_say_whether_helm_upgrade_deletes_them_once_dropped():
    kept = _crd("k.example.com")
    kept["metadata"]["annotations"] = {"helm.sh/resource-policy": "keep"}
    got = u.shipped_crds([(_crd("a.example.com"), True), (_crd("t.example.com"), False), (kept, False)])
    assert got == [{"name": "a.example.com", "deleted": False}, {"name": "k.example.com", "deleted": False},
                   {"name": "t.example.com", "deleted": True}]


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="the new CRD is not a CustomResourceDefinition"):
        u.crd_changes(_crd(), {"kind": "ConfigMap"})
    with pytest.raises(ValueError, match="cannot compare CRD a.example.com with CRD b.example.com"):
        u.crd_changes(_crd("a.example.com"), _crd("b.example.com"))
    with pytest.raises(ValueError, match="release values must be a mapping, got list"):
        u.values_renamed({}, {}, ["a"])
    with pytest.raises(ValueError, match="new chart values must be a mapping, got str"):
        u.values_defaults({}, "x", {})


def test_kuberay_selector_renamed_is_reported_only_where_the_inventory_sets_it(reference):
    old, new = reference["kuberay"]["old"]["values"], reference["kuberay"]["new"]["values"]
    got = u.values_renamed(old, new, {"metrics": {"serviceMonitor": {"enabled": True, "selector": {"release": "prom"}}}})
    assert got == [{"key": "metrics.serviceMonitor.selector", "candidates": ["metrics.serviceMonitor.additionalLabels"]}]
    # Keys the new chart still has, or that the old chart never had, are not the upgrade's doing.
    assert u.values_renamed(old, new, {"metrics": {"serviceMonitor": {"enabled": True}}, "image": {"tag": "x"}}) == []
    assert u.values_renamed(old, new, {"notAKey": {"deep": 1}}) == []


@pytest.mark.parametrize("chart,values", [
    ("gpu-operator", {"driver": {"enabled": False, "version": "580.126.20"}, "dcgmExporter": {"enabled": True},
                      "operator": {"upgradeCRD": False}, "toolkit": {"enabled": True}}),
    ("kueue", {"controllerManager": {"replicas": 2}, "enableCertManager": False}),
    ("volcano", {"basic": {"image_registry": "registry.example"}, "custom": {"scheduler_enable": True}}),
])
def test_no_key_renamed_in_the_other_charts(reference, chart, values):
    assert u.values_renamed(reference[chart]["old"]["values"], reference[chart]["new"]["values"], values) == []


def _defaults(reference, chart, values):
    return dict((d["key"], (d["old"], d["new"])) for d in
                u.values_defaults(reference[chart]["old"]["values"], reference[chart]["new"]["values"], values))


def test_gpu_operator_defaults_that_change_behaviour_unless_the_inventory_sets_them(reference):
    got = _defaults(reference, "gpu-operator", {})
    assert got["dcgmExporter.serviceMonitor.enabled"] == (False, True)
    assert got["driver.version"] == ("580.126.20", "595.91.07")
    assert got["toolkit.version"] == ("v1.19.1", "v1.20.0")
    # A key the inventory sets is its own choice, not a default that changes; its sibling defaults still change
    # (Helm merges maps key by key).
    pinned = _defaults(reference, "gpu-operator", {"driver": {"version": "580.126.20"},
                                                   "dcgmExporter": {"serviceMonitor": {"enabled": False}}})
    assert "driver.version" not in pinned and "dcgmExporter.serviceMonitor.enabled" not in pinned
    assert pinned["driver.manager.version"] == ("v0.11.0", "v0.12.0") and "toolkit.version" in pinned
    # Keys only one chart has are not defaults that change.
    assert not [k for k in got if k.startswith("draDriver") or k.startswith("gpuCluster")]


def test_kuberay_feature_gate_default_is_read_by_name(reference):
    got = _defaults(reference, "kuberay", {})
    assert got["featureGates[RayServiceIncrementalUpgrade].enabled"] == (False, True)
    assert "featureGates[RayClusterMTLS].enabled" not in got  # new, not changed
    assert "featureGates[RayServiceIncrementalUpgrade].enabled" not in _defaults(
        reference, "kuberay", {"featureGates": [{"name": "RayServiceIncrementalUpgrade", "enabled": False}]})


def test_kueue_empty_maps_that_gain_defaults_and_the_config_string(reference):
    got = _defaults(reference, "kueue", {})
    old, new = got["kueueViz.frontend.podSecurityContext"]
    assert old == {} and new["runAsNonRoot"] is True and new["runAsUser"] == 1000
    assert new["seccompProfile.type"] == "RuntimeDefault"
    old, new = got["managerConfig.controllerManagerConfigYaml"]
    assert "kubeflow.org/pytorchjob" in old and "#  - \"kubeflow.org/pytorchjob\"" in new


def test_volcano_only_the_image_tag_default_changes(reference):
    assert _defaults(reference, "volcano", {}) == {"basic.image_tag_version": ("v1.14.4", "v1.15.0")}


def test_a_downgrade_that_drops_a_stored_served_version_is_refused_naming_the_objects(reference):
    queues = [c for c in reference["kueue"]["new"]["crds"] if c["metadata"]["name"] == "clusterqueues.kueue.x-k8s.io"][0]
    live = dict(copy.deepcopy(queues), status={"storedVersions": ["v1beta1", "v1beta2"]})
    older = copy.deepcopy(queues)
    older["spec"]["versions"] = [v for v in older["spec"]["versions"] if v["name"] == "v1beta1"]
    older["spec"]["versions"][0]["storage"] = True
    objects = [{"metadata": {"name": "team-b"}}, {"metadata": {"name": "team-a"}}]
    why = u.stored_version_refusal(live, older, objects)
    assert "CRD clusterqueues.kueue.x-k8s.io: the new chart no longer serves v1beta2" in why
    assert "2 ClusterQueue objects may be stored in it: team-a, team-b" in why
    # Without objects, or when the version was never stored in, it may go ahead.
    assert u.stored_version_refusal(live, older, []) == ""
    assert u.stored_version_refusal(dict(live, status={"storedVersions": ["v1beta1"]}), older, objects) == ""
    # Kept in spec but no longer served is a removal too; namespaced objects are named with their namespace.
    unserved = copy.deepcopy(queues)
    unserved["spec"]["versions"] = [dict(v, served=v["name"] != "v1beta2") for v in unserved["spec"]["versions"]]
    assert "1 ClusterQueue object may be stored in it: lab/q" in u.stored_version_refusal(
        live, unserved, [{"metadata": {"name": "q", "namespace": "lab"}}])
    # The upgrade itself (same versions) is never refused.
    assert u.stored_version_refusal(live, queues, objects) == ""
