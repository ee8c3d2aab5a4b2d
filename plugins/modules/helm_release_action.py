#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: helm_release_action
short_description: Install, upgrade, roll back or uninstall one Helm release, as helm_releases decided, in one helm command
version_added: 0.1.0
author:
  - gpuops.platform maintainers (@gpuops)
description:
  - Carries out one decision of M(gpuops.platform.helm_releases) with one helm command, and nothing else - no
    C(helm list), C(helm get values) or C(helm show chart) (helm_releases asked those once for every release), and no
    warning or deprecation notice of its own.
  - C(install) and C(upgrade) run C(helm upgrade --install) with the chart, its version and repository, C(--reset-values)
    and the values in a temporary file (removed afterwards), waiting up to O(timeout) with O(wait); a release whose
    namespace is missing gets it with the release's C(create_namespace).
  - C(rollback) runs C(helm rollback) to the release's C(rollback_to), C(uninstall) runs C(helm uninstall) - the recovery of a
    release that an interrupted operation left pending (a killed helm leaves it C(pending-install) or
    C(pending-upgrade), and every install or upgrade fails until it is cleared).
  - Connection options as kubernetes.core's helm modules, given to helm as environment variables (the token never on
    its command line); in the collection's action group C(gpuops.platform.k8s), so C(module_defaults) of
    C(group/gpuops.platform.k8s) give them.
options:
  action:
    description: What to do, as helm_releases' RV(gpuops.platform.helm_releases#module:plans[].action) and
      RV(gpuops.platform.helm_releases#module:plans[].recover) say.
    type: str
    required: true
    choices: [install, upgrade, rollback, uninstall]
  release:
    description:
      - The release, as P(gpuops.platform.k8s_helm_release#filter) gives it, or for a recovery the plan of
        helm_releases. Read are C(name) and C(namespace) (always), C(chart_ref), C(chart_repo_url), C(chart_version),
        C(values) and C(create_namespace) (install, upgrade), C(rollback_to) (rollback); other keys are ignored.
      - C(values) may hold secrets; they go to helm in a temporary file, are in no result, and the task of a sensitive
        release runs with C(no_log).
    type: dict
    required: true
  plan:
    description:
      - The decision of helm_releases for this release (its RV(gpuops.platform.helm_releases#module:plans) entry), for
        the diff (the state and revision found) and the result's reason. Optional.
    type: dict
    default: {}
  wait:
    description: Wait until the release's resources are ready (C(--wait)).
    type: bool
    default: true
  timeout:
    description: How long helm waits, a Go duration (C(10m0s)).
    type: str
    default: 5m0s
extends_documentation_fragment:
  - gpuops.platform.attributes
  - gpuops.platform.attributes.node
  - kubernetes.core.helm_common_options
attributes:
  check_mode:
    support: full
    details: Runs no helm command; reports the change the decision says (every action changes the release).
  diff_mode:
    support: full
    details: RV(diff) is the release's status and revision before, and after the action its chart and version (never
      its values).
  idempotent:
    support: N/A
    details: It carries out a decision of M(gpuops.platform.helm_releases), which decides C(unchanged) for a release
      already as wanted; the role does not call this module for those.
requirements:
  - helm >= 3.0.0 (on C(PATH), or O(binary_path))
seealso:
  - module: gpuops.platform.helm_releases
"""

EXAMPLES = r"""
- name: Read and decide every Helm release of the run
  gpuops.platform.helm_releases:
    releases: "{{ releases | gpuops.platform.k8s_helm_wanted }}"
  register: helm_state

- name: Recover the releases left pending (roll back or uninstall)
  gpuops.platform.helm_release_action:
    action: "{{ item.recover }}"
    release: "{{ item }}"
    plan: "{{ item }}"
  loop: "{{ helm_state.plans | selectattr('recover') | list }}"

- name: Install or upgrade the releases that are not as wanted
  gpuops.platform.helm_release_action:
    action: "{{ plan.action }}"
    release: "{{ item | gpuops.platform.k8s_helm_release }}"
    plan: "{{ plan }}"
  loop: "{{ releases }}"
  vars:
    plan: "{{ helm_state.plans | selectattr('name', 'equalto', item.name) | first }}"
  when: plan.action in ['install', 'upgrade']
"""

RETURN = r"""
command:
  description: The helm command run (arguments after the binary); the values file as C(<values>). Empty in check mode.
  returned: always
  type: list
  elements: str
  sample: [upgrade, --install, gpu-operator, gpu-operator, --namespace, gpu-operator, --version, v25.3.0, --repo,
           "https://helm.ngc.nvidia.com/nvidia", --reset-values, --wait, --timeout, 10m0s, --values, <values>, -o, json]
release:
  description: After an install or upgrade, the release as helm printed it - name, namespace, revision, status, chart
    and chart_version (never its values or manifest). Empty otherwise, and in check mode.
  returned: always
  type: dict
  sample: {name: gpu-operator, namespace: gpu-operator, revision: 2, status: deployed, chart: gpu-operator,
           chart_version: v25.3.0}
reason:
  description: Why, as the plan says; empty without one.
  returned: always
  type: str
diff:
  description: The release before and after (status, revision, chart, version), in diff mode.
  returned: in diff mode
  type: dict
"""

import os
import tempfile

from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.kubernetes.core.plugins.module_utils.helm_args_common import (
    HELM_AUTH_ARG_SPEC, HELM_AUTH_MUTUALLY_EXCLUSIVE)

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import helm
from ansible_collections.gpuops.platform.plugins.module_utils._k8s.helm_cli import HelmModule, HelmRunner

try:
    import yaml
except ImportError:  # kubernetes.core's helm modules need it too
    yaml = None

VALUES_SHOWN = "<values>"


def argument_spec():
    spec = dict(HELM_AUTH_ARG_SPEC)
    spec.update(
        action=dict(type="str", required=True, choices=list(helm.ACTIONS)),
        release=dict(type="dict", required=True),
        plan=dict(type="dict", default={}),
        wait=dict(type="bool", default=True),
        timeout=dict(type="str", default="5m0s"),
    )
    return spec


def _values_file(module, values):
    """The values in a private temporary file (mode 0600), removed once helm ran (and when the module exits, should
    it end first); None for no values."""
    if not values:
        return None
    if yaml is None:
        module.fail_json(msg="PyYAML is required to hand a release's values to helm (pip install pyyaml)")
    fd, path = tempfile.mkstemp(prefix="gpuops-helm-values-", suffix=".yaml")
    module.add_cleanup_file(path)
    with os.fdopen(fd, "wb") as handle:
        handle.write(to_bytes(yaml.safe_dump(values, default_flow_style=False)))
    return path


def main():
    module = HelmModule(argument_spec=argument_spec(), mutually_exclusive=HELM_AUTH_MUTUALLY_EXCLUSIVE,
                        supports_check_mode=True)
    params = module.params
    action, release, plan = params["action"], params["release"], params["plan"] or {}
    try:
        # Everything checked before any file is written or helm runs.
        values = release.get("values")
        if values is not None and not isinstance(values, dict):
            raise ValueError("release %s: values must be a mapping, got %s" % (release.get("name"), type(values).__name__))
        args = helm.action_args(action, release, params["timeout"], VALUES_SHOWN if values else None, params["wait"])
        if plan and (plan.get("name"), plan.get("namespace")) != (release["name"], release["namespace"]):
            raise ValueError("plan is the decision for %s/%s, not for the release %s/%s" % (
                plan.get("namespace"), plan.get("name"), release["namespace"], release["name"]))
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    result = {"changed": True, "command": [], "release": {}, "reason": plan.get("reason") or ""}
    if module._diff:
        result["diff"] = helm.action_diff(action, release, plan)
    if module.check_mode:
        module.exit_json(**result)
    run = HelmRunner(module)
    values = _values_file(module, values)
    deploys = action in ("install", "upgrade")
    try:
        if values:
            args[args.index(VALUES_SHOWN)] = values
        # helm prints the release with its values (config): never in a result, not even when it fails.
        printed = run(args, "(the release)", show_output=not deploys, shown={values: VALUES_SHOWN} if values else None,
                      parse=deploys)
    finally:
        if values and os.path.exists(values):
            os.remove(values)
    if deploys:
        try:
            result["release"] = helm.deployed(printed)
        except ValueError as exc:
            run.fail("`helm %s`: %s" % (" ".join(run.commands[-1]), exc))
    result["command"] = run.commands[-1]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
