"""inventories/example holds what a site changes, and it plans.

The example is loaded as it is (hosts.yml and its group_vars) and cluster.yml
renders it, with recorded facts replayed on its GPU hosts, so it cannot go
stale. A render with no variables at all shows that each role's own
<role>_enabled default decides whether cluster.yml runs it.
"""
import re

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
    text = (ROOT / "playbooks" / "cluster.yml").read_text()
    assert not re.search(r"_enabled\s*\|\s*default\(", text)
    stack = [p for p in yaml.safe_load(text) if p["name"] == "Kubernetes GPU stack"]
    tasks = stack[0]["tasks"][0]["block"]
    for task in tasks:
        when = str(task.get("when", ""))
        if "_enabled" in when:
            # An include's condition is evaluated before the role (and its defaults) is loaded.
            assert "ansible.builtin.import_role" in task, task["name"]
            role = task["ansible.builtin.import_role"]["name"].split(".")[-1]
            assert when == "%s_enabled | bool" % role, task["name"]
    switched = {t["ansible.builtin.import_role"]["name"].split(".")[-1] for t in tasks if "_enabled" in str(t.get("when", ""))}
    assert switched == set(IMPORTED)
    assert DATA_ONLY and not [r for r in DATA_ONLY if r in text], "cluster.yml names a data-only add-on"
