"""Conventions every role follows, so surveys, docs and argument validation agree."""
import pytest
import yaml

from conftest import ROOT

ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir()) if (ROOT / "roles").is_dir() else []


def _load(path):
    return yaml.safe_load(path.read_text()) if path.is_file() else None


@pytest.mark.parametrize("role", ROLES)
def test_role_has_docs_and_argument_specs(role):
    base = ROOT / "roles" / role
    assert (base / "README.md").is_file(), "%s has no README.md" % role
    specs = _load(base / "meta" / "argument_specs.yml")
    assert specs and "main" in specs["argument_specs"], "%s has no meta/argument_specs.yml main entry" % role


@pytest.mark.parametrize("role", ROLES)
def test_role_has_galaxy_metadata(role):
    """Galaxy's importer reads each role's description from meta/main.yml."""
    meta = _load(ROOT / "roles" / role / "meta" / "main.yml")
    assert meta, "%s has no meta/main.yml" % role
    info = meta["galaxy_info"]
    assert info["description"] and info["license"] == "Apache-2.0", role
    assert info["min_ansible_version"] == "2.17" and info["platforms"], role
    assert meta.get("dependencies") == [], role


@pytest.mark.parametrize("role", ROLES)
def test_role_variables_are_prefixed_and_specified(role):
    base = ROOT / "roles" / role
    defaults = _load(base / "defaults" / "main.yml") or {}
    options = (_load(base / "meta" / "argument_specs.yml") or {}).get("argument_specs", {}).get("main", {}).get("options", {}) or {}
    unprefixed = [k for k in defaults if not k.startswith(role + "_")]
    assert unprefixed == [], "%s: defaults must start with %s_" % (role, role)
    # A role may also document the platform-wide gpuops_* settings it reads.
    foreign = [k for k in options if not k.startswith((role + "_", "gpuops_"))]
    assert foreign == [], "%s: options must start with %s_ or gpuops_" % (role, role)
    # A data-only add-on (no tasks, so no vars/main.yml of its own) keeps the private values
    # that k8s_addons and k8s_apply read in its defaults; they are not options.
    private = {role + "__helm_values", role + "__wait_crds", role + "__refuse"} if not (base / "tasks").is_dir() else set()
    undocumented = sorted(set(defaults) - set(options) - private)
    assert undocumented == [], "%s: defaults missing from argument_specs" % role
    assert not private & set(options), "%s: private values are not options" % role
