#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nvidia_driver
short_description: Install, pin and check the NVIDIA data center driver in one pass
version_added: "0.1.0"
description:
  - Installs the NVIDIA GPU driver from NVIDIA's CUDA network repository, the distribution's own packages,
    a mirror of NVIDIA's repository (air-gapped sites, C(file:) repositories included) or a local C(.run) installer.
  - Follows a driver branch (V(570)) or an exact version (V(570.172.08)), with open or proprietary kernel modules.
  - Never installs packages over a driver that packages did not install (NVIDIA's runfile, a driver container or
    mount, a C(libnvidia-ml.so.1) no package owns). Such a driver is kept when it is the wanted one; otherwise the
    module fails before any change and says how to go on (pin that version, or remove that driver first).
  - Pins the driver so no background upgrade can move it. On Debian and Ubuntu with an apt preferences pin on the branch or version,
    C(apt-mark hold) on every installed driver package and an unattended-upgrades blacklist. On RHEL, Rocky and
    AlmaLinux with a dnf module stream, C(versionlock.list) entries and a dnf-automatic exclude.
  - On Ubuntu with O(source=distro), installs Canonical's signed precompiled kernel modules for the running kernel when
    the apt cache has them, and builds with DKMS only when it does not (see RV(kernel_modules)).
  - Installs kernel headers for the running kernel and DKMS, blacklists nouveau (regenerating the initramfs
    only when the blacklist changed), optionally signs DKMS builds with a MOK key, installs
    nvidia-fabricmanager at the driver's version when NVSwitches are present and DCGM when asked.
  - Reads the loaded kernel module version, nouveau and Secure Boot from C(/proc) and C(/sys) and says
    whether a reboot is needed. It never reboots; the P(gpuops.platform.nvidia_driver#role) role does.
  - One call checks and converges. Package operations run through apt-get or dnf, like M(ansible.builtin.apt)
    and M(ansible.builtin.dnf) do. In check mode only read-only queries run and RV(plan) lists what would be done.
author:
  - gpuops.platform maintainers (@gpuops)
options:
  state:
    description:
      - V(present) installs the wanted branch or version when it is not installed.
      - V(latest) also moves to the newest version of the branch the repository offers.
      - V(absent) removes the driver packages (or runs the runfile uninstaller) and the pin, hold and blacklist files.
    type: str
    choices: [present, latest, absent]
    default: present
  branch:
    description:
      - Driver branch to follow, the major version such as V(570).
      - Taken from O(version) when that is set.
      - A string (a whole number is read as one); a boolean or a fraction is refused.
    type: raw
  version:
    description:
      - Exact driver version such as V(570.172.08). Holds the driver there.
      - With O(source=runfile) it is taken from the installer's file name when not set.
      - A string, quoted in YAML; a number (V(570.190) unquoted is the number 570.19) is refused.
    type: raw
  open:
    description:
      - Use NVIDIA's open GPU kernel modules (Turing and newer, the default since 560).
      - V(false) installs the proprietary modules, which Volta and older GPUs need.
    type: bool
    default: true
  allow_downgrade:
    description:
      - Consent to move the driver to an older version than the one installed (O(version) or O(branch) older
        than the installed driver). Without it the module fails before anything is changed, naming both versions.
      - Only then is C(--allow-downgrades) passed to apt-get, and C(dnf downgrade) run.
    type: bool
    default: false
  source:
    description:
      - V(cuda) is NVIDIA's CUDA network repository C(https://developer.download.nvidia.com/compute/cuda/repos/<distro><ver>/<arch>/),
        C(sbsa) on aarch64, set up with NVIDIA's C(cuda-keyring) package on Debian and Ubuntu and a repo file on RHEL.
      - V(distro) is the distribution's packages, C(nvidia-driver-<branch>-server[-open]) on Ubuntu and
        C(nvidia-driver) from non-free on Debian (which offers one branch only).
      - V(mirror) is a copy of NVIDIA's repository at O(mirror_url).
      - V(runfile) runs the installer at O(runfile) with C(--silent --dkms).
    type: str
    choices: [cuda, distro, mirror, runfile]
    default: cuda
  mirror_url:
    description:
      - Base URL of the mirror, C(http(s)://) or C(file:). Required with O(source=mirror).
      - On Debian and Ubuntu it is a flat repository like NVIDIA's (see O(mirror_suite)).
      - Must not carry credentials (C(user:password@)), since the source list and repo file are world-readable.
        Use O(mirror_username) and O(mirror_password).
      - Whitespace and control characters are refused, like in every value written to a file or command line.
    type: str
  mirror_username:
    description:
      - User name for a mirror behind HTTP basic authentication. Needs O(mirror_password) and an C(http(s)://) O(mirror_url).
      - Written with the password to C(/etc/apt/auth.conf.d/gpuops-nvidia-mirror.conf) (apt) or to the
        C(/etc/yum.repos.d/gpuops-nvidia-mirror.repo) file (dnf), both with mode 0600, never to the apt source list.
    type: str
  mirror_password:
    description:
      - Password for O(mirror_username). Never logged, and shown as C(********) in the diff.
    type: str
  mirror_gpgkey:
    description:
      - ASCII-armored signing key of the mirror, as an absolute path on the node or an C(http(s)://) URL.
      - A key URL is downloaded once, before any file is written; a URL that cannot be reached fails the run with
        nothing changed.
      - In check mode a key URL is not downloaded. Like M(ansible.builtin.get_url), a C(HEAD) request checks that it
        can be reached; if it can, the plan lists the download (C(changed=true)), if not, the check fails with
        C(changed=false).
      - Required on RHEL, Rocky and AlmaLinux unless O(mirror_trusted) is set.
    type: str
  mirror_trusted:
    description:
      - Trust the mirror without a signature (C([trusted=yes]) for apt, C(gpgcheck=0) for dnf), with a warning.
      - Meant for C(file:) repositories built on the node itself, such as test repositories.
    type: bool
    default: false
  mirror_suite:
    description: apt suite of the mirror; V(/) for a flat repository like NVIDIA's.
    type: str
    default: /
  mirror_components:
    description: apt components of the mirror, for a mirror that is not flat.
    type: list
    elements: str
    default: []
  runfile:
    description:
      - Path on the node of NVIDIA's C(NVIDIA-Linux-<arch>-<version>.run) installer. Required with O(source=runfile).
      - Installed with C(--silent --dkms), and C(-m=kernel-open) for open modules.
    type: path
  fabricmanager:
    description:
      - Install nvidia-fabricmanager at the driver's version.
      - V(auto) does so when NVSwitches are found on the PCI bus or O(nvswitch_count) is above zero.
    type: str
    choices: [auto, 'true', 'false']
    default: auto
  nvswitch_count:
    description: NVSwitch count known from facts (for example NVML), added to the PCI scan's; 0 or more.
    type: int
    default: 0
  dcgm:
    description: Install NVIDIA DCGM 4 (C(datacenter-gpu-manager-4-cuda12), C(-cuda13) from branch 580).
    type: bool
    default: false
  dcgm_package:
    description: DCGM package name to install instead of the one derived from the branch.
    type: str
  install_prerequisites:
    description:
      - Install the kernel headers of the running kernel and DKMS
        (C(linux-headers-<kernel>) and C(dkms); C(kernel-devel-<kernel>), C(dkms) and the dnf versionlock plugin).
      - Turn off only where the kernel is not the node's own, such as in a container.
    type: bool
    default: true
  blacklist_nouveau:
    description: Blacklist nouveau in C(/etc/modprobe.d/gpuops-blacklist-nouveau.conf).
    type: bool
    default: true
  regenerate_initramfs:
    description:
      - Run C(update-initramfs -u) or C(dracut -f) when the nouveau blacklist changed, and only then.
    type: bool
    default: true
  block_unattended_upgrades:
    description:
      - Keep unattended-upgrades (C(/etc/apt/apt.conf.d/51gpuops-nvidia-driver)) and
        dnf-automatic (C(excludepkgs) in C(/etc/dnf/automatic.conf), when present) away from the driver.
    type: bool
    default: true
  update_cache:
    description:
      - Refresh the apt package lists before resolving versions.
      - Done anyway when the repository definition changed. Unset means only with O(state=latest).
    type: bool
  mok_signing_key:
    description:
      - Absolute path of the MOK private key DKMS signs the module with, for Secure Boot.
        Written shell-quoted to C(/etc/dkms/framework.conf.d/gpuops-mok.conf), which dkms sources with bash.
      - Whitespace, control characters and C($), C(`), C("), C(\\) are refused.
    type: path
  mok_certificate:
    description: Path of the MOK certificate (DER) that goes with O(mok_signing_key).
    type: path
notes:
  - Files are written atomically through a temporary file in the same directory. A file that exists keeps its mode,
    owner and SELinux context, and a symlink is written through to its target. A directory or device in the way
    fails the run before anything is changed; a read-only (immutable) file fails it before that file is written.
    Check mode reports both the same way.
  - Package choices per distribution are documented in the C(nvidia_driver) role README.
  - Debian/Ubuntu CUDA repository packages installed are C(nvidia-open-<branch>) or C(cuda-drivers-<branch>) at the
    exact package version whose upstream part is the wanted version, plus C(nvidia-fabricmanager-<branch>) and DCGM when asked.
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.node, gpuops.platform.attributes.converge]
attributes:
  check_mode:
    details: Only queries run; RV(plan) lists the commands and file changes that would be made.
  diff_mode:
    details:
      - Shows the repository, pin, hold, blacklist and DKMS configuration files it writes or removes.
      - Passwords in the credential files are shown as C(********).
requirements:
  - apt-get, dpkg-query and apt-cache (Debian, Ubuntu) or dnf and rpm (RHEL, Rocky, AlmaLinux) on the node.
seealso:
  - module: gpuops.platform.gpu_node_preflight
  - module: gpuops.platform.nvml_facts
"""

EXAMPLES = r"""
- name: Follow the 570 branch from NVIDIA's repository, open modules
  gpuops.platform.nvidia_driver:
    branch: "570"

- name: Hold an exact version, proprietary modules, with DCGM
  gpuops.platform.nvidia_driver:
    version: "570.172.08"
    open: false
    dcgm: true

- name: Air-gapped site, mirror of NVIDIA's Debian 12 repository
  gpuops.platform.nvidia_driver:
    version: "570.172.08"
    source: mirror
    mirror_url: https://repo.example.internal/nvidia/debian12/x86_64/
    mirror_gpgkey: /etc/pki/nvidia-mirror.asc

- name: Mirror behind basic authentication; the credentials go to a 0600 file, never to the source list
  gpuops.platform.nvidia_driver:
    branch: "570"
    source: mirror
    mirror_url: https://artifacts.example.internal/nvidia/rhel9/x86_64
    mirror_gpgkey: https://artifacts.example.internal/nvidia/rhel9/x86_64/D42D0685.pub
    mirror_username: gpu-nodes
    mirror_password: "{{ vault_mirror_password }}"

- name: Local runfile, signed for Secure Boot
  gpuops.platform.nvidia_driver:
    source: runfile
    runfile: /opt/nvidia/NVIDIA-Linux-x86_64-570.172.08.run
    mok_signing_key: /var/lib/shim-signed/mok/MOK.priv
    mok_certificate: /var/lib/shim-signed/mok/MOK.der
  register: driver

- name: Reboot when the loaded module is not the installed one
  ansible.builtin.reboot:
  when: driver.reboot_required
"""

RETURN = r"""
actions:
  description: What was done (or, in check mode, what would be done), in order.
  returned: always
  type: list
  elements: str
  sample: ["write /etc/modprobe.d/gpuops-blacklist-nouveau.conf", "install nvidia-open-570=570.172.08-1"]
check_mode:
  description: Whether this run only planned (the play or task may set check mode without C(--check)).
  returned: always
  type: bool
packages_changed:
  description: Whether the driver packages themselves changed (or would), as opposed to files around them.
  returned: always
  type: bool
plan:
  description: In check mode, the same list as RV(actions); empty otherwise.
  returned: always
  type: list
  elements: str
previous_version:
  description: Driver version installed before this run, or null.
  returned: always
  type: str
  sample: "570.158.01"
installed_version:
  description: Driver version installed after this run (in check mode, the one that would be), or null.
  returned: always
  type: str
  sample: "570.172.08"
loaded_version:
  description: Version of the loaded nvidia kernel module (C(/proc/driver/nvidia/version)), or null.
  returned: always
  type: str
wanted:
  description: The normalized request.
  returned: always
  type: dict
  sample: {"branch": "570", "version": "570.172.08", "open": true, "source": "cuda"}
reboot_required:
  description: True when the loaded module differs from the installed driver, or nouveau is loaded.
  returned: always
  type: bool
reboot_reasons:
  description: Why a reboot is required.
  returned: always
  type: list
  elements: str
secure_boot:
  description: Secure Boot state from the EFI variable; null on a non-EFI boot.
  returned: always
  type: bool
nouveau_loaded:
  description: Whether nouveau is loaded now.
  returned: always
  type: bool
kernel:
  description: The running kernel release.
  returned: always
  type: str
gpu_count:
  description: NVIDIA GPUs found on the PCI bus.
  returned: always
  type: int
nvswitch_count:
  description: NVSwitches found on the PCI bus.
  returned: always
  type: int
fabricmanager:
  description: Whether nvidia-fabricmanager is part of the install.
  returned: always
  type: bool
services:
  description:
    - Services the caller should enable and start (nvidia-persistenced, nvidia-fabricmanager, nvidia-dcgm).
    - Outside check mode, only those whose systemd unit the packages installed; a missing one is a warning.
  returned: always
  type: list
  elements: str
held_packages:
  description: Driver packages held (apt-mark) or version-locked (dnf).
  returned: always
  type: list
  elements: str
driver_provenance:
  description:
    - How the driver found on the node got there, read before anything is changed (the record
      M(gpuops.platform.gpu_node_preflight) returns and the fleet planner decides by). Null with O(source=runfile)
      or O(state=absent).
    - A driver from outside the packages (C(kind) V(runfile), V(container) or V(unknown)) that is the wanted one is
      kept, see RV(kept); one that is not makes the module fail before any change, naming what was found, and
      packages are never installed over it.
  returned: always
  type: dict
  sample: {"kind": "container", "version": "580.159.04", "origin": null, "packages": [], "evidence": ["/run/nvidia/driver"]}
kept:
  description: When a driver from outside the packages is the wanted one, the sentence saying it was kept (no package
    installed, no reboot); null otherwise.
  returned: always
  type: str
kernel_modules:
  description:
    - Ubuntu with O(source=distro) only (null elsewhere) - the kernel modules chosen. C(kind) V(precompiled) installs
      Canonical's signed C(linux-modules-nvidia-<branch>-server[-open]-<flavour>) with the package of the running
      kernel, when the apt cache has it (no DKMS build, and Secure Boot needs no MOK); V(dkms) builds them with DKMS
      otherwise. C(reason) says why; the plan's install line says it too.
  returned: always
  type: dict
  sample: {"kind": "precompiled", "packages": ["linux-modules-nvidia-580-server-open-generic",
           "linux-modules-nvidia-580-server-open-6.8.0-45-generic"], "reason": "Canonical's signed precompiled modules ..."}
warnings_list:
  description: Non-fatal findings (also emitted as warnings), such as Secure Boot without a MOK key.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.platform.plugins.module_utils._common.typed_args import count_arguments, version_arguments
from ansible_collections.gpuops.platform.plugins.module_utils._driver.converge import Converger, DriverError


def argument_spec():
    return dict(
        state=dict(type="str", default="present", choices=["present", "latest", "absent"]),
        # raw: a version given as a number is refused (version_arguments), never read as "570.19".
        branch=dict(type="raw"),
        version=dict(type="raw"),
        open=dict(type="bool", default=True),
        allow_downgrade=dict(type="bool", default=False),
        source=dict(type="str", default="cuda", choices=["cuda", "distro", "mirror", "runfile"]),
        mirror_url=dict(type="str"),
        mirror_username=dict(type="str"),
        mirror_password=dict(type="str", no_log=True),
        mirror_gpgkey=dict(type="str", no_log=False),
        mirror_trusted=dict(type="bool", default=False),
        mirror_suite=dict(type="str", default="/"),
        mirror_components=dict(type="list", elements="str", default=[]),
        runfile=dict(type="path"),
        fabricmanager=dict(type="str", default="auto", choices=["auto", "true", "false"]),
        nvswitch_count=dict(type="int", default=0),
        dcgm=dict(type="bool", default=False),
        dcgm_package=dict(type="str"),
        install_prerequisites=dict(type="bool", default=True),
        blacklist_nouveau=dict(type="bool", default=True),
        regenerate_initramfs=dict(type="bool", default=True),
        block_unattended_upgrades=dict(type="bool", default=True),
        update_cache=dict(type="bool"),
        mok_signing_key=dict(type="path", no_log=False),
        mok_certificate=dict(type="path"),
    )


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_if=[("source", "mirror", ["mirror_url"]), ("source", "runfile", ["runfile"])],
        required_together=[("mok_signing_key", "mok_certificate"), ("mirror_username", "mirror_password")],
        supports_check_mode=True,
    )
    version_arguments(module, module.params, versions=("version",), branches=("branch",))
    count_arguments(module, module.params, ("nvswitch_count",))
    # A URL with user:password@ is refused, but the arguments echoed with the
    # result (invocation.module_args) would still carry it: mask the whole URL
    # (masking only a short userinfo would mangle every other match in the output).
    url = module.params.get("mirror_url") or ""
    if "@" in url.split("://", 1)[-1].split("/", 1)[0]:
        module.no_log_values.add(url)
    converger = Converger(module, module.params)
    try:
        result = converger.execute()
    except DriverError as exc:
        # Check mode changed nothing, whatever it had planned before the failure.
        module.fail_json(msg=str(exc), actions=converger.actions, changed=converger.changed and not module.check_mode)
    for warning in result["warnings_list"]:
        module.warn(warning)
    if not module._diff:
        result.pop("diff")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
