"""The Helm release options of the add-on roles are defined once.

roles/k8s_apply/meta/release_options.yml holds them; scripts/release_specs.py
writes them into each add-on role's argument specs, and k8s_apply builds the
release from them (k8s_apply_release_from), so no role restates the mapping.
"""
import importlib.util
import shutil

import pytest
import yaml

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("release_specs", ROOT / "scripts" / "release_specs.py")
release_specs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(release_specs)

ADDONS = release_specs.addon_roles()
# Data-only add-ons have no tasks: gpuops.platform.k8s_addons hands their release to k8s_apply.
WITH_TASKS = [r for r in ADDONS if (ROOT / "roles" / r / "tasks").is_dir()]
SHARED = yaml.safe_load((ROOT / "roles" / "k8s_apply" / "meta" / "release_options.yml").read_text())


def test_the_add_on_roles_are_found():
    assert ADDONS == ["dcgm_exporter", "dra_driver", "gpu_operator", "kai_scheduler", "kube_prometheus_stack", "kuberay", "kueue",
                      "network_operator", "prometheus_adapter", "volcano"]
    assert sorted(set(ADDONS) - set(WITH_TASKS)) == ["dcgm_exporter", "kube_prometheus_stack", "prometheus_adapter"]


def test_no_add_on_spec_is_stale():
    assert release_specs.main(["--check"]) == 0, "run: python scripts/release_specs.py"


@pytest.mark.parametrize("role", ADDONS)
def test_each_add_on_spec_carries_the_shared_options_with_the_role_defaults(role):
    base = ROOT / "roles" / role
    defaults = yaml.safe_load((base / "defaults" / "main.yml").read_text())
    entries = yaml.safe_load((base / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    # A role with tasks has plan and apply entry points too (gpu_operator also ready); a data-only add-on only main.
    wanted = ("main", "plan", "apply") if role in WITH_TASKS else ("main",)
    assert set(wanted) <= set(entries) and (role in WITH_TASKS or list(entries) == ["main"]), role
    for entry in wanted:
        options = entries[entry]["options"]
        for key, shared in SHARED.items():
            name = key.replace("<role>", role)
            assert options[name]["type"] == shared["type"], (role, entry, name)
            assert options[name]["default"] == defaults[name], (role, entry, name)
            assert options[name]["description"] == (
                shared["description"].replace("<role>", role).replace("<default>", str(defaults[name]))), (role, name)


@pytest.mark.parametrize("role", WITH_TASKS)
def test_each_add_on_hands_its_release_to_k8s_apply_by_name(role):
    """Its layer names the role as the release's source (k8s_apply builds the release from the shared
    options), and its apply hands that layer to k8s_apply, as cluster.yml does with every layer."""
    base = ROOT / "roles" / role
    role_vars = yaml.safe_load((base / "vars" / "main.yml").read_text()) or {}
    layer = role_vars[role + "__layer"]
    assert layer["layer"] == role and layer["release_from"] == role
    assert "releases" not in layer, role
    apply = yaml.safe_load((base / "tasks" / "apply.yml").read_text())
    calls = [t for t in apply if t.get("ansible.builtin.include_role", {}).get("name") == "gpuops.platform.k8s_apply"]
    assert [c["ansible.builtin.include_role"].get("tasks_from") for c in calls] == ["layers"]
    assert [c["vars"]["k8s_apply_layers"] for c in calls] == ["{{ [%s__layer] }}" % role]
    assert role + "__helm_release" not in role_vars, "%s restates the release mapping" % role
    assert role + "__helm_values" in role_vars, "%s: k8s_apply reads %s__helm_values" % (role, role)


def test_check_names_a_spec_that_differs_from_the_shared_definition(tmp_path, monkeypatch, capsys):
    shutil.copytree(ROOT / "roles", tmp_path / "roles")
    path = tmp_path / "roles" / "kuberay" / "meta" / "argument_specs.yml"
    path.write_text(path.read_text().replace("description: Helm release name.", "description: The release."))
    monkeypatch.setattr(release_specs, "ROOT", tmp_path)
    monkeypatch.setattr(release_specs, "SHARED", tmp_path / "roles" / "k8s_apply" / "meta" / "release_options.yml")
    assert release_specs.main(["--check"]) == 1
    assert "roles/kuberay/meta/argument_specs.yml" in capsys.readouterr().out
    # Without --check the spec is rewritten, and then it is current.
    assert release_specs.main([]) == 0
    assert "description: Helm release name." in path.read_text()
    assert release_specs.main(["--check"]) == 0


def test_a_default_missing_from_an_add_on_is_refused(tmp_path, monkeypatch):
    shutil.copytree(ROOT / "roles", tmp_path / "roles")
    path = tmp_path / "roles" / "volcano" / "defaults" / "main.yml"
    path.write_text(path.read_text().replace("volcano_chart_path:", "volcano_chart_archive:"))
    monkeypatch.setattr(release_specs, "ROOT", tmp_path)
    monkeypatch.setattr(release_specs, "SHARED", tmp_path / "roles" / "k8s_apply" / "meta" / "release_options.yml")
    with pytest.raises(SystemExit, match="volcano_chart_path"):
        release_specs.main(["--check"])
