# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): how the node's driver got there.
"""Driver provenance: how the NVIDIA driver on a node was installed, read from files only.

One record, made the same way by gpu_node_preflight (recorded by playbooks/record_facts.yml, read by
the fleet planner) and by the nvidia_driver module before it changes anything::

    {"kind": "packages" | "runfile" | "container" | "unknown" | "none",
     "version": "580.159.04" or None,       # the driver found
     "origin": "cuda" | "distro" | None,    # packages: NVIDIA's CUDA repository or the distribution's
     "packages": [{"name": ..., "version": ...}],   # packages: the driver's own, at most MAX_PACKAGES
     "evidence": ["/usr/bin/nvidia-uninstall", ...]}  # what was found, for the messages

* ``container``: a driver container or mount (the GPU Operator's driver root ``/run/nvidia/driver``);
* ``packages``: driver packages installed (distro or CUDA);
* ``runfile``: NVIDIA's ``.run`` installer left ``/usr/bin/nvidia-uninstall``, its log, or a DKMS tree with
  no package;
* ``unknown``: a ``libnvidia-ml.so.1`` that no package owns;
* ``none``: no driver.

``root`` points every path at a fake tree in tests. The installed packages come from the caller (the
module's dpkg-query or rpm answer); without them the dpkg status file is read.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuops.platform.plugins.module_utils._driver import packages as pk

CONTAINER_ROOT = "/run/nvidia/driver"
UNINSTALLER = "/usr/bin/nvidia-uninstall"
INSTALLER_LOG = "/var/log/nvidia-installer.log"
DKMS_TREE = "/var/lib/dkms/nvidia"
DPKG_STATUS = "/var/lib/dpkg/status"
NVML_LIB = "libnvidia-ml.so.1"
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
MAX_PACKAGES = 20
MAX_READ = 64 * 1024  # the installer log's version is on its first lines
_VERSION = re.compile(r"[0-9]{3,4}\.[0-9]{1,3}(?:\.[0-9]{1,3})?")
_LOG_VERSION = re.compile(r"^installer version:[ \t]*([0-9]{3,4}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)[ \t]*(?:\r?\n|\Z)",
                          re.MULTILINE)
_LIB_VERSION = re.compile(r"^libnvidia-ml\.so\.([0-9]{3,4}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)\Z")
# The distributions' own driver packages (Ubuntu's archive, Debian non-free, Canonical's signed modules);
# every other driver package comes from NVIDIA's CUDA repository (or a mirror of it).
_DISTRO_NAMES = re.compile(r"^(nvidia-driver-[0-9]+-server|linux-modules-nvidia-|nvidia-kernel-(open-)?dkms\Z)")


def _path(root, rel):
    return os.path.join(root or "/", rel.lstrip("/"))


def _read(root, rel):
    try:
        with open(_path(root, rel), "rb") as handle:
            return handle.read(MAX_READ).decode("utf-8", "replace")
    except (IOError, OSError):
        return None


def dpkg_packages(root="/"):
    """``{name: version}`` of the packages dpkg has installed, from its status file; None without one."""
    try:
        with open(_path(root, DPKG_STATUS), "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return None
    installed = {}
    for stanza in text.split("\n\n"):
        fields = dict(line.split(":", 1) for line in stanza.splitlines() if ":" in line and not line.startswith(" "))
        name, status = fields.get("Package", "").strip(), fields.get("Status", "").split()
        # "install ok installed", or unpacked / half-configured: the files are there.
        if name and len(status) == 3 and status[2] in ("installed", "unpacked", "half-configured", "half-installed",
                                                       "triggers-awaited", "triggers-pending"):
            installed[name] = fields.get("Version", "").strip()
    return installed


def upstream_versions(installed, family):
    """``{name: upstream version}`` from the module's installed_packages (deb: full version; rpm: (e, v, r))."""
    if family == "deb":
        return dict((name, pk.upstream_version(value)) for name, value in installed.items())
    return dict((name, value[1]) for name, value in installed.items())


def driver_packages(installed, family):
    """``{name: upstream version}`` of the installed packages that are the driver itself."""
    regex = re.compile(pk.PY_DEB_DRIVER_REGEX if family == "deb" else pk.RPM_DRIVER_REGEX)
    return dict((name, version) for name, version in installed.items()
                if (regex.match(name) or name.startswith("linux-modules-nvidia-")) and not pk._STANDALONE.match(name))


def _lib_version(root, base=""):
    """``(path, version)`` of libnvidia-ml.so.1 under ``base``, version from the file it links to; None."""
    for folder in LIB_DIRS:
        rel = base.rstrip("/") + folder + "/" + NVML_LIB
        full = _path(root, rel)
        if os.path.lexists(full):
            match = _LIB_VERSION.match(os.path.basename(os.path.realpath(full)))
            return rel, match.group(1) if match else None
    return None


def _dkms_versions(root):
    try:
        entries = os.listdir(_path(root, DKMS_TREE))
    except (IOError, OSError):
        return []
    return sorted((e for e in entries if _VERSION.fullmatch(e)), key=lambda v: [int(p) for p in v.split(".")])


def _container(root):
    full = _path(root, CONTAINER_ROOT)
    try:
        return os.path.isdir(full) and bool(os.listdir(full))
    except (IOError, OSError):
        return False


def probe(root="/", installed=None, family="deb", loaded_version=None):
    """The provenance record of the node's driver (see the module docstring).

    ``installed``: ``{name: upstream version}`` of every installed package (upstream_versions), None to read
    dpkg's status file. ``loaded_version``: the loaded kernel module's (host.loaded_module_version).
    """
    if installed is None:
        status = dpkg_packages(root)
        installed = dict((n, pk.upstream_version(v)) for n, v in (status or {}).items())
        family = "deb" if status is not None else family
    record = {"kind": "none", "version": None, "origin": None, "packages": [], "evidence": []}
    evidence = record["evidence"]
    lib = _lib_version(root)
    if _container(root):
        inside = _lib_version(root, CONTAINER_ROOT)
        evidence.append(CONTAINER_ROOT)
        record.update(kind="container", version=(inside and inside[1]) or loaded_version)
        return record
    packaged = driver_packages(installed, family)
    if packaged:
        names = sorted(packaged)
        counts = {}
        for value in packaged.values():  # the version most driver packages have (a kernel modules package has the kernel's)
            if value and _VERSION.fullmatch(value):
                counts[value] = counts.get(value, 0) + 1
        version = sorted(counts.items(), key=lambda item: (item[1], item[0]))[-1][0] if counts else None
        distro = [n for n in names if _DISTRO_NAMES.match(n) or (n == "nvidia-driver" and family == "deb")]
        record.update(kind="packages", version=version, origin="distro" if distro else "cuda",
                      packages=[{"name": n, "version": packaged[n]} for n in names[:MAX_PACKAGES]])
        return record
    dkms = _dkms_versions(root)
    log = _read(root, INSTALLER_LOG)
    logged = _LOG_VERSION.search(log or "")
    if os.path.lexists(_path(root, UNINSTALLER)):
        evidence.append(UNINSTALLER)
    if dkms:
        evidence.append("%s/%s (no package)" % (DKMS_TREE, dkms[-1]))
    if logged:
        evidence.append(INSTALLER_LOG)
    if evidence:
        version = (dkms[-1] if dkms else None) or (logged and logged.group(1)) or (lib and lib[1]) or loaded_version
        record.update(kind="runfile", version=version)
        return record
    if lib:
        evidence.append("%s (no package)" % lib[0])
        record.update(kind="unknown", version=lib[1] or loaded_version)
    # A loaded module alone (its packages just removed, the reboot still due) is no installed driver: none.
    return record
