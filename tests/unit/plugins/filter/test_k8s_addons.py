"""k8s_addon_roles: the data-only add-on roles that k8s_addons plans and applies,
so that cluster.yml never names them."""
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter.k8s_addons import FilterModule, k8s_addon_roles

ROLES = Path(__file__).resolve().parents[4] / "roles"


def role(root, name, defaults=None, tasks=False):
    base = root / name
    (base / "meta").mkdir(parents=True)
    if defaults is not None:
        (base / "defaults").mkdir()
        (base / "defaults" / "main.yml").write_text(defaults)
    if tasks:
        (base / "tasks").mkdir()
        (base / "tasks" / "main.yml").write_text("---\n[]\n")
    return base


def test_only_roles_without_tasks_whose_defaults_set_manage_release(tmp_path):
    role(tmp_path, "foo", "foo_enabled: false\nfoo_manage_release: true\n")
    role(tmp_path, "bar", "bar_enabled: true\nbar_manage_release: false\n")
    # An add-on with tasks of its own is run by cluster.yml, not by k8s_addons.
    role(tmp_path, "kuberay_like", "kuberay_like_manage_release: true\n", tasks=True)
    # Another role's release variable does not make this one an add-on.
    role(tmp_path, "helper", "foo_manage_release: true\n")
    role(tmp_path, "no_defaults")
    role(tmp_path, "empty", "")
    (tmp_path / "README.md").write_text("not a role\n")
    assert k8s_addon_roles(str(tmp_path)) == ["bar", "foo"]


def test_the_collections_own_data_only_add_ons():
    assert k8s_addon_roles(str(ROLES)) == ["dcgm_exporter", "kube_prometheus_stack", "prometheus_adapter"]


def test_a_missing_folder_and_unreadable_defaults_are_named(tmp_path):
    with pytest.raises(AnsibleFilterError, match="is not a folder of roles"):
        k8s_addon_roles(str(tmp_path / "nope"))
    role(tmp_path, "broken", "foo: [unclosed\n")
    with pytest.raises(AnsibleFilterError, match=r"cannot read .*broken/defaults/main\.yml"):
        k8s_addon_roles(str(tmp_path))


def test_the_filter_is_exported_by_name():
    assert FilterModule().filters() == {"k8s_addon_roles": k8s_addon_roles}
