"""containerd config edits: versions 2 and 3, in place and as a drop-in."""
import os

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import ConfigError
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.containerd import (
    config_version_for,
    plan_containerd,
)
from container_runtime_helpers import CRI2, CRI3, fixture_text, load_toml, place, runtimes, snapshot

NVIDIA_BIN = "/usr/bin/nvidia-container-runtime"


def apply(plan):
    for edit in plan.changed_edits:
        os.makedirs(os.path.dirname(edit.path), exist_ok=True)
        with open(edit.path, "w") as handle:
            handle.write(edit.after)


def without(data, plugin, *names):
    """The parsed config without the keys the NVIDIA edit may touch."""
    cri = data["plugins"][plugin]
    for name in names:
        cri["containerd"]["runtimes"].pop(name, None)
    cri["containerd"].pop("default_runtime_name", None)
    cri.pop("enable_cdi", None)
    data.pop("imports", None)
    return data


@pytest.mark.parametrize("output, version", [
    ("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3", 2),
    ("containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da", 2),
    ("containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7193e4e490e9fbdc236c0e811ccaba3376", 3),
    ("containerd github.com/k3s-io/containerd v2.0.5-k3s1 ", 3),
    ("containerd: command not found", None),
    ("", None),
])
def test_config_version_from_containerd_version(output, version):
    assert config_version_for(output) == version


class TestInPlace:
    def test_v2_kubeadm_config_gets_a_runc_like_nvidia_runtime(self, tmp_path):
        original = fixture_text("containerd-1.7-kubeadm.toml")
        path = place(tmp_path, "etc/containerd/config.toml", original)
        plan = plan_containerd(path)
        assert (plan.config_version, plan.plugin) == (2, CRI2)
        after = plan.edits[0].after
        data = load_toml(after)
        rts = runtimes(data, CRI2)
        assert rts["nvidia"]["runtime_type"] == "io.containerd.runc.v2"
        assert rts["nvidia"]["options"]["BinaryName"] == NVIDIA_BIN
        assert rts["nvidia"]["options"]["SystemdCgroup"] is True
        # every runc option except the binary is inherited
        runc_opts = dict(rts["runc"]["options"], BinaryName=NVIDIA_BIN)
        assert rts["nvidia"]["options"] == runc_opts
        assert rts["nvidia"]["sandbox_mode"] == "podsandbox"
        # the rest of the file, comments included, is untouched
        assert data["imports"] == []
        assert without(data, CRI2, "nvidia") == without(load_toml(original), CRI2)
        assert "# kubelet runs with the systemd cgroup driver" in after
        assert after.count("# kubelet runs with the systemd cgroup driver") == 1  # not copied onto nvidia
        assert original.splitlines()[:60] == after.splitlines()[:60]
        # the new table sits right after runc and reads like it
        assert '\n        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n' \
               '          base_runtime_spec = ""\n' in after
        # no default runtime, no CDI unless asked
        assert 'default_runtime_name = "runc"' in after
        assert "enable_cdi = false" in after

    def test_v2_default_and_cdi(self, tmp_path):
        path = place(tmp_path, "etc/containerd/config.toml", fixture_text("containerd-1.7-kubeadm.toml"))
        after = plan_containerd(path, set_as_default=True, enable_cdi=True).edits[0].after
        cri = load_toml(after)["plugins"][CRI2]
        assert cri["containerd"]["default_runtime_name"] == "nvidia"
        assert cri["enable_cdi"] is True
        assert cri["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
        assert "    enable_cdi = true\n" in after  # replaced on its line, indentation kept

    def test_cdi_spec_dir_added_when_the_list_leaves_it_out(self, tmp_path):
        text = fixture_text("containerd-1.7-kubeadm.toml").replace(
            'cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]', 'cdi_spec_dirs = ["/etc/cdi"]')
        path = place(tmp_path, "etc/containerd/config.toml", text)
        after = plan_containerd(path, enable_cdi=True).edits[0].after
        assert load_toml(after)["plugins"][CRI2]["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]

    def test_v3_containerd2_default(self, tmp_path):
        original = fixture_text("containerd-2.1-default.toml")
        path = place(tmp_path, "etc/containerd/config.toml", original)
        plan = plan_containerd(path, set_as_default=True)
        assert (plan.config_version, plan.plugin) == (3, CRI3)
        after = plan.edits[0].after
        data = load_toml(after)
        rts = runtimes(data, CRI3)
        assert rts["nvidia"]["options"]["BinaryName"] == NVIDIA_BIN
        assert rts["nvidia"]["options"]["SystemdCgroup"] is True
        assert rts["nvidia"]["sandboxer"] == "podsandbox"
        assert data["plugins"][CRI3]["containerd"]["default_runtime_name"] == "nvidia"
        # containerd 2.x writes 'literal' strings; edited values keep that style
        assert "default_runtime_name = 'nvidia'" in after
        assert "BinaryName = '%s'" % NVIDIA_BIN in after
        # the v2 plugin name is not used for v3 configs
        assert "runtimes" not in data["plugins"].get(CRI2, {}).get("containerd", {})
        assert without(data, CRI3, "nvidia") == without(load_toml(original), CRI3)

    def test_minimal_config_without_runc_gets_defaults(self, tmp_path):
        path = place(tmp_path, "etc/containerd/config.toml", "version = 2\n")
        after = plan_containerd(path, systemd_cgroup=True).edits[0].after
        nvidia = runtimes(load_toml(after), CRI2)["nvidia"]
        assert nvidia == {"runtime_type": "io.containerd.runc.v2",
                          "options": {"BinaryName": NVIDIA_BIN, "SystemdCgroup": True}}

    def test_missing_config_is_created_for_the_detected_version(self, tmp_path):
        path = str(tmp_path / "etc/containerd/config.toml")
        plan = plan_containerd(path, config_version=3)
        edit = plan.edits[0]
        assert edit.before is None
        data = load_toml(edit.after)
        assert data["version"] == 3
        assert runtimes(data, CRI3)["nvidia"]["options"]["BinaryName"] == NVIDIA_BIN

    def test_inherits_from_the_default_runtime_first(self, tmp_path):
        # k3s-like: crun is the default, so the NVIDIA runtime inherits crun's settings
        text = fixture_text("k3s-rewritten.toml").replace(
            '  snapshotter = "overlayfs"\n', '  snapshotter = "overlayfs"\n  default_runtime_name = "crun"\n')
        path = place(tmp_path, "etc/containerd/config.toml", text)
        nvidia = runtimes(load_toml(plan_containerd(path).edits[0].after), CRI2)["nvidia"]
        assert nvidia["options"] == {"BinaryName": NVIDIA_BIN, "SystemdCgroup": True}

    def test_custom_runtime_path_and_name(self, tmp_path):
        path = place(tmp_path, "etc/containerd/config.toml", fixture_text("containerd-1.6-default.toml"))
        plan = plan_containerd(path, runtime_name="nvidia-legacy", runtime_path="/opt/nvidia/bin/ncr")
        rts = runtimes(load_toml(plan.edits[0].after), CRI2)
        assert rts["nvidia-legacy"]["options"]["BinaryName"] == "/opt/nvidia/bin/ncr"
        assert "nvidia" not in rts

    @pytest.mark.parametrize("fixture", [
        "containerd-1.6-default.toml", "containerd-1.7-kubeadm.toml", "containerd-2.1-default.toml",
        "containerd-2.2-default-imports.toml", "k3s-rewritten.toml",
    ])
    @pytest.mark.parametrize("mode", ["in_place", "drop_in"])
    def test_idempotent(self, tmp_path, fixture, mode):
        path = place(tmp_path, "etc/containerd/config.toml", fixture_text(fixture))
        first = plan_containerd(path, mode=mode, set_as_default=True, enable_cdi=True)
        assert first.changed
        apply(first)
        second = plan_containerd(path, mode=mode, set_as_default=True, enable_cdi=True)
        assert not second.changed, [e.path for e in second.changed_edits]
        assert second.warnings == []


class TestBuiltinRuntimes:
    """Debian's containerd package ships a config that names no runtime: containerd runs its built-in runc."""

    def default_runtimes(self):
        return runtimes(load_toml(fixture_text("containerd-1.6-default.toml")), CRI2)

    @pytest.mark.parametrize("mode", ["in_place", "drop_in"])
    def test_builtin_runc_is_written_out_before_the_nvidia_runtime(self, tmp_path, mode):
        path = place(tmp_path, "etc/containerd/config.toml", fixture_text("containerd-1.6-debian12-package.toml"))
        asked = []

        def builtins(version):
            asked.append(version)
            return self.default_runtimes()

        plan = plan_containerd(path, mode=mode, systemd_cgroup=True, builtin_runtimes=builtins)
        assert asked == [2]
        data = load_toml(plan.edits[-1].after)
        rts = runtimes(data, CRI2)
        # naming only nvidia would replace containerd's runtime map: runc (the default) would be gone
        assert rts["runc"] == self.default_runtimes()["runc"]
        assert rts["runc"]["options"]["SystemdCgroup"] is False  # runc untouched
        assert rts["nvidia"]["options"] == dict(self.default_runtimes()["runc"]["options"],
                                                BinaryName=NVIDIA_BIN, SystemdCgroup=True)
        assert data["plugins"][CRI2]["cni"]["bin_dir"] == "/usr/lib/cni"
        apply(plan)
        assert not plan_containerd(path, mode=mode, systemd_cgroup=True, builtin_runtimes=builtins).changed

    def test_without_containerd_a_plain_runc(self, tmp_path):
        path = place(tmp_path, "etc/containerd/config.toml", fixture_text("containerd-1.6-debian12-package.toml"))
        rts = runtimes(load_toml(plan_containerd(path).edits[0].after), CRI2)
        assert rts["runc"] == {"runtime_type": "io.containerd.runc.v2"}
        assert rts["nvidia"] == {"runtime_type": "io.containerd.runc.v2", "options": {"BinaryName": NVIDIA_BIN}}

    def test_new_tables_are_indented_like_containerd_writes_them(self, tmp_path):
        path = place(tmp_path, "etc/containerd/config.toml", fixture_text("containerd-1.6-debian12-package.toml"))
        after = plan_containerd(path, set_as_default=True).edits[0].after
        assert '\n      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]\n' in after
        assert '\n        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n' \
               '          runtime_type = "io.containerd.runc.v2"\n' in after
        assert '\n          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n' \
               '            BinaryName = "%s"\n' % NVIDIA_BIN in after
        assert '    [plugins."io.containerd.grpc.v1.cri".containerd]\n      default_runtime_name = "nvidia"\n' in after


def test_layout_tomlkit_cannot_reproduce_does_not_churn(tmp_path):
    # Indented sibling tables below an implicit table come back from tomlkit
    # further indented on every parse/dump: only a change of meaning may be written.
    text = (
        'version = 2\n\n[plugins]\n  [plugins."io.containerd.grpc.v1.cri"]\n'
        '    sandbox_image = "registry.k8s.io/pause:3.8"\n\n'
        '        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
        '          runtime_type = "io.containerd.runc.v2"\n\n'
        '        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]\n'
        '          runtime_type = "io.containerd.kata.v2"\n\n'
        '        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        '          runtime_type = "io.containerd.runc.v2"\n\n'
        '          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        '            BinaryName = "/usr/bin/nvidia-container-runtime"\n'
    )
    path = place(tmp_path, "etc/containerd/config.toml", text)
    plan = plan_containerd(path)
    assert not plan.changed
    assert plan.edits[0].after == text
    # a real change is written, and the next run is quiet again
    apply(plan_containerd(path, set_as_default=True))
    assert runtimes(load_toml(open(path).read()), CRI2)["kata"] == {"runtime_type": "io.containerd.kata.v2"}
    assert not plan_containerd(path, set_as_default=True).changed


class TestRepair:
    def test_config_rewritten_by_another_tool_gets_the_runtime_back(self, tmp_path):
        rewritten = fixture_text("k3s-rewritten.toml")
        path = place(tmp_path, "etc/containerd/config.toml", rewritten)
        apply(plan_containerd(path))
        # the distribution tool regenerates its config: the NVIDIA runtime is gone
        place(tmp_path, "etc/containerd/config.toml", rewritten)
        plan = plan_containerd(path)
        assert plan.changed
        data = load_toml(plan.edits[0].after)
        assert runtimes(data, CRI2)["nvidia"]["options"]["BinaryName"] == NVIDIA_BIN
        assert "# File generated by k3s. DO NOT EDIT. Use config.toml.tmpl instead." in plan.edits[0].after
        assert set(runtimes(data, CRI2)) == {"runc", "crun", "nvidia"}

    def test_drifted_nvidia_runtime_is_corrected_and_operator_keys_kept(self, tmp_path):
        text = fixture_text("k3s-rewritten.toml") + (
            '\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
            '  runtime_type = "io.containerd.runc.v1"\n'
            '  privileged_without_host_devices = true\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
            '  BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"\n'
            '  SystemdCgroup = false\n')
        path = place(tmp_path, "etc/containerd/config.toml", text)
        nvidia = runtimes(load_toml(plan_containerd(path).edits[0].after), CRI2)["nvidia"]
        assert nvidia["runtime_type"] == "io.containerd.runc.v2"
        assert nvidia["options"] == {"BinaryName": NVIDIA_BIN, "SystemdCgroup": True}  # follows runc
        assert nvidia["privileged_without_host_devices"] is True  # the operator's choice stays


class TestDropIn:
    def test_v2_drop_in_carries_the_whole_cri_section(self, tmp_path):
        original = fixture_text("containerd-1.7-kubeadm.toml")
        path = place(tmp_path, "etc/containerd/config.toml", original)
        plan = plan_containerd(path, mode="drop_in", set_as_default=True)
        main, drop_in = plan.edits
        assert drop_in.path == str(tmp_path / "etc/containerd/conf.d/99-nvidia.toml")
        assert drop_in.before is None
        main_data = load_toml(main.after)
        assert main_data["imports"] == [str(tmp_path / "etc/containerd/conf.d/*.toml")]
        assert without(main_data, CRI2) == without(load_toml(original), CRI2)  # only imports changed
        data = load_toml(drop_in.after)
        assert data["version"] == 2
        assert set(data) == {"version", "plugins"}
        cri = data["plugins"][CRI2]
        # containerd 1.x replaces the whole section on import: all of it is there
        assert cri["sandbox_image"] == "registry.k8s.io/pause:3.8"
        assert cri["containerd"]["runtimes"]["runc"] == runtimes(load_toml(original), CRI2)["runc"]
        assert cri["containerd"]["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is True
        assert cri["containerd"]["default_runtime_name"] == "nvidia"

    def test_v2_drop_in_follows_changes_of_the_main_config(self, tmp_path):
        path = place(tmp_path, "etc/containerd/config.toml", fixture_text("containerd-1.7-kubeadm.toml"))
        apply(plan_containerd(path, mode="drop_in"))
        text = open(path).read().replace("pause:3.8", "pause:3.10")
        with open(path, "w") as handle:
            handle.write(text)
        plan = plan_containerd(path, mode="drop_in")
        assert [e.path for e in plan.changed_edits] == [str(tmp_path / "etc/containerd/conf.d/99-nvidia.toml")]
        assert load_toml(plan.edits[1].after)["plugins"][CRI2]["sandbox_image"] == "registry.k8s.io/pause:3.10"

    def test_v3_drop_in_holds_only_the_runtime(self, tmp_path):
        original = fixture_text("containerd-2.1-default.toml")
        path = place(tmp_path, "etc/containerd/config.toml", original)
        main, drop_in = plan_containerd(path, mode="drop_in", enable_cdi=True).edits
        data = load_toml(drop_in.after)
        assert data["version"] == 3
        cri = data["plugins"][CRI3]
        assert set(cri) == {"containerd", "enable_cdi"}
        assert set(cri["containerd"]) == {"runtimes"}
        assert set(cri["containerd"]["runtimes"]) == {"nvidia"}
        assert cri["containerd"]["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is True
        assert load_toml(main.after)["imports"] == [str(tmp_path / "etc/containerd/conf.d/*.toml")]

    def test_existing_glob_import_is_reused(self, tmp_path):
        original = fixture_text("containerd-2.2-default-imports.toml")
        path = place(tmp_path, "etc/containerd/config.toml", original)
        plan = plan_containerd(path, mode="drop_in")
        main, drop_in = plan.edits
        assert not main.changed  # '/etc/containerd/conf.d/*.toml' already imports 99-nvidia.toml
        assert drop_in.changed

    def test_existing_drop_ins_are_kept_and_read(self, tmp_path):
        # another drop-in, sorted before ours, turns on SystemdCgroup for runc (containerd 2.x merges keys)
        path = place(tmp_path, "etc/containerd/config.toml", fixture_text("containerd-2.2-default-imports.toml"))
        other = place(tmp_path, "etc/containerd/conf.d/10-cgroup.toml",
                      "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n"
                      "  SystemdCgroup = true\n")
        mine = place(tmp_path, "etc/containerd/conf.d/99-nvidia.toml",
                     "# site notes: keep this\nversion = 3\n\n[plugins.'io.containerd.cri.v1.runtime']\n"
                     "  enable_unprivileged_ports = false\n")
        plan = plan_containerd(path, mode="drop_in")
        assert [e.path for e in plan.changed_edits] == [mine]
        after = plan.edits[1].after
        assert after.startswith("# site notes: keep this\nversion = 3\n")
        cri = load_toml(after)["plugins"][CRI3]
        assert cri["enable_unprivileged_ports"] is False
        assert cri["containerd"]["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is True
        assert open(other).read().endswith("SystemdCgroup = true\n")

    def test_v2_drop_in_after_ours_replacing_the_section_is_reported(self, tmp_path):
        path = place(tmp_path, "etc/containerd/config.toml", fixture_text("containerd-1.7-kubeadm.toml"))
        place(tmp_path, "etc/containerd/conf.d/zz-registry.toml",
              'version = 2\n[plugins."io.containerd.grpc.v1.cri".registry]\n  config_path = "/etc/certs.d"\n')
        plan = plan_containerd(path, mode="drop_in")
        assert len(plan.warnings) == 1
        assert "zz-registry.toml" in plan.warnings[0] and "replaces its whole" in plan.warnings[0]

    def test_v2_drop_in_before_ours_is_the_base(self, tmp_path):
        path = place(tmp_path, "etc/containerd/config.toml", fixture_text("containerd-1.7-kubeadm.toml"))
        place(tmp_path, "etc/containerd/conf.d/10-site.toml",
              'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "site/pause:1"\n'
              '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n')
        main_text = open(path).read()
        place(tmp_path, "etc/containerd/config.toml",
              main_text.replace("imports = []", 'imports = ["conf.d/*.toml"]'))
        plan = plan_containerd(path, mode="drop_in")
        assert not plan.edits[0].changed  # the relative glob already covers our file
        cri = load_toml(plan.edits[1].after)["plugins"][CRI2]
        # what containerd 1.x sees before our file is 10-site.toml's section, not the main one
        assert cri["sandbox_image"] == "site/pause:1"
        assert set(cri["containerd"]["runtimes"]) == {"runc", "nvidia"}

    def test_missing_main_config_is_created_with_the_import(self, tmp_path):
        path = str(tmp_path / "etc/containerd/config.toml")
        main, drop_in = plan_containerd(path, mode="drop_in", config_version=2).edits
        assert load_toml(main.after) == {"version": 2, "imports": [str(tmp_path / "etc/containerd/conf.d/*.toml")]}
        assert runtimes(load_toml(drop_in.after), CRI2)["nvidia"]["options"]["BinaryName"] == NVIDIA_BIN


BAD_CONFIGS = [
    ('version = 2\n[plugins\n', "is not valid TOML"),
    ('version = 2\nversion = 3\n', "is not valid TOML"),
    ('[plugins.cri.containerd]\n  snapshotter = "overlayfs"\n', "config version 1"),
    ('version = 4\n', "unsupported containerd config version 4"),
    ('version = "2"\n', "must be an integer"),
]


class TestErrors:
    @pytest.mark.parametrize("text, message, mode", [case + (mode,) for case in BAD_CONFIGS
                                                     for mode in ("in_place", "drop_in")] + [
        ('version = 2\nimports = "conf.d/*.toml"\n', "'imports' must be a list", "drop_in"),
    ])
    def test_bad_config_is_a_clear_error_and_nothing_changes(self, tmp_path, text, message, mode):
        path = place(tmp_path, "etc/containerd/config.toml", text)
        before = snapshot(tmp_path)
        with pytest.raises(ConfigError, match=message) as err:
            plan_containerd(path, mode=mode)
        assert path in str(err.value)
        assert snapshot(tmp_path) == before

    def test_broken_drop_in_is_an_error(self, tmp_path):
        path = place(tmp_path, "etc/containerd/config.toml", fixture_text("containerd-2.1-default.toml"))
        drop_in = place(tmp_path, "etc/containerd/conf.d/99-nvidia.toml", "version = 3\n[plugins.\n")
        with pytest.raises(ConfigError, match="99-nvidia.toml is not valid TOML"):
            plan_containerd(path, mode="drop_in")
        assert open(drop_in).read() == "version = 3\n[plugins.\n"

    def test_requested_version_must_match_the_file(self, tmp_path):
        path = place(tmp_path, "etc/containerd/config.toml", fixture_text("containerd-2.1-default.toml"))
        with pytest.raises(ConfigError, match="conflicting options: .* is config version 3 but version 2"):
            plan_containerd(path, config_version=2)

    def test_unknown_version_without_config(self, tmp_path):
        with pytest.raises(ConfigError, match="containerd version is unknown"):
            plan_containerd(str(tmp_path / "config.toml"))

    def test_relative_runtime_path(self, tmp_path):
        with pytest.raises(ConfigError, match="not an absolute path"):
            plan_containerd(str(tmp_path / "config.toml"), config_version=2, runtime_path="nvidia-container-runtime")
