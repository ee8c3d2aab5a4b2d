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
module: gpu_node_preflight
short_description: Check that a node is ready for the NVIDIA driver, in one call
version_added: "0.1.0"
description:
  - Finds NVIDIA GPUs and NVSwitches by PCI vendor C(0x10de) under C(/sys/bus/pci/devices), with no lspci.
  - Checks the OS and kernel, the kernel headers of the running kernel, Secure Boot (from efivars, no mokutil),
    free disk space, and a conflicting driver already loaded (nouveau, or an nvidia module of another version).
  - Returns every finding at once in RV(problems) and never fails on them itself, so a role can fail once
    per host with one message. Changes nothing.
author:
  - gpuops.platform maintainers (@gpuops)
options:
  require_gpu:
    description: Treat a node without an NVIDIA GPU as a problem. Turn off for demo or container inventories.
    type: bool
    default: true
  require_supported_os:
    description: Treat an OS other than Ubuntu 22.04/24.04, Debian 12 and RHEL/Rocky/AlmaLinux 8/9 as a problem.
    type: bool
    default: true
  require_kernel_headers:
    description:
      - Treat missing headers of the running kernel as a problem.
      - Off by default because the driver module installs them.
    type: bool
    default: false
  allow_secure_boot:
    description: Accept Secure Boot (a warning only). Set V(false) where no MOK key is available.
    type: bool
    default: true
  min_free_mib:
    description: Free space needed on each filesystem of O(disk_paths), in MiB.
    type: int
    default: 2048
  disk_paths:
    description:
      - Absolute paths whose filesystems must have O(min_free_mib) free.
      - A path that does not exist is reported in RV(problems).
    type: list
    elements: str
    default: [/, /var, /usr]
  expected_nvswitches:
    description: Number of NVSwitches the node must have (HGX/DGX baseboards); unset means any.
    type: int
  expected_driver:
    description:
      - Wanted driver branch (V(570)) or version (V(570.172.08)); a loaded nvidia module of another one is reported.
    type: str
  fail_on_nouveau:
    description: Treat a loaded nouveau as a problem (by default a warning, since the driver role handles it).
    type: bool
    default: false
  fail_on_other_driver:
    description: Treat a loaded nvidia module of another branch or version as a problem (by default a warning).
    type: bool
    default: false
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.node, gpuops.platform.attributes.read_only]
seealso:
  - module: gpuops.platform.nvidia_driver
"""

EXAMPLES = r"""
- name: Check the node
  gpuops.platform.gpu_node_preflight:
    expected_driver: "570"
  register: preflight

- name: Stop here when the node is not ready
  ansible.builtin.fail:
    msg: "{{ preflight.problems | join('; ') }}"
  when: preflight.problems | length > 0
"""

RETURN = r"""
ok:
  description: True when RV(problems) is empty.
  returned: always
  type: bool
problems:
  description: Every finding that stops the node, each a sentence that says what to do.
  returned: always
  type: list
  elements: str
warnings_list:
  description: Findings that do not stop the node.
  returned: always
  type: list
  elements: str
gpus:
  description: NVIDIA GPUs on the PCI bus.
  returned: always
  type: list
  elements: dict
  sample: [{"bus_id": "0000:18:00.0", "device_id": "0x2330", "class": "0x030200"}]
nvswitches:
  description: NVSwitches on the PCI bus (class 0x0680).
  returned: always
  type: list
  elements: dict
distro:
  description: OS id, version, major version and pretty name from os-release.
  returned: always
  type: dict
os_supported:
  description: Whether the OS is one the collection supports.
  returned: always
  type: bool
arch:
  description: Machine architecture.
  returned: always
  type: str
kernel:
  description: Running kernel release.
  returned: always
  type: str
kernel_headers_present:
  description: Whether C(/lib/modules/<kernel>/build) exists.
  returned: always
  type: bool
secure_boot:
  description: Secure Boot state; null on a non-EFI boot.
  returned: always
  type: bool
nouveau_loaded:
  description: Whether nouveau is loaded.
  returned: always
  type: bool
loaded_version:
  description: Version of the loaded nvidia kernel module, or null.
  returned: always
  type: str
loaded_flavor:
  description: V(open) or V(proprietary) for the loaded module, or null.
  returned: always
  type: str
driver_provenance:
  description:
    - How the installed driver got there, the record the fleet planner and the nvidia_driver module decide by.
    - C(kind) is V(packages) (distro or CUDA packages, C(origin) V(distro) or V(cuda), with C(packages) and their
      versions), V(runfile) (C(/usr/bin/nvidia-uninstall), C(/var/lib/dkms/nvidia) without a package, or the
      runfile's install log), V(container) (a driver container or mount, C(/run/nvidia/driver)), V(unknown)
      (C(libnvidia-ml.so.1) or a loaded module that no package owns) or V(none).
    - C(version) is the driver found; C(evidence) lists what was found.
  returned: always
  type: dict
  sample: {"kind": "runfile", "version": "580.159.04", "origin": null, "packages": [],
           "evidence": ["/usr/bin/nvidia-uninstall", "/var/lib/dkms/nvidia/580.159.04 (no package)"]}
free_space:
  description: Free MiB per checked filesystem.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.platform.plugins.module_utils._driver import provenance
from ansible_collections.gpuops.platform.plugins.module_utils._node import preflight as node_preflight


def main():
    module = AnsibleModule(
        argument_spec=dict(
            require_gpu=dict(type="bool", default=True),
            require_supported_os=dict(type="bool", default=True),
            require_kernel_headers=dict(type="bool", default=False),
            allow_secure_boot=dict(type="bool", default=True),
            min_free_mib=dict(type="int", default=2048),
            disk_paths=dict(type="list", elements="str", default=["/", "/var", "/usr"]),
            expected_nvswitches=dict(type="int"),
            expected_driver=dict(type="str"),
            fail_on_nouveau=dict(type="bool", default=False),
            fail_on_other_driver=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    try:
        node_preflight.validate(module.params)
    except node_preflight.PreflightParamError as exc:
        module.fail_json(msg=str(exc))
    installed = None
    rpm = module.get_bin_path("rpm")
    if rpm and provenance.dpkg_packages() is None:
        # No dpkg status file: what rpm has installed says whether a package owns the driver (read-only).
        rc, out, dummy = module.run_command([rpm, "-qa", "--qf", "%{NAME}\t%{VERSION}\n"])
        if rc == 0:
            installed = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    result = node_preflight.run(module.params, installed=installed)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
