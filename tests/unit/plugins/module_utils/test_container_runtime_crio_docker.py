"""CRI-O drop-in and docker daemon.json edits."""
import json

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import ConfigError
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.crio import plan_crio
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.docker import plan_docker
from container_runtime_helpers import fixture_text, load_toml, place

NVIDIA_BIN = "/usr/bin/nvidia-container-runtime"


class TestCrio:
    def test_drop_in_next_to_the_config(self, tmp_path):
        config = place(tmp_path, "etc/crio/crio.conf", fixture_text("crio.conf"))
        plan = plan_crio(config, set_as_default=True)
        [edit] = plan.edits
        assert edit.path == str(tmp_path / "etc/crio/crio.conf.d/99-nvidia.toml")
        assert edit.before is None
        data = load_toml(edit.after)
        nvidia = data["crio"]["runtime"]["runtimes"]["nvidia"]
        assert nvidia["runtime_path"] == NVIDIA_BIN
        assert nvidia["runtime_type"] == "oci"
        # inherited from crun, the configured default runtime
        assert nvidia["runtime_root"] == "/run/crun"
        assert nvidia["monitor_path"] == "/usr/libexec/crio/conmon"
        assert nvidia["allowed_annotations"] == ["io.containers.trace-syscall"]
        assert data["crio"]["runtime"]["default_runtime"] == "nvidia"
        assert open(config).read() == fixture_text("crio.conf")  # the main config is only read

    def test_without_default(self, tmp_path):
        config = place(tmp_path, "etc/crio/crio.conf", fixture_text("crio.conf"))
        data = load_toml(plan_crio(config).edits[0].after)
        assert "default_runtime" not in data["crio"]["runtime"]

    def test_no_main_config(self, tmp_path):
        plan = plan_crio(str(tmp_path / "etc/crio/crio.conf"))
        data = load_toml(plan.edits[0].after)
        assert data == {"crio": {"runtime": {"runtimes": {"nvidia": {
            "runtime_path": NVIDIA_BIN, "runtime_type": "oci"}}}}}

    def test_existing_drop_ins_are_read_in_order(self, tmp_path):
        config = place(tmp_path, "etc/crio/crio.conf", fixture_text("crio.conf"))
        place(tmp_path, "etc/crio/crio.conf.d/10-runc.conf",
              '[crio.runtime]\ndefault_runtime = "runc"\n[crio.runtime.runtimes.runc]\nruntime_root = "/run/site-runc"\n')
        later = place(tmp_path, "etc/crio/crio.conf.d/99-zz.conf", '[crio.runtime]\ndefault_runtime = "crun"\n')
        plan = plan_crio(config, set_as_default=True)
        nvidia = load_toml(plan.edits[0].after)["crio"]["runtime"]["runtimes"]["nvidia"]
        assert nvidia["runtime_root"] == "/run/site-runc"
        assert plan.warnings == ["%s sorts after %s and sets another default runtime." % (later, plan.edits[0].path)]

    def test_own_drop_in_keeps_comments_and_is_idempotent(self, tmp_path):
        config = place(tmp_path, "etc/crio/crio.conf", fixture_text("crio.conf"))
        drop_in = place(tmp_path, "etc/crio/crio.conf.d/99-nvidia.toml",
                        "# GPU nodes, see the runbook\n[crio.runtime.runtimes.nvidia]\n"
                        'runtime_path = "/usr/local/bin/nvidia-container-runtime"\nmonitor_env = ["X=1"]\n')
        plan = plan_crio(config)
        after = plan.edits[0].after
        assert after.startswith("# GPU nodes, see the runbook\n")
        nvidia = load_toml(after)["crio"]["runtime"]["runtimes"]["nvidia"]
        assert nvidia["runtime_path"] == NVIDIA_BIN
        assert nvidia["monitor_env"] == ["X=1"]
        with open(drop_in, "w") as handle:
            handle.write(after)
        assert not plan_crio(config).changed

    def test_broken_drop_in(self, tmp_path):
        config = place(tmp_path, "etc/crio/crio.conf", fixture_text("crio.conf"))
        place(tmp_path, "etc/crio/crio.conf.d/99-nvidia.toml", "[crio.runtime\n")
        with pytest.raises(ConfigError, match="99-nvidia.toml is not valid TOML"):
            plan_crio(config)

    def test_broken_main_config(self, tmp_path):
        config = place(tmp_path, "etc/crio/crio.conf", "[crio]\nlog_dir = \n")
        with pytest.raises(ConfigError, match="crio.conf is not valid TOML"):
            plan_crio(config)


class TestDocker:
    def test_runtime_added_and_every_other_key_kept_in_order(self, tmp_path):
        original = fixture_text("daemon.json")
        path = place(tmp_path, "etc/docker/daemon.json", original)
        plan = plan_docker(path, set_as_default=True, enable_cdi=True)
        after = plan.edits[0].after
        data = json.loads(after)
        before = json.loads(original)
        assert data["runtimes"]["nvidia"] == {"path": NVIDIA_BIN, "args": []}
        assert data["runtimes"]["runsc"] == before["runtimes"]["runsc"]
        assert data["default-runtime"] == "nvidia"
        assert data["features"] == {"containerd-snapshotter": True, "cdi": True}
        for key in ("exec-opts", "log-driver", "log-opts", "storage-driver", "registry-mirrors"):
            assert data[key] == before[key]
        assert list(data)[:len(before)] == list(before)
        assert after.startswith('{\n  "exec-opts": [\n')  # the file's 2-space indentation is kept
        assert after.endswith("}\n")

    def test_unchanged_file_is_left_byte_for_byte(self, tmp_path):
        text = '{"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "args": []}}}'
        path = place(tmp_path, "etc/docker/daemon.json", text)
        plan = plan_docker(path)
        assert not plan.changed
        assert plan.edits[0].after == text

    def test_missing_or_empty_file(self, tmp_path):
        for text in (None, "", "\n"):
            path = str(tmp_path / "daemon.json")
            if text is not None:
                place(tmp_path, "daemon.json", text)
            after = plan_docker(path).edits[0].after
            assert after == '{\n    "runtimes": {\n        "nvidia": {\n' \
                            '            "path": "/usr/bin/nvidia-container-runtime",\n' \
                            '            "args": []\n        }\n    }\n}\n'

    @pytest.mark.parametrize("entry", [
        '{"path": "nvidia-container-runtime", "runtimeArgs": ["--debug"]}',
        '{"path": "/usr/bin/nvidia-container-runtime", "args": ["--debug"]}',
        '"/usr/bin/nvidia-container-runtime"',
    ])
    def test_existing_nvidia_entry_is_replaced_like_nvidia_ctk_does(self, tmp_path, entry):
        """nvidia-ctk writes {"path": ..., "args": []} whole (pkg/config/engine/docker AddRuntime)."""
        path = place(tmp_path, "daemon.json", '{"runtimes": {"nvidia": %s, "runsc": {"path": "/usr/bin/runsc"}}}' % entry)
        data = json.loads(plan_docker(path).edits[0].after)
        assert data["runtimes"] == {"nvidia": {"path": NVIDIA_BIN, "args": []}, "runsc": {"path": "/usr/bin/runsc"}}

    @pytest.mark.parametrize("text, message", [
        ("[]", "must hold a JSON object, found a list"),
        ('"runtimes"', "must hold a JSON object, found a str"),
        ("null", "must hold a JSON object, found a null"),
        ('{"runtimes": ', "is not valid JSON"),
        ('{"runtimes": []}', "'runtimes' must be a JSON object, found \\[\\]"),
        ('{"features": true}', "'features' must be a JSON object, found true"),
    ])
    def test_bad_daemon_json(self, tmp_path, text, message):
        path = place(tmp_path, "daemon.json", text)
        with pytest.raises(ConfigError, match=message):
            plan_docker(path, enable_cdi=True)
        assert open(path).read() == text


class TestSetAsDefaultOff:
    """nvidia-ctk's RemoveRuntime: a default naming the NVIDIA runtime goes, any other stays."""

    @pytest.mark.parametrize("default, kept", [("nvidia", False), ("runsc", True)])
    def test_docker(self, tmp_path, default, kept):
        path = place(tmp_path, "daemon.json", '{"default-runtime": "%s", "runtimes": {"nvidia": '
                     '{"path": "/usr/bin/nvidia-container-runtime", "args": []}}}' % default)
        data = json.loads(plan_docker(path, set_as_default=False).edits[0].after)
        assert ("default-runtime" in data) is kept

    @pytest.mark.parametrize("default, kept", [("nvidia", False), ("crun", True)])
    def test_crio_drop_in(self, tmp_path, default, kept):
        config = place(tmp_path, "etc/crio/crio.conf", "")
        place(tmp_path, "etc/crio/crio.conf.d/99-nvidia.toml",
              '[crio.runtime]\ndefault_runtime = "%s"\n' % default)
        after = plan_crio(config, set_as_default=False).edits[0].after
        assert ("default_runtime" in load_toml(after)["crio"]["runtime"]) is kept


def test_inherited_runtime_order_and_nvidia_default():
    from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import inherited_runtime
    runtimes = {"runc": {}, "crun": {}, "nvidia-cdi": {}, "kata": {}}
    assert inherited_runtime(runtimes, "kata", "nvidia") == "kata"
    assert inherited_runtime(runtimes, "nvidia", "nvidia") == "runc"  # never itself
    assert inherited_runtime({"crun": {}}, None, "nvidia") == "crun"
    assert inherited_runtime({"runc": "not a table"}, None, "nvidia") is None
    # Like nvidia-ctk, for containerd and CRI-O alike: an nvidia-named default is skipped.
    assert inherited_runtime(runtimes, "nvidia-cdi", "nvidia") == "runc"
    assert inherited_runtime({"crun": {}, "nvidia-legacy": {}}, "nvidia-legacy", "gpu") == "crun"
