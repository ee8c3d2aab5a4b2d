"""Hostile input for nvidia_container_runtime: a clear message naming what is wrong, no traceback, no change.

Every case runs the module's main() in check mode and for real, and compares
the whole temporary tree (bytes, mode, owner, mtime, links) before and after.
"""
import os

import pytest

from test_nvidia_container_runtime import FIXTURES, run, tree

pytestmark = pytest.mark.usefixtures("module_exits")

CRI2 = "io.containerd.grpc.v1.cri"
INJECTIONS = ["nvidia\n[plugins.evil]", 'nvidia"]\nx = 1 #', "nvidia; rm -rf /", "$(touch /tmp/pwned)", "a b",
              "nvidia/../runc", "", "-", "n" * 64, "nvídia", ".nvidia"]
# (a NUL byte never reaches the module: AnsibleModule refuses it first, with its own message)


def refused(tmp_path, args, *expected):
    """The module fails in check mode and for real, with every ``expected`` text in its message, changing nothing."""
    before = tree(tmp_path)
    for check in (True, False):
        status, result = run(args, check=check, diff=True)
        assert status == "failed", result
        message = result["msg"]
        assert "Traceback" not in message and "exception" not in result, result
        for text in expected:
            assert text in message, message
        assert tree(tmp_path) == before
    return message


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "etc/containerd/config.toml"
    path.parent.mkdir(parents=True)
    path.write_text((FIXTURES / "containerd-1.7-kubeadm.toml").read_text())
    path.chmod(0o640)
    return path


@pytest.mark.parametrize("runtime", ["containerd", "crio", "docker"])
@pytest.mark.parametrize("name", INJECTIONS)
def test_runtime_names_are_validated(tmp_path, config, runtime, name):
    path = {"containerd": config, "crio": tmp_path / "etc/crio/crio.conf", "docker": tmp_path / "daemon.json"}
    refused(tmp_path, dict(runtime=runtime, config_path=str(path[runtime]), runtime_name=name),
            "runtime_name", "letters, digits")


@pytest.mark.parametrize("runtime", ["containerd", "crio", "docker"])
@pytest.mark.parametrize("value", ["/usr/bin/nvidia\nruntime", "/usr/bin/nvidia container", "/usr/bin/x\x1b[31m",
                                   'nvidia-container-runtime', '/usr/bin/"quoted"'])
def test_the_runtime_path_is_validated(tmp_path, config, runtime, value):
    path = {"containerd": config, "crio": tmp_path / "etc/crio/crio.conf", "docker": tmp_path / "daemon.json"}
    refused(tmp_path, dict(runtime=runtime, config_path=str(path[runtime]), nvidia_runtime_path=value),
            "nvidia_runtime_path")


@pytest.mark.parametrize("option", ["config_path", "drop_in_path"])
def test_paths_with_control_characters(tmp_path, config, option):
    args = dict(runtime="containerd", config_path=str(config), mode="drop_in")
    args[option] = str(tmp_path / "etc/containerd/x\ny.toml")
    refused(tmp_path, args, option, "control character")


@pytest.mark.parametrize("text, expected", [
    ("version = 2\n[plugins\n", ["is not valid TOML"]),
    ("version = 2\nplugins = [1, 2]\n", ["plugins must be a table, found [1, 2]"]),
    ('version = 2\n[plugins."%s"]\ncontainerd = 5\n' % CRI2, ["containerd", "table"]),
    ('version = 2\n[plugins."%s".containerd]\nruntimes = "runc"\n' % CRI2, ["runtimes", "table"]),
    ('version = 2\n[plugins."%s".containerd.runtimes]\nrunc = "x"\nnvidia = 3\n' % CRI2, ["runtimes.runc must be a table"]),
    ('version = 2\n[plugins."%s".containerd.runtimes.runc]\noptions = "x"\n' % CRI2, ["options", "table"]),
    ('version = 2\n[plugins."%s".containerd.runtimes.nvidia]\noptions = [1]\n' % CRI2, ["options", "table"]),
    ('version = 2\nimports = "conf.d/*.toml"\n', ["imports", "list"]),
    ('version = "2"\n', ["'version' must be an integer"]),
    ("version = true\n", ["'version' must be an integer"]),
])
@pytest.mark.parametrize("mode", ["in_place", "drop_in"])
def test_wrong_shapes_in_containerd_configs(tmp_path, config, text, expected, mode):
    config.write_text(text)
    refused(tmp_path, dict(runtime="containerd", config_path=str(config), mode=mode), str(config), *expected)


@pytest.mark.parametrize("text, expected", [
    ("{", "is not valid JSON"),
    ("[]", "JSON object"),
    ('{"runtimes": "nvidia"}', "'runtimes' must be a JSON object"),
    ('{"runtimes": {"nvidia": {"path": "/x"}}, "features": []}', "'features' must be a JSON object"),
])
def test_wrong_shapes_in_daemon_json(tmp_path, text, expected):
    path = tmp_path / "daemon.json"
    path.write_text(text)
    refused(tmp_path, dict(runtime="docker", config_path=str(path), enable_cdi=True), str(path), expected)


@pytest.mark.parametrize("text", ["[crio.runtime\n", "crio = 1\n", "[crio]\nruntime = []\n",
                                  "[crio.runtime]\nruntimes = 'x'\n"])
def test_wrong_shapes_in_crio_configs(tmp_path, text):
    path = tmp_path / "etc/crio/crio.conf"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    refused(tmp_path, dict(runtime="crio", config_path=str(path)), str(path))


@pytest.mark.parametrize("runtime, name", [("containerd", "config.toml"), ("docker", "daemon.json")])
def test_a_file_that_is_not_utf8(tmp_path, runtime, name):
    path = tmp_path / name
    path.write_bytes(b'version = 2\n# caf\xe9 \xff\xfe\n')
    refused(tmp_path, dict(runtime=runtime, config_path=str(path)), str(path), "not UTF-8")


@pytest.mark.parametrize("runtime", ["containerd", "crio", "docker"])
def test_a_directory_at_the_config_path(tmp_path, runtime):
    path = tmp_path / "config"
    path.mkdir()
    refused(tmp_path, dict(runtime=runtime, config_path=str(path)), "config_path", str(path), "is a directory")


def test_a_directory_at_the_drop_in_path(tmp_path, config):
    drop_in = tmp_path / "etc/containerd/conf.d/99-nvidia.toml"
    drop_in.mkdir(parents=True)
    refused(tmp_path, dict(runtime="containerd", config_path=str(config), mode="drop_in", drop_in_path=str(drop_in)),
            "drop_in_path", "is a directory")


def test_a_huge_file_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "config.toml"
    with open(str(path), "wb") as handle:
        handle.truncate(200 * 1024 * 1024)  # sparse: costs no disk
    refused(tmp_path, dict(runtime="containerd", config_path=str(path)), str(path), "larger than")


def test_a_symlink_loop(tmp_path):
    path = tmp_path / "config.toml"
    path.symlink_to(tmp_path / "other.toml")
    (tmp_path / "other.toml").symlink_to(path)
    refused(tmp_path, dict(runtime="containerd", config_path=str(path)), str(path))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files; run as a user to check this case")
def test_a_read_only_directory(tmp_path, config):
    config.parent.chmod(0o555)
    try:
        status, result = run(dict(runtime="containerd", config_path=str(config)))
        assert status == "failed" and str(config) in result["msg"]
    finally:
        config.parent.chmod(0o755)


def test_cdi_driver_version_is_validated(tmp_path):
    path = tmp_path / "daemon.json"
    refused(tmp_path, dict(runtime="docker", config_path=str(path),
                           cdi=dict(generate=True, driver_version="570.1; reboot")), "cdi.driver_version")


@pytest.mark.parametrize("version, words", [
    (570.19, "cdi.driver_version is the number 570.19, not a string: YAML reads an unquoted version as a number"),
    (True, "cdi.driver_version is the boolean True, not a string"),
])
def test_a_cdi_driver_version_given_as_a_number_is_refused(tmp_path, version, words):
    """570.190 unquoted is 570.19: a spec generated for a driver that is not the node's."""
    path = tmp_path / "daemon.json"
    refused(tmp_path, dict(runtime="docker", config_path=str(path), cdi=dict(generate=True, driver_version=version)),
            words, "Nothing was changed.")


def test_a_new_text_that_would_not_read_back_as_planned_is_not_written(tmp_path, config, monkeypatch):
    """The collection's own error (here, a writer that drops a setting): the module fails and writes nothing."""
    from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime import base, toml_file

    def losing(doc):
        return base.tomlkit.dumps(doc).replace("SystemdCgroup = true", "")
    monkeypatch.setattr(base, "dump_toml", losing)
    monkeypatch.setattr(toml_file, "dump_toml", losing)
    for mode in ("in_place", "drop_in"):
        refused(tmp_path, dict(runtime="containerd", config_path=str(config), mode=mode),
                "would not mean what was planned", "SystemdCgroup", "nothing was changed")
