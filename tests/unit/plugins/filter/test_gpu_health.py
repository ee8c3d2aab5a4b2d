"""The gpu_health_plan filter: what a node's GPU health does to its Node, and what it never touches."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter import gpu_health as f

OURS = {"key": "gpuops.io/gpu-unhealthy", "value": "true", "effect": "NoSchedule"}
FOREIGN = {"key": "dedicated", "value": "ml", "effect": "NoExecute"}
CRITICAL = {"present": True, "health": {"status": "critical", "reasons": ["GPU 0: GPU is lost"]}}
OK = {"present": True, "health": {"status": "ok", "reasons": []}}


def k8s(name="n1", labels=None, annotations=None, taints=(), unschedulable=None, rv="7"):
    spec = {"taints": list(taints)}
    if unschedulable is not None:
        spec["unschedulable"] = unschedulable
    return {"metadata": {"name": name, "resourceVersion": rv, "labels": labels or {},
                         "annotations": annotations or {}}, "spec": spec}


def plan(facts, node, extra=(), render=False, **options):
    return f.gpu_health_plan([{"host": "h1", "name": "n1", "nvidia": facts, "extra": list(extra)}],
                             [node] if node else [], options, render)[0]


def test_critical_taints_once_with_the_configured_effect_and_keeps_foreign_taints():
    p = plan(CRITICAL, k8s(taints=[FOREIGN]), taint_effect="NoExecute")
    assert p["patch"]["spec"]["taints"] == [FOREIGN, dict(OURS, effect="NoExecute")]
    assert p["patch"]["metadata"]["resourceVersion"] == "7"
    assert p["patch"]["metadata"]["annotations"] == {"gpuops.io/gpu-health-reasons": "GPU 0: GPU is lost"}
    assert "spec" in p["patch"] and "unschedulable" not in p["patch"]["spec"]     # no cordon unless asked
    # Already in that state: no change, no patch.
    done = k8s(labels={"gpuops.io/gpu-health": "critical"}, taints=[FOREIGN, dict(OURS, effect="NoExecute")],
               annotations={"gpuops.io/gpu-health-reasons": "GPU 0: GPU is lost"})
    assert plan(CRITICAL, done, taint_effect="NoExecute") == dict(p, changes=[], changed=False, patch={})


def test_a_changed_effect_replaces_our_taint_and_report_only_removes_it():
    node = k8s(labels={"gpuops.io/gpu-health": "critical"}, taints=[OURS, FOREIGN],
               annotations={"gpuops.io/gpu-health-reasons": "GPU 0: GPU is lost"})
    assert plan(CRITICAL, node, taint_effect="NoExecute")["patch"]["spec"]["taints"] == [
        FOREIGN, dict(OURS, effect="NoExecute")]
    p = plan(CRITICAL, node, taint_effect="none")
    assert p["patch"]["spec"]["taints"] == [FOREIGN] and p["changes"] == ["taint gpuops.io/gpu-unhealthy removed"]


def test_a_cordon_set_by_someone_else_is_neither_claimed_nor_lifted():
    cordoned = k8s(unschedulable=True)
    p = plan(CRITICAL, cordoned, cordon=True)
    assert "unschedulable" not in p["patch"]["spec"]
    assert "gpuops.io/gpu-health-cordoned" not in p["patch"]["metadata"]["annotations"]
    healthy = plan(OK, k8s(unschedulable=True, labels={"gpuops.io/gpu-health": "ok"}))
    assert healthy["changed"] is False


def test_our_cordon_is_lifted_when_healthy_or_when_cordoning_is_turned_off():
    ours = k8s(unschedulable=True, annotations={"gpuops.io/gpu-health-cordoned": "true"},
               labels={"gpuops.io/gpu-health": "critical"})
    for facts, options in ((OK, {"cordon": True}), (CRITICAL, {"cordon": False, "taint_effect": "none"})):
        p = plan(facts, ours, **options)
        assert p["patch"]["spec"]["unschedulable"] is None                      # merge patch: field removed
        assert p["patch"]["metadata"]["annotations"]["gpuops.io/gpu-health-cordoned"] is None


def test_warning_labels_and_annotates_without_a_taint():
    warn = {"present": True, "health": {"status": "warning", "reasons": ["GPU 1: a row remap is pending"]}}
    p = plan(warn, k8s(taints=[OURS]))
    assert p["patch"]["metadata"]["labels"] == {"gpuops.io/gpu-health": "warning"}
    assert p["patch"]["spec"]["taints"] == []


def test_a_dcgm_failure_makes_a_healthy_node_critical():
    dcgm = {"status": "critical", "reasons": ["DCGM diag: GPU 2 Memory failed"], "source": "dcgm"}
    p = plan(OK, k8s(), extra=[dcgm])
    assert p["status"] == "critical" and p["reasons"] == ["DCGM diag: GPU 2 Memory failed"]
    assert OURS in p["patch"]["spec"]["taints"]


def test_nodes_without_gpu_or_outside_the_cluster_are_left_alone():
    absent = plan({"present": False, "reason": "libnvidia-ml.so.1 not found", "health": {"status": "ok", "reasons": []}},
                  k8s())["skipped"]
    assert absent.startswith("no NVIDIA GPU found on the host (libnvidia-ml.so.1 not found): not judged")
    assert "set gpuops_nvml_replay_file or gpuops_fleet_facts_dir" in absent
    recorded = plan({"present": False, "source": "replay", "health": {"status": "ok", "reasons": []}}, k8s())["skipped"]
    assert recorded == "no NVIDIA GPU in its recorded facts (NVML reports none): not judged"
    missing = plan(None, k8s())["skipped"]
    assert missing.startswith("no NVIDIA GPU facts for this host in this run (nvml_facts did not run")
    assert "gpu_health_gather" in missing and "left alone" not in missing
    assert "not a Kubernetes node" in plan(OK, None)["skipped"]
    # NVML that cannot start (driver/library mismatch) is judged although no GPU is listed.
    mismatch = {"present": False, "health": {"status": "critical", "reasons": ["NVML cannot start"]}}
    assert plan(mismatch, k8s())["status"] == "critical"


def test_render_plans_from_nothing():
    p = plan(CRITICAL, None, render=True)
    assert p["changed"] and "resourceVersion" not in p["patch"]["metadata"]
    assert p["patch"]["spec"]["taints"] == [OURS]


def test_long_reasons_are_cut_to_fit_an_annotation():
    many = {"present": True, "health": {"status": "warning", "reasons": ["x" * 100] * 20}}
    text = plan(many, k8s())["patch"]["metadata"]["annotations"]["gpuops.io/gpu-health-reasons"]
    assert len(text) == f.MAX_REASONS_CHARS and text.endswith("...")


@pytest.mark.parametrize("options, facts, message", [
    ({"taint_effect": "PreferNoSchedule"}, OK, "taint effect must be one of NoSchedule, NoExecute, none"),
    ({}, {"present": True, "health": {"status": "bad"}}, "node n1: unknown health status 'bad'"),
])
def test_bad_input_fails_clearly(options, facts, message):
    with pytest.raises(AnsibleFilterError, match=message):
        plan(facts, k8s(), **options)


def test_report_line():
    p = plan(CRITICAL, k8s(), cordon=True)
    assert f.gpu_health_line(p, "would change") == (
        "critical (GPU 0: GPU is lost); would change: label gpuops.io/gpu-health=critical (was unset), "
        "annotation gpuops.io/gpu-health-reasons set, taint gpuops.io/gpu-unhealthy=true:NoSchedule, cordon")
    assert f.gpu_health_line(plan(OK, k8s(labels={"gpuops.io/gpu-health": "ok"}))) == "ok; no change"


def test_the_patches_are_those_of_the_plans_that_change_their_node():
    changing = plan(CRITICAL, k8s(taints=[FOREIGN]))
    unchanged = plan(OK, k8s(labels={"gpuops.io/gpu-health": "ok"}))
    assert changing["changed"] and not unchanged["changed"]
    assert f.gpu_health_patches([changing, unchanged]) == [{"name": "n1", "patch": changing["patch"]}]
    assert f.gpu_health_patches([]) == []
    for bad in ("n1", [None], None):
        with pytest.raises(AnsibleFilterError, match="gpu_health_patches needs the list that gpu_health_plan returns"):
            f.gpu_health_patches(bad)
