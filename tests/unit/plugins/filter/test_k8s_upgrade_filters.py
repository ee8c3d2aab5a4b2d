"""k8s_apply's chart upgrades: which releases move, the plan against the cluster's CRDs, the refusals, the summary."""
import copy

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter import k8s_upgrade as f
from ansible_collections.gpuops.platform.plugins.filter.k8s_objects import k8s_stats_lines
from ansible_collections.gpuops.platform.plugins.module_utils._k8s import helm, upgrade
from ansible_collections.gpuops.platform.plugins.plugin_utils import k8s_upgrade


def release(name="kuberay-operator", version="1.7.0", **extra):
    return dict({"name": name, "namespace": "kuberay", "chart": name, "version": version,
                 "repo_url": "https://charts.example/", "values": {"a": 1}}, **extra)


def plan(name="kuberay-operator", chart="kuberay-operator-1.6.2", state="deployed", action="upgrade", recover=""):
    return {"name": name, "namespace": "kuberay", "state": state, "action": action, "recover": recover, "chart": chart}


QUEUE = [{"layer": "kuberay", "phases": {}, "releases": [release()]}]


def test_only_a_release_deployed_at_another_chart_version_moves():
    got = f.k8s_chart_upgrades(QUEUE, [plan()])
    assert got == [{"name": "kuberay-operator", "namespace": "kuberay", "chart_ref": "kuberay-operator",
                    "chart_repo_url": "https://charts.example/", "chart_version": "1.7.0", "source": "repo",
                    "values": {"a": 1}, "sensitive": False, "layer": "kuberay", "deployed_version": "1.6.2"}]
    # Same version (values only), an install, a recovery first, or a release of another namespace: no chart upgrade.
    assert f.k8s_chart_upgrades(QUEUE, [plan(chart="kuberay-operator-1.7.0")]) == []
    assert f.k8s_chart_upgrades(QUEUE, [plan(state="", action="install", chart="")]) == []
    assert f.k8s_chart_upgrades(QUEUE, [plan(state="pending-upgrade", recover="rollback")]) == []
    assert f.k8s_chart_upgrades(QUEUE, [dict(plan(), namespace="other")]) == []
    # failed and superseded upgrade from their chart too.
    assert len(f.k8s_chart_upgrades(QUEUE, [plan(state="failed")])) == 1


def test_the_deployed_version_is_read_from_helms_chart_column():
    assert upgrade.deployed_version("gpu-operator-v26.3.3", "gpu-operator") == "v26.3.3"
    assert upgrade.deployed_version("kuberay-operator-1.7.0-rc.0") == "1.7.0-rc.0"
    assert upgrade.deployed_version("node-feature-discovery-0.18.3") == "0.18.3"
    assert upgrade.deployed_version("") == "" and upgrade.deployed_version("nochart") == ""
    # A chart from a path (no chart name given) is read from the column alone.
    queue = [{"layer": "kuberay", "phases": {}, "releases": [dict(release(), chart="", chart_path="/charts/kr")]}]
    assert f.k8s_chart_upgrades(queue, [plan()])[0]["deployed_version"] == "1.6.2"


def test_helm_decide_names_the_listed_chart():
    wanted = {"name": "kuberay-operator", "namespace": "kuberay", "chart": "kuberay-operator", "chart_version": "1.7.0",
              "values": {}}
    listed = {"name": "kuberay-operator", "namespace": "kuberay", "status": "deployed", "revision": "3",
              "chart": "kuberay-operator-1.6.2"}
    assert helm.decide(wanted, listed)["chart"] == "kuberay-operator-1.6.2"
    assert helm.decide(wanted, None)["chart"] == ""


def test_chart_args_follow_the_release_source():
    assert upgrade.chart_args({"source": "path", "chart_ref": "/c/kr", "chart_version": "1"}) == ["/c/kr"]
    assert upgrade.chart_args({"source": "oci", "chart_ref": "oci://r/kr", "chart_version": "1"}) == [
        "oci://r/kr", "--version", "1"]
    assert upgrade.chart_args({"source": "repo", "chart_ref": "kr", "chart_version": "1", "chart_repo_url": "https://r"}) == [
        "kr", "--version", "1", "--repo", "https://r"]
    with pytest.raises(ValueError, match="unknown chart source 'git'"):
        upgrade.chart_args({"name": "x", "source": "git", "chart_ref": "kr", "chart_version": "1"})


def crd(name="widgets.example.com", versions=("v1",), storage="v1", stored=None, field="size"):
    group = name.split(".", 1)[1]
    out = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
           "spec": {"group": group, "scope": "Namespaced", "names": {"plural": name.split(".")[0], "kind": "Widget"},
                    "versions": [{"name": v, "served": True, "storage": v == storage, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            field: {"type": "integer"}}}}}}} for v in versions]}}
    if stored is not None:
        out["status"] = {"storedVersions": list(stored)}
    return out


def test_helm_template_output_tells_crds_dir_from_templates():
    text = "\n".join([
        "---", "# Source: kr/crds/a.yaml", "---", yaml.safe_dump(crd("a.example.com")),
        "---", "# Source: kr/templates/b.yaml", yaml.safe_dump(crd("b.example.com")),
        "---", "# Source: kr/templates/cm.yaml", "apiVersion: v1", "kind: ConfigMap", "metadata: {name: c}"])
    got = upgrade.rendered_crds(text, yaml.safe_load)
    assert [(c["metadata"]["name"], d) for c, d in got] == [("a.example.com", True), ("b.example.com", False)]


def upgrades(new):
    return [{"name": "kuberay-operator", "namespace": "kuberay", "layer": "kuberay", "from_version": "1.6.2",
             "to_version": "1.7.0", "crds": [{"crds_dir": d, "object": c} for c, d in new],
             "values_renamed": [{"key": "m.selector", "candidates": ["m.additionalLabels"]}],
             "values_defaults": [{"key": "gate", "old": False, "new": True},
                                 {"key": "config", "old": "a\nb", "new": "a\nc"}]}]


def live(*crds):
    return list(crds)


def test_the_plan_compares_with_the_cluster_and_applies_only_crds_dir():
    old = crd("a.example.com", stored=["v1"])
    new = crd("a.example.com", field="priority")
    plan_ = f.k8s_upgrade_plan(upgrades([(new, True), (crd("b.example.com"), False)]), live(old))
    entry = plan_["releases"][0]
    assert entry["crds"]["added"] == ["b.example.com"]
    assert [c["name"] for c in entry["crds"]["changed"]] == ["a.example.com"]
    assert entry["crds"]["changed"][0]["fields_added"] == {"v1": ["spec.priority"]}
    assert entry["crds"]["changed"][0]["fields_removed"] == {"v1": ["spec.size"]}
    assert entry["applied"] == ["a.example.com"] and plan_["apply"] == [new] and plan_["at_risk"] == []
    lines = k8s_upgrade.upgrade_lines(plan_["releases"])
    assert lines[0] == "Chart upgrade: kuberay-operator (layer kuberay): chart 1.6.2 -> 1.7.0"
    assert "    CRD b.example.com: new" in lines
    assert "    CRD a.example.com (applied server-side first): fields removed in v1: spec.size; fields added in v1: " \
           "spec.priority" in lines
    assert "    values key m.selector is set but the new chart no longer has it (now m.additionalLabels?)" in lines
    assert "    default gate changes: False -> True" in lines
    assert "    default config changes: (3 characters) -> (3 characters)" in lines
    # The summary of the run carries them, and says "planned" in check mode.
    stats = {"mode": "apply", "check": True, "layers": [], "upgrades": plan_["releases"]}
    assert "Chart upgrade planned: kuberay-operator (layer kuberay): chart 1.6.2 -> 1.7.0" in k8s_stats_lines(stats)


def test_a_crd_update_that_stops_serving_a_stored_version_is_at_risk_and_refused_with_objects():
    old = crd("a.example.com", versions=("v1beta1", "v1"), storage="v1", stored=["v1beta1", "v1"])
    new = crd("a.example.com", versions=("v1beta1",), storage="v1beta1")
    plan_ = f.k8s_upgrade_plan(upgrades([(new, False)]), live(old))
    assert [(r["crd"], r["api_version"], r["kind"]) for r in plan_["at_risk"]] == [
        ("a.example.com", "example.com/v1beta1", "Widget")]
    listed = {"results": [{"item": plan_["at_risk"][0], "resources": [{"metadata": {"name": "w", "namespace": "ns"}}]}]}
    refusals = f.k8s_upgrade_refusals(plan_, live(old), listed)
    assert len(refusals) == 1 and refusals[0].startswith(
        "Helm release kuberay-operator (layer kuberay), chart 1.6.2 -> 1.7.0: CRD a.example.com: the new chart no "
        "longer serves v1, which status.storedVersions lists (v1beta1, v1), and 1 Widget object may be stored in it: ns/w.")
    empty = {"results": [{"item": plan_["at_risk"][0], "resources": []}]}
    assert f.k8s_upgrade_refusals(plan_, live(old), empty) == []
    # Deciding without the listing is an error, never a silent pass.
    with pytest.raises(AnsibleFilterError, match="the CRD and its objects must be read before deciding"):
        f.k8s_upgrade_refusals(plan_, live(old), {"results": []})


def test_a_crd_the_new_chart_drops_and_the_objects_left_behind_are_named():
    # The deployed chart shipped c.example.com (still in the cluster) and d.example.com (gone already); the new one
    # ships neither. helm_chart_upgrades named the objects holding a field a version drops, and those of a version
    # no longer served.
    entry = upgrades([(crd("a.example.com"), True)])[0]
    entry["previous_crds"] = [{"name": "a.example.com", "deleted": False}, {"name": "c.example.com", "deleted": False},
                              {"name": "d.example.com", "deleted": False}, {"name": "e.example.com", "deleted": True}]
    entry["held"] = [{"crd": "a.example.com", "kind": "Widget", "version": "v1", "fields": ["spec.size"],
                      "objects": [{"name": "ns/w", "fields": ["spec.size"]}, {"name": "ns/x", "fields": ["spec.size"]}]},
                     {"crd": "a.example.com", "kind": "Widget", "versions": ["v1beta1"], "objects": [{"name": "ns/w"}]}]
    plan_ = f.k8s_upgrade_plan([entry], live(crd("a.example.com", stored=["v1"]), crd("c.example.com"),
                                             crd("e.example.com")))
    release_ = plan_["releases"][0]
    assert release_["crds"]["dropped"] == ["c.example.com", "e.example.com"] and release_["crds"]["added"] == []
    assert release_["crds"]["deleted"] == ["e.example.com"]
    assert release_["held"] == entry["held"]
    lines = k8s_upgrade.upgrade_lines(plan_["releases"])
    assert "    CRD c.example.com: no longer in the new chart; Helm leaves it and its objects in place (delete it once " \
           "nothing uses it)" in lines
    assert "    CRD e.example.com: no longer in the new chart, made by the templates of the deployed chart: helm upgrade " \
           "deletes it, and every object of its kind with it" in lines
    assert "    CRD a.example.com: 2 Widget objects hold fields that v1 no longer has (the API server prunes them): " \
           "ns/w (spec.size); ns/x (spec.size)" in lines
    assert "    CRD a.example.com: v1beta1 no longer served, and 1 Widget object exists: ns/w" in lines
    # Without the deployed chart's CRDs (an older module result), nothing is dropped.
    del entry["previous_crds"]
    assert f.k8s_upgrade_plan([entry], live(crd("c.example.com")))["releases"][0]["crds"]["dropped"] == []


def test_a_sensitive_release_shows_the_keys_of_changed_defaults_only():
    plan_ = f.k8s_upgrade_plan(upgrades([]), live())
    plan_["releases"][0]["values_defaults"] = [{"key": "gate"}]
    assert "    default gate changes: (values hidden)" in k8s_upgrade.upgrade_lines(plan_["releases"])


def test_bad_input_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="Helm release x lacks namespace, version"):
        f.k8s_chart_upgrades([{"layer": "x", "releases": [{"name": "x"}]}], [plan()])
    with pytest.raises(AnsibleFilterError, match="k8s_upgrade_plan"):
        f.k8s_upgrade_plan([{"crds": [{"object": {"kind": "ConfigMap"}}]}], live())
    # The loop shape of a k8s_info per CRD is no list of CRDs.
    with pytest.raises(AnsibleFilterError, match="the cluster's CRDs must be a list of CustomResourceDefinitions, got dict"):
        f.k8s_upgrade_plan([], {"results": []})


def test_merged_values_merge_maps_and_replace_the_rest():
    assert upgrade.merged_values({"a": {"b": 1, "c": [1]}, "d": 1}, {"a": {"c": [2]}, "e": 2}) == {
        "a": {"b": 1, "c": [2]}, "d": 1, "e": 2}
    assert copy.deepcopy(upgrade.merged_values(None, None)) == {}
