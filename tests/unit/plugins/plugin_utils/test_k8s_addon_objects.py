"""The enabled add-ons' templates and objects (plugin_utils/k8s_addons.py)."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter.k8s_addon_objects import k8s_addon_objects, k8s_addon_templates


def addon(root, name, template=True):
    base = root / name / "templates"
    base.mkdir(parents=True)
    if template:
        (base / "objects.yml.j2").write_text("---\n")
    return str(base / "objects.yml.j2")


def test_only_enabled_add_ons_in_order_and_those_without_a_template_get_none(tmp_path):
    stack = addon(tmp_path, "stack")
    addon(tmp_path, "adapter", template=False)
    addon(tmp_path, "off")
    assert k8s_addon_templates(["stack", "adapter", "off"], [True, True, False], str(tmp_path)) == {"stack": stack, "adapter": ""}
    assert k8s_addon_templates([], [], str(tmp_path)) == {}


def test_objects_are_keyed_by_role_and_empty_documents_dropped():
    got = k8s_addon_objects({"a": "/a.j2", "b": "", "c": "/c.j2"}, [[None, {"kind": "Namespace"}], [{"kind": "ConfigMap"}, {}]])
    assert got == {"a": [{"kind": "Namespace"}], "b": [], "c": [{"kind": "ConfigMap"}]}


def test_a_count_that_does_not_match_fails_clearly(tmp_path):
    with pytest.raises(AnsibleFilterError, match="2 roles but 1 switches"):
        k8s_addon_templates(["a", "b"], [True], str(tmp_path))
    with pytest.raises(AnsibleFilterError, match="1 templates but 0 rendered"):
        k8s_addon_objects({"a": "/a.j2"}, [])
