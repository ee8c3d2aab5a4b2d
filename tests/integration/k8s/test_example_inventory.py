"""inventories/example holds what a site changes, and it plans.

The example is loaded as it is (hosts.yml and its group_vars) and cluster.yml
renders it, with recorded facts replayed on its GPU hosts, so it cannot go
stale. A render with no variables at all shows that each role's own
<role>_enabled default decides whether cluster.yml runs it.
"""
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from k8s_support import ROOT

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "inventories" / "example"
# Roles cluster.yml imports, each only when its <role>_enabled is true.
IMPORTED = ["volcano", "kueue", "kuberay", "kai_scheduler", "dra_driver", "network_operator", "gpu_smoke_test",
            "gpu_monitoring"]
# The data-only add-ons (no tasks), which k8s_addons runs when <role>_enabled is true; cluster.yml never names them.
DATA_ONLY = sorted(p.parent.parent.name for p in (ROOT / "roles").glob("*/defaults/main.yml")
                   if not (p.parent.parent / "tasks").is_dir()
                   and p.parent.parent.name + "_manage_release" in (yaml.safe_load(p.read_text()) or {}))
SWITCHED = IMPORTED + DATA_ONLY


def _role_default(name):
    role = next(r for r in SWITCHED if name == r + "_enabled")
    return yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())[name]


def _all_role_defaults():
    out = {}
    for path in sorted((ROOT / "roles").glob("*/defaults/main.yml")):
        out.update(yaml.safe_load(path.read_text()) or {})
    return out


@pytest.fixture(scope="module")
def example(render):
    nodes = {"hgx-h100-%02d.gpu.example.com" % i: {"facts": "hgx-h100"} for i in range(1, 5)}
    nodes.update({"l40s-%02d.gpu.example.com" % i: {"facts": "l40s"} for i in range(1, 7)})
    return render("example-inventory", nodes=nodes, inventory=EXAMPLE / "hosts.yml")


@pytest.fixture(scope="module")
def bare(render):
    """No variable at all: every role runs on its own defaults."""
    return render("role-defaults", nodes={"gpu-a": {"facts": "hgx-h100"}})


def test_the_example_sets_no_role_default_again():
    defaults = _all_role_defaults()
    copies = []
    for path in sorted(EXAMPLE.rglob("*.yml")):
        if "group_vars" not in path.parts and "host_vars" not in path.parts:
            continue
        for name, value in (yaml.safe_load(path.read_text()) or {}).items():
            if name in defaults and defaults[name] == value:
                copies.append("%s: %s" % (path.relative_to(EXAMPLE), name))
    assert copies == [], "the example restates role defaults: %s" % copies


def test_the_example_names_only_known_variables():
    known = set(_all_role_defaults())
    for path in (ROOT / "roles").glob("*/meta/argument_specs.yml"):
        for entry in (yaml.safe_load(path.read_text())["argument_specs"] or {}).values():
            known.update((entry or {}).get("options") or {})
    for path in sorted(EXAMPLE.rglob("group_vars/*/*.yml")):
        for name in yaml.safe_load(path.read_text()) or {}:
            assert name in known or name.startswith("gpuops_"), "%s: unknown %s" % (path, name)


def test_the_example_plans_what_it_sets(example):
    layers = set(example.layers)
    # On by its own default, and switched on by the example.
    assert {"gpu_operator", "gpu_sharing", "gpu_nodes", "volcano", "kueue", "kuberay", "gpu_tenants",
            "gpu_monitoring", "gpu_smoke_test"} <= layers, sorted(layers)
    assert not layers & {"kai_scheduler", "dra_driver", "network_operator"}, sorted(layers)
    assert {t["metadata"]["name"] for t in example.find("Namespace")} >= {"research", "inference"}
    ray = example.one("RayCluster", "ray-gpu", "research")
    assert ray["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research"
    # The pools' sharing choices reach the nodes.
    configs = {n["metadata"]["name"]: n["metadata"]["labels"].get("nvidia.com/device-plugin.config")
               for n in example.find("Node")}
    assert configs["l40s-01.gpu.example.com"] == "ts4" and configs["hgx-h100-01.gpu.example.com"] == "default"


def test_each_role_default_decides_whether_cluster_yml_runs_it(bare):
    on = {r for r in SWITCHED if _role_default(r + "_enabled")}
    assert on == {"volcano", "kueue", "kuberay", "gpu_smoke_test"}  # the documented defaults
    for role in SWITCHED:
        assert (role in bare.layers) == (role in on), (role, sorted(bare.layers))


def test_cluster_yml_restates_no_enabled_default():
    """cluster.yml leaves out the roles check_variables reports switched off (<role>_enabled as set, or the
    role's argument spec default): it restates no default and lists every switched role once."""
    text = (ROOT / "playbooks" / "cluster.yml").read_text()
    assert not re.search(r"_enabled\s*\|\s*default\(", text)
    stack = [p for p in yaml.safe_load(text) if p["name"] == "Kubernetes GPU stack"][0]
    roles = stack["vars"]["gpuops__k8s_roles"]
    assert set(IMPORTED) <= set(roles) and len(roles) == len(set(roles))
    assert "gpuops__variables_checked.enabled" in stack["vars"]["gpuops__k8s_off"]
    tasks = stack["tasks"][0]["block"]
    plan = [t for t in tasks if t["name"] == "Plan each layer"][0]
    assert plan["loop"] == "{{ gpuops__k8s_planned }}"
    assert not [t for t in tasks if "_enabled" in str(t.get("when", ""))]
    assert DATA_ONLY and not [r for r in DATA_ONLY if r in text], "cluster.yml names a data-only add-on"


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """The README's offline plan: the example as it is, plus inventories/example-offline.yml."""
    installed = ROOT / "collections" / "ansible_collections" / "gpuops" / "platform"
    assert installed.is_dir(), "run scripts/bootstrap.sh first: ansible-playbook needs the installed collection"
    out = tmp_path_factory.mktemp("example-offline")
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "inventories/example/hosts.yml",
         "-i", "inventories/example-offline.yml", "playbooks/plan_fleet.yml", "playbooks/cluster.yml", "--check",
         "-e", "gpuops_fleet_report_dir=%s" % (out / "fleet"), "-e", "gpuops_k8s_render_dir=%s" % (out / "rendered")],
        cwd=str(ROOT), capture_output=True, text=True, check=False, timeout=600,
        env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return out, json.loads((out / "fleet" / "plan.json").read_text())


def test_the_example_plans_offline_end_to_end_through_capacity(offline):
    out, plan = offline
    s = plan["summary"]
    assert plan["valid"] and s["hosts"] == 10 and s["hosts_invalid"] == [] and s["invalid_mig"] == []
    assert plan["mig_strategy"] == "mixed"
    # The H100 pool's inference-mixed layout: GPUs 0-3 as 3g.40gb + 4 x 1g.10gb, GPUs 4-7 whole; each L40S
    # time-sliced four ways (ts4).
    assert s["mig_changes"] == ["hgx-h100-%02d.gpu.example.com" % i for i in range(1, 5)]
    assert s["capacity"] == {"nvidia.com/mig-3g.40gb": 16, "nvidia.com/mig-1g.10gb": 64, "nvidia.com/gpu": 16 + 6 * 4}
    # The Kubernetes layer is rendered with the same strategy and the inference quota fits the fleet.
    values = yaml.safe_load((out / "rendered" / "10-gpu_operator" / "helm" / "gpu-operator" / "values.yaml").read_text())
    assert values["mig"]["strategy"] == "mixed"
    quotas = [d for d in yaml.safe_load_all((out / "rendered" / "80-gpu_tenants" / "manifests.yaml").read_text())
              if d and d["kind"] == "ResourceQuota" and d["metadata"]["namespace"] == "inference"]
    assert quotas and quotas[0]["spec"]["hard"]["requests.nvidia.com/gpu"] in (16, "16")


def test_the_offline_overlay_changes_only_how_the_site_is_reached_and_its_facts():
    overlay = yaml.safe_load((ROOT / "inventories" / "example-offline.yml").read_text())["all"]
    assert set(overlay["vars"]) == {"ansible_connection", "ansible_python_interpreter", "ansible_become",
                                    "gpuops_nodes_become", "gpuops_nodes_plan_only", "gpuops_k8s_render_dir",
                                    "gpuops_fleet_publish_facts"}
    pools = overlay["children"]
    assert {g: set(v["vars"]) for g, v in pools.items()} == {
        "hgx_h100": {"gpuops_nvml_replay_file"}, "inference_l40s": {"gpuops_nvml_replay_file"}}
    for group in pools.values():
        facts = group["vars"]["gpuops_nvml_replay_file"].replace("{{ inventory_dir }}", str(EXAMPLE))
        assert os.path.isfile(os.path.normpath(facts)), facts


def test_the_example_mig_layout_and_strategy_agree():
    mig = yaml.safe_load((EXAMPLE / "group_vars" / "gpu_nodes" / "mig.yml").read_text())
    layout = mig["mig_config"]["mig-configs"][mig["mig_config_name"]]
    half = any(e.get("mig-enabled") for e in layout) and any(not e.get("mig-enabled") for e in layout)
    k8s = yaml.safe_load((EXAMPLE / "group_vars" / "all" / "k8s.yml").read_text())
    strategy = k8s.get("gpuops_k8s_mig_strategy", "single")
    assert not half or strategy == "mixed", "a half-MIG layout needs gpuops_k8s_mig_strategy: mixed"


def test_the_cluster_layer_runs_as_many_tasks_for_any_number_of_gpu_nodes(render):
    """Each GPU node planned from its recorded facts (as the example offline plans them): cluster.yml loads them
    all in one task and plans them in one pass, so its tasks do not grow with the nodes, and every node still gets
    its label patch."""
    fixtures = ROOT / "tests" / "fixtures" / "nvml"
    tasks = {}
    for count in (2, 12):
        nodes = dict(("gpu-%02d" % i, {"vars": {"gpuops_nvml_replay_file": str(fixtures / (
            "hgx-h100.json" if i % 2 else "l40s.json"))}}) for i in range(1, count + 1))
        rendered = render("gpu-nodes-%d" % count, nodes=nodes)
        assert sorted(o["metadata"]["name"] for o in rendered.objects if o["kind"] == "Node") == sorted(nodes)
        tasks[count] = rendered.tasks
    assert tasks[2] == tasks[12], tasks
