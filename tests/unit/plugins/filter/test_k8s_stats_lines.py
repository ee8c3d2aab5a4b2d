"""The run summary: "planned" under --check, pruned and kept objects per layer."""
from ansible_collections.gpuops.platform.plugins.filter.k8s_objects import k8s_stats_lines

LAYERS = [{"name": "gpu_tenants", "order": 80, "objects": 9, "releases": [], "changed": True,
           "pruned": ["ResourceQuota team-b/gpuops-tenant", "Namespace team-b"],
           "kept": ["Namespace team-c (holds objects this collection did not create: ConfigMap team-c/notebooks)"]},
          {"name": "gpu_sharing", "order": 20, "objects": 2, "releases": [], "changed": False}]


def test_check_mode_says_planned():
    lines = k8s_stats_lines({"mode": "apply", "check": True, "objects": 11, "releases": 0, "layers": LAYERS})
    assert lines[0] == "Kubernetes GPU stack planned (check mode): 2 layers, 11 objects, 0 Helm releases"
    assert lines[1] == "20 gpu_sharing: 2 objects, unchanged"
    assert lines[2].startswith("80 gpu_tenants: 9 objects, changes planned, prune planned 2 "
                               "(ResourceQuota team-b/gpuops-tenant, Namespace team-b), kept 1 no longer planned")
    assert "applied" not in " ".join(lines)


def test_apply_mode_says_applied_and_pruned():
    lines = k8s_stats_lines({"mode": "apply", "check": False, "objects": 11, "releases": 0, "layers": LAYERS})
    assert lines[0].startswith("Kubernetes GPU stack applied:")
    assert ", changed, pruned 2 (" in lines[2]
