"""Hostile input to nvidia_driver and gpu_node_preflight, through AnsibleModule's real exit and fail paths.

Every refused input must end in a message that names the option and the
problem, with no traceback, and leave every file under the node's root as it
was: bytes, mode, owner and mtime.
"""

import functools
import json
import os
import stat
import subprocess

import pytest

from fakes.gpu_node import FakeApt, FakeNode
from support.module_args import patch_module_args

from ansible.module_utils import basic
from ansible.module_utils.common.parameters import PASS_VARS

from ansible_collections.gpuops.platform.plugins.module_utils._driver import converge as driver_converge
from ansible_collections.gpuops.platform.plugins.module_utils._driver import host as driver_host
from ansible_collections.gpuops.platform.plugins.module_utils._node import preflight as node_preflight
from ansible_collections.gpuops.platform.plugins.modules import gpu_node_preflight, nvidia_driver

KERNEL = "6.1.0-37-amd64"
PASSWORD = "Pw-7f3a9c-do-not-print"
MIRROR = {"source": "mirror", "mirror_url": "https://mirror.example/nvidia/debian12/x86_64/",
          "mirror_gpgkey": "/etc/pki/mirror.asc", "version": "570.172.08", "install_prerequisites": False}
KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGJ0\n-----END PGP PUBLIC KEY BLOCK-----\n"
# Files a previous run left, which a refused run must not touch.
EXISTING = {
    "etc/modprobe.d/gpuops-blacklist-nouveau.conf": "# managed\nblacklist nouveau\n",
    "etc/apt/preferences.d/gpuops-nvidia-driver": "Package: /^nvidia/\nPin: version 570.158.01-*\n",
    "etc/apt/sources.list.d/gpuops-nvidia-mirror.list": "deb https://mirror.example/nvidia/ /\n",
    "etc/dkms/framework.conf.d/gpuops-mok.conf": "mok_signing_key=/k/MOK.priv\n",
    "etc/pki/mirror.asc": KEY,
}


# ansible-core 2.18+ echoes the arguments only when the controller asks (it
# does at -vvv); 2.17 always does and does not know the flag.
INJECT_INVOCATION = {"_ansible_inject_invocation": True} if "inject_invocation" in PASS_VARS else {}


def run_module(main, args, capsys):
    """main() with ``args`` through the real exit_json/fail_json: (rc, result, raw stdout).

    The result carries invocation.module_args, as it does at -vvv on every ansible-core."""
    with pytest.raises(SystemExit) as exc:
        with patch_module_args(dict(args, **INJECT_INVOCATION)):
            main()
    out = capsys.readouterr()
    return exc.value.code, json.loads(out.out), out.out + out.err


def snapshot(root):
    """Every path under root: file bytes, mode, owner, mtime; link targets; directories."""
    found = {}
    for base, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(base, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as handle:
                    found[rel] = (handle.read(), st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns)
            else:
                found[rel] = (stat.S_IFMT(st.st_mode), st.st_mode, st.st_uid)
    return found


@pytest.fixture
def node(tmp_path, monkeypatch):
    monkeypatch.setattr(driver_host, "kernel_release", lambda: KERNEL)
    monkeypatch.setattr(driver_host, "machine_arch", lambda: "x86_64")
    n = FakeNode(tmp_path / "root").os("debian", "12").modules("ext4")
    for rel, content in EXISTING.items():
        n.write(rel, content)
    os.makedirs(os.path.join(n.root, "etc/pki/a-directory"))
    monkeypatch.setattr(nvidia_driver, "Converger", functools.partial(driver_converge.Converger, root=n.root))
    monkeypatch.setattr(node_preflight, "run", functools.partial(node_preflight.run, root=n.root))
    return n


@pytest.fixture
def apt(node, monkeypatch):
    fake = FakeApt(node, available={"nvidia-open-570": ["570.172.08-1"], "nvidia-driver": ["570.172.08-1"]})
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: fake(argv, **kw))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, tool, required=False, opt_dirs=None: "/usr/sbin/" + tool)
    return fake


def assert_refused(node, apt, capsys, args, option, problem, main=nvidia_driver.main):
    before = snapshot(node.root)
    rc, result, raw = run_module(main, args, capsys)
    assert rc == 1 and result["failed"], result
    assert option in result["msg"] and problem in result["msg"], result["msg"]
    assert "Traceback" not in raw and "exception" not in result
    assert not result.get("changed")
    assert [c for c in apt.calls if apt.mutating(c)] == []
    assert snapshot(node.root) == before
    return result, raw


INJECTIONS = ["$(touch {marker})", "`touch {marker}`", "x;touch {marker}", "x\ntouch {marker}", "x\x00y",
              "x\r\ndeb [trusted=yes] http://evil.example/ /"]
# Options whose values reach a file or command line, with what a refusal says.
FREE_TEXT = {
    "branch": "is not a driver branch",
    "version": "is not a driver version",
    "mirror_url": "mirror_url",
    "mirror_gpgkey": "mirror_gpgkey",
    "mirror_suite": "mirror_suite",
    "mirror_components": "mirror_components[0]",
    "runfile": "runfile",
    "dcgm_package": "dcgm_package",
    "mok_signing_key": "mok_signing_key",
    "mok_certificate": "mok_certificate",
    "mirror_username": "mirror_username",
    "mirror_password": "mirror_password",
}


@pytest.mark.parametrize("option", sorted(FREE_TEXT))
@pytest.mark.parametrize("injection", range(len(INJECTIONS)))
def test_injection_in_every_free_text_option(node, apt, capsys, tmp_path, option, injection):
    marker = tmp_path / "injected"
    value = INJECTIONS[injection].format(marker=marker)
    args = dict(MIRROR, mirror_username="ci-bot", mirror_password=PASSWORD,
                mok_signing_key="/etc/pki/MOK.priv", mok_certificate="/etc/pki/MOK.der")
    node.write("etc/pki/MOK.priv", "key")
    node.write("etc/pki/MOK.der", "cert")
    if option == "runfile":
        args.update(source="runfile", version=None)
        args.pop("mirror_username")
        args.pop("mirror_password")
    if option in ("mok_signing_key", "mok_certificate", "mirror_gpgkey", "runfile"):
        value = "/etc/pki/" + value
    elif option == "mirror_url":
        value = "https://mirror.example/" + value
    args[option] = [value] if option == "mirror_components" else value
    if option == "mirror_components":
        args["mirror_suite"] = "stable"
    args = {k: v for k, v in args.items() if v is not None}
    before = snapshot(node.root)
    rc, result, raw = run_module(nvidia_driver.main, dict(args, _ansible_check_mode=True, _ansible_diff=True), capsys)
    assert "Traceback" not in raw and "exception" not in result
    assert not marker.exists()
    assert snapshot(node.root) == before
    assert [c for c in apt.calls if apt.mutating(c)] == []
    if rc == 0:
        # Accepted only where the value cannot break out: no whitespace or control character reached a file.
        assert not any(c in value for c in "\n\r\x00 "), (option, value)
        for diff in result.get("diff", []):
            assert "evil" not in diff["after"] and "\ntouch" not in diff["after"]
    elif "\x00" in value and FREE_TEXT[option] not in result["msg"]:
        # ansible-core 2.18+ stops at a NUL in a logged string option, before the module's code runs
        # (2.17 logs it and the module refuses the value itself).
        assert result["msg"].startswith("Failed to log to syslog (embedded null character)")
    else:
        assert FREE_TEXT[option] in result["msg"], result["msg"]
    assert PASSWORD not in raw


@pytest.mark.parametrize("args,option,problem", [
    ({"nvswitch_count": "many"}, "nvswitch_count", "int"),
    ({"open": "perhaps"}, "open", "bool"),
    ({"state": "gone"}, "state", "one of"),
    # AnsibleModule turns the dict into its text, whose spaces are then refused.
    ({"mirror_components": [{"a": 1}]}, "mirror_components[0]", "whitespace"),
    ({"mirror_url": "https://mirror.example/" + "a" * 1000000}, "mirror_url", "more than the 4096"),
    ({"mirror_url": "ftp://mirror.example/"}, "mirror_url", "is not an http://, https:// or file: URL"),
    ({"mirror_gpgkey": "/etc/pki/a-directory"}, "mirror_gpgkey", "is a directory, not a file"),
    ({"mirror_gpgkey": "/etc/pki/missing.asc"}, "mirror_gpgkey", "does not exist on the node"),
    ({"mirror_gpgkey": "/etc/modprobe.d/gpuops-blacklist-nouveau.conf"}, "mirror_gpgkey",
     "is not an ASCII-armored OpenPGP public key"),
    ({"mok_signing_key": "/etc/pki/a-directory", "mok_certificate": "/etc/pki/mirror.asc"}, "mok_signing_key",
     "is a directory, not a file"),
    ({"source": "runfile", "runfile": "/etc/pki/a-directory", "version": "570.172.08"}, "runfile",
     "is a directory, not a file"),
    ({"mirror_username": "ci-bot"}, "mirror_username, mirror_password", "required together"),
])
def test_bad_values_fail_clearly_and_change_nothing(node, apt, capsys, args, option, problem):
    assert_refused(node, apt, capsys, dict(MIRROR, **args), option, problem)


@pytest.mark.parametrize("check", [True, False], ids=["check", "apply"])
@pytest.mark.parametrize("url", ["https://ci-bot:%s@mirror.example/nvidia/" % PASSWORD,
                                 "https://%s@mirror.example/nvidia/" % PASSWORD])
def test_credentials_in_the_url_never_reach_output_or_files(node, apt, capsys, check, url):
    result, raw = assert_refused(node, apt, capsys, dict(MIRROR, mirror_url=url, _ansible_check_mode=check,
                                                         _ansible_diff=True),
                                 "mirror_url", "must not carry credentials")
    assert PASSWORD not in raw
    assert "/etc/apt/auth.conf.d/gpuops-nvidia-mirror.conf" in result["msg"]


def _all_files_holding(root, text):
    hits = []
    for base, dummy, files in os.walk(root):
        for name in files:
            path = os.path.join(base, name)
            with open(path, "rb") as handle:
                if text.encode() in handle.read():
                    hits.append(os.path.relpath(path, root))
    return hits


def test_mirror_password_only_in_the_0600_auth_file(node, apt, capsys):
    args = dict(MIRROR, mirror_username="ci-bot", mirror_password=PASSWORD)
    rc, plan, raw = run_module(nvidia_driver.main, dict(args, _ansible_check_mode=True, _ansible_diff=True), capsys)
    assert rc == 0, plan
    assert PASSWORD not in raw
    auth = [d for d in plan["diff"] if d["after_header"] == "/etc/apt/auth.conf.d/gpuops-nvidia-mirror.conf"]
    assert auth and auth[0]["after"].endswith("login ci-bot\npassword ********\n")
    assert _all_files_holding(node.root, PASSWORD) == []

    rc, result, raw = run_module(nvidia_driver.main, dict(args, _ansible_diff=True), capsys)
    assert rc == 0, result
    assert PASSWORD not in raw
    assert _all_files_holding(node.root, PASSWORD) == ["etc/apt/auth.conf.d/gpuops-nvidia-mirror.conf"]
    auth = os.path.join(node.root, "etc/apt/auth.conf.d/gpuops-nvidia-mirror.conf")
    assert stat.S_IMODE(os.stat(auth).st_mode) == 0o600
    assert "ci-bot" not in node.read("/etc/apt/sources.list.d/gpuops-nvidia-mirror.list")

    # A failure after the credentials were given does not print them either.
    apt.available = {}
    rc, result, raw = run_module(nvidia_driver.main, dict(args, version="570.999.01"), capsys)
    assert rc == 1 and PASSWORD not in raw

    # Credentials taken away: the auth entry goes too.
    rc, result, raw = run_module(nvidia_driver.main, MIRROR, capsys)
    assert not os.path.exists(auth)


def test_rhel_mirror_without_a_key_is_refused(node, apt, capsys):
    node.os("rhel", "9.4")
    args = dict(MIRROR, mirror_url="https://mirror.example/rhel9", mirror_gpgkey=None)
    del args["mirror_gpgkey"]
    assert_refused(node, apt, capsys, args, "mirror_gpgkey", "mirror_trusted: true")


def test_trusted_mirror_warns_loudly(node, apt, capsys):
    rc, result, raw = run_module(nvidia_driver.main, dict(MIRROR, mirror_trusted=True, _ansible_check_mode=True),
                                 capsys)
    assert rc == 0
    assert any("WITHOUT signature checks" in w for w in result["warnings_list"])
    assert "WITHOUT signature checks" in json.dumps(result["warnings"])  # emitted as a warning too


@pytest.mark.parametrize("check", [True, False], ids=["check", "apply"])
def test_a_directory_in_place_of_a_file_changes_nothing(node, apt, capsys, check):
    os.makedirs(os.path.join(node.root, "etc/apt/apt.conf.d/51gpuops-nvidia-driver"))
    assert_refused(node, apt, capsys, dict(MIRROR, _ansible_check_mode=check),
                   "/etc/apt/apt.conf.d/51gpuops-nvidia-driver", "is a directory, not a file")


@pytest.mark.parametrize("check", [True, False], ids=["check", "apply"])
def test_an_immutable_file_is_refused_and_kept(node, apt, capsys, check):
    path = node.write("etc/modprobe.d/gpuops-blacklist-nouveau.conf", "# hand-made\n")
    try:
        subprocess.run(["chattr", "+i", path], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("chattr +i is not possible here")
    try:
        assert_refused(node, apt, capsys, dict(MIRROR, _ansible_check_mode=check),
                       "/etc/modprobe.d/gpuops-blacklist-nouveau.conf", "it is read-only")
    finally:
        subprocess.run(["chattr", "-i", path], check=False)


def test_a_symlinked_file_is_written_through(node, apt, capsys):
    target = node.write("srv/managed/blacklist.conf", "# old\n")
    link = os.path.join(node.root, "etc/modprobe.d/gpuops-blacklist-nouveau.conf")
    os.unlink(link)
    os.symlink(target, link)
    rc, result, raw = run_module(nvidia_driver.main, MIRROR, capsys)
    assert rc == 0, result
    assert os.path.islink(link) and os.readlink(link) == target
    assert "blacklist nouveau" in node.read("srv/managed/blacklist.conf")


# -- gpu_node_preflight ----------------------------------------------------------------

@pytest.mark.parametrize("args,option,problem", [
    ({"disk_paths": ["var"]}, "disk_paths[0]", "is not an absolute path"),
    ({"disk_paths": ["/", "/var\x1b/x"]}, "disk_paths[1]", "a control character"),
    ({"disk_paths": ["/$(touch /tmp/x)\n"]}, "disk_paths[0]", "a line break"),
    ({"disk_paths": ["/" + "a" * 100000]}, "disk_paths[0]", "more than the 4096"),
    ({"min_free_mib": -1}, "min_free_mib", "cannot be negative"),
    ({"min_free_mib": "lots"}, "min_free_mib", "int"),
    ({"expected_nvswitches": -4}, "expected_nvswitches", "cannot be negative"),
    ({"expected_driver": "570\n"}, "expected_driver", "is not a driver branch or version"),
    ({"expected_driver": "$(reboot)"}, "expected_driver", "is not a driver branch or version"),
    ({"disk_paths": {"a": 1}}, "disk_paths", "list"),
])
def test_preflight_bad_values_fail_clearly(node, apt, capsys, args, option, problem):
    assert_refused(node, apt, capsys, args, option, problem, main=gpu_node_preflight.main)


def test_preflight_reports_a_missing_disk_path_and_survives_hostile_files(node, apt, capsys):
    node.write("etc/os-release", b"ID=debian\nVERSION_ID=\"12\"\nPRETTY_NAME=\"Deb\xe9an\"\n", binary=True)
    os.makedirs(os.path.join(node.root, "proc/driver/nvidia/version"))  # a directory where a file belongs
    before = snapshot(node.root)
    rc, result, raw = run_module(gpu_node_preflight.main, {"disk_paths": ["/", "/no/such/path"], "min_free_mib": 1,
                                                           "require_gpu": False}, capsys)
    assert rc == 0 and "Traceback" not in raw
    assert result["problems"] == ["disk_paths entry /no/such/path does not exist on the node: fix disk_paths"]
    assert result["distro"]["pretty_name"] == "Deb\ufffdan" and result["os_supported"]
    assert result["loaded_version"] is None
    assert snapshot(node.root) == before


KEY_URL = "https://mirror.example/nvidia/debian12/x86_64/D42D0685.pub"
KEYRING = "etc/apt/keyrings/gpuops-nvidia-mirror.asc"


class FakeFetch(object):
    """ansible.module_utils.urls.fetch_url for one key URL: (response, info) as the real one returns them.

    An unreachable host gives no response and status -1 with urllib's reason, as fetch_url does for a URLError.
    """

    def __init__(self, reachable, body=KEY):
        self.reachable, self.body, self.calls = reachable, body, []

    def __call__(self, module, url, method=None, timeout=10, **kwargs):
        self.calls.append((method or "GET", url))
        if not self.reachable:
            return None, {"url": url, "status": -1,
                          "msg": "Request failed: <urlopen error [Errno -2] Name or service not known>"}
        body = self.body if (method or "GET") == "GET" else ""
        return _Response(body), {"url": url, "status": 200, "msg": "OK (%d bytes)" % len(body)}


class _Response(object):
    def __init__(self, body):
        self._body = body.encode()

    def read(self, amt=None):
        return self._body if amt is None else self._body[:amt]


@pytest.fixture
def fetch(monkeypatch):
    def install(reachable):
        from ansible.module_utils import urls
        fake = FakeFetch(reachable)
        monkeypatch.setattr(urls, "fetch_url", fake)
        return fake
    return install


def test_check_mode_with_an_unreachable_key_url_fails_without_a_change_or_a_download(node, apt, capsys, fetch):
    fake = fetch(reachable=False)
    result, raw = assert_refused(node, apt, capsys, dict(MIRROR, mirror_gpgkey=KEY_URL, _ansible_check_mode=True),
                                 "mirror_gpgkey", "cannot be reached")
    assert result["changed"] is False
    assert KEY_URL in result["msg"] and "Name or service not known" in result["msg"]
    assert [m for m, dummy in fake.calls if m != "HEAD"] == []  # like get_url in check mode: a HEAD, no download


def test_check_mode_with_a_reachable_key_url_predicts_the_key_without_downloading_it(node, apt, capsys, fetch):
    fake = fetch(reachable=True)
    before = snapshot(node.root)
    rc, result, raw = run_module(nvidia_driver.main, dict(MIRROR, mirror_gpgkey=KEY_URL, _ansible_check_mode=True,
                                                          _ansible_diff=True), capsys)
    assert rc == 0 and not result.get("failed"), result
    assert result["changed"] is True
    assert "download the mirror key %s to /%s" % (KEY_URL, KEYRING) in result["plan"]
    assert fake.calls == [("HEAD", KEY_URL)]
    assert snapshot(node.root) == before


def test_apply_with_an_unreachable_key_url_fails_before_anything_is_written(node, apt, capsys, fetch):
    fetch(reachable=False)
    node.write("etc/modprobe.d/gpuops-blacklist-nouveau.conf", "# an old file the run would rewrite\n")
    assert_refused(node, apt, capsys, dict(MIRROR, mirror_gpgkey=KEY_URL), "mirror_gpgkey", "cannot be reached")


def test_apply_downloads_a_key_url_once(node, apt, capsys, fetch):
    fake = fetch(reachable=True)
    rc, result, raw = run_module(nvidia_driver.main, dict(MIRROR, mirror_gpgkey=KEY_URL), capsys)
    assert rc == 0, result
    assert node.read("/" + KEYRING) == KEY
    assert fake.calls == [("GET", KEY_URL)]
    rc, result, raw = run_module(nvidia_driver.main, dict(MIRROR, mirror_gpgkey=KEY_URL), capsys)
    assert rc == 0 and fake.calls == [("GET", KEY_URL)]  # the key is there: not fetched again


@pytest.mark.parametrize("args, option, problem", [
    # \d matches any Unicode digit: "５７０" planned `install nvidia-open-５７０`.
    ({"branch": "\uff15\uff17\uff10", "version": None}, "branch", "is not a driver branch"),
    ({"branch": "\u0665\u0667\u0660", "version": None}, "branch", "is not a driver branch"),
    ({"version": "\uff15\uff17\uff10.172.08"}, "version", "is not a driver version"),
    ({"version": "570.\u00b9\u2077\u00b2.08"}, "version", "is not a driver version"),
    # $ matched before a trailing newline: the value must be trimmed and quoted.
    ({"version": "570.172.08\n"}, "version", "Trim the value and quote it in YAML (version: '570.172.08')"),
    ({"branch": "570\n", "version": None}, "branch", "Trim the value and quote it in YAML (branch: '570')"),
    ({"version": " 570.172.08"}, "version", "whitespace around it"),
])
def test_unicode_digits_and_untrimmed_values_are_refused(node, apt, capsys, args, option, problem):
    result, raw = assert_refused(node, apt, capsys, dict(MIRROR, **args), option, problem)
    assert "nvidia-open-" not in raw
