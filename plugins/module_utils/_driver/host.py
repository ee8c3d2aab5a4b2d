# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): read-only probes of the node.
"""Read-only probes of a GPU node, from /proc, /sys, /etc and /lib/modules.

Every function takes ``root`` (default ``/``) so tests can point it at a fake
tree under tmp_path. Nothing here runs a command or needs a driver: it works
on a bare node, in a container and in check mode alike.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import platform
import re

NVIDIA_PCI_VENDOR = "0x10de"
# PCI class codes (class/subclass/prog-if): what NVIDIA functions show up as.
PCI_CLASS_VGA = "0x0300"
PCI_CLASS_3D = "0x0302"
PCI_CLASS_BRIDGE_OTHER = "0x0680"  # NVSwitch enumerates as "bridge, other"

# EFI global variable GUID; the SecureBoot variable is 4 attribute bytes + 1 value byte.
SECURE_BOOT_VAR = "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"

_VERSION_IN_PROC = re.compile(r"Kernel Module(?: for [^ ]+)?\s+([0-9]+\.[0-9]+(?:\.[0-9]+)?)")
_OPEN_IN_PROC = re.compile(r"Open Kernel Module", re.IGNORECASE)


def _path(root, rel):
    return os.path.join(root or "/", rel.lstrip("/"))


MAX_READ = 1024 * 1024  # every file probed here is a few lines long


def _read(root, rel, binary=False):
    """A file's content, None when it cannot be read; bytes that are not UTF-8 become U+FFFD."""
    try:
        with open(_path(root, rel), "rb") as handle:
            data = handle.read(MAX_READ)
    except (IOError, OSError):
        return None
    return data if binary else data.decode("utf-8", "replace")


def os_release(root="/"):
    """Parse /etc/os-release (falling back to /usr/lib/os-release) into a dict."""
    text = _read(root, "etc/os-release")
    if text is None:
        text = _read(root, "usr/lib/os-release")
    data = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        data[key.strip()] = value
    return data


def distro_info(root="/"):
    """Return {id, version, major, like} from os-release, ids lower-cased."""
    rel = os_release(root)
    version = rel.get("VERSION_ID", "")
    return {
        "id": rel.get("ID", "").lower(),
        "version": version,
        "major": version.split(".")[0] if version else "",
        "like": rel.get("ID_LIKE", "").lower().split(),
        "pretty_name": rel.get("PRETTY_NAME", ""),
    }


def kernel_release():
    """The running kernel release (``uname -r``)."""
    return platform.release()


def machine_arch():
    """The machine architecture as the kernel names it (x86_64, aarch64)."""
    return platform.machine()


def loaded_module_version(root="/"):
    """Version of the loaded nvidia kernel module, or None when it is not loaded.

    /proc/driver/nvidia/version is authoritative; /sys/module/nvidia/version is
    the fallback (present as soon as the module is loaded).
    """
    text = _read(root, "proc/driver/nvidia/version")
    if text:
        match = _VERSION_IN_PROC.search(text)
        if match:
            return match.group(1)
    text = _read(root, "sys/module/nvidia/version")
    if text and text.strip():
        return text.strip()
    return None


def loaded_module_flavor(root="/"):
    """'open' or 'proprietary' for the loaded module, None when not loaded."""
    text = _read(root, "proc/driver/nvidia/version")
    if not text:
        return None
    return "open" if _OPEN_IN_PROC.search(text) else "proprietary"


def loaded_modules(root="/"):
    """Names of the loaded kernel modules, from /proc/modules."""
    text = _read(root, "proc/modules") or ""
    return set(line.split(" ", 1)[0] for line in text.splitlines() if line.strip())


def nouveau_loaded(root="/"):
    return "nouveau" in loaded_modules(root)


def secure_boot(root="/"):
    """True/False from the SecureBoot EFI variable; None on a non-EFI boot.

    The efivarfs file holds 4 bytes of attributes then the 1-byte value, so
    there is no need for mokutil.
    """
    data = _read(root, SECURE_BOOT_VAR, binary=True)
    if data is None:
        if os.path.isdir(_path(root, "sys/firmware/efi")):
            return False  # EFI boot without the variable: Secure Boot is not on
        return None
    if len(data) < 5:
        return None
    value = data[4]
    if not isinstance(value, int):  # Python 2 compatible indexing of bytes
        value = ord(value)
    return value == 1


def kernel_headers_present(kernel, root="/"):
    """Whether the build tree for ``kernel`` exists (what DKMS compiles against)."""
    return os.path.isdir(_path(root, "lib/modules/%s/build" % kernel))


def _pci_attr(dev_dir, name):
    try:
        with open(os.path.join(dev_dir, name), "rb") as handle:
            return handle.read(256).decode("ascii", "replace").strip().lower()
    except (IOError, OSError):
        return None


def pci_scan(root="/"):
    """NVIDIA GPUs and NVSwitches on the PCI bus, from /sys/bus/pci/devices.

    Returns {"gpus": [...], "nvswitches": [...]}, each item
    {"bus_id", "device_id", "class"}, sorted by bus id. No lspci needed.
    """
    base = _path(root, "sys/bus/pci/devices")
    gpus, switches = [], []
    try:
        entries = sorted(os.listdir(base))
    except (IOError, OSError):
        entries = []
    for entry in entries:
        dev_dir = os.path.join(base, entry)
        if _pci_attr(dev_dir, "vendor") != NVIDIA_PCI_VENDOR:
            continue
        pci_class = _pci_attr(dev_dir, "class") or ""
        item = {"bus_id": entry, "device_id": _pci_attr(dev_dir, "device"), "class": pci_class}
        prefix = pci_class[:6]
        if prefix in (PCI_CLASS_VGA, PCI_CLASS_3D):
            gpus.append(item)
        elif prefix == PCI_CLASS_BRIDGE_OTHER:
            switches.append(item)
        # Anything else from NVIDIA (HDMI audio, USB-C controllers) is neither.
    return {"gpus": gpus, "nvswitches": switches}


def free_space_mib(paths, root="/"):
    """Free MiB (for unprivileged users) per path, one entry per filesystem."""
    result = []
    seen = set()
    for path in paths:
        full = _path(root, path)
        try:
            st = os.stat(full)
            vfs = os.statvfs(full)
        except (IOError, OSError):
            continue
        if st.st_dev in seen:
            continue
        seen.add(st.st_dev)
        result.append({"path": path, "free_mib": int(vfs.f_bavail * vfs.f_frsize // (1024 * 1024))})
    return result


def probe(root="/"):
    """Everything the driver module and the preflight need, in one pass."""
    kernel = kernel_release()
    pci = pci_scan(root)
    return {
        "distro": distro_info(root),
        "arch": machine_arch(),
        "kernel": kernel,
        "kernel_headers_present": kernel_headers_present(kernel, root),
        "loaded_version": loaded_module_version(root),
        "loaded_flavor": loaded_module_flavor(root),
        "nouveau_loaded": nouveau_loaded(root),
        "secure_boot": secure_boot(root),
        "gpus": pci["gpus"],
        "nvswitches": pci["nvswitches"],
    }
