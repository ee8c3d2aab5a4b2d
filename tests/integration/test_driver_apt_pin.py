"""The apt pin nvidia_driver writes, against real apt and stand-in packages.

Builds a flat file: repository of packages laid out like NVIDIA's Debian 12
repo (a branch metapackage with >= dependencies on driver packages whose
names carry no branch), then asks real apt, in a private state directory
(nothing on the host changes), what it would install with and without the pin.
"""

import re
import shutil
import subprocess

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._driver import packages as pk

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not all(shutil.which(t) for t in ("apt-get", "apt-cache", "dpkg-deb", "dpkg-scanpackages")),
                       reason="needs apt and dpkg-dev"),
]

DEBIAN12 = {"id": "debian", "version": "12", "major": "12"}


def _deb(build, repo, name, version, depends=None):
    root = build / ("%s-%s" % (name, version))
    (root / "DEBIAN").mkdir(parents=True)
    control = "Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: test <t@example.org>\nDescription: stand-in\n" % (
        name, version)
    if depends:
        control += "Depends: %s\n" % depends
    (root / "DEBIAN" / "control").write_text(control)
    subprocess.run(["dpkg-deb", "-b", "-Zgzip", str(root), str(repo / ("%s_%s_all.deb" % (name, version)))],
                   check=True, capture_output=True)


@pytest.fixture(scope="module")
def apt(tmp_path_factory):
    base = tmp_path_factory.mktemp("apt")
    repo, build = base / "repo", base / "build"
    repo.mkdir()
    for version in ("570.158.01-1", "570.172.08-1", "575.57.08-1"):
        for name in ("nvidia-driver", "libcuda1", "nvidia-kernel-open-dkms"):
            _deb(build, repo, name, version)
    for version in ("570.158.01-1", "570.172.08-1"):
        up = version.split("-", maxsplit=1)[0]
        _deb(build, repo, "nvidia-open-570", version,
             "nvidia-driver (>= %s), libcuda1 (>= %s), nvidia-kernel-open-dkms (>= %s)" % (up, up, up))
    packages = subprocess.run(["dpkg-scanpackages", "-m", "."], cwd=str(repo), check=True, capture_output=True).stdout
    (repo / "Packages").write_bytes(packages)
    spec = pk.normalize({"source": "mirror", "mirror_url": "file:%s" % repo, "mirror_trusted": True,
                         "branch": "570"}, DEBIAN12, "x86_64")
    etc = base / "etc"
    (etc / "preferences.d").mkdir(parents=True)
    (etc / "sources.list").write_text(pk.repository(spec)["content"])
    for sub in ("lists/partial", "cache/archives/partial"):
        (base / sub).mkdir(parents=True)
    opts = ["-o", "Dir::Etc::SourceList=%s" % (etc / "sources.list"), "-o", "Dir::Etc::SourceParts=/nonexistent",
            "-o", "Dir::Etc::PreferencesParts=%s" % (etc / "preferences.d"), "-o", "Dir::Etc::Preferences=/nonexistent",
            "-o", "Dir::State::Lists=%s" % (base / "lists"), "-o", "Dir::Cache=%s" % (base / "cache"),
            "-o", "Dir::State::status=/dev/null", "-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root"]
    subprocess.run(["apt-get"] + opts + ["update", "-q"], check=True, capture_output=True)

    class Apt(object):
        def pin(self, params):
            path = etc / "preferences.d" / "gpuops-nvidia-driver"
            if params is None:
                if path.exists():
                    path.unlink()
                return
            path.write_text(pk.apt_pin(pk.normalize(dict(params), DEBIAN12, "x86_64")))

        def simulate(self, *specs):
            out = subprocess.run(["apt-get"] + opts + ["-s", "install"] + list(specs),
                                 check=True, capture_output=True, text=True).stdout
            return dict((line.split()[1], line.split()[2].strip("(")) for line in out.splitlines()
                        if line.startswith("Inst "))

        def madison(self, name):
            return subprocess.run(["apt-cache"] + opts + ["madison", name], check=True, capture_output=True,
                                  text=True).stdout

    found = Apt()
    found.repo = repo
    return found


def test_without_the_pin_an_old_meta_drags_in_another_branch(apt):
    apt.pin(None)
    plan = apt.simulate("nvidia-open-570=570.158.01-1")
    assert plan["nvidia-open-570"] == "570.158.01-1"
    assert plan["nvidia-driver"] == "575.57.08-1"  # the mismatch the pin exists for


def test_version_pin_keeps_every_driver_package_on_the_version(apt):
    apt.pin({"version": "570.158.01"})
    assert apt.simulate("nvidia-open-570=570.158.01-1") == {
        "nvidia-open-570": "570.158.01-1", "nvidia-driver": "570.158.01-1", "libcuda1": "570.158.01-1",
        "nvidia-kernel-open-dkms": "570.158.01-1"}


def test_branch_pin_takes_the_newest_of_the_branch_only(apt):
    apt.pin({"branch": "570"})
    plan = apt.simulate("nvidia-open-570")
    assert set(plan.values()) == {"570.172.08-1"}


def test_madison_output_resolves_the_full_version(apt):
    assert pk.pick_apt_version(apt.madison("nvidia-open-570"), "nvidia-open-570", "570.158.01") == "570.158.01-1"


@pytest.fixture
def auth_mirror(apt, tmp_path):
    """The stand-in repository over HTTP behind basic authentication, on 127.0.0.1."""
    import base64
    import functools
    import http.server
    import threading

    repo = apt.repo
    seen = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's naming)
            seen.append(self.headers.get("Authorization"))
            if self.headers.get("Authorization") != "Basic " + base64.b64encode(b"ci-bot:S3cr3t-pw").decode():
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="mirror"')
                self.end_headers()
                return
            super().do_GET()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(repo)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d/" % server.server_address[1], seen
    server.shutdown()


# apt's status line for a refused request ("  401  Unauthorized [IP: ...]"); a bare
# "401" would also match a port such as 40137 in the URL.
REFUSED = re.compile(r"^\s*401\s+Unauthorized", re.M)


def _apt_update(tmp_path, url, auth_content):
    """apt-get update in a private state directory with the module's source line and auth entry."""
    spec = pk.normalize({"source": "mirror", "mirror_url": url, "mirror_trusted": True, "branch": "570",
                         "mirror_username": "ci-bot", "mirror_password": "S3cr3t-pw"}, DEBIAN12, "x86_64")
    repo = pk.repository(spec)
    base = tmp_path / "apt-auth"
    for sub in ("etc/auth.conf.d", "lists/partial", "cache/archives/partial"):
        (base / sub).mkdir(parents=True)
    (base / "etc" / "sources.list").write_text(repo["content"])
    if auth_content is not None:
        (base / "etc" / "auth.conf.d" / "gpuops-nvidia-mirror.conf").write_text(auth_content)
    opts = ["-o", "Dir::Etc::SourceList=%s" % (base / "etc" / "sources.list"), "-o", "Dir::Etc::SourceParts=/nonexistent",
            "-o", "Dir::Etc::netrc=/nonexistent", "-o", "Dir::Etc::netrcparts=%s" % (base / "etc" / "auth.conf.d"),
            "-o", "Dir::State::Lists=%s" % (base / "lists"), "-o", "Dir::Cache=%s" % (base / "cache"),
            "-o", "Dir::State::status=/dev/null", "-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root",
            "-o", "Acquire::Retries=0", "-o", "Acquire::http::Proxy=DIRECT"]
    proc = subprocess.run(["apt-get"] + opts + ["update", "-q"], capture_output=True, text=True, timeout=120,
                          check=False)
    return repo, proc


def test_real_apt_authenticates_with_the_auth_conf_entry(auth_mirror, tmp_path):
    """apt_auth.conf(5) entry the module writes for an http mirror: apt sends the credentials from it."""
    url, seen = auth_mirror
    repo, proc = _apt_update(tmp_path, url, None)
    assert "S3cr3t" not in repo["content"]
    assert proc.returncode != 0 and REFUSED.search(proc.stdout + proc.stderr)  # without the entry: refused
    # apt_auth.conf(5): an entry without a protocol matches https only, so an http mirror must name it.
    bare = repo["auth_content"].replace("machine http://", "machine ")
    dummy, proc = _apt_update(tmp_path / "bare", url, bare)
    assert proc.returncode != 0 and REFUSED.search(proc.stdout + proc.stderr)
    del seen[:]
    repo, proc = _apt_update(tmp_path / "with", url, repo["auth_content"])
    assert proc.returncode == 0 and not REFUSED.search(proc.stdout), proc.stdout + proc.stderr
    assert any(header and header.startswith("Basic ") for header in seen)
