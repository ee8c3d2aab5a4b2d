#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_node_taints
short_description: Merge taints into several Kubernetes nodes in one run, each guarded by the version it was read at
version_added: 0.1.0
author:
  - gpuops.platform maintainers (@gpuops)
description:
  - Adds the given taints to every named node, or removes them, keeping each node's other taints. A taint is its
    C(key) and C(effect); a given C(value) replaces the value of the node's taint with the same key and effect, as
    C(kubernetes.core.k8s_taint) does.
  - One module run for all the nodes, where C(kubernetes.core.k8s_taint) takes one per node.
  - Each node is read (C(GET /api/v1/nodes/NAME), unless O(listed) holds it) before any is changed, so a node that
    does not exist changes nothing. A node whose taints differ then gets one JSON merge patch with its whole new taint list (C(spec.taints)
    is an atomic list) and the C(metadata.resourceVersion) it was read at. A taint that another controller set in
    between (the node lifecycle controller's C(node.kubernetes.io/unreachable), say) makes the server answer 409
    Conflict instead of being lost; the node is then read and merged again, up to five times.
  - Used by the C(gpuops.platform.gpu_nodes) role; connection options come from the play's C(module_defaults)
    (C(group/gpuops.platform.k8s)) like those of kubernetes.core.
options:
  nodes:
    description: Names of the nodes, as Kubernetes knows them. An empty list makes no call.
    type: list
    elements: str
    required: true
  taints:
    description: The taints to add (or, with O(state=absent), to remove; only C(key) and C(effect) are compared then).
    type: list
    elements: dict
    required: true
    suboptions:
      key:
        description: The taint key.
        type: str
        required: true
      value:
        description: The taint value; none when left out.
        type: str
      effect:
        description: The taint effect.
        type: str
        required: true
        choices: [NoSchedule, PreferNoSchedule, NoExecute]
  listed:
    description:
      - The nodes as the caller read them already (the answers of the label apply, say), each with
        C(metadata.name), C(metadata.resourceVersion) and C(spec.taints); others are ignored.
      - A node of O(nodes) found here is not read again; its patch carries the C(resourceVersion) given here, so
        a node changed since is answered 409 Conflict, then read and merged again. The others are read.
    type: list
    elements: dict
    default: []
  state:
    description: Whether the taints must be on the nodes or off them.
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpuops.platform.attributes
  - gpuops.platform.attributes.node
attributes:
  check_mode:
    support: full
    details: Reads the nodes and reports which would change; patches nothing.
  diff_mode:
    support: full
    details: One before and after per changed node, of its taints.
  idempotent:
    support: full
    details: A node that has the taints (or lacks them, for O(state=absent)) is read and not patched.
requirements:
  - kubernetes (Python) >= 24.2.0
"""

EXAMPLES = r"""
- name: Keep general workloads off the GPU nodes
  gpuops.platform.k8s_node_taints:
    nodes: [gpu-node-01, gpu-node-02]
    taints:
      - {key: nvidia.com/gpu, value: "true", effect: NoSchedule}

- name: Lift the taint again
  gpuops.platform.k8s_node_taints:
    nodes: [gpu-node-01]
    taints:
      - {key: nvidia.com/gpu, effect: NoSchedule}
    state: absent
"""

RETURN = r"""
nodes:
  description: One entry per node, in the order given, with its taints before and after the run.
  returned: always
  type: list
  elements: dict
  sample:
    - name: gpu-node-01
      changed: true
      before: [{key: node.kubernetes.io/not-ready, effect: NoSchedule}]
      after: [{key: node.kubernetes.io/not-ready, effect: NoSchedule}, {key: nvidia.com/gpu, value: "true", effect: NoSchedule}]
changed_nodes:
  description: Names of the nodes whose taints changed (or would change, in check mode).
  returned: always
  type: list
  elements: str
  sample: [gpu-node-01]
"""

import copy
import traceback

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import node_taints
from ansible_collections.gpuops.platform.plugins.module_utils._k8s.api import Api, Conflict

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException

NODE_ROW = {"group": "", "version": "v1", "kind": "Node", "resource": "nodes", "namespaced": False}


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        nodes=dict(type="list", elements="str", required=True),
        taints=dict(type="list", elements="dict", required=True, options=dict(
            key=dict(type="str", required=True, no_log=False),
            value=dict(type="str"),
            effect=dict(type="str", required=True, choices=list(node_taints.EFFECTS)))),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        listed=dict(type="list", elements="dict", default=[]),
    )
    return spec


def main():
    module = AnsibleK8SModule(argument_spec=argspec(), supports_check_mode=True)
    params = module.params
    try:
        names = node_taints.check_names(params["nodes"])
        taints = node_taints.check_taints(params["taints"])
    except node_taints.TaintError as exc:
        module.fail_json(msg="k8s_node_taints: %s" % exc)
    results = []
    if names:
        try:
            api = Api(get_api_client(module=module), [NODE_ROW])
            results = node_taints.converge(lambda name: api.get(NODE_ROW, name),
                                           lambda name, body: api.merge_patch(NODE_ROW, name, body),
                                           names, taints, params["state"], module.check_mode, conflict=Conflict,
                                           listed=params["listed"])
        except node_taints.TaintError as exc:
            module.fail_json(msg="k8s_node_taints: %s" % exc)
        except CoreException as exc:
            module.fail_from_exception(exc)
        except Exception as exc:  # the API client raises many types (connection, TLS, 401, 422); all stop the run
            module.fail_json(msg="k8s_node_taints: tainting %s failed: %s" % (", ".join(names), exc),
                             exception=traceback.format_exc())
    changed = [r["name"] for r in results if r["changed"]]
    out = dict(changed=bool(changed), nodes=results, changed_nodes=changed)
    if module._diff and changed:
        out["diff"] = [{"before_header": "Node %s taints" % r["name"], "after_header": "Node %s taints" % r["name"],
                        "before": {"taints": r["before"]}, "after": {"taints": r["after"]}}
                       for r in results if r["changed"]]
    module.exit_json(**out)


if __name__ == "__main__":
    main()
