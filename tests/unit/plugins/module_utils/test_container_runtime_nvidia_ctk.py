"""containerd edits held against nvidia-ctk's own semantics.

The table cases are NVIDIA's TestAddRuntime (pkg/config/engine/containerd/config_test.go
in NVIDIA/nvidia-container-toolkit), written for config version 2 and the runtime name
``test``. Where the module deliberately differs, the case says why.
"""
import os

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.containerd import (
    builtin_runtimes_from_default,
    plan_containerd,
)
from container_runtime_helpers import CRI2, CRI3, fixture_text, load_toml, place, runtimes

RUNC = """
[plugins."{cri}".containerd.runtimes.runc]
  privileged_without_host_devices = true
  runtime_engine = "engine"
  runtime_root = "root"
  runtime_type = "type"
  [plugins."{cri}".containerd.runtimes.runc.options]
    BinaryName = "/usr/bin/runc"
    SystemdCgroup = true
"""
DEFAULT = """
[plugins."{cri}".containerd.runtimes.default]
  privileged_without_host_devices = false
  runtime_engine = "defaultengine"
  runtime_root = "defaultroot"
  runtime_type = "defaulttype"
  [plugins."{cri}".containerd.runtimes.default.options]
    BinaryName = "/usr/bin/default"
    SystemdCgroup = false
"""
FROM_RUNC = {"privileged_without_host_devices": True, "runtime_engine": "engine", "runtime_root": "root",
             "runtime_type": "type", "options": {"BinaryName": "/usr/bin/test", "SystemdCgroup": True}}
FROM_DEFAULT = {"privileged_without_host_devices": False, "runtime_engine": "defaultengine",
                "runtime_root": "defaultroot", "runtime_type": "defaulttype",
                "options": {"BinaryName": "/usr/bin/test", "SystemdCgroup": False}}


def config(version, default=None, *tables):
    cri = CRI2 if version == 2 else CRI3
    head = "version = %d\n[plugins.\"%s\".containerd]\n" % (version, cri)
    if default:
        head += 'default_runtime_name = "%s"\n' % default
    return head + "".join(t.format(cri=cri) for t in tables)


def nvidia_after(tmp_path, text, name="test", mode="in_place", **kwargs):
    path = place(tmp_path, "etc/containerd/config.toml", text)
    plan = plan_containerd(path, mode=mode, runtime_name=name, runtime_path="/usr/bin/%s" % name, **kwargs)
    data = load_toml(plan.edits[-1].after)
    return runtimes(data, plan.plugin)[name], data, plan


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("default, tables, expected", [
    pytest.param(None, [RUNC], FROM_RUNC, id="options from runc are imported"),
    pytest.param("default", [DEFAULT], FROM_DEFAULT, id="options from default runtime are imported"),
    pytest.param("default", [RUNC, DEFAULT], FROM_DEFAULT, id="the default runtime takes precedence over runc"),
    # engine.GetLowLevelRuntimes: a default named nvidia* is skipped for runc
    pytest.param("nvidia-cdi", [RUNC, DEFAULT.replace("default]", "nvidia-cdi]").replace("default.options", "nvidia-cdi.options")],
                 FROM_RUNC, id="a default named nvidia-something is skipped"),
])
def test_nvidia_ctk_add_runtime_cases(tmp_path, version, default, tables, expected):
    nvidia, _data, _plan = nvidia_after(tmp_path, config(version, default, *tables))
    assert nvidia == expected


def test_the_runtime_type_is_inherited_and_runc_v2_only_fills_an_empty_one(tmp_path):
    shim = RUNC.replace('runtime_type = "type"', 'runtime_type = "io.containerd.runhcs.v1"')
    assert nvidia_after(tmp_path, config(2, None, shim))[0]["runtime_type"] == "io.containerd.runhcs.v1"
    for empty in ('runtime_type = ""', ""):
        text = config(2, None, RUNC.replace('runtime_type = "type"', empty))
        assert nvidia_after(tmp_path, text)[0]["runtime_type"] == "io.containerd.runc.v2"


def test_a_type_changed_on_the_source_follows_on_the_next_run(tmp_path):
    _nvidia, data, plan = nvidia_after(tmp_path, config(2, None, RUNC))
    text = plan.edits[0].after.replace('runtime_type = "type"', 'runtime_type = "io.containerd.kata.v2"', 1)
    nvidia, _data, _plan = nvidia_after(tmp_path, text)
    assert nvidia["runtime_type"] == "io.containerd.kata.v2"


class TestSetAsDefaultOff:
    """nvidia-ctk removes a default_runtime_name that names its runtime (RemoveRuntime)."""

    @pytest.mark.parametrize("version", [2, 3])
    def test_in_place_the_default_goes_and_containerd_falls_back_to_runc(self, tmp_path, version):
        _nvidia, data, plan = nvidia_after(tmp_path, config(version, "test", RUNC), set_as_default=False)
        containerd = data["plugins"][plan.plugin]["containerd"]
        assert "default_runtime_name" not in containerd
        assert plan.changed

    def test_another_default_is_left_alone(self, tmp_path):
        _nvidia, data, plan = nvidia_after(tmp_path, config(2, "default", RUNC, DEFAULT), set_as_default=False)
        assert data["plugins"][CRI2]["containerd"]["default_runtime_name"] == "default"

    def test_on_then_off_moves_the_default_back(self, tmp_path):
        text = config(3, None, RUNC)
        _n, _d, on = nvidia_after(tmp_path, text, set_as_default=True)
        assert "default_runtime_name = \"test\"" in on.edits[0].after
        _n, data, off = nvidia_after(tmp_path, on.edits[0].after, set_as_default=False)
        assert "default_runtime_name" not in data["plugins"][CRI3]["containerd"]
        # and the file is the original but for the runtime added
        assert load_toml(off.edits[0].after) == load_toml(nvidia_after(tmp_path, text)[2].edits[0].after)

    def test_v3_drop_in_names_runc_when_the_main_config_sets_the_nvidia_default(self, tmp_path):
        _n, data, plan = nvidia_after(tmp_path, config(3, "test", RUNC), mode="drop_in", set_as_default=False)
        assert not plan.edits[0].changed or "imports" in plan.edits[0].after  # main: only the import line
        assert data["plugins"][CRI3]["containerd"]["default_runtime_name"] == "runc"

    def test_v3_drop_in_drops_its_own_nvidia_default(self, tmp_path):
        text = config(3, None, RUNC)
        path = place(tmp_path, "etc/containerd/config.toml", text)
        on = plan_containerd(path, mode="drop_in", runtime_name="test", runtime_path="/usr/bin/test",
                             set_as_default=True)
        for edit in on.changed_edits:
            os.makedirs(os.path.dirname(edit.path), exist_ok=True)
            with open(edit.path, "w") as handle:
                handle.write(edit.after)
        off = plan_containerd(path, mode="drop_in", runtime_name="test", runtime_path="/usr/bin/test")
        drop_in = load_toml(off.edits[1].after)
        assert "default_runtime_name" not in drop_in["plugins"][CRI3]["containerd"]
        assert off.edits[1].changed and not off.edits[0].changed

    def test_v2_drop_in_copy_has_no_nvidia_default(self, tmp_path):
        _n, data, plan = nvidia_after(tmp_path, config(2, "test", RUNC), mode="drop_in", set_as_default=False)
        assert "default_runtime_name" not in data["plugins"][CRI2]["containerd"]


class TestBuiltinRuntimesFromConfigDefault:
    def test_the_plugin_comes_from_the_output_own_version(self):
        """containerd 2.1 prints a version 3 default; Debian's config.toml for it is version 2."""
        found = builtin_runtimes_from_default(fixture_text("containerd-2.1-default.toml"))
        assert found["runc"]["runtime_type"] == "io.containerd.runc.v2"
        found = builtin_runtimes_from_default(fixture_text("containerd-1.6-default.toml"))
        assert found["runc"]["runtime_type"] == "io.containerd.runc.v2"

    @pytest.mark.parametrize("text", ["", "not toml [", "version = 3\n", "version = 9\n[plugins]\n"])
    def test_nothing_usable_gives_none(self, text):
        assert builtin_runtimes_from_default(text) is None

    def test_a_v2_config_on_containerd_2_gets_the_builtin_runc_options(self, tmp_path):
        default = builtin_runtimes_from_default(fixture_text("containerd-2.1-default.toml"))
        text = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\n  bin_dir = "/usr/lib/cni"\n'
        nvidia, data, _plan = nvidia_after(tmp_path, text, name="nvidia", builtin_runtimes=lambda _v: default)
        assert set(runtimes(data, CRI2)) == {"runc", "nvidia"}
        assert runtimes(data, CRI2)["runc"] == default["runc"]
        assert nvidia["options"] == dict(default["runc"].get("options", {}), BinaryName="/usr/bin/nvidia")
