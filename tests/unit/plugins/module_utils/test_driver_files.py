"""How nvidia_driver writes its files: through atomic_move, keeping what it does not own."""

import os
import stat
import subprocess

import pytest

from fakes.gpu_node import FakeApt, FakeModule, FakeNode

from ansible_collections.gpuops.platform.plugins.module_utils._driver import converge as dc
from ansible_collections.gpuops.platform.plugins.module_utils._driver import host as driver_host

KERNEL = "6.1.0-37-amd64"
BLACKLIST = "/etc/modprobe.d/gpuops-blacklist-nouveau.conf"
AUTOMATIC = "/etc/dnf/automatic.conf"


@pytest.fixture
def node(tmp_path, monkeypatch):
    monkeypatch.setattr(driver_host, "kernel_release", lambda: KERNEL)
    monkeypatch.setattr(driver_host, "machine_arch", lambda: "x86_64")
    return FakeNode(tmp_path / "root").os("debian", "12").modules("ext4")


def converger(node, check=False):
    module = FakeModule(FakeApt(node, check_mode=check), check_mode=check)
    return dc.Converger(module, {}, root=node.root)


def full(node, path):
    return os.path.join(node.root, path.lstrip("/"))


def state(path):
    st = os.lstat(path)
    with open(path, "rb") as handle:
        return handle.read(), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns


def leftovers(directory):
    return [name for name in os.listdir(directory) if name.startswith((".gpuops-", ".ansible_tmp"))]


def test_new_file_gets_the_mode_asked_whatever_the_umask(node):
    old = os.umask(0o077)
    try:
        c = converger(node)
        assert c.ensure_file(BLACKLIST, "blacklist nouveau\n")
        assert c.ensure_file("/etc/apt/auth.conf.d/x.conf", "machine m login u password p\n", mode=0o600, secret=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(full(node, BLACKLIST)).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(full(node, "/etc/apt/auth.conf.d/x.conf")).st_mode) == 0o600
    assert c.module.moves == [os.path.realpath(full(node, BLACKLIST)),
                              os.path.realpath(full(node, "/etc/apt/auth.conf.d/x.conf"))]


def test_an_existing_file_keeps_its_mode_and_owner(node):
    path = node.write(AUTOMATIC.lstrip("/"), "[base]\nexcludepkgs = foo\n")
    os.chmod(path, 0o640)
    if os.geteuid() == 0:
        os.chown(path, 4321, 4322)
    c = converger(node)
    assert c.ensure_file(AUTOMATIC, "[base]\nexcludepkgs = nvidia-*\n")
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o640
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (4321, 4322)
    assert node.read(AUTOMATIC) == "[base]\nexcludepkgs = nvidia-*\n"
    assert leftovers(os.path.dirname(path)) == []


def test_a_secret_file_is_tightened_to_0600_before_the_secret_goes_in(node):
    path = node.write("etc/apt/auth.conf.d/gpuops-nvidia-mirror.conf", "machine m login u password old\n")
    os.chmod(path, 0o644)
    c = converger(node)
    c.module._diff = True
    assert c.ensure_file("/etc/apt/auth.conf.d/gpuops-nvidia-mirror.conf", "machine m login u password new\n",
                         mode=0o600, secret=True)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    diff = c.diffs[-1]
    assert diff["before"] == diff["after"] == "machine m login u password ********\n"
    # Same content, mode already right: nothing to do.
    assert not c.ensure_file("/etc/apt/auth.conf.d/gpuops-nvidia-mirror.conf", "machine m login u password new\n",
                             mode=0o600, secret=True)
    # Same content but opened up by hand: tightened again, and that is a change.
    os.chmod(path, 0o644)
    assert c.ensure_file("/etc/apt/auth.conf.d/gpuops-nvidia-mirror.conf", "machine m login u password new\n",
                         mode=0o600, secret=True)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_symlink_is_written_through_to_its_target(node):
    target = node.write("srv/config/automatic.conf", "[base]\nupgrade_type = security\n")
    link = full(node, AUTOMATIC)
    os.makedirs(os.path.dirname(link))
    os.symlink(os.path.relpath(target, os.path.dirname(link)), link)
    c = converger(node)
    assert c.ensure_file(AUTOMATIC, "[base]\nupgrade_type = security\nexcludepkgs = nvidia-*\n")
    assert os.path.islink(link)
    with open(target) as handle:
        assert handle.read().endswith("excludepkgs = nvidia-*\n")
    assert not c.ensure_file(AUTOMATIC, "[base]\nupgrade_type = security\nexcludepkgs = nvidia-*\n")
    # Removing the file removes the link, never the file it points to.
    assert c.ensure_file(AUTOMATIC, None)
    assert not os.path.lexists(link) and os.path.exists(target)


def test_undecodable_bytes_of_a_merged_file_are_kept(node):
    path = node.write(AUTOMATIC.lstrip("/"), b"# caf\xe9 (latin-1)\n[base]\n", binary=True)
    c = converger(node)
    c.ensure_file(AUTOMATIC, c._read(AUTOMATIC) + "excludepkgs = nvidia-*\n")
    with open(path, "rb") as handle:
        assert handle.read() == b"# caf\xe9 (latin-1)\n[base]\nexcludepkgs = nvidia-*\n"
    assert "\ufffd" in c.diffs[-1]["after"]  # the diff still travels as JSON


@pytest.mark.parametrize("check", [False, True], ids=["apply", "check"])
@pytest.mark.parametrize("kind,message", [("directory", "is a directory, not a file"),
                                          ("fifo", "is not a regular file")])
def test_something_else_in_place_of_the_file_is_an_error_in_check_mode_too(node, check, kind, message):
    path = full(node, BLACKLIST)
    os.makedirs(os.path.dirname(path))
    if kind == "directory":
        os.mkdir(path)
    else:
        os.mkfifo(path)  # a read would block forever
    c = converger(node, check=check)
    with pytest.raises(dc.DriverError) as exc:
        c.ensure_file(BLACKLIST, "blacklist nouveau\n")
    assert str(exc.value).startswith(BLACKLIST + " " + message)
    assert not c.changed and c.actions == []


def _immutable(path):
    try:
        subprocess.run(["chattr", "+i", path], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("chattr +i is not possible here")


@pytest.mark.parametrize("check", [False, True], ids=["apply", "check"])
def test_an_immutable_file_is_a_clear_error_and_stays_as_it_was(node, check):
    path = node.write(BLACKLIST.lstrip("/"), "# mine\n")
    _immutable(path)
    try:
        before = state(path)
        c = converger(node, check=check)
        with pytest.raises(dc.DriverError) as exc:
            c.ensure_file(BLACKLIST, "blacklist nouveau\n")
        assert str(exc.value).startswith("cannot write %s: it is read-only" % BLACKLIST)
        assert state(path) == before
        assert leftovers(os.path.dirname(path)) == []
        assert c.actions == []
    finally:
        subprocess.run(["chattr", "-i", path], check=False)


def test_a_failed_move_leaves_no_temporary_file_and_says_why(node, monkeypatch):
    """The real atomic_move failing (here: a read-only filesystem) ends in a DriverError, not a traceback."""
    path = node.write(BLACKLIST.lstrip("/"), "# mine\n")
    before = state(path)

    def rename(src, dst):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "rename", rename)
    c = converger(node)
    with pytest.raises(dc.DriverError) as exc:
        c.ensure_file(BLACKLIST, "blacklist nouveau\n")
    monkeypatch.undo()
    assert str(exc.value) == "cannot write %s: Read-only file system; the filesystem is read-only" % BLACKLIST
    assert state(path) == before
    assert leftovers(os.path.dirname(path)) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_file_is_a_clear_error_for_a_user(node):
    path = node.write(BLACKLIST.lstrip("/"), "# mine\n")
    os.chmod(path, 0o444)
    with pytest.raises(dc.DriverError, match="it is read-only"):
        converger(node).ensure_file(BLACKLIST, "blacklist nouveau\n")
