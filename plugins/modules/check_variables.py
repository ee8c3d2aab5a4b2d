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
module: check_variables
short_description: Fail on role and platform variables that nothing defines (typos)
version_added: 0.1.0
description:
  - Argument specs validate the variables a role knows; a misspelt variable (C(gpu_sharing_config) for
    C(gpu_sharing_configs)) is never read and never reported. This action fails on every variable of the
    current host (and of the hosts in O(hosts)) whose name starts with a role's prefix C(<role>_), or with
    C(gpuops_), and that the role's C(meta/argument_specs.yml) (for C(gpuops_*), the collection's
    C(meta/variables.yml) or any role's argument specs) does not define. The message names each variable once,
    with its hosts grouped on one line, the inventory files that set it (C(group_vars) and
    C(host_vars) beside the inventory or the playbook) and the closest known variable; for a variable that was renamed or moved to another role (the
    C(renamed) table of C(meta/variables.yml)), the variable to set instead (or the variables, where several
    take over its job). An internal name (C(<role>__x)) is never offered as the closest one.
  - A name of the C(renamed) table is reported even without a role's prefix (DeepOps' C(k8s_gpu_mig_strategy)),
    with the C(gpuops_*) variables (O(globals)); other names without such a prefix are not checked.
  - Every playbook of the collection runs it as its first task, once for all the hosts of the run, so that a
    misspelt variable stops the run before any batch changes anything.
  - A name belongs to the role with the longest matching prefix, so C(gpu_nodes_group) is gpu_nodes' and never
    another role's whose name is a shorter prefix.
  - Not checked - internal names (C(__x), C(<role>__x)), and facts and registered results (set by tasks, not by
    the inventory or extra variables).
  - Roles added to the collection are checked as soon as their variables are in their argument specs; nothing
    here lists roles.
author:
  - gpuops.platform maintainers (@gpuops)
options:
  roles:
    description:
      - Roles whose variables are checked. Default every role of the collection.
    type: list
    elements: str
  hosts:
    description:
      - Other inventory hosts whose variables are checked for the prefixes of O(roles) too, for example the
        GPU nodes whose host variables a Kubernetes role reads.
    type: list
    elements: str
    default: []
  globals:
    description:
      - Check C(gpuops_*) variables of the current host as well.
    type: bool
    default: true
  host_globals:
    description:
      - With O(globals), check the C(gpuops_*) variables of the hosts named in O(hosts) too, for hosts that run
        no play of their own where they would be checked (the fleet planner reads them on the controller).
    type: bool
    default: false
  validate:
    description:
      - Also validate the values of the current host's role variables against the roles' argument specs (type,
        choices, elements, sub-options), with the messages of a role's own include, and fail naming each one.
      - For a play that includes many roles with C(rolespec_validate=false), as C(cluster.yml) does, so that
        their variables are validated once instead of by an argument validation task per include. Only the
        variables that are set are validated; C(required) and C(default) stay with the role's own include, and a
        value that reads a variable not defined yet is left to the role.
      - Each refusal names the host and the inventory file (or extra vars) that set the variable.
    type: bool
    default: false
  validate_hosts:
    description:
      - With O(validate), also validate the role variables of the hosts named in O(hosts), each in its own
        context (C(plan_fleet.yml) reads the control host's, such as C(gpu_sharing_configs), on the controller).
    type: bool
    default: false
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.controller, gpuops.platform.attributes.read_only]
notes:
  - The check reads the roles' files once per run; it costs no round trip to the host.
"""

EXAMPLES = r"""
- name: Refuse unknown gpu_sharing_* and gpuops_* variables
  gpuops.platform.check_variables:
    roles: [gpu_sharing]

- name: Refuse unknown variables of every role, here and on the GPU nodes
  gpuops.platform.check_variables:
    hosts: "{{ groups['gpu_nodes'] | default([]) }}"

- name: Refuse unknown variables, and values that the roles' argument specs refuse
  gpuops.platform.check_variables:
    validate: true
"""

RETURN = r"""
checked:
  description: How many variable names were looked at.
  returned: always
  type: int
  sample: 412
unknown:
  description: The unknown variable names.
  returned: always
  type: list
  elements: str
  sample: [gpu_sharing_config]
validated:
  description: How many variable values were validated against the roles' argument specs (O(validate)).
  returned: when O(validate) is true and no variable is unknown
  type: int
  sample: 37
enabled:
  description:
    - Each role that has a C(<role>_enabled) switch, and its value on the current host (set there, or the role's
      argument spec default), so that a play can leave a switched-off role out before it loads the role.
  returned: when no variable is refused
  type: dict
  sample: {kueue: true, kai_scheduler: false}
argument_errors:
  description: One message per value that an argument spec refuses (O(validate)).
  returned: when a value is refused
  type: list
  elements: str
  sample: ["value of gpuops_k8s_mig_strategy must be one of: none, single, mixed, got: triple"]
"""
