"""The nvidia_container_runtime module: writes, check mode, diff, backups, errors and CDI."""
import json
import os
import stat
from pathlib import Path

import pytest

from ansible_collections.gpuops.platform.plugins.modules import nvidia_container_runtime as module_under_test
from container_runtime_helpers import load_toml
from support.module_args import ExitJson, FailJson, patch_module_args

pytestmark = pytest.mark.usefixtures("module_exits")

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "container_runtime"
NVIDIA_BIN = "/usr/bin/nvidia-container-runtime"


def run(args, check=False, diff=False):
    args = dict(args, _ansible_check_mode=check, _ansible_diff=diff, _ansible_remote_tmp="/tmp",
                _ansible_keep_remote_files=False)
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as caught:
            module_under_test.main()
    if caught.type is FailJson:
        return "failed", caught.value.args[0]
    return "ok", caught.value.args[0]


def ok(args, **kwargs):
    status, result = run(args, **kwargs)
    assert status == "ok", result
    return result


def failed(args, **kwargs):
    status, result = run(args, **kwargs)
    assert status == "failed", result
    return result


def tree(root):
    """Every file under ``root`` with its bytes (a link: its target), mode, owner and mtime (not followed)."""
    found = {}
    for dirpath, _dirs, files in os.walk(str(root)):
        for name in files:
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            content = os.readlink(path) if stat.S_ISLNK(info.st_mode) else Path(path).read_bytes()
            found[path] = (content, info.st_mode, info.st_uid, info.st_gid, info.st_mtime_ns)
    return found


@pytest.fixture
def containerd_config(tmp_path):
    path = tmp_path / "etc/containerd/config.toml"
    path.parent.mkdir(parents=True)
    path.write_text((FIXTURES / "containerd-1.7-kubeadm.toml").read_text())
    path.chmod(0o600)
    return path


def executable(path, script):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return str(path)


class TestContainerd:
    def test_writes_reports_and_then_changes_nothing(self, containerd_config):
        original = containerd_config.read_text()
        result = ok(dict(runtime="containerd", config_path=str(containerd_config)), diff=True)
        assert result["changed"] is True
        assert result["restart_required"] is True
        assert (result["config_version"], result["cri_plugin"]) == (2, "io.containerd.grpc.v1.cri")
        assert result["files"] == [str(containerd_config)]
        written = containerd_config.read_text()
        assert '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]' in written
        assert 'BinaryName = "%s"' % NVIDIA_BIN in written
        assert stat.S_IMODE(containerd_config.stat().st_mode) == 0o600  # the file keeps its mode
        [diff] = result["diff"]
        assert diff == dict(before=original, after=written, before_header=str(containerd_config),
                            after_header=str(containerd_config))
        assert result["cdi"]["state"] == "disabled"

        again = ok(dict(runtime="containerd", config_path=str(containerd_config)), diff=True)
        assert again["changed"] is False
        assert again["restart_required"] is False
        assert again["files"] == [] and again["diff"] == []

    def test_runtime_table_appended_after_other_tables(self, tmp_path):
        """containerd config default output with gVisor appended at the end used to crash the module."""
        path = tmp_path / "etc/containerd/config.toml"
        path.parent.mkdir(parents=True)
        original = (FIXTURES / "containerd-1.6-appended-gvisor.toml").read_text()
        path.write_text(original)
        args = dict(runtime="containerd", config_path=str(path), set_as_default=True)
        checked = ok(args, check=True, diff=True)
        assert checked["changed"] is True and path.read_text() == original
        result = ok(args, diff=True)
        assert result["diff"][0]["after"] == checked["diff"][0]["after"] == path.read_text()
        written = path.read_text()
        assert written.endswith(original[original.index("# gVisor, appended"):])  # gVisor as it was
        assert written.count('.containerd.runtimes.nvidia]') == 1
        assert 'default_runtime_name = "nvidia"' in written
        assert ok(args)["changed"] is False

    def test_check_mode_writes_nothing_and_shows_the_diff(self, tmp_path, containerd_config):
        before = tree(tmp_path)
        result = ok(dict(runtime="containerd", config_path=str(containerd_config), mode="drop_in"),
                    check=True, diff=True)
        assert tree(tmp_path) == before
        assert result["changed"] is True and result["restart_required"] is True
        drop_in = str(tmp_path / "etc/containerd/conf.d/99-nvidia.toml")
        assert result["files"] == [str(containerd_config), drop_in]
        main_diff, drop_in_diff = result["diff"]
        assert main_diff["before"] == containerd_config.read_text()
        assert 'imports = ["%s/etc/containerd/conf.d/*.toml"]' % tmp_path in main_diff["after"]
        assert drop_in_diff["before"] == ""
        assert drop_in_diff["before_header"] == drop_in
        assert "runtimes.nvidia.options]" in drop_in_diff["after"]

    def test_drop_in_with_backup(self, tmp_path, containerd_config):
        original = containerd_config.read_text()
        result = ok(dict(runtime="containerd", config_path=str(containerd_config), mode="drop_in", backup=True,
                         set_as_default=True))
        drop_in = tmp_path / "etc/containerd/conf.d/99-nvidia.toml"
        assert drop_in.exists()
        assert stat.S_IMODE(drop_in.stat().st_mode) & 0o044 == 0o044  # readable like any config
        assert list(result["backup_files"]) == [str(containerd_config)]  # a new file has nothing to back up
        assert Path(result["backup_files"][str(containerd_config)]).read_text() == original
        assert ok(dict(runtime="containerd", config_path=str(containerd_config), mode="drop_in",
                       set_as_default=True))["changed"] is False

    def test_version_from_containerd_binary_when_there_is_no_config(self, tmp_path, monkeypatch):
        bindir = tmp_path / "bin"
        executable(bindir / "containerd",
                   'echo "containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7193e4e490e9fbdc236c0e811ccaba3376"\n')
        monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ.get("PATH", "")))
        config = tmp_path / "etc/containerd/config.toml"
        result = ok(dict(runtime="containerd", config_path=str(config)), check=True, diff=True)
        assert result["config_version"] == 3
        assert result["cri_plugin"] == "io.containerd.cri.v1.runtime"
        assert "version = 3" in result["diff"][0]["after"]
        assert not config.exists()
        # a config with only comments has no version either: containerd still decides, comments stay
        config.parent.mkdir(parents=True)
        config.write_text("# containerd for the GPU pool\n")
        result = ok(dict(runtime="containerd", config_path=str(config)), diff=True)
        assert result["config_version"] == 3
        assert config.read_text().startswith("version = 3\n# containerd for the GPU pool\n")

    def test_builtin_runtimes_come_from_containerd_config_default(self, tmp_path, monkeypatch):
        log = tmp_path / "calls.log"
        executable(tmp_path / "bin/containerd",
                   'echo "$*" >> %s\n'
                   '[ "$1" = "--version" ] && echo "containerd github.com/containerd/containerd 1.6.20~ds1 x"\n'
                   '[ "$1 $2" = "config default" ] && cat %s\n'
                   'exit 0\n' % (log, FIXTURES / "containerd-1.6-default.toml"))
        monkeypatch.setenv("PATH", "%s:%s" % (tmp_path / "bin", os.environ.get("PATH", "")))
        config = tmp_path / "etc/containerd/config.toml"
        config.parent.mkdir(parents=True)
        config.write_text((FIXTURES / "containerd-1.6-debian12-package.toml").read_text())
        result = ok(dict(runtime="containerd", config_path=str(config), systemd_cgroup=True))
        assert result["changed"] is True
        assert log.read_text() == "config default\n"  # the config has a version: no --version needed
        written = config.read_text()
        assert '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]' in written
        assert written.count("SystemdCgroup = false") == 1 and written.count("SystemdCgroup = true") == 1
        # a config that names its runtimes does not need containerd at all
        log.write_text("")
        assert ok(dict(runtime="containerd", config_path=str(config), systemd_cgroup=True))["changed"] is False
        assert log.read_text() == ""

    @pytest.mark.parametrize("text, message", [
        ("version = 2\n[plugins.\n", "is not valid TOML"),
        ("version = 7\n", "unsupported containerd config version 7"),
        ("[plugins.cri]\n", "config version 1"),
    ])
    def test_bad_config_fails_clearly_and_leaves_every_file_untouched(
            self, tmp_path, containerd_config, text, message):
        containerd_config.write_text(text)
        before = tree(tmp_path)
        for mode in ("in_place", "drop_in"):
            result = failed(dict(runtime="containerd", config_path=str(containerd_config), mode=mode, backup=True))
            assert message in result["msg"]
            assert "Nothing was changed" in result["msg"]
            assert str(containerd_config) in result["msg"]
        assert tree(tmp_path) == before

    def test_requested_version_conflicting_with_the_config(self, tmp_path, containerd_config):
        before = tree(tmp_path)
        result = failed(dict(runtime="containerd", config_path=str(containerd_config), containerd_config_version="3"))
        assert result["msg"].startswith("conflicting options:")
        assert tree(tmp_path) == before


class TestOtherEngines:
    def test_crio_drop_in(self, tmp_path):
        config = tmp_path / "etc/crio/crio.conf"
        config.parent.mkdir(parents=True)
        config.write_text((FIXTURES / "crio.conf").read_text())
        result = ok(dict(runtime="crio", config_path=str(config), set_as_default=True), diff=True)
        drop_in = tmp_path / "etc/crio/crio.conf.d/99-nvidia.toml"
        assert result["files"] == [str(drop_in)]
        assert result["config_version"] is None
        assert '[crio.runtime.runtimes.nvidia]\nruntime_path = "%s"\nruntime_type = "oci"' % NVIDIA_BIN \
            in drop_in.read_text()
        assert result["diff"][0]["after"] == drop_in.read_text()
        assert ok(dict(runtime="crio", config_path=str(config), set_as_default=True))["changed"] is False

    def test_crio_skips_an_nvidia_default_when_choosing_what_to_copy(self, tmp_path):
        # nvidia-ctk's CRI-O engine (engine.GetLowLevelRuntimes) ignores a default named nvidia*:
        # the NVIDIA runtime takes runc's settings, not those of another NVIDIA runtime.
        config = tmp_path / "etc/crio/crio.conf"
        config.parent.mkdir(parents=True)
        config.write_text('[crio.runtime]\ndefault_runtime = "nvidia-legacy"\n'
                          '[crio.runtime.runtimes.nvidia-legacy]\n'
                          'runtime_path = "/usr/bin/nvidia-container-runtime.legacy"\n'
                          'runtime_root = "/run/nvidia-legacy"\nmonitor_env = ["NVIDIA_LEGACY=1"]\n'
                          '[crio.runtime.runtimes.runc]\nruntime_path = "/usr/libexec/crio/runc"\n'
                          'runtime_root = "/run/runc"\nmonitor_env = ["PATH=/usr/sbin:/usr/bin"]\n')
        ok(dict(runtime="crio", config_path=str(config)))
        drop_in = load_toml((tmp_path / "etc/crio/crio.conf.d/99-nvidia.toml").read_text())
        assert drop_in["crio"]["runtime"]["runtimes"] == {"nvidia": {
            "runtime_path": NVIDIA_BIN, "runtime_type": "oci",
            "runtime_root": "/run/runc", "monitor_env": ["PATH=/usr/sbin:/usr/bin"]}}

    def test_docker(self, tmp_path):
        config = tmp_path / "daemon.json"
        config.write_text((FIXTURES / "daemon.json").read_text())
        result = ok(dict(runtime="docker", config_path=str(config), enable_cdi=True, set_as_default=True))
        data = json.loads(config.read_text())
        assert data["runtimes"]["nvidia"] == {"path": NVIDIA_BIN, "args": []}
        assert data["default-runtime"] == "nvidia" and data["features"]["cdi"] is True
        assert result["restart_required"] is True

    @pytest.mark.parametrize("text", ["[1, 2]", '"x"', "{not json"])
    def test_docker_bad_daemon_json_untouched(self, tmp_path, text):
        config = tmp_path / "daemon.json"
        config.write_text(text)
        before = tree(tmp_path)
        result = failed(dict(runtime="docker", config_path=str(config)))
        assert str(config) in result["msg"] and "Nothing was changed" in result["msg"]
        assert tree(tmp_path) == before

    @pytest.mark.parametrize("args, message", [
        (dict(runtime="docker", mode="drop_in"), "mode and drop_in_path do not apply"),
        (dict(runtime="crio", mode="in_place"), "drop-in only"),
        (dict(runtime="docker", containerd_config_version="2"), "runtime=containerd only"),
        (dict(runtime="containerd", drop_in_path="/tmp/x.toml"), "needs mode=drop_in"),
    ])
    def test_conflicting_options(self, tmp_path, args, message):
        args.setdefault("config_path", str(tmp_path / "config"))
        result = failed(args)
        assert result["msg"].startswith("conflicting options:") and message in result["msg"]
        assert list(tmp_path.iterdir()) == []


FAKE_NVIDIA_CTK = r"""
# stand-in for nvidia-ctk: writes a spec naming the driver libraries of $FAKE_DRIVER
for arg in "$@"; do case "$arg" in --output=*) out="${arg#--output=}";; esac; done
[ "$1 $2" = "cdi generate" ] || exit 2
cat > "$out" <<EOF
---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: all
containerEdits:
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.$FAKE_DRIVER
  - hostPath: /usr/lib/x86_64-linux-gnu/libnvidia-egl-wayland.so.1.1.13
EOF
"""


class TestCdi:
    @pytest.fixture
    def setup(self, tmp_path, monkeypatch):
        ctk = executable(tmp_path / "bin/nvidia-ctk", FAKE_NVIDIA_CTK)
        monkeypatch.setenv("FAKE_DRIVER", "570.172.08")
        daemon = tmp_path / "daemon.json"
        daemon.write_text('{"runtimes": {"nvidia": {"path": "%s", "args": []}}}' % NVIDIA_BIN)
        spec = tmp_path / "run/cdi/nvidia.yaml"
        return dict(runtime="docker", config_path=str(daemon)), ctk, spec

    def cdi_args(self, base, ctk, spec, **cdi):
        return dict(base, cdi=dict(dict(generate=True, output=str(spec), nvidia_ctk_path=ctk,
                                        driver_version="570.172.08"), **cdi))

    def test_generated_when_missing_then_current(self, setup):
        base, ctk, spec = setup
        result = ok(self.cdi_args(base, ctk, spec))
        assert result["cdi"]["state"] == "generated" and result["cdi"]["changed"] is True
        assert result["cdi"]["reason"] == "the CDI spec is missing"
        assert result["changed"] is True and result["restart_required"] is False  # no engine restart for a spec
        assert "libcuda.so.570.172.08" in spec.read_text()
        again = ok(self.cdi_args(base, ctk, spec))
        assert again["changed"] is False and again["cdi"]["state"] == "current"

    def test_regenerated_after_a_driver_change(self, setup, monkeypatch):
        base, ctk, spec = setup
        ok(self.cdi_args(base, ctk, spec))
        monkeypatch.setenv("FAKE_DRIVER", "580.65.06")
        result = ok(self.cdi_args(base, ctk, spec, driver_version="580.65.06"))
        assert result["cdi"]["state"] == "generated"
        assert "generated for driver 570.172.08, the installed driver is 580.65.06" in result["cdi"]["reason"]
        assert "libcuda.so.580.65.06" in spec.read_text()

    def test_check_mode_reports_without_running(self, setup, tmp_path):
        base, ctk, spec = setup
        before = tree(tmp_path)
        result = ok(self.cdi_args(base, ctk, spec), check=True)
        assert result["cdi"]["state"] == "would_generate" and result["changed"] is True
        assert result["cdi"]["command"] == [ctk, "cdi", "generate", "--output=%s" % spec]
        assert tree(tmp_path) == before

    def test_forced(self, setup):
        base, ctk, spec = setup
        ok(self.cdi_args(base, ctk, spec))
        result = ok(self.cdi_args(base, ctk, spec, force=True))
        assert result["cdi"]["state"] == "current"  # regenerated, identical, so not changed
        assert result["cdi"]["reason"].startswith("forced")

    def test_skipped_without_nvidia_ctk(self, setup, tmp_path):
        base, _ctk, spec = setup
        result = ok(self.cdi_args(base, str(tmp_path / "missing/nvidia-ctk"), spec))
        assert result["cdi"]["state"] == "skipped"
        assert "nvidia-ctk is not installed" in result["cdi"]["reason"]
        assert not spec.exists()

    def test_generation_failure_is_reported(self, setup, tmp_path):
        base, _ctk, spec = setup
        broken = executable(tmp_path / "bin/broken-ctk", 'echo "ERRO failed to initialize NVML" >&2; exit 1\n')
        result = failed(self.cdi_args(base, broken, spec))
        assert "failed to initialize NVML" in result["msg"]
        assert not spec.exists()
        assert [p.name for p in spec.parent.iterdir()] == []  # no temporary file left behind

    def test_refresh_units_reported(self, setup, tmp_path, monkeypatch):
        base, _ctk, _spec = setup
        units = tmp_path / "systemd"
        units.mkdir()
        (units / "nvidia-cdi-refresh.path").write_text("[Path]\n")
        monkeypatch.setattr(module_under_test, "SYSTEMD_UNIT_DIRS", (str(units),))
        assert ok(base)["cdi"]["refresh_units"] == ["nvidia-cdi-refresh.path"]


class TestWithoutTomlkit:
    def test_check_mode_skips_and_a_real_run_fails_clearly(self, tmp_path, containerd_config, monkeypatch):
        monkeypatch.setattr(module_under_test, "HAS_TOMLKIT", False)
        monkeypatch.setattr(module_under_test, "TOMLKIT_IMPORT_ERROR", ImportError("No module named 'tomlkit'"))
        before = tree(tmp_path)
        args = dict(runtime="containerd", config_path=str(containerd_config))
        skipped = ok(args, check=True)
        assert skipped["skipped"] is True and skipped["changed"] is False
        assert "tomlkit" in skipped["msg"]
        result = failed(args)
        assert "Failed to import the required Python library (tomlkit)" in result["msg"]
        assert tree(tmp_path) == before
        # docker's daemon.json needs no TOML library
        daemon = tmp_path / "daemon.json"
        assert ok(dict(runtime="docker", config_path=str(daemon)))["changed"] is True
