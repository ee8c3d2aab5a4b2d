"""Test doubles for a GPU node: a fake /proc+/sys+/etc tree and a package manager.

FakeNode writes the files the driver modules read (os-release, /proc/modules,
/proc/driver/nvidia/version, efivars, /sys/bus/pci/devices/*) under tmp_path.

FakeApt and FakeDnf model apt-get/dpkg/apt-cache and dnf/rpm closely enough
to converge against: a repository of package versions, an installed set,
holds, versionlock-free installs. They answer the exact command lines the
module runs; an unknown command fails the test. In check mode any command
that would change the host raises, so a test cannot pass by accident.
"""

import os
import re
import struct

SECURE_BOOT_VAR = "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"

OS_RELEASE = {
    ("debian", "12"): 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n'
                      'VERSION_ID="12"\nVERSION_CODENAME=bookworm\nID=debian\n',
    ("ubuntu", "22.04"): 'PRETTY_NAME="Ubuntu 22.04.5 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\n'
                         'ID=ubuntu\nID_LIKE=debian\n',
    ("ubuntu", "24.04"): 'PRETTY_NAME="Ubuntu 24.04.2 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\n'
                         'ID=ubuntu\nID_LIKE=debian\n',
    ("rhel", "9.4"): 'NAME="Red Hat Enterprise Linux"\nVERSION_ID="9.4"\nID="rhel"\n'
                     'ID_LIKE="fedora"\nPRETTY_NAME="Red Hat Enterprise Linux 9.4 (Plow)"\n',
    ("rocky", "8.10"): 'NAME="Rocky Linux"\nVERSION_ID="8.10"\nID="rocky"\nID_LIKE="rhel centos fedora"\n'
                       'PRETTY_NAME="Rocky Linux 8.10 (Green Obsidian)"\n',
    ("almalinux", "9.5"): 'NAME="AlmaLinux"\nVERSION_ID="9.5"\nID="almalinux"\nID_LIKE="rhel centos fedora"\n'
                          'PRETTY_NAME="AlmaLinux 9.5 (Teal Serval)"\n',
    ("sles", "15.5"): 'NAME="SLES"\nVERSION_ID="15.5"\nID="sles"\nPRETTY_NAME="SUSE Linux Enterprise Server 15 SP5"\n',
}

# The format of /proc/driver/nvidia/version for both module flavors.
PROC_VERSION = {
    "open": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {v}  Release Build  "
            "(dvs-builder@U16-I3-B03-4-3)  Thu Jul  3 21:35:34 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
    "proprietary": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {v}  Thu Jul  3 21:27:16 UTC 2025\n"
                   "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
}


class FakeNode(object):
    """A node's readable state under ``root``."""

    def __init__(self, root):
        self.root = str(root)

    def write(self, rel, content, binary=False):
        path = os.path.join(self.root, rel)
        if not os.path.isdir(os.path.dirname(path)):
            os.makedirs(os.path.dirname(path))
        with open(path, "wb" if binary else "w") as handle:
            handle.write(content)
        return path

    def read(self, rel):
        path = os.path.join(self.root, rel.lstrip("/"))
        if not os.path.exists(path):
            return None
        with open(path) as handle:
            return handle.read()

    def os(self, distro="debian", version="12"):
        self.write("etc/os-release", OS_RELEASE[(distro, version)])
        return self

    def modules(self, *names):
        lines = ["%s 16384 0 - Live 0x0000000000000000" % name for name in names]
        self.write("proc/modules", "\n".join(lines) + ("\n" if lines else ""))
        return self

    def loaded_driver(self, version, flavor="open"):
        self.write("proc/driver/nvidia/version", PROC_VERSION[flavor].format(v=version))
        self.write("sys/module/nvidia/version", version + "\n")
        return self

    def nvml_library(self, version, base="", folder="usr/lib/x86_64-linux-gnu"):
        """libnvidia-ml.so.1 -> libnvidia-ml.so.<version>, as the driver installs it (under ``base``)."""
        lib = os.path.join(base, folder)
        self.write(os.path.join(lib, "libnvidia-ml.so.%s" % version), "ELF")
        os.symlink("libnvidia-ml.so.%s" % version, os.path.join(self.root, lib, "libnvidia-ml.so.1"))
        return self

    def foreign_driver(self, kind, version):
        """A driver no package installed, loaded, as each way leaves it on the node.

        ``runfile``: NVIDIA's .run installer (nvidia-uninstall, the DKMS tree, its log, the library);
        ``runfile-log``: only the installer's log (--no-dkms, uninstaller removed by hand);
        ``container``: the GPU Operator's driver root /run/nvidia/driver, the library inside it;
        ``unknown``: a library no package owns (a cloud image, a read-only mount).
        """
        self.loaded_driver(version)
        if kind == "runfile":
            self.write("usr/bin/nvidia-uninstall", "#!/bin/sh\n")
            os.makedirs(os.path.join(self.root, "var/lib/dkms/nvidia", version, "source"))
        if kind in ("runfile", "runfile-log"):
            self.write("var/log/nvidia-installer.log", "nvidia-installer log file '/var/log/nvidia-installer.log'\n"
                       "creation time: Fri Nov 27 10:00:00 2026\ninstaller version: %s\n" % version)
        if kind == "container":
            self.nvml_library(version, base="run/nvidia/driver")
        else:
            self.nvml_library(version)
        return self

    def secure_boot(self, enabled):
        # efivarfs: 4 bytes of attributes (NV|BS|RT = 0x7), then the value byte.
        self.write(SECURE_BOOT_VAR, struct.pack("<I", 7) + bytes([1 if enabled else 0]), binary=True)
        return self

    def efi_without_secure_boot_var(self):
        os.makedirs(os.path.join(self.root, "sys/firmware/efi/efivars"))
        return self

    def headers(self, kernel):
        os.makedirs(os.path.join(self.root, "lib/modules/%s/build" % kernel))
        return self

    def pci(self, bus_id, vendor, device, pci_class):
        base = "sys/bus/pci/devices/%s/" % bus_id
        self.write(base + "vendor", vendor + "\n")
        self.write(base + "device", device + "\n")
        self.write(base + "class", pci_class + "\n")
        return self

    def hgx_h100(self):
        """8 H100 SXM (3D controller) and 4 NVSwitches (bridge), plus unrelated devices."""
        for i, bus in enumerate(["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]):
            self.pci("0000:%s:00.0" % bus, "0x10de", "0x2330", "0x030200")
        for bus in ["05", "06", "07", "08"]:
            self.pci("0000:%s:00.0" % bus, "0x10de", "0x22a3", "0x068000")
        self.pci("0000:00:1f.2", "0x8086", "0xa182", "0x010601")   # SATA controller
        self.pci("0000:03:00.0", "0x15b3", "0x1021", "0x020700")   # ConnectX-7 InfiniBand
        return self


# The systemd units NVIDIA's packages ship (DCGM is left to tests on purpose).
UNITS = (("nvidia-persistenced", "nvidia-persistenced"), ("nvidia-fabricmanager", "nvidia-fabricmanager"),
         ("nvidia-fabric-manager", "nvidia-fabricmanager"))


def install_units(node, names):
    for name in names:
        for prefix, unit in UNITS:
            if name.startswith(prefix):
                node.write("lib/systemd/system/%s.service" % unit, "[Service]\nExecStart=/usr/bin/%s\n" % unit)


def _operands(args):
    """apt-get's package arguments: not options, not the values of -o."""
    result, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg == "-o":
            skip = True
        elif not arg.startswith("-"):
            result.append(arg)
    return result


def _upstream(version):
    return version.split(":", 1)[-1].split("-", 1)[0]


def _vkey(version):
    return [int(p) if p.isdigit() else p for p in re.split(r"[.:~+-]", version)]


class CommandLog(object):
    """Base: records every argv; refuses mutating commands in check mode."""

    def __init__(self, check_mode=False, tools=("update-initramfs", "dracut", "nvidia-uninstall")):
        self.calls = []
        self.check_mode = check_mode
        self.tools = set(tools)

    def mutating(self, argv):
        raise NotImplementedError

    def __call__(self, argv, environ_update=None, **kwargs):
        argv = list(argv)
        self.calls.append(argv)
        if self.check_mode and self.mutating(argv):
            raise AssertionError("check mode ran a command that changes the host: %s" % " ".join(argv))
        return self.answer(argv)

    def commands(self, prefix):
        return [c for c in self.calls if c[:len(prefix)] == list(prefix)]


class FakeApt(CommandLog):
    """dpkg + apt-get + apt-cache with an apt preferences pin honoured."""

    def __init__(self, node, available=None, installed=None, held=(), **kwargs):
        CommandLog.__init__(self, **kwargs)
        self.node = node
        self.available = {k: list(v) for k, v in (available or {}).items()}  # name -> [full versions]
        self.installed = dict(installed or {})
        self.held = set(held)
        self.updates = 0
        self.depends = {}  # name -> [dependency names], installed with it at the same upstream version

    def mutating(self, argv):
        if argv[:2] == ["apt-get", "-s"]:  # a simulation changes nothing
            return False
        return argv[0] in ("apt-get", "apt-mark", "update-initramfs", "dracut", "sh", "nvidia-uninstall")

    def _pin(self):
        text = self.node.read("/etc/apt/preferences.d/gpuops-nvidia-driver") or ""
        match = re.search(r"^Pin: version (\S+)", text, re.MULTILINE)
        if not match:
            return None
        return re.compile("^" + re.escape(match.group(1)).replace(r"\*", ".*") + "$")

    def candidate(self, name):
        versions = sorted(self.available.get(name, []), key=_vkey)
        pin = self._pin()
        if pin and name.startswith(("nvidia", "cuda-drivers", "libnvidia", "libcuda")):
            pinned = [v for v in versions if pin.match(v)]
            if pinned:
                return pinned[-1]
        return versions[-1] if versions else None

    def answer(self, argv):
        cmd = argv[0]
        if cmd == "dpkg-query":
            # ${db:Status-Abbrev}: desired action (i install, h hold) + status (i installed) + error flag.
            lines = ["%s\t%s\t%si " % (name, self.installed[name], "h" if name in self.held else "i")
                     for name in sorted(self.installed)]
            return 0, "\n".join(lines) + "\n", ""
        if argv[:2] == ["apt-cache", "madison"]:
            name = argv[2]
            rows = ["%10s | %s | file:/srv/nvidia-mirror  Packages" % (name, v)
                    for v in sorted(self.available.get(name, []), key=_vkey, reverse=True)]
            return 0, "\n".join(rows) + ("\n" if rows else ""), ""
        if argv[:2] == ["apt-cache", "policy"]:
            name = argv[2]
            if name not in self.available:
                return 0, "", ""
            cand = self.candidate(name)
            return 0, "%s:\n  Installed: %s\n  Candidate: %s\n" % (
                name, self.installed.get(name, "(none)"), cand), ""
        if argv[:2] == ["apt-get", "update"]:
            self.updates += 1
            return 0, "Reading package lists...\n", ""
        if argv[:2] == ["apt-mark", "hold"]:
            self.held.update(argv[2:])
            return 0, "", ""
        if argv[:2] == ["apt-mark", "unhold"]:
            self.held.difference_update(argv[2:])
            return 0, "", ""
        if argv[:2] == ["apt-get", "install"]:
            return self._install(_operands(argv[2:]), argv)
        if argv[:3] == ["apt-get", "-s", "install"]:
            return self._install(_operands(argv[3:]), argv, simulate=True)
        if argv[:2] == ["apt-get", "remove"]:
            names = _operands(argv[2:])
            held = [n for n in names if n in self.held]
            if held and "--allow-change-held-packages" not in argv:
                return 100, "", "E: Held packages were changed and -y was used without --allow-change-held-packages."
            for name in names:
                self.installed.pop(name, None)
                self.held.discard(name)
            return 0, "", ""
        if cmd in ("update-initramfs", "dracut"):
            return 0, "", ""
        raise AssertionError("unexpected command %s" % argv)

    def _install(self, specs, argv=(), simulate=False):
        """apt-get install; with -s, apt-get's simulation: Inst lines, nothing changed (apt-private-output.cc)."""
        plan = {}
        for spec in specs:
            if spec.endswith("-"):
                self.installed.pop(spec[:-1], None)
                continue
            if spec.endswith(".deb"):
                plan["cuda-keyring"] = "1.1-1"
                continue
            name, dummy, version = spec.partition("=")
            version = version or self.candidate(name)
            if name.startswith("linux-headers-") or name == "dkms":
                version = version or "1.0"
            if version is None or (name in self.available and version not in self.available[name]):
                return 100, "", "E: Version '%s' for '%s' was not found" % (version, name)
            plan[name] = version
            for dep in self.depends.get(name, []):
                want = [v for v in self.available.get(dep, []) if _upstream(v) == _upstream(version)]
                plan.setdefault(dep, want[-1] if want else self.candidate(dep))
        changes = dict((n, v) for n, v in plan.items() if self.installed.get(n) != v)
        for name, version in changes.items():
            if name in self.held and "--allow-change-held-packages" not in argv:
                return 100, "", "E: Held packages were changed and -y was used without --allow-change-held-packages."
        downgrades = [n for n, v in changes.items() if n in self.installed and _vkey(v) < _vkey(self.installed[n])]
        if downgrades and "--allow-downgrades" not in argv:
            return 100, "", "E: Packages were downgraded and -y was used without --allow-downgrades."
        if simulate:
            lines = ["Inst %s%s (%s stand-in:stable [amd64])" % (
                name, " [%s]" % self.installed[name] if name in self.installed else "", version)
                for name, version in sorted(changes.items())]
            lines += ["Conf %s (%s stand-in:stable [amd64])" % item for item in sorted(changes.items())]
            return 0, "\n".join(["NOTE: This is only a simulation!"] + lines) + "\n", ""
        self.held.difference_update(changes)  # apt-get drops the hold of a package it changes
        self.installed.update(plan)
        install_units(self.node, plan)
        return 0, "", ""


class FakeDnf(CommandLog):
    """rpm + dnf with module streams read from the node's modules.d file."""

    def __init__(self, node, available=None, installed=None, **kwargs):
        CommandLog.__init__(self, **kwargs)
        self.node = node
        self.available = {k: list(v) for k, v in (available or {}).items()}  # name -> ["3:570.172.08-1.el9"]
        self.installed = dict(installed or {})

    def mutating(self, argv):
        if argv[0] == "dnf":
            return "repoquery" not in argv and "--assumeno" not in argv
        return argv[0] in ("dracut", "sh", "nvidia-uninstall", "update-initramfs")

    def answer(self, argv):
        if argv[0] == "rpm":
            out = []
            for name, evr in sorted(self.installed.items()):
                epoch, rest = evr.split(":", 1) if ":" in evr else ("0", evr)
                version, release = rest.split("-", 1)
                out.append("%s\t%s\t%s\t%s" % (name, epoch, version, release))
            return 0, "\n".join(out) + "\n", ""
        if argv[0] == "dnf" and "repoquery" in argv:
            name = argv[-1]
            versions = sorted(self.available.get(name, []), key=_vkey)
            return 0, (_upstream(versions[-1]) + "\n") if versions else "", ""
        if argv[:4] == ["dnf", "-y", "module", "enable"]:
            stream = argv[4].split(":", 1)[1]
            self.node.write("etc/dnf/modules.d/nvidia-driver.module",
                            "[nvidia-driver]\nname=nvidia-driver\nstream=%s\nprofiles=\nstate=enabled\n" % stream)
            return 0, "", ""
        if argv[:4] == ["dnf", "-y", "module", "reset"]:
            os.unlink(os.path.join(self.node.root, "etc/dnf/modules.d/nvidia-driver.module"))
            return 0, "", ""
        if argv[:4] == ["dnf", "-q", "--assumeno", "install"]:
            # dnf(8) --assumeno: "Nothing to do." (rc 0), or the transaction then CliError "Operation aborted.",
            # which dnf's main prints as "Error: Operation aborted." (rc 1).
            plan = {}
            for spec in argv[4:]:
                name, found = self._resolve(spec)
                if found is None:
                    return 1, "", "No match for argument: %s\nError: Unable to find a match: %s" % (spec, spec)
                if self.installed.get(name) != found:
                    plan[name] = found
            if not plan:
                return 0, "Dependencies resolved.\nNothing to do.\nComplete!\n", ""
            return 1, "Transaction Summary\n", "Error: Operation aborted.\n"
        if argv[:2] == ["dnf", "-y"] and argv[2] in ("install", "upgrade", "downgrade"):
            for spec in argv[3:]:
                name, found = self._resolve(spec)
                if found is None:
                    return 1, "", "Error: Unable to find a match: %s" % spec
                self.installed[name] = found
                install_units(self.node, [name])
            return 0, "", ""
        if argv[:3] == ["dnf", "-y", "remove"]:
            for name in argv[3:]:
                self.installed.pop(name, None)
            return 0, "", ""
        if argv[0] in ("dracut", "update-initramfs"):
            return 0, "", ""
        raise AssertionError("unexpected command %s" % argv)

    def _resolve(self, spec):
        """(name, "epoch:version-release" dnf would install) for NAME, NAME-VERSION or NAME-VERSION-RELEASE."""
        match = re.match(r"^(.*?)-(\d{3}\.\d+(?:\.\d+)?)$", spec)
        name, version = (match.group(1), match.group(2)) if match else (spec, None)
        if not match:
            for known in sorted(self.available, key=len, reverse=True):
                if spec.startswith(known + "-"):
                    name, version = known, spec[len(known) + 1:]
                    break
        candidates = sorted(self.available.get(name, ["0:1.0-1"]), key=_vkey)
        if version:
            candidates = [c for c in candidates if version in (_upstream(c), c.split(":", 1)[-1])]
        return name, (candidates[-1] if candidates else None)


class FakeModule(object):
    """The parts of AnsibleModule the converger uses.

    Files are written through AnsibleModule's own atomic_move (SELinux off),
    so tests see its real handling of modes, owners and failures.
    """

    def __init__(self, runner, check_mode=False):
        self.run_command = runner
        self.check_mode = check_mode
        self.warnings = []
        self.moves = []  # destinations given to atomic_move

    def atomic_move(self, src, dest, unsafe_writes=False, keep_dest_attrs=True):
        from ansible.module_utils.basic import AnsibleModule

        self.moves.append(dest)
        return AnsibleModule.atomic_move(self, src, dest, unsafe_writes, keep_dest_attrs)

    def selinux_enabled(self):
        return False

    def cleanup(self, path):
        if os.path.exists(path):
            os.unlink(path)

    def get_bin_path(self, tool, required=False):
        return "/usr/sbin/" + tool if tool in self.run_command.tools else None

    def warn(self, msg):
        self.warnings.append(msg)
