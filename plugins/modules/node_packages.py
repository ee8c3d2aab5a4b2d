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
module: node_packages
short_description: Install OS packages at pinned versions with apt-get or dnf, no Python apt or dnf binding
version_added: "0.1.0"
description:
  - Installs packages on a Debian, Ubuntu or RHEL-family node the way M(gpuops.platform.nvidia_driver) does, through
    the same code, C(apt-get) and C(dpkg-query), or C(dnf) and C(rpm), run directly. The interpreter needs neither
    python3-apt nor python3-dnf, unlike M(ansible.builtin.apt) and M(ansible.builtin.dnf), so minimal images and a
    virtual environment work as they are, in check mode too.
  - A package already installed at the wanted version (any version for a bare name) is left alone; a bare name is
    never upgraded.
  - Before any change, and in check mode, the request is resolved by the package manager itself
    (C(apt-get -s install), C(dnf --assumeno install)) against the node's package lists, so check mode reports what
    would really be installed (RV(transaction)) and fails where the real run would.
  - Where neither apt-get nor dnf exists, fails with a message naming the module's interpreter.
author:
  - gpuops.platform maintainers (@gpuops)
options:
  name:
    description:
      - Packages, each as C(NAME) or C(NAME=VERSION).
      - C(VERSION) is the exact package version, such as V(1.17.8-1); on the RHEL family it is installed as
        C(NAME-VERSION).
    type: list
    elements: str
    required: true
  update_cache:
    description:
      - Run C(apt-get update) first (Debian and Ubuntu; dnf refreshes its metadata itself).
      - Not run in check mode, where it is listed in RV(plan); so a repository added in the same check run is
        not in the package lists yet.
    type: bool
    default: false
  allow_downgrade:
    description: Let apt-get install a version older than the installed one (C(--allow-downgrades)). dnf needs no flag.
    type: bool
    default: false
notes:
  - Held packages (C(apt-mark hold)) are changed when their wanted version differs (C(--allow-change-held-packages)).
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.node, gpuops.platform.attributes.converge]
attributes:
  check_mode:
    details: Only queries and the package manager's simulation run; RV(plan) lists what would be done.
  diff_mode:
    details: Shows each named package with its version before and after.
requirements:
  - apt-get and dpkg-query (Debian, Ubuntu) or dnf and rpm (RHEL, Rocky, AlmaLinux) on the node.
seealso:
  - module: gpuops.platform.nvidia_driver
"""

EXAMPLES = r"""
- name: NVIDIA Container Toolkit, pinned, and tomlkit
  gpuops.platform.node_packages:
    name:
      - nvidia-container-toolkit=1.17.8-1
      - nvidia-container-toolkit-base=1.17.8-1
      - python3-tomlkit
    update_cache: true
    allow_downgrade: true
"""

RETURN = r"""
manager:
  description: The package manager used, V(apt) or V(dnf).
  returned: success
  type: str
transaction:
  description:
    - What the package manager resolved for the packages not yet as wanted, dependencies included (apt), from its
      simulation. Empty when nothing is to be done.
  returned: success
  type: list
  elements: dict
  contains:
    action:
      description: V(install) (new, upgrade or downgrade) or V(remove).
      type: str
    name:
      description: The package.
      type: str
    from:
      description: The installed version, null when none.
      type: str
    to:
      description: The version it would be, null for a removal.
      type: str
actions:
  description: What was done, or in check mode what would be done.
  returned: success
  type: list
  elements: str
plan:
  description: In check mode, RV(actions); otherwise empty.
  returned: success
  type: list
  elements: str
versions:
  description: Each named package and its version after the run (in check mode, the version it would have); null when not installed.
  returned: success
  type: dict
previous_versions:
  description: Each named package and its version before the run; null when not installed.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.platform.plugins.module_utils._driver.install import PackageError, PackageInstaller


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="list", elements="str", required=True),
            update_cache=dict(type="bool", default=False),
            allow_downgrade=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    installer = PackageInstaller(module, module.params)
    try:
        result = installer.execute()
    except PackageError as exc:
        # Check mode changed nothing, whatever it had planned before the failure.
        module.fail_json(msg=str(exc), actions=installer.tool.actions,
                         changed=installer.tool.changed and not module.check_mode)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
