"""Every module declares the same attributes through gpuops.platform.attributes, described once."""
import pathlib

import pytest
import yaml

from ansible.utils.plugin_docs import merge_fragment

from ansible_collections.gpuops.platform.plugins.doc_fragments.attributes import ModuleDocFragment

MODULES = sorted((pathlib.Path(__file__).resolve().parents[4] / "plugins" / "modules").glob("*.py"))
REQUIRED = ("check_mode", "diff_mode", "platform", "idempotent")


def _doc(path):
    text = path.read_text()
    start = text.index('DOCUMENTATION = r"""') + len('DOCUMENTATION = r"""')
    return yaml.safe_load(text[start:text.index('"""', start)])


def _attributes(doc):
    """The module's attributes after ansible's fragment merge (the module's own keys win)."""
    merged = {k: dict(v) for k, v in doc.get("attributes", {}).items()}
    for name in doc.get("extends_documentation_fragment", []):
        if not name.startswith("gpuops.platform.attributes"):
            continue
        variant = name.split(".")[3].upper() if name.count(".") == 3 else "DOCUMENTATION"
        fragment = yaml.safe_load(getattr(ModuleDocFragment, variant))["attributes"]
        merge_fragment(merged, {k: dict(v) for k, v in fragment.items()})
    return merged


def test_every_module_is_found():
    assert len(MODULES) >= 11


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_module_uses_the_collection_fragment_only(path):
    doc = _doc(path)
    fragments = doc.get("extends_documentation_fragment", [])
    assert "gpuops.platform.attributes" in fragments
    assert not [f for f in fragments if f.startswith("ansible.builtin.action_common_attributes")]
    # Descriptions live in the fragment once; a module only says how it supports them.
    assert [k for k, v in doc.get("attributes", {}).items() if "description" in v] == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_module_declares_the_common_attributes(path):
    attributes = _attributes(_doc(path))
    for key in REQUIRED:
        assert attributes[key].get("description"), (path.stem, key)
        assert attributes[key].get("support") in ("full", "partial", "none", "N/A"), (path.stem, key)
    assert attributes["platform"].get("platforms") in ("posix", "all")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_action_backed_modules_use_the_controller_variant(path):
    action = (path.parents[1] / "action" / path.name).exists()
    fragments = _doc(path)["extends_documentation_fragment"]
    # controller: the whole work runs there; node_action: the action plugin only prepares a node module's arguments.
    variants = [f for f in fragments if f in ("gpuops.platform.attributes.controller", "gpuops.platform.attributes.node_action")]
    assert len(variants) == (1 if action else 0), (path.stem, variants)
    if action:
        assert ("gpuops.platform.attributes.node" in fragments) == (variants == ["gpuops.platform.attributes.node_action"])
    assert ("action" in _attributes(_doc(path))) == action
