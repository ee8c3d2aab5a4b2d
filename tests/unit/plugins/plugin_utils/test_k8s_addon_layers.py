"""The enabled add-ons' templates and layers (plugin_utils/k8s_addons.py)."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter.k8s_addon_layers import k8s_addon_layers, k8s_addon_templates


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


def test_a_count_that_does_not_match_fails_clearly(tmp_path):
    with pytest.raises(AnsibleFilterError, match="2 roles but 1 switches"):
        k8s_addon_templates(["a", "b"], [True], str(tmp_path))


def test_one_layer_per_enabled_add_on_with_its_order_release_template_crds_and_refusal():
    templates = {"kube_prometheus_stack": "/roles/kube_prometheus_stack/templates/objects.yml.j2", "dcgm_exporter": ""}
    values = [15, True, ["prometheuses.monitoring.coreos.com"], [],
              86, "false", ["unused.example.com"], "the GPU Operator runs its own DCGM exporter"]
    assert k8s_addon_layers(templates, values) == [
        {"layer": "kube_prometheus_stack", "order": 15, "release_from": "kube_prometheus_stack", "template": True,
         "wait_crds": ["prometheuses.monitoring.coreos.com"], "errors": []},
        # Without its release, no chart installs the CRDs: nothing to wait for. Its refusal is the layer's error.
        {"layer": "dcgm_exporter", "order": 86, "release_from": "dcgm_exporter", "template": False, "wait_crds": [],
         "errors": ["the GPU Operator runs its own DCGM exporter"]}]
    with pytest.raises(AnsibleFilterError, match="7 values for 2 add-ons"):
        k8s_addon_layers(templates, values[:7])
