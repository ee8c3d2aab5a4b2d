#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: helm_releases
short_description: Ask helm for the state of several releases and decide what a run does with each
version_added: 0.1.0
author:
  - gpuops.platform maintainers (@gpuops)
description:
  - Runs one C(helm list --all --all-namespaces -o json), filtered to the names of O(releases), for every release at
    once, whatever Helm's storage driver (C(HELM_DRIVER)).
  - Only where the decision needs more, asks helm again, per release - C(helm get values -o json) for a release
    C(deployed) at the wanted chart and version, to compare its values with the wanted ones, and
    C(helm history -o json) for a release left C(pending-install), C(pending-upgrade) or C(pending-rollback), to find
    the revision to roll back to. Those reads run side by side, each in a helm of its own.
  - Decides per release (see P(gpuops.platform.k8s_helm_decide#filter)) - C(install), C(upgrade), C(unchanged) (the
    deployed chart version and values equal the wanted ones), or first recover from an interrupted operation
    (C(uninstall), or C(rollback) to the last deployed revision).
  - The deployed values are compared by digest inside the module; neither they nor their digest are returned.
  - With O(recover=false), a release left pending (or with a status this module does not handle) fails the task,
    naming the helm command to run by hand; nothing is changed.
  - Changes nothing; the recovery, install and upgrade are left to M(gpuops.platform.helm_release_action), one helm
    command each.
  - Connection options as kubernetes.core's helm modules; in the collection's action group
    C(gpuops.platform.k8s), so C(module_defaults) of C(group/gpuops.platform.k8s) give them.
options:
  releases:
    description:
      - The wanted releases, as P(gpuops.platform.k8s_helm_wanted#filter) returns them. With none, helm is not run.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Release name (Helm's rule - lower-case letters, digits, C(-) and C(.), at most 53 characters).
        type: str
        required: true
      namespace:
        description: Release namespace (a DNS label).
        type: str
        required: true
      chart:
        description: Chart name; empty for a chart from a path, when only the version is compared.
        type: str
        default: ""
      chart_version:
        description: Wanted chart version, as the chart's C(Chart.yaml) has it.
        type: str
        required: true
      values_digest:
        description:
          - Digest of the wanted values (P(gpuops.platform.k8s_helm_wanted#filter)).
          - Kept out of the task's logged arguments and result (C(no_log)), as the values are.
        type: str
        required: true
  recover:
    description:
      - Plan the recovery of a release left pending by an interrupted operation. With V(false) such a release fails the
        task instead.
    type: bool
    default: true
extends_documentation_fragment:
  - gpuops.platform.attributes
  - gpuops.platform.attributes.node
  - gpuops.platform.attributes.read_only
  - kubernetes.core.helm_common_options
requirements:
  - helm >= 3.0.0 (on C(PATH), or O(binary_path))
seealso:
  - module: gpuops.platform.helm_release_action
  - module: kubernetes.core.helm_info
  - plugin: gpuops.platform.k8s_helm_decide
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Read and decide every Helm release of the run
  gpuops.platform.helm_releases:
    releases: "{{ releases | gpuops.platform.k8s_helm_wanted }}"
    recover: true
  register: helm_state

- name: Name the releases that a run would change (gpuops.platform.helm_release_action carries the plans out)
  ansible.builtin.debug:
    msg: "{{ helm_state.plans | rejectattr('action', 'equalto', 'unchanged') | map(attribute='name') | list }}"
"""

RETURN = r"""
plans:
  description: One decision per release of O(releases), in the same order.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Release name.
      type: str
    namespace:
      description: Release namespace.
      type: str
    state:
      description: Status of the latest revision as helm prints it (C(deployed), C(pending-upgrade), ...); empty when not listed.
      type: str
    revision:
      description: Latest revision; 0 when not listed.
      type: int
    recover:
      description: Empty, C(uninstall) (a release that never deployed) or C(rollback) (to RV(plans[].rollback_to)).
      type: str
    rollback_to:
      description: The last deployed revision, with C(recover=rollback); otherwise 0.
      type: int
    action:
      description: C(install), C(upgrade), C(unchanged) or C(fail).
      type: str
    reason:
      description: Why.
      type: str
    command:
      description: The helm command of the recovery (or to inspect an unhandled status), to run by hand.
      type: str
    chart:
      description: The chart of the latest revision as helm lists it (C(<name>-<version>)); empty when not listed.
      type: str
  sample:
    - name: gpu-operator
      namespace: gpu-operator
      state: deployed
      revision: 2
      recover: ""
      rollback_to: 0
      action: unchanged
      reason: chart v25.3.0 and values already deployed
      command: ""
      chart: gpu-operator-v25.3.0
commands:
  description: The helm commands run (arguments after the binary), in order.
  returned: always
  type: list
  elements: list
  sample: [["list", "--all", "--all-namespaces", "--max", "0", "--filter", "^(?:gpu-operator)$", "-o", "json"]]
"""


# kubernetes.core is a dependency of the collection (galaxy.yml): its helm pieces, as its helm modules use them.
from ansible_collections.kubernetes.core.plugins.module_utils.helm_args_common import (
    HELM_AUTH_ARG_SPEC, HELM_AUTH_MUTUALLY_EXCLUSIVE)

from ansible_collections.gpuops.platform.plugins.module_utils._k8s.helm_cli import RELEASE_SPEC, HelmModule, checked_state


def argument_spec():
    spec = dict(HELM_AUTH_ARG_SPEC)
    spec.update(releases=dict(type="list", elements="dict", required=True, options=RELEASE_SPEC),
                recover=dict(type="bool", default=True))
    return spec


def main():
    module = HelmModule(argument_spec=argument_spec(), mutually_exclusive=HELM_AUTH_MUTUALLY_EXCLUSIVE,
                        supports_check_mode=True)
    plans, commands, stops = checked_state(module, module.params["releases"], module.params["recover"])
    if stops:
        module.fail_json(msg=" ".join(stops), plans=plans, commands=commands)
    module.exit_json(changed=False, plans=plans, commands=commands)


if __name__ == "__main__":
    main()
