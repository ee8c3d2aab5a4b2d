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
def test_role_variables_are_prefixed_and_specified(role):
    base = ROOT / "roles" / role
    defaults = _load(base / "defaults" / "main.yml") or {}
    options = (_load(base / "meta" / "argument_specs.yml") or {}).get("argument_specs", {}).get("main", {}).get("options", {}) or {}
    unprefixed = [k for k in list(defaults) + list(options) if not k.startswith(role + "_")]
    assert unprefixed == [], "%s: variables must start with %s_" % (role, role)
    undocumented = sorted(set(defaults) - set(options))
    assert undocumented == [], "%s: defaults missing from argument_specs" % role
