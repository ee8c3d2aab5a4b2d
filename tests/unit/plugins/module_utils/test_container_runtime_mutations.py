"""One-line mistakes in the containerd planner that a test must catch.

Each test names the mistake it is there for. The import merge rules are also
checked against real containerd in tests/integration/test_container_runtime_real.py.
"""
import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import settled
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.containerd import (
    _glob_matches,
    _import_files,
    _merge_imported,
    plan_containerd,
)
from container_runtime_helpers import CRI2, CRI3, load_toml, place, runtimes

MAIN = {
    "version": 2, "oom_score": 5,
    "plugins": {
        "io.containerd.gc.v1.scheduler": {"pause_threshold": 0.3},
        CRI2: {"enable_selinux": True,
               "containerd": {"default_runtime_name": "runc",
                              "runtimes": {"runc": {"runtime_type": "io.containerd.runc.v2",
                                                    "options": {"SystemdCgroup": True}}}}},
    },
}
IMPORTED = {"version": 2, "oom_score": -999,
            "plugins": {CRI2: {"containerd": {"default_runtime_name": "crun"}}}}


class TestImportMerge:
    def test_containerd_1_replaces_a_whole_plugin_section(self):
        """Mistake: merging a version 2 import key by key (containerd 1.x replaces the section)."""
        merged = _merge_imported(2, MAIN, IMPORTED)
        assert merged["plugins"][CRI2] == {"containerd": {"default_runtime_name": "crun"}}  # runc, selinux gone
        assert merged["plugins"]["io.containerd.gc.v1.scheduler"] == {"pause_threshold": 0.3}  # other plugin kept
        assert merged["oom_score"] == -999  # top-level keys: the import wins

    def test_containerd_2_merges_key_by_key(self):
        """Mistake: replacing sections on a version 3 import (containerd 2.x merges deeply)."""
        main = dict(MAIN, version=3, plugins={CRI3: MAIN["plugins"][CRI2]})
        imported = dict(IMPORTED, version=3, plugins={CRI3: IMPORTED["plugins"][CRI2]})
        merged = _merge_imported(3, main, imported)
        cri = merged["plugins"][CRI3]
        assert cri["containerd"]["default_runtime_name"] == "crun"
        assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
        assert cri["enable_selinux"] is True

    def test_the_merge_does_not_change_its_inputs(self):
        """Mistake: merging in place, so the main config's data is the merged one afterwards."""
        before = repr(MAIN)
        _merge_imported(2, MAIN, IMPORTED)
        _merge_imported(3, MAIN, IMPORTED)
        assert repr(MAIN) == before

    def test_an_in_place_edit_under_a_v2_import_that_replaces_the_cri_section_warns(self, tmp_path):
        """Mistake: a silent in-place edit that containerd 1.x never sees."""
        place(tmp_path, "etc/containerd/conf.d/50-x.toml",
              'version = 2\n[plugins."%s".containerd]\n  snapshotter = "zfs"\n' % CRI2)
        path = place(tmp_path, "etc/containerd/config.toml",
                     'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
                     '[plugins."%s".containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n' % CRI2)
        plan = plan_containerd(path)
        assert any("replaces the whole" in w and "mode=drop_in" in w for w in plan.warnings)


class TestSystemdCgroup:
    @pytest.mark.parametrize("version, cri", [(2, CRI2), (3, CRI3)])
    @pytest.mark.parametrize("layout", ["tables", "inline"])
    def test_false_is_copied_as_false(self, tmp_path, version, cri, layout):
        """Mistake: `if options.get("SystemdCgroup"):` skipping false, so the key is missing (containerd: cgroupfs)."""
        if layout == "tables":
            text = ('version = %d\n[plugins."%s".containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n'
                    '[plugins."%s".containerd.runtimes.runc.options]\n  SystemdCgroup = false\n  NoPivotRoot = false\n'
                    % (version, cri, cri))
        else:
            text = ('version = %d\n[plugins."%s".containerd.runtimes]\n  runc = { runtime_type = '
                    '"io.containerd.runc.v2", options = { SystemdCgroup = false, NoPivotRoot = false } }\n'
                    % (version, cri))
        path = place(tmp_path, "etc/containerd/config.toml", text)
        nvidia = runtimes(load_toml(plan_containerd(path).edits[0].after), cri)["nvidia"]
        assert nvidia["options"]["SystemdCgroup"] is False
        assert nvidia["options"]["NoPivotRoot"] is False

    @pytest.mark.parametrize("forced", [True, False])
    def test_the_option_overrides_runc(self, tmp_path, forced):
        """Mistake: `if opts.systemd_cgroup:` ignoring systemd_cgroup=false."""
        text = ('version = 2\n[plugins."%s".containerd.runtimes.runc.options]\n  SystemdCgroup = %s\n'
                % (CRI2, str(not forced).lower()))
        path = place(tmp_path, "etc/containerd/config.toml", text)
        data = load_toml(plan_containerd(path, systemd_cgroup=forced).edits[0].after)
        assert runtimes(data, CRI2)["nvidia"]["options"]["SystemdCgroup"] is forced
        assert runtimes(data, CRI2)["runc"]["options"]["SystemdCgroup"] is (not forced)  # runc itself untouched

    def test_runc_binary_name_is_never_inherited(self, tmp_path):
        """Mistake: copying every option, BinaryName included, after setting ours."""
        text = ('version = 2\n[plugins."%s".containerd.runtimes.runc.options]\n  BinaryName = "/usr/sbin/runc"\n'
                '  SystemdCgroup = true\n' % CRI2)
        path = place(tmp_path, "etc/containerd/config.toml", text)
        nvidia = runtimes(load_toml(plan_containerd(path).edits[0].after), CRI2)["nvidia"]
        assert nvidia["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True}


class TestImportsAndGlobs:
    def test_a_star_does_not_cross_a_slash(self):
        """Mistake: fnmatch on the whole path (`*` matches `/` there, not in Go's filepath.Glob)."""
        assert _glob_matches("/etc/containerd/conf.d/*.toml", "/etc/containerd/conf.d/99-nvidia.toml")
        assert not _glob_matches("/etc/containerd/conf.d/*.toml", "/etc/containerd/conf.d/sub/99-nvidia.toml")
        assert not _glob_matches("/etc/containerd/*.toml", "/etc/containerd/conf.d/99-nvidia.toml")

    def test_files_come_in_containerd_order(self):
        """Mistake: not sorting a glob's matches, or sorting across patterns (containerd sorts per pattern)."""
        found = {"/c/b/*.toml": ["/c/b/2.toml", "/c/b/1.toml"], "/c/a.toml": ["/c/a.toml"]}
        order = _import_files(["b/*.toml", "/c/a.toml", 7], "/c", lambda p: found.get(p, []))
        assert order == ["/c/b/1.toml", "/c/b/2.toml", "/c/a.toml"]


class TestSettled:
    def test_same_meaning_keeps_the_original_text(self):
        """Mistake: comparing text, so a layout tomlkit changes rewrites the file (and restarts containerd)."""
        before = 'version = 2\n[a]\nx = "y"  # note\n'
        assert settled("p", before, 'version = 2\n\n[a]\nx = \'y\'  # note\n') == before

    def test_a_changed_value_is_a_change(self):
        """Mistake: comparing only keys, or only the top level."""
        before = 'version = 2\n[a.b]\nx = false\n'
        after = 'version = 2\n[a.b]\nx = true\n'
        assert settled("p", before, after) == after


class TestCdiSpecDirs:
    @pytest.mark.parametrize("dirs, added", [
        (['"/etc/cdi"'], True),
        (['"/etc/cdi"', '"/var/run/cdi"'], False),
        (['"/etc/cdi"', '"/run/cdi"'], False),  # /var/run is a link to /run
    ])
    def test_the_spec_dir_is_added_only_when_missing(self, tmp_path, dirs, added):
        """Mistake: appending on every run, or missing that /run/cdi is /var/run/cdi."""
        text = 'version = 2\n[plugins."%s"]\n  cdi_spec_dirs = [%s]\n' % (CRI2, ", ".join(dirs))
        path = place(tmp_path, "etc/containerd/config.toml", text)
        plan = plan_containerd(path, enable_cdi=True)
        cri = load_toml(plan.edits[0].after)["plugins"][CRI2]
        assert ("/var/run/cdi" in cri["cdi_spec_dirs"]) is (added or '"/var/run/cdi"' in dirs)
        assert len(cri["cdi_spec_dirs"]) == len(dirs) + (1 if added else 0)
        assert cri["enable_cdi"] is True
