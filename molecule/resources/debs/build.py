"""Build the local apt repository of stand-in NVIDIA packages for Debian 12.

No reachable registry carries NVIDIA's packages, so the Molecule scenarios
install these instead: same names, versions, dependencies, conflicts and
systemd units as NVIDIA's CUDA repository for debian12/x86_64, with small
shell stand-ins for the binaries. apt, dpkg, holds and upgrades then behave
as they do on a real node. Several versions per branch, so pinning and
upgrades are exercised for real.

    build.py OUT_DIR     builds OUT_DIR/{*.deb,Packages,Packages.gz,Release}

The repository is flat (``deb [trusted=yes] file:OUT_DIR ./``). A stamp with
the hash of this script and the running kernel makes a second run a no-op.
"""

import gzip
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ARCH = "amd64"
MAINTAINER = "gpuops.platform maintainers <noreply@example.invalid>"

# Driver versions as NVIDIA publishes them: two on the 570 branch (pinning,
# holds, upgrades within a branch) and one on a newer branch (branch changes).
DRIVER_VERSIONS = ["570.148.08-1", "570.172.08-1", "580.82.07-1"]
TOOLKIT_VERSIONS = ["1.17.7-1", "1.17.8-1", "1.18.0-1"]


def branch_of(version):
    return version.split(".", 1)[0]


def upstream(version):
    return version.rsplit("-", 1)[0]


# --- file contents --------------------------------------------------------

NVIDIA_SMI = """#!/bin/sh
# Stand-in for nvidia-smi {ver}: no GPU in this container.
case "$1" in
  --version|-h|--help) printf 'NVIDIA-SMI version  : {ver}\\nDRIVER version      : {ver}\\n' ;;
  *) echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." >&2; exit 9 ;;
esac
"""

DAEMON_STUB = """#!/bin/sh
# Stand-in for {name} {ver}: stays up like the daemon, touches no device.
exec sleep infinity
"""

PERSISTENCED_UNIT = """[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target

[Service]
Type=simple
ExecStart=/usr/bin/nvidia-persistenced
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced

[Install]
WantedBy=multi-user.target
"""

FABRICMANAGER_UNIT = """[Unit]
Description=NVIDIA fabric manager service
After=network-online.target

[Service]
Type=simple
ExecStart=/usr/bin/nv-fabricmanager

[Install]
WantedBy=multi-user.target
"""

NVIDIA_CTK = """#!/bin/sh
# Stand-in for nvidia-ctk {ver}. `cdi generate` writes the spec real nvidia-ctk
# writes for a node with one GPU; `runtime configure` is what
# gpuops.platform.nvidia_container_runtime does natively, so it is refused here
# to catch a role that shells out to it.
set -eu
case "${{1:-}}" in
  --version|-v)
    echo "NVIDIA Container Toolkit CLI version {ver}"
    echo "commit: standin"
    ;;
  cdi)
    shift
    case "${{1:-}}" in
      generate)
        shift
        # Like the real one, it describes the installed driver, and fails
        # without one (NVML missing).
        if [ ! -r /usr/lib/nvidia/version ]; then
          echo "level=error msg=\"failed to generate CDI spec: failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND\"" >&2
          exit 1
        fi
        driver=$(cat /usr/lib/nvidia/version)
        out=""
        for arg in "$@"; do
          case "$arg" in
            --output=*) out="${{arg#--output=}}" ;;
          esac
        done
        spec='---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
  - path: /dev/nvidiactl
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.'"$driver"'
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.'"$driver"'
    options: [ro, nosuid, nodev, bind]
  - hostPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.'"$driver"'
    containerPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.'"$driver"'
    options: [ro, nosuid, nodev, bind]
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, update-ldcache]
'
        if [ -n "$out" ]; then
          mkdir -p "$(dirname "$out")"
          printf '%s' "$spec" >"$out.tmp" && mv "$out.tmp" "$out"
          echo "level=info msg=\\"Generated CDI spec with version 0.5.0\\""
        else
          printf '%s' "$spec"
        fi
        ;;
      list)
        if [ -f /var/run/cdi/nvidia.yaml ] || [ -f /etc/cdi/nvidia.yaml ]; then
          printf 'nvidia.com/gpu=0\\nnvidia.com/gpu=all\\n'
        fi
        ;;
      *) echo "nvidia-ctk cdi: unknown command ${{1:-}}" >&2; exit 1 ;;
    esac
    ;;
  runtime)
    echo "nvidia-ctk runtime: not available in the stand-in package" >&2
    exit 1
    ;;
  *) echo "nvidia-ctk: unknown command ${{1:-}}" >&2; exit 1 ;;
esac
"""

CONTAINER_RUNTIME = """#!/bin/sh
# Stand-in for nvidia-container-runtime {ver}: like the real shim on a
# container that asks for no GPU, it hands every call to runc unchanged.
case "${{1:-}}" in
  --version) echo "NVIDIA Container Runtime version {ver}"; exit 0 ;;
esac
exec runc "$@"
"""

SIMPLE_TOOL = """#!/bin/sh
# Stand-in for {name} {ver}.
case "${{1:-}}" in
  --version|-V|version) echo "{name} version {ver}" ;;
  *) echo "{name}: no NVIDIA GPU in this container" >&2; exit 1 ;;
esac
"""

TOOLKIT_CONFIG = """#accept-nvidia-visible-devices-as-volume-mounts = false
#accept-nvidia-visible-devices-envvar-when-unprivileged = true
disable-require = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"

[nvidia-container-cli]
environment = []
ldconfig = "@/sbin/ldconfig"
load-kmods = true

[nvidia-container-runtime]
log-level = "info"
mode = "auto"
runtimes = ["runc", "crun"]
"""

CDI_REFRESH_SERVICE = """[Unit]
Description=Refresh NVIDIA CDI specification file
ConditionPathExists=/usr/bin/nvidia-smi

[Service]
Type=oneshot
ExecStart=/usr/bin/nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml

[Install]
WantedBy=multi-user.target
"""

CDI_REFRESH_PATH = """[Unit]
Description=Trigger CDI refresh on NVIDIA driver install / uninstall events

[Path]
PathChanged=/lib/modules/%v/modules.dep
PathChanged=/lib/modules/%v/modules.dep.bin

[Install]
WantedBy=multi-user.target
"""

DKMS_STUB = """#!/bin/sh
# Stand-in for dkms: a container cannot build or load kernel modules, so this
# only keeps DKMS's bookkeeping (/var/lib/dkms/<module>/<version>/<kernel>/<arch>)
# for add/build/install/remove/status, the way the driver packages call it.
set -eu
cmd=${1:-}; shift || true
module=""; version=""; kernel=$(uname -r); arch=$(uname -m)
while [ $# -gt 0 ]; do
  case "$1" in
    -m) module=$2; shift 2 ;;
    -v) version=$2; shift 2 ;;
    -k) kernel=$2; shift 2 ;;
    */*) module=${1%/*}; version=${1#*/}; shift ;;
    *) shift ;;
  esac
done
case "$cmd" in
  --version|-V) echo "dkms-3.0.10" ;;
  add|build) mkdir -p "/var/lib/dkms/$module/$version/source" ;;
  install) mkdir -p "/var/lib/dkms/$module/$version/$kernel/$arch/module" ;;
  remove|uninstall) rm -rf "/var/lib/dkms/$module/$version" ;;
  status)
    for dir in /var/lib/dkms/*/*/*/*/module; do
      [ -d "$dir" ] || continue
      rest=${dir#/var/lib/dkms/}
      m=${rest%%/*}; rest=${rest#*/}; v=${rest%%/*}; rest=${rest#*/}; k=${rest%%/*}; rest=${rest#*/}; a=${rest%%/*}
      echo "$m/$v, $k, $a: installed"
    done
    ;;
  *) echo "dkms: unsupported command $cmd" >&2; exit 1 ;;
esac
"""

DKMS_POSTINST = """#!/bin/sh
set -e
if [ "$1" = configure ]; then
  dkms add -m nvidia -v {ver}
  dkms build -m nvidia -v {ver}
  dkms install -m nvidia -v {ver}
fi
"""

DKMS_PRERM = """#!/bin/sh
set -e
dkms remove -m nvidia -v {ver} --all || true
"""

UNIT_POSTINST = """#!/bin/sh
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
  {extra}
fi
"""


def exe(text):
    return (text, 0o755)


def regular(text):
    return (text, 0o644)


# --- package definitions --------------------------------------------------


def driver_packages(version):
    ver, br = upstream(version), branch_of(version)
    eq = "(= %s)" % version
    pkgs = [
        {
            "Package": "nvidia-kernel-dkms",
            "Depends": "dkms, nvidia-kernel-support %s" % eq,
            "Conflicts": "nvidia-kernel-open-dkms",
            "Provides": "nvidia-kernel-%s" % ver,
            "Description": "NVIDIA binary kernel module DKMS source (proprietary)",
            "postinst": DKMS_POSTINST.format(ver=ver),
            "prerm": DKMS_PRERM.format(ver=ver),
            "files": {"usr/src/nvidia-%s/dkms.conf" % ver: regular('PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="%s"\n' % ver)},
        },
        {
            "Package": "nvidia-kernel-open-dkms",
            "Depends": "dkms, nvidia-kernel-support %s" % eq,
            "Conflicts": "nvidia-kernel-dkms",
            "Provides": "nvidia-kernel-%s" % ver,
            "Description": "NVIDIA binary kernel module DKMS source (open GPU kernel modules)",
            "postinst": DKMS_POSTINST.format(ver=ver),
            "prerm": DKMS_PRERM.format(ver=ver),
            "files": {"usr/src/nvidia-%s/dkms.conf" % ver: regular('PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="%s"\nOPEN=1\n' % ver)},
        },
        {
            "Package": "nvidia-kernel-support",
            "Description": "NVIDIA binary kernel module support files",
            "files": {"etc/modprobe.d/nvidia.conf": regular("options nvidia NVreg_PreserveVideoMemoryAllocations=1\n")},
        },
        {
            "Package": "libcuda1",
            "Description": "NVIDIA CUDA Driver Library",
            "files": {
                "usr/lib/x86_64-linux-gnu/libcuda.so.%s" % ver: regular("stand-in %s\n" % ver),
                "usr/lib/nvidia/version": regular(ver + "\n"),
            },
        },
        {
            "Package": "libnvidia-ml1",
            "Description": "NVIDIA Management Library (NVML) runtime library",
            "files": {"usr/lib/x86_64-linux-gnu/libnvidia-ml.so.%s" % ver: regular("stand-in %s\n" % ver)},
        },
        {
            "Package": "nvidia-smi",
            "Depends": "libnvidia-ml1 %s" % eq,
            "Description": "NVIDIA System Management Interface",
            "files": {"usr/bin/nvidia-smi": exe(NVIDIA_SMI.format(ver=ver))},
        },
        {
            "Package": "nvidia-persistenced",
            "Depends": "libnvidia-ml1 %s" % eq,
            "Description": "daemon to maintain persistent software state in the NVIDIA driver",
            "files": {
                "usr/bin/nvidia-persistenced": exe(DAEMON_STUB.format(name="nvidia-persistenced", ver=ver)),
                "lib/systemd/system/nvidia-persistenced.service": regular(PERSISTENCED_UNIT),
            },
            "postinst": UNIT_POSTINST.format(extra=":"),
        },
        {
            "Package": "nvidia-driver-cuda",
            "Depends": "libcuda1 %s, nvidia-smi %s, nvidia-persistenced %s" % (eq, eq, eq),
            "Description": "NVIDIA driver CUDA integration components",
        },
        {
            "Package": "nvidia-driver",
            "Depends": "nvidia-kernel-dkms %s, nvidia-driver-cuda %s" % (eq, eq),
            "Description": "NVIDIA metapackage (proprietary kernel modules)",
        },
        {
            "Package": "nvidia-open",
            "Depends": "nvidia-kernel-open-dkms %s, nvidia-driver-cuda %s" % (eq, eq),
            "Description": "NVIDIA metapackage (open kernel modules)",
        },
        {
            "Package": "nvidia-open-%s" % br,
            "Depends": "nvidia-open %s" % eq,
            "Description": "NVIDIA open kernel modules driver meta-package, branch-specific",
        },
        {
            "Package": "cuda-drivers-%s" % br,
            "Depends": "nvidia-driver %s" % eq,
            "Description": "CUDA Driver meta-package, branch-specific",
        },
        {
            "Package": "cuda-drivers",
            "Depends": "cuda-drivers-%s %s" % (br, eq),
            "Description": "CUDA Driver meta-package",
        },
        {
            # The branch suffix was dropped from 580 on.
            "Package": "nvidia-fabricmanager" if int(br) >= 580 else "nvidia-fabricmanager-%s" % br,
            "Description": "Fabric Manager for NVSwitch based systems",
            "files": {
                "usr/bin/nv-fabricmanager": exe(DAEMON_STUB.format(name="nv-fabricmanager", ver=ver)),
                "lib/systemd/system/nvidia-fabricmanager.service": regular(FABRICMANAGER_UNIT),
            },
            "postinst": UNIT_POSTINST.format(extra=":"),
        },
        {
            # DCGM 4 is split per CUDA major; 580 is the first CUDA 13 branch.
            "Package": "datacenter-gpu-manager-4-cuda%d" % (13 if int(br) >= 580 else 12),
            "Description": "NVIDIA Data Center GPU Manager (DCGM)",
            "files": {"usr/bin/dcgmi": exe(SIMPLE_TOOL.format(name="dcgmi", ver=ver))},
        },
    ]
    for pkg in pkgs:
        pkg["Version"] = version
        pkg.setdefault("Section", "NVIDIA")
    return pkgs


def toolkit_packages(version):
    ver = upstream(version)
    eq = "(= %s)" % version
    base_files = {
        "usr/bin/nvidia-ctk": exe(NVIDIA_CTK.format(ver=ver)),
        "usr/bin/nvidia-container-runtime": exe(CONTAINER_RUNTIME.format(ver=ver)),
        "usr/bin/nvidia-cdi-hook": exe(SIMPLE_TOOL.format(name="nvidia-cdi-hook", ver=ver)),
        "etc/nvidia-container-runtime/config.toml": regular(TOOLKIT_CONFIG),
    }
    base = {
        "Package": "nvidia-container-toolkit-base",
        "Description": "NVIDIA Container Toolkit Base",
        "files": base_files,
        "conffiles": ["/etc/nvidia-container-runtime/config.toml"],
    }
    # nvidia-cdi-refresh units arrived with 1.18.0.
    if tuple(int(p) for p in ver.split(".")) >= (1, 18, 0):
        base_files["lib/systemd/system/nvidia-cdi-refresh.service"] = regular(CDI_REFRESH_SERVICE)
        base_files["lib/systemd/system/nvidia-cdi-refresh.path"] = regular(CDI_REFRESH_PATH)
        base["postinst"] = UNIT_POSTINST.format(extra=":")
    pkgs = [
        base,
        {
            "Package": "libnvidia-container1",
            "Description": "NVIDIA container runtime library",
            "files": {"usr/lib/x86_64-linux-gnu/libnvidia-container.so.%s" % ver: regular("stand-in %s\n" % ver)},
        },
        {
            "Package": "libnvidia-container-tools",
            "Depends": "libnvidia-container1 (>= %s)" % version,
            "Description": "NVIDIA container runtime library (command-line tools)",
            "files": {"usr/bin/nvidia-container-cli": exe(SIMPLE_TOOL.format(name="nvidia-container-cli", ver=ver))},
        },
        {
            "Package": "nvidia-container-toolkit",
            "Depends": "nvidia-container-toolkit-base %s, libnvidia-container-tools (>= %s)" % (eq, version),
            "Description": "NVIDIA Container toolkit",
            "files": {
                "usr/bin/nvidia-container-runtime-hook": exe(SIMPLE_TOOL.format(name="nvidia-container-runtime-hook", ver=ver)),
            },
        },
    ]
    for pkg in pkgs:
        pkg["Version"] = version
        pkg.setdefault("Section", "utils")
    return pkgs


def dkms_package():
    """DKMS comes from Debian on a real node; here it cannot build anything."""
    return {
        "Package": "dkms",
        "Version": "3.0.10-8+deb12u1",
        "Section": "kernel",
        "Description": "Dynamic Kernel Module System (stand-in)",
        "files": {"usr/sbin/dkms": exe(DKMS_STUB)},
    }


def kernel_headers_package(kernel):
    """linux-headers for the running kernel: what DKMS builds against.

    The container shares the host kernel, which no Debian repository has
    headers for; this ships the build link the driver's preflight looks for.
    """
    src = "usr/src/linux-headers-%s" % kernel
    return {
        "Package": "linux-headers-%s" % kernel,
        "Version": "1.0-1",
        "Section": "kernel",
        "Description": "Header files for Linux %s (stand-in)" % kernel,
        "files": {src + "/Makefile": regular("# stand-in kernel build tree\n")},
        "links": {"lib/modules/%s/build" % kernel: "/" + src},
    }


# --- building -------------------------------------------------------------


def build_deb(pkg, out_dir):
    work = tempfile.mkdtemp(prefix="standin-")
    try:
        for rel, (text, mode) in sorted(pkg.get("files", {}).items()):
            path = os.path.join(work, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as handle:
                handle.write(text)
            os.chmod(path, mode)
        for rel, target in sorted(pkg.get("links", {}).items()):
            path = os.path.join(work, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.symlink(target, path)
        debian = os.path.join(work, "DEBIAN")
        os.makedirs(debian)
        fields = ["Package", "Version", "Section", "Depends", "Conflicts", "Provides"]
        lines = ["%s: %s" % (f, pkg[f]) for f in fields if pkg.get(f)]
        lines += [
            "Architecture: %s" % ARCH,
            "Maintainer: %s" % MAINTAINER,
            "Priority: optional",
            "Description: %s" % pkg["Description"],
            " Stand-in package for tests: same name, version and relations as",
            " NVIDIA's, with placeholder binaries.",
        ]
        with open(os.path.join(debian, "control"), "w") as handle:
            handle.write("\n".join(lines) + "\n")
        if pkg.get("conffiles"):
            with open(os.path.join(debian, "conffiles"), "w") as handle:
                handle.write("\n".join(pkg["conffiles"]) + "\n")
        for script in ("postinst", "prerm"):
            if pkg.get(script):
                path = os.path.join(debian, script)
                with open(path, "w") as handle:
                    handle.write(pkg[script])
                os.chmod(path, 0o755)
        deb = os.path.join(out_dir, "%s_%s_%s.deb" % (pkg["Package"], pkg["Version"], ARCH))
        subprocess.run(
            ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", work, deb],
            check=True, stdout=subprocess.DEVNULL,
        )
    finally:
        shutil.rmtree(work)


def write_index(out_dir):
    packages = subprocess.run(
        ["dpkg-scanpackages", "--multiversion", "."],
        cwd=out_dir, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    ).stdout
    with open(os.path.join(out_dir, "Packages"), "wb") as handle:
        handle.write(packages)
    with gzip.GzipFile(os.path.join(out_dir, "Packages.gz"), "wb", mtime=0) as handle:
        handle.write(packages)
    release = ["Origin: gpuops-standin", "Label: gpuops-standin", "Suite: stable",
               "Date: Thu, 01 Jan 2026 00:00:00 UTC", "Architectures: %s" % ARCH]
    for algo, field in (("md5", "MD5Sum"), ("sha256", "SHA256")):
        release.append("%s:" % field)
        for name in ("Packages", "Packages.gz"):
            with open(os.path.join(out_dir, name), "rb") as handle:
                data = handle.read()
            release.append(" %s %d %s" % (hashlib.new(algo, data).hexdigest(), len(data), name))
    with open(os.path.join(out_dir, "Release"), "w") as handle:
        handle.write("\n".join(release) + "\n")


def main(out_dir):
    kernel = platform.release()
    with open(os.path.abspath(__file__), "rb") as handle:
        stamp = hashlib.sha256(handle.read() + kernel.encode()).hexdigest()
    stamp_file = os.path.join(out_dir, ".stamp")
    if os.path.exists(stamp_file) and open(stamp_file).read() == stamp:
        return 0
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    pkgs = [kernel_headers_package(kernel), dkms_package()]
    for version in DRIVER_VERSIONS:
        pkgs += driver_packages(version)
    for version in TOOLKIT_VERSIONS:
        pkgs += toolkit_packages(version)
    for pkg in pkgs:
        build_deb(pkg, out_dir)
    write_index(out_dir)
    with open(stamp_file, "w") as handle:
        handle.write(stamp)
    print("built %d stand-in packages in %s" % (len(pkgs), out_dir))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build.py OUT_DIR")
    sys.exit(main(os.path.abspath(sys.argv[1])))
