# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): package names, repositories and pins (pure).
"""What to install for an NVIDIA driver: pure functions, no I/O.

distro + arch + source + branch/version + open/proprietary go in; the
repository definition, the package set, the branch pin and the hold
selection come out. Everything here is unit tested for every distro.

Package names follow NVIDIA's CUDA network repositories (the layout used by
the 570 and 575 data center driver branches):

* Ubuntu/Debian, CUDA repo: ``nvidia-open-<branch>`` (open kernel modules) or
  ``cuda-drivers-<branch>`` (proprietary), both metapackages versioned like the
  driver; ``nvidia-fabricmanager-<branch>`` (``nvidia-fabricmanager`` from
  580 on); DCGM 4 as ``datacenter-gpu-manager-4-cuda<major>``.
* Ubuntu archive: ``nvidia-driver-<branch>-server[-open]`` and
  ``nvidia-fabricmanager-<branch>``. Debian non-free: ``nvidia-driver`` with
  ``nvidia-kernel-dkms`` or ``nvidia-open-kernel-dkms``.
* RHEL/Rocky/Alma: the ``nvidia-driver`` dnf module, stream
  ``<branch>-open`` or ``<branch>-dkms``, packages ``nvidia-driver``,
  ``nvidia-driver-cuda``, ``kmod-nvidia-open-dkms`` or
  ``kmod-nvidia-latest-dkms``; ``nvidia-fabric-manager``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from shlex import quote as shell_quote

CUDA_REPO_BASE = "https://developer.download.nvidia.com/compute/cuda/repos"
MANAGED_MARK = "Managed by gpuops.platform.nvidia_driver"

# distro id -> {version -> CUDA repo directory name}; RHEL rebuilds share RHEL's repo.
SUPPORTED = {
    "ubuntu": {"22.04": "ubuntu2204", "24.04": "ubuntu2404"},
    "debian": {"12": "debian12"},
    "rhel": {"8": "rhel8", "9": "rhel9"},
    "rocky": {"8": "rhel8", "9": "rhel9"},
    "almalinux": {"8": "rhel8", "9": "rhel9"},
}
DEB_FAMILY = ("ubuntu", "debian")
RPM_FAMILY = ("rhel", "rocky", "almalinux")
# Kernel arch -> NVIDIA repo dir (server Arm is "sbsa") and Debian arch.
REPO_ARCH = {"x86_64": "x86_64", "aarch64": "sbsa"}
DEB_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}
# Signing keys NVIDIA publishes next to each repo.
CUDA_KEY_DEB = "3bf863cc.pub"
CUDA_KEY_RPM = "D42D0685.pub"
CUDA_KEYRING_DEB = "cuda-keyring_1.1-1_all.deb"

SOURCES = ("cuda", "distro", "mirror", "runfile")

# Names of every package that belongs to the driver itself (held and pinned
# together). Container toolkit, DCGM and CUDA toolkit packages are not in here.
DEB_DRIVER_REGEX = (
    r"^(nvidia-(open|driver|dkms|kernel|utils|compute-utils|modprobe|persistenced|settings|smi|"
    r"fabricmanager|firmware|headless|suspend-common|vdpau-driver|egl|opencl|xconfig|alternative|"
    r"libopencl|vulkan)|libnvidia-|libcuda1|libnvcuvid|libnvoptix|cuda-drivers|"
    r"firmware-nvidia|xserver-xorg-video-nvidia|libxnvctrl|libgl1-nvidia|libegl-nvidia|"
    r"libgles-nvidia|libglx-nvidia)"
)
# Python-side matching (holds, removal, unattended-upgrades): leave the container
# toolkit's libnvidia-container* alone, it is not part of the driver. apt's own
# regexes have no look-ahead, and the apt pin is safe anyway: it pins by version.
PY_DEB_DRIVER_REGEX = DEB_DRIVER_REGEX.replace("libnvidia-|", "libnvidia-(?!container)|")
RPM_DRIVER_REGEX = (
    r"^(nvidia-(driver|kmod|modprobe|persistenced|settings|xconfig|libXNVCtrl|fabric-manager|open)|"
    r"kmod-nvidia|libnvidia-(?!container)|xorg-x11-nvidia|cuda-drivers)"
)

# ASCII digits only (\d is any Unicode digit: "５７０" would name a package nobody publishes),
# matched against the whole value with fullmatch (``$`` also matches before a trailing newline).
_BRANCH = re.compile(r"[0-9]{3}")
_VERSION = re.compile(r"([0-9]{3})\.[0-9]{1,3}(\.[0-9]{1,3})?")
_RUNFILE = re.compile(r"NVIDIA-Linux-(x86_64|aarch64)-([0-9]{3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)\.run\Z")


class DriverSpecError(ValueError):
    """The requested driver cannot be planned; the message says what to change."""


# -- validation of every value that reaches a file or a command line ------------

MAX_VALUE_LEN = 4096  # PATH_MAX; nothing this module writes needs a longer value
APT_AUTH_PATH = "/etc/apt/auth.conf.d/gpuops-nvidia-mirror.conf"
DNF_MIRROR_PATH = "/etc/yum.repos.d/gpuops-nvidia-mirror.repo"
# C0 and C1 control characters, DEL, and the Unicode line and paragraph separators.
_CONTROL = re.compile(u"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SPACE = re.compile(r"\s")
# Characters bash still expands inside double quotes: dkms sources its framework
# files, then sources again a copy with each value re-emitted in double quotes.
_DKMS_UNSAFE = re.compile(r"[$`\"\\]")
_PACKAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
_URL_SCHEMES = ("http://", "https://", "file:")


def _describe(value, match):
    char = match.group(0)
    kind = "whitespace" if _SPACE.match(char) and not _CONTROL.match(char) else "a control character"
    if char in "\n\r":
        kind = "a line break"
    return "%s (%r at position %d)" % (kind, char, match.start())


def check_text(name, value, where, spaces=False, secret=False):
    """Reject a value that could break out of the line or file it is written to.

    ``where`` says what reads the value, for the message. A ``secret`` value is
    never quoted back.
    """
    if not isinstance(value, str):
        raise DriverSpecError("%s must be a string, got %s" % (name, type(value).__name__))
    if not value:
        raise DriverSpecError("%s is empty: set a value or leave the option out" % name)
    try:
        value.encode("utf-8")
    except UnicodeError:
        raise DriverSpecError("%s is not valid UTF-8 text: %s cannot hold it" % (name, where))
    if len(value) > MAX_VALUE_LEN:
        raise DriverSpecError("%s is %d characters long, more than the %d that %s can take"
                              % (name, len(value), MAX_VALUE_LEN, where))
    match = _CONTROL.search(value) or (None if spaces else _SPACE.search(value))
    if match:
        what = "whitespace or a control character" if secret else _describe(value, match)
        raise DriverSpecError("%s contains %s, which would change %s: remove it" % (name, what, where))
    return value


def _userinfo(url):
    """Whether a URL carries user[:password]@ before its host."""
    rest = url.split("://", 1)[1] if "://" in url else url[len("file:"):] if url.startswith("file:") else url
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    return "@" in authority


def check_url(name, value, where, family):
    check_text(name, value, where)
    if _userinfo(value):
        # Do not echo the value: it holds the credentials.
        raise DriverSpecError(
            "%s must not carry credentials (user:password@host): %s is world-readable. Set mirror_username and "
            "mirror_password instead; they go to %s with mode 0600" % (
                name, where, APT_AUTH_PATH if family == "deb" else DNF_MIRROR_PATH))
    if not value.startswith(_URL_SCHEMES):
        raise DriverSpecError("%s %r is not an http://, https:// or file: URL" % (name, value))
    if family == "rpm" and "," in value:
        raise DriverSpecError("%s %r contains a comma, which dnf reads as a second URL: remove it" % (name, value))
    return value


def check_path(name, value, where, shell=False):
    check_text(name, value, where)
    if not value.startswith("/"):
        raise DriverSpecError("%s %r is not an absolute path: give the full path on the node" % (name, value))
    if shell and _DKMS_UNSAFE.search(value):
        raise DriverSpecError("%s %r contains $, `, \" or \\, which %s would expand: rename the file"
                              % (name, value, where))
    return value


def validate(params, family):
    """Check every free-text option before anything is planned; messages name the option."""
    if params.get("mirror_url") is not None:
        where = "the apt source list" if family == "deb" else "the dnf .repo file"
        check_url("mirror_url", params["mirror_url"], where, family)
    key = params.get("mirror_gpgkey")
    if key is not None:
        if key.startswith(("http://", "https://")):
            check_url("mirror_gpgkey", key, "the dnf .repo file" if family == "rpm" else "the key download", family)
        else:
            check_path("mirror_gpgkey", key[len("file://"):] if key.startswith("file://") else key,
                       "the dnf .repo file" if family == "rpm" else "the key path")
            if family == "rpm" and "," in key:
                raise DriverSpecError("mirror_gpgkey %r contains a comma, which dnf reads as a second key" % key)
    if params.get("mirror_suite") is not None:
        check_text("mirror_suite", params["mirror_suite"], "the apt source list")
    for index, component in enumerate(params.get("mirror_components") or []):
        check_text("mirror_components[%d]" % index, component, "the apt source list")
    user, password = params.get("mirror_username"), params.get("mirror_password")
    if user is not None or password is not None:
        if user is None or password is None:
            raise DriverSpecError("mirror_username and mirror_password go together: set both or neither")
        target = APT_AUTH_PATH if family == "deb" else DNF_MIRROR_PATH
        check_text("mirror_username", user, target)
        check_text("mirror_password", password, target, secret=True)
        if (params.get("source") or "cuda") != "mirror":
            raise DriverSpecError("mirror_username and mirror_password are for source=mirror only")
        if not (params.get("mirror_url") or "").startswith(("http://", "https://")):
            raise DriverSpecError("mirror_username and mirror_password need an http:// or https:// mirror_url")
    for name in ("mok_signing_key", "mok_certificate"):
        if params.get(name) is not None:
            check_path(name, params[name], "/etc/dkms/framework.conf.d (sourced by bash)", shell=True)
    if params.get("runfile") is not None:
        check_path("runfile", params["runfile"], "the installer command line")
    if params.get("dcgm_package") is not None:
        name = params["dcgm_package"]
        check_text("dcgm_package", name, "the package manager command line")
        if not _PACKAGE_NAME.fullmatch(name):
            raise DriverSpecError("dcgm_package %r is not a package name (letters, digits, . _ + -, not starting "
                                  "with -)" % name)
    for name in ("branch", "version"):
        if params.get(name) is not None and not isinstance(params[name], (str, int)):
            raise DriverSpecError("%s must be a string, got %s" % (name, type(params[name]).__name__))


def _check_untrimmed(name, value):
    """A branch or version with whitespace around it (a YAML block scalar, a value read from a file)."""
    if isinstance(value, str) and value != value.strip():
        raise DriverSpecError(
            "%s %r is not a driver %s as written: it has %s around it. Trim the value and quote it in YAML "
            "(%s: '%s'); a block scalar (|) or a value read from a file keeps its line break"
            % (name, value, name, "a line break" if "\n" in value or "\r" in value else "whitespace", name,
               value.strip()))


def upstream_version(pkg_version):
    """'570.172.08-0ubuntu1' / '3:570.172.08-1.el9' -> '570.172.08'."""
    if not pkg_version:
        return None
    version = pkg_version.split(":", 1)[-1]
    return version.split("-", 1)[0]


def branch_of(version):
    return version.split(".", 1)[0] if version else None


def wanted_matches(installed, branch, version):
    """Whether an installed upstream version satisfies the requested branch/version."""
    if not installed:
        return False
    if version:
        return installed == version
    return branch_of(installed) == branch


def normalize(params, distro, arch):
    """Validate the module parameters against the host; return the spec dict.

    ``distro`` is ``host.distro_info()`` (_driver/host.py); ``arch`` the kernel arch.
    Raises DriverSpecError with a message that says what to change.
    """
    source = params.get("source") or "cuda"
    if source not in SOURCES:
        raise DriverSpecError("source must be one of %s, got %r" % (", ".join(SOURCES), source))
    distro_id = distro.get("id") or ""
    versions = SUPPORTED.get(distro_id)
    if versions is None:
        raise DriverSpecError(
            "unsupported distribution %r: nvidia_driver supports Ubuntu 22.04/24.04, Debian 12 and "
            "RHEL/Rocky/AlmaLinux 8 and 9" % (distro.get("pretty_name") or distro_id or "unknown"))
    key = distro.get("version") if distro_id == "ubuntu" else distro.get("major")
    if key not in versions:
        raise DriverSpecError("unsupported %s release %r: supported are %s"
                              % (distro_id, distro.get("version"), ", ".join(sorted(versions))))
    if arch not in REPO_ARCH:
        raise DriverSpecError("unsupported architecture %r: supported are x86_64 and aarch64" % arch)
    family = "deb" if distro_id in DEB_FAMILY else "rpm"
    validate(params, family)

    version = params.get("version")
    branch = params.get("branch")
    runfile = params.get("runfile")
    for name, value in (("branch", branch), ("version", version)):
        _check_untrimmed(name, value)
    if branch is not None and not _BRANCH.fullmatch(str(branch)):
        raise DriverSpecError("branch %r is not a driver branch: use the major version such as '570'" % (branch,))
    if version is not None:
        version = str(version)
        match = _VERSION.fullmatch(version)
        if not match:
            raise DriverSpecError(
                "version %r is not a driver version: use the full version such as '570.172.08' "
                "(or set branch: '570' to follow a branch)" % version)
        if branch is not None and str(branch) != match.group(1):
            raise DriverSpecError("version %s is not on branch %s" % (version, branch))
        branch = match.group(1)
    if source == "runfile":
        if not runfile:
            raise DriverSpecError("source=runfile needs runfile: the path of NVIDIA-Linux-<arch>-<version>.run on the node")
        match = _RUNFILE.search(os.path.basename(runfile))
        if match:
            if version and version != match.group(2):
                raise DriverSpecError("runfile %s is version %s, not the requested %s" % (runfile, match.group(2), version))
            version = version or match.group(2)
            branch = branch_of(version)
            if match.group(1) != arch:
                raise DriverSpecError("runfile %s is for %s, the node is %s" % (runfile, match.group(1), arch))
        elif not version:
            raise DriverSpecError(
                "cannot tell the driver version from the runfile name %s: set version" % runfile)
    if branch is None:
        raise DriverSpecError("set branch (e.g. '570') or version (e.g. '570.172.08')")
    branch = str(branch)
    if not _BRANCH.fullmatch(branch):
        raise DriverSpecError("branch %r is not a driver branch: use the major version such as '570'" % branch)

    if source == "mirror" and not params.get("mirror_url"):
        raise DriverSpecError("source=mirror needs mirror_url (http(s):// or file: URL of a copy of NVIDIA's repository)")
    if source == "distro" and distro_id not in ("ubuntu", "debian"):
        raise DriverSpecError("source=distro is for Ubuntu and Debian; on %s use source=cuda or mirror" % distro_id)
    if source == "mirror" and family == "rpm" and not (params.get("mirror_gpgkey") or params.get("mirror_trusted")):
        raise DriverSpecError(
            "source=mirror on %s needs mirror_gpgkey (the mirror's signing key, a path on the node or a URL) so dnf "
            "checks package signatures; to install unsigned packages anyway, set mirror_trusted: true" % distro_id)

    return {
        "distro": distro_id,
        "family": family,
        "release": key,
        "repo_dir": versions[key],
        "arch": arch,
        "repo_arch": REPO_ARCH[arch],
        "source": source,
        "branch": branch,
        "version": version,
        "open": bool(params.get("open", True)),
        "state": params.get("state") or "present",
        "runfile": runfile,
        "mirror_url": params.get("mirror_url"),
        "mirror_gpgkey": params.get("mirror_gpgkey"),
        "mirror_trusted": bool(params.get("mirror_trusted")),
        "mirror_suite": params.get("mirror_suite") or "/",
        "mirror_components": list(params.get("mirror_components") or []),
        "mirror_username": params.get("mirror_username"),
        "mirror_password": params.get("mirror_password"),
    }


def cuda_repo_url(spec):
    return "%s/%s/%s/" % (CUDA_REPO_BASE, spec["repo_dir"], spec["repo_arch"])


def repository(spec):
    """The repository to configure, or None (distro packages, runfile).

    For the CUDA repo on Debian/Ubuntu this is NVIDIA's own cuda-keyring
    package (it writes the same list file and keyring NVIDIA documents, so a
    host set up by hand converges without a duplicate source). Everything
    else is a file this module writes.
    """
    source, family = spec["source"], spec["family"]
    if source in ("distro", "runfile"):
        return None
    if source == "cuda" and family == "deb":
        base = cuda_repo_url(spec)
        return {
            "kind": "apt-keyring",
            "package": "cuda-keyring",
            "url": base + CUDA_KEYRING_DEB,
            "list_path": "/etc/apt/sources.list.d/cuda-%s-%s.list" % (spec["repo_dir"], spec["repo_arch"]),
            "repo_url": base,
        }
    if source == "cuda":
        name = "cuda-%s-%s" % (spec["repo_dir"], spec["repo_arch"])
        base = cuda_repo_url(spec)
        content = (
            "# %s\n[%s]\nname=%s\nbaseurl=%s\nenabled=1\ngpgcheck=1\ngpgkey=%s\n"
            % (MANAGED_MARK, name, name, base.rstrip("/"), base + CUDA_KEY_RPM))
        return {"kind": "dnf", "path": "/etc/yum.repos.d/cuda-%s.repo" % spec["repo_dir"],
                "content": content, "repo_url": base}
    # mirror
    url = spec["mirror_url"]
    user, password = spec.get("mirror_username"), spec.get("mirror_password")
    if family == "deb":
        key_path = None
        options = []
        if spec["mirror_trusted"]:
            options.append("trusted=yes")
        elif spec["mirror_gpgkey"]:
            key_path = "/etc/apt/keyrings/gpuops-nvidia-mirror.asc"
            options.append("signed-by=%s" % key_path)
        opts = "[%s] " % " ".join(options) if options else ""
        line = "deb %s%s %s" % (opts, url, spec["mirror_suite"])
        if spec["mirror_components"]:
            line += " " + " ".join(spec["mirror_components"])
        content = "# %s: NVIDIA driver mirror\n%s\n" % (MANAGED_MARK, line)
        return {"kind": "apt", "path": "/etc/apt/sources.list.d/gpuops-nvidia-mirror.list",
                "content": content, "key_source": spec["mirror_gpgkey"] if key_path else None,
                "key_path": key_path, "repo_url": url,
                "auth_path": APT_AUTH_PATH,
                "auth_content": apt_auth(url, user, password) if user is not None else None}
    if spec["mirror_trusted"]:
        gpg = "gpgcheck=0\n"
    else:
        key = spec["mirror_gpgkey"]
        if key.startswith("/"):
            key = "file://" + key  # dnf takes key URLs only
        gpg = "gpgcheck=1\ngpgkey=%s\n" % key
    auth = "username=%s\npassword=%s\n" % (user, password) if user is not None else ""
    content = ("# %s\n[gpuops-nvidia-mirror]\nname=NVIDIA driver mirror\nbaseurl=%s\nenabled=1\n%s%s"
               % (MANAGED_MARK, url, gpg, auth))
    return {"kind": "dnf", "path": DNF_MIRROR_PATH, "content": content, "repo_url": url,
            "secret": bool(auth)}


def apt_auth(url, user, password):
    """An apt_auth.conf(5) entry for the mirror: ``machine`` is host[:port]/path.

    Without a protocol apt matches the entry for https only, so an http mirror
    names its protocol.
    """
    scheme, rest = url.split("://", 1)
    machine = rest.rstrip("/")
    if scheme != "https":
        machine = "%s://%s" % (scheme, machine)
    return "# %s: NVIDIA driver mirror\nmachine %s\nlogin %s\npassword %s\n" % (MANAGED_MARK, machine, user, password)


# dnf: "password=" up to the end of the line; apt_auth.conf: the token after "password".
_SECRET_INI = re.compile(r"^(\s*password\s*=)[^\n]*", re.MULTILINE | re.IGNORECASE)
_SECRET_NETRC = re.compile(r"(\bpassword\s+)(?!\*{8}\b)\S+")


def redact(text):
    """A credential file's text with every password replaced, for the diff."""
    return _SECRET_NETRC.sub(r"\g<1>********", _SECRET_INI.sub(r"\g<1>********", text or ""))


def dcgm_package(spec):
    """DCGM 4 is split per CUDA major; 580 is the first CUDA 13 driver branch."""
    return "datacenter-gpu-manager-4-cuda%d" % (13 if int(spec["branch"]) >= 580 else 12)


def fabricmanager_package(spec):
    if spec["family"] == "rpm":
        return "nvidia-fabric-manager"
    if spec["source"] == "distro":
        return "nvidia-fabricmanager-%s" % spec["branch"] if spec["distro"] == "ubuntu" else None
    # The CUDA repo dropped the branch suffix from 580 on.
    if int(spec["branch"]) >= 580:
        return "nvidia-fabricmanager"
    return "nvidia-fabricmanager-%s" % spec["branch"]


def packages(spec, fabricmanager=False, dcgm=False, dcgm_name=None):
    """The package set: {driver: [...], primary: name, extra: [...], module_stream}.

    ``primary`` is the package whose version is the installed driver version.
    Names carry no version: exact versions are added by versioned_names() once
    the package manager has said which full package version matches.
    """
    branch, source, family, is_open = spec["branch"], spec["source"], spec["family"], spec["open"]
    stream = None
    if source == "runfile":
        return {"driver": [], "primary": None, "extra": [], "module_stream": None}
    if family == "deb":
        if source == "distro" and spec["distro"] == "ubuntu":
            primary = "nvidia-driver-%s-server%s" % (branch, "-open" if is_open else "")
            driver = [primary]
        elif source == "distro":
            primary = "nvidia-driver"
            driver = [primary, "nvidia-open-kernel-dkms" if is_open else "nvidia-kernel-dkms"]
        else:
            primary = ("nvidia-open-%s" if is_open else "cuda-drivers-%s") % branch
            driver = [primary]
    else:
        stream = "%s-%s" % (branch, "open" if is_open else "dkms")
        primary = "nvidia-driver"
        driver = ["nvidia-driver", "nvidia-driver-cuda",
                  "kmod-nvidia-open-dkms" if is_open else "kmod-nvidia-latest-dkms",
                  "nvidia-persistenced"]
    extra = []
    if fabricmanager:
        name = fabricmanager_package(spec)
        if name is None:
            raise DriverSpecError(
                "NVSwitches need nvidia-fabricmanager, which Debian does not ship: use source=cuda or mirror")
        extra.append(name)
    if dcgm:
        extra.append(dcgm_name or dcgm_package(spec))
    return {"driver": driver, "primary": primary, "extra": extra, "module_stream": stream}


_KERNEL_FLAVOUR = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+-[0-9]+-([a-z0-9][a-z0-9.+-]*)")


def precompiled_modules(spec, kernel):
    """Canonical's signed precompiled kernel modules for the running ``kernel`` on Ubuntu with source=distro:
    ``(metapackage, per-kernel package)``, or None where there are none to look for.

    ``linux-modules-nvidia-<branch>-server[-open]-<flavour>`` follows the kernel flavour (6.8.0-45-generic:
    generic) to every new kernel; ``linux-modules-nvidia-<branch>-server[-open]-<kernel>`` holds the modules of the
    running kernel, and is what the apt cache must have (as ubuntu-drivers checks). Signed by Canonical, they load
    under Secure Boot with no MOK enrolment and no DKMS build.
    """
    if spec["source"] != "distro" or spec["distro"] != "ubuntu" or not kernel:
        return None
    match = _KERNEL_FLAVOUR.fullmatch(kernel)
    if not match:
        return None
    stem = "linux-modules-nvidia-%s-server%s-" % (spec["branch"], "-open" if spec["open"] else "")
    return stem + match.group(1), stem + kernel


def prerequisites(spec, kernel):
    """Packages DKMS needs to build the module for the running kernel."""
    if spec["family"] == "deb":
        return ["linux-headers-%s" % kernel, "dkms"]
    return ["kernel-devel-%s" % kernel, "dkms", "python3-dnf-plugin-versionlock"]


def pick_apt_version(madison_output, package, version):
    """Full Debian version of ``package`` whose upstream part is ``version``.

    ``madison_output`` is ``apt-cache madison <package>``:
    ``nvidia-open-570 | 570.172.08-1 | file:/srv/repo  Packages``.
    """
    for line in madison_output.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) >= 2 and parts[0] == package and upstream_version(parts[1]) == version:
            return parts[1]
    return None


def apt_pin(spec):
    """An apt preferences file that keeps every driver package on the branch/version.

    A hold alone does not stop apt from pulling a newer ``nvidia-driver`` in
    through a metapackage's ``>=`` dependency, and NVIDIA's Debian packages
    carry no branch in their names: the pin does.
    """
    target = "%s-*" % spec["version"] if spec["version"] else "%s.*" % spec["branch"]
    what = "version %s" % spec["version"] if spec["version"] else "branch %s" % spec["branch"]
    return (
        "# %s: keep the NVIDIA driver on %s.\n"
        "Package: /%s/\n"
        "Pin: version %s\n"
        "Pin-Priority: 1001\n" % (MANAGED_MARK, what, DEB_DRIVER_REGEX, target))


def hold_selection(installed, version, family):
    """Installed driver packages at ``version``: the ones to hold.

    ``installed`` maps package name -> full package version.
    """
    regex = re.compile(PY_DEB_DRIVER_REGEX if family == "deb" else RPM_DRIVER_REGEX)
    return sorted(name for name, pkg_version in installed.items()
                  if regex.match(name) and upstream_version(pkg_version) == version)


def driver_packages_installed(installed, family):
    regex = re.compile(PY_DEB_DRIVER_REGEX if family == "deb" else RPM_DRIVER_REGEX)
    return sorted(name for name in installed if regex.match(name))


# Packages Debian and Ubuntu build from their own sources (nvidia-settings and
# friends) and that other software pulls in without any driver: libxnvctrl0
# comes with desktop tools. Alone they do not make a driver installed.
_STANDALONE = re.compile(r"^(libxnvctrl|nvidia-settings|nvidia-xconfig|nvidia-modprobe|nvidia-persistenced)")


def installed_driver_version(installed, primary, family):
    """The installed driver version: the primary package's, else the most common
    version among installed driver packages (another branch's metapackage)."""
    def version_of(value):
        return upstream_version(value) if family == "deb" else value[1]
    if primary in installed:
        return version_of(installed[primary])
    regex = re.compile(PY_DEB_DRIVER_REGEX if family == "deb" else RPM_DRIVER_REGEX)
    counts = {}
    for name, value in installed.items():
        version = version_of(value)
        if regex.match(name) and not _STANDALONE.match(name) and version and _VERSION.fullmatch(version):
            counts[version] = counts.get(version, 0) + 1
    if not counts:
        return None
    return sorted(counts.items(), key=lambda item: (item[1], item[0]))[-1][0]


def other_branch_metas(installed, spec):
    """Branch metapackages of another branch, removed when switching branches."""
    if spec["family"] != "deb":
        return []
    pattern = re.compile(r"(nvidia-open|cuda-drivers|nvidia-driver|nvidia-fabricmanager)-([0-9]{3})(-server)?(-open)?")
    wanted = packages(spec)["primary"]
    # The other kernel module flavor's metapackage of the same branch goes too.
    other_flavor = ("cuda-drivers-%s" if spec["open"] else "nvidia-open-%s") % spec["branch"]
    result = []
    for name in sorted(installed):
        match = pattern.fullmatch(name)
        if match and name != wanted and (match.group(2) != spec["branch"] or name == other_flavor):
            result.append(name)
    return result


def unattended_upgrades_blacklist():
    """apt.conf.d snippet: unattended-upgrades must never touch the driver."""
    return (
        "// %s: the driver is upgraded on purpose, with a reboot, never in the background.\n"
        "Unattended-Upgrade::Package-Blacklist {\n"
        "    \"%s\";\n"
        "};\n" % (MANAGED_MARK, PY_DEB_DRIVER_REGEX))


def versionlock_block(installed_nevra, version):
    """Lines for /etc/dnf/plugins/versionlock.list, one per driver package.

    ``installed_nevra`` maps name -> (epoch, version, release).
    """
    regex = re.compile(RPM_DRIVER_REGEX)
    lines = []
    for name in sorted(installed_nevra):
        epoch, ver, rel = installed_nevra[name]
        if regex.match(name) and ver == version:
            lines.append("%s-%s:%s-%s.*" % (name, epoch or "0", ver, rel))
    return lines


VERSIONLOCK_BEGIN = "# BEGIN %s" % MANAGED_MARK
VERSIONLOCK_END = "# END %s" % MANAGED_MARK


def merge_block(text, lines):
    """Replace (or append) the managed block in a file, keeping all other lines."""
    kept, inside = [], False
    for line in (text or "").splitlines():
        if line.strip() == VERSIONLOCK_BEGIN:
            inside = True
            continue
        if line.strip() == VERSIONLOCK_END:
            inside = False
            continue
        if not inside:
            kept.append(line)
    if lines:
        kept.extend([VERSIONLOCK_BEGIN] + list(lines) + [VERSIONLOCK_END])
    return "\n".join(kept) + "\n" if kept else ""


def set_ini_option(text, section, key, value):
    """Set ``key = value`` in ``[section]`` of an INI text, keeping everything else.

    By hand, not configparser: the file (dnf-automatic's automatic.conf) belongs to
    the distribution and the admin, and configparser would drop its comments and
    blank lines and rewrite every other line when writing it back.
    """
    lines = (text or "").splitlines()
    out, current, done, seen_section = [], None, False, False
    key_re = re.compile(r"^\s*%s\s*=" % re.escape(key))
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            if current == section and not done:
                out.append("%s = %s" % (key, value))
                done = True
            current = stripped[1:-1].strip()
            seen_section = seen_section or current == section
            out.append(line)
            continue
        if current == section and key_re.match(line):
            if not done:
                out.append("%s = %s" % (key, value))
                done = True
            continue
        out.append(line)
    if not done:
        if not seen_section:
            out.append("[%s]" % section)
        out.append("%s = %s" % (key, value))
    return "\n".join(out) + "\n"


DNF_AUTOMATIC_EXCLUDE = "nvidia-* kmod-nvidia-* libnvidia-* cuda-drivers*"


def nouveau_blacklist():
    return (
        "# %s: the nvidia driver needs nouveau out of the way.\n"
        "blacklist nouveau\n"
        "options nouveau modeset=0\n" % MANAGED_MARK)


def dkms_mok_config(key, cert):
    """DKMS framework config that signs every built module with the given MOK.

    dkms sources the file with bash: both paths are shell-quoted (validate()
    has already refused the characters its second, double-quoted pass expands).
    """
    return "# %s\nmok_signing_key=%s\nmok_certificate=%s\n" % (MANAGED_MARK, shell_quote(key), shell_quote(cert))


def runfile_command(spec):
    """argv for NVIDIA's .run installer: unattended, registered with DKMS."""
    argv = ["sh", spec["runfile"], "--silent", "--dkms"]
    if spec["open"]:
        argv.append("-m=kernel-open")
    elif int(spec["branch"]) >= 560:
        argv.append("-m=kernel")  # open modules became the default in 560
    return argv


def reboot_decision(installed_version, loaded_version, nouveau_is_loaded, gpu_present,
                    loaded_flavor=None, wanted_open=None):
    """(reboot_required, reasons) from what is installed and what the kernel runs."""
    reasons = []
    if loaded_flavor and wanted_open is not None and installed_version == loaded_version:
        wanted = "open" if wanted_open else "proprietary"
        if loaded_flavor != wanted:
            reasons.append("the loaded kernel module is %s, the installed one is %s" % (loaded_flavor, wanted))
    if nouveau_is_loaded:
        reasons.append("nouveau is loaded")
    if installed_version and loaded_version and installed_version != loaded_version:
        reasons.append("loaded kernel module %s differs from installed driver %s"
                       % (loaded_version, installed_version))
    elif installed_version and not loaded_version and gpu_present:
        reasons.append("driver %s is installed but its kernel module is not loaded" % installed_version)
    return bool(reasons), reasons
