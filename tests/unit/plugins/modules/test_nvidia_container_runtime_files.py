"""How nvidia_container_runtime writes files: through symlinks, keeping the target's mode and owner."""
import json
import os
import stat
from pathlib import Path

import pytest

from test_nvidia_container_runtime import FIXTURES, NVIDIA_BIN, failed, ok, tree

pytestmark = pytest.mark.usefixtures("module_exits")


def linked(tmp_path, rel, text, mode=0o640):
    """``rel`` under tmp_path as a symlink to a file kept elsewhere (a config management checkout)."""
    target = tmp_path / "srv/configs" / Path(rel).name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    target.chmod(mode)
    link = tmp_path / rel
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link, target


@pytest.mark.parametrize("runtime, rel, fixture, args", [
    ("containerd", "etc/containerd/config.toml", "containerd-1.7-kubeadm.toml", {}),
    ("docker", "etc/docker/daemon.json", "daemon.json", {}),
    ("crio", "etc/crio/crio.conf.d/99-nvidia.toml", None, {}),
])
def test_a_symlinked_config_is_written_through_to_its_target(tmp_path, runtime, rel, fixture, args):
    text = (FIXTURES / fixture).read_text() if fixture else "# ours, kept in git\n"
    link, target = linked(tmp_path, rel, text)
    if runtime == "crio":
        config = tmp_path / "etc/crio/crio.conf"
        config.write_text((FIXTURES / "crio.conf").read_text())
        args = dict(args, config_path=str(config))
    else:
        args = dict(args, config_path=str(link))
    checked = ok(dict(args, runtime=runtime), check=True)
    assert checked["changed"] is True and target.read_text() == text  # check mode writes nothing

    result = ok(dict(args, runtime=runtime))
    assert result["files"] == [str(link)]
    assert link.is_symlink() and os.readlink(str(link)) == str(target)  # still the link
    assert NVIDIA_BIN in target.read_text()  # the target got the change
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no temporary file left
    assert ok(dict(args, runtime=runtime))["changed"] is False


def test_backup_copies_the_target_not_the_link(tmp_path):
    link, target = linked(tmp_path, "etc/docker/daemon.json", '{"log-driver": "journald"}\n')
    result = ok(dict(runtime="docker", config_path=str(link), backup=True))
    backup = Path(result["backup_files"][str(link)])
    assert not backup.is_symlink() and backup.read_text() == '{"log-driver": "journald"}\n'
    assert json.loads(target.read_text())["log-driver"] == "journald"


def test_a_link_through_a_linked_directory_is_followed(tmp_path):
    real_dir = tmp_path / "srv/containerd"
    real_dir.mkdir(parents=True)
    (real_dir / "config.toml").write_text((FIXTURES / "containerd-2.1-default.toml").read_text())
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/containerd").symlink_to(real_dir)
    (tmp_path / "etc/config.toml").symlink_to(tmp_path / "etc/containerd/config.toml")
    ok(dict(runtime="containerd", config_path=str(tmp_path / "etc/config.toml")))
    assert (tmp_path / "etc/config.toml").is_symlink() and (tmp_path / "etc/containerd").is_symlink()
    assert NVIDIA_BIN in (real_dir / "config.toml").read_text()


def test_a_dangling_link_into_a_missing_directory_fails_clearly(tmp_path):
    link = tmp_path / "etc/docker/daemon.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(tmp_path / "gone/daemon.json")
    before = tree(tmp_path)
    result = failed(dict(runtime="docker", config_path=str(link)))
    assert "is a symlink to %s" % (tmp_path / "gone/daemon.json") in result["msg"]
    assert "fix the link" in result["msg"]
    assert tree(tmp_path) == before and link.is_symlink()


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_owner_and_mode_of_an_existing_file_are_kept(tmp_path):
    config = tmp_path / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text((FIXTURES / "containerd-1.7-kubeadm.toml").read_text())
    os.chown(str(config), 4321, 4322)
    config.chmod(0o604)
    ok(dict(runtime="containerd", config_path=str(config)))
    info = config.stat()
    assert NVIDIA_BIN in config.read_text()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4321, 4322, 0o604)


def test_a_write_refused_before_anything_was_written_is_not_changed(tmp_path):
    """A refused write used to report failed and changed together, though nothing was written."""
    link = tmp_path / "etc/docker/daemon.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(tmp_path / "gone" / "daemon.json")
    before = tree(tmp_path)
    result = failed(dict(runtime="docker", config_path=str(link)))
    assert "whose directory does not exist" in result["msg"] and "(nothing was written)" in result["msg"], result
    assert result["changed"] is False and result["restart_required"] is False and result["files"] == []
    assert tree(tmp_path) == before
