#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_token_kubeconfig
short_description: Write a bearer token into a private kubeconfig for one run, and remove it again
version_added: 0.1.0
author:
  - gpuops.platform maintainers (@gpuops)
description:
  - With O(state=present), writes a kubeconfig of one cluster (O(server)) and one user (the bearer token
    O(api_key)) into a new folder of its own under the temporary folder, and returns its RV(path). The folder is
    made with mode C(0700) under a name no one else holds, and the file is created with mode C(0600) inside it, so no
    other user can read the token at any moment.
  - With O(state=absent), removes that kubeconfig and its folder. It refuses any other path (a file not named
    C(kubeconfig), a folder not named C(gpuops-k8s-*), or one that holds anything else) and removes nothing then.
  - So a token never becomes an argument of a kubernetes.core task, whose action plugins copy the raw task
    arguments into the result when the module returns none (a crash, for example); the tasks get the kubeconfig's
    path instead. O(api_key) is C(no_log), and the C(gpuops.platform.k8s_apply) role runs the task with C(no_log) too.
  - One module run each way, where a temporary folder, a copy of the content and a removal took four. Where the
    task's host is the controller itself (a local connection without become, as the Kubernetes layer runs from an
    execution environment), O(state=absent) runs in the controller's own process and costs no module run; the result
    and the failures are the same.
options:
  state:
    description: Write a new kubeconfig (V(present)), or remove the one at O(path) (V(absent)).
    type: str
    choices: [present, absent]
    default: present
  server:
    description: URL of the API server, for example C(https://10.0.0.1:6443). Required with O(state=present).
    type: str
  api_key:
    description: The bearer token. Required with O(state=present).
    type: str
  path:
    description: The kubeconfig to remove, as RV(path) returned it. Required with O(state=absent).
    type: path
extends_documentation_fragment:
  - gpuops.platform.attributes
  - gpuops.platform.attributes.node
  - gpuops.platform.attributes.node_action
attributes:
  action:
    support: full
    details: With a local connection and no become, the action plugin removes the kubeconfig itself (O(state=absent));
      otherwise it runs the module on the host.
  check_mode:
    support: full
    details:
      - In check mode nothing is written or removed; O(state=present) returns an empty RV(path).
      - The kubeconfig is a run artefact that check-mode reads of the API need too, so the C(gpuops.platform.k8s_apply)
        role runs both tasks with C(check_mode=false).
  diff_mode:
    support: none
    details: The file holds a secret, so nothing of it is shown.
  idempotent:
    support: partial
    details: Each O(state=present) writes a new kubeconfig in a new folder; O(state=absent) of a removed one changes nothing.
"""

EXAMPLES = r"""
- name: Write the API token into a private kubeconfig
  gpuops.platform.k8s_token_kubeconfig:
    server: https://10.0.0.1:6443
    api_key: "{{ k8s_token }}"
  no_log: true
  register: token_kubeconfig

- name: Read the nodes with it
  kubernetes.core.k8s_info:
    kind: Node
    kubeconfig: "{{ token_kubeconfig.path }}"

- name: Remove it
  gpuops.platform.k8s_token_kubeconfig:
    state: absent
    path: "{{ token_kubeconfig.path }}"
"""

RETURN = r"""
path:
  description: The kubeconfig written (O(state=present); empty in check mode) or removed (O(state=absent)).
  returned: always
  type: str
  sample: /tmp/gpuops-k8s-3xq0v1yz/kubeconfig
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import token_kubeconfig


def main():
    module = AnsibleModule(argument_spec=token_kubeconfig.ARGUMENT_SPEC, required_if=token_kubeconfig.REQUIRED_IF,
                           supports_check_mode=True)
    try:
        result = token_kubeconfig.converge(module.params, module.check_mode)
    except token_kubeconfig.TokenKubeconfigError as exc:
        module.fail_json(msg="k8s_token_kubeconfig: %s" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
