#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_node_patches
short_description: Send planned JSON merge patches to several Kubernetes nodes in one run
version_added: 0.1.0
author:
  - gpuops.platform maintainers (@gpuops)
description:
  - Sends each given JSON merge patch (RFC 7386, C(application/merge-patch+json)) to its node, in one module run
    for all of them, where C(kubernetes.core.k8s) with C(state=patched) takes one run, and a C(GET), per node.
  - A patch that carries C(metadata.resourceVersion) is guarded by it, so the server answers 409 Conflict when the
    node changed since the plan read it. Such a node, and one that no longer exists, is named in the failure and
    in RV(refused); the other nodes are patched, and the next run plans the refused ones again.
  - Every patch is checked before the first is sent.
  - Used by the C(gpuops.platform.gpu_health) role, whose plan makes the patches (labels, annotations, taints,
    C(spec.unschedulable)); connection options come from the play's C(module_defaults)
    (C(group/gpuops.platform.k8s)) like those of kubernetes.core.
options:
  patches:
    description: One entry per node to change. An empty list makes no call.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The node's name, as Kubernetes knows it.
        type: str
        required: true
      patch:
        description:
          - The JSON merge patch, of C(metadata) and C(spec) only; C(null) removes a field.
          - Include C(metadata.resourceVersion) to make the server refuse it once the node has changed.
        type: dict
        required: true
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpuops.platform.attributes
  - gpuops.platform.attributes.node
attributes:
  check_mode:
    support: full
    details: Sends nothing; every given patch counts as a change.
  diff_mode:
    support: none
  idempotent:
    support: partial
    details: The patches come from a plan that leaves out the nodes already as wanted; a patch sent twice changes nothing the second time.
requirements:
  - kubernetes (Python) >= 24.2.0
"""

EXAMPLES = r"""
- name: Label one node and cordon another
  gpuops.platform.k8s_node_patches:
    patches:
      - name: gpu-node-01
        patch: {metadata: {labels: {platform.gpuops.io/gpu-health: ok}}}
      - name: gpu-node-02
        patch: {spec: {unschedulable: true}}
"""

RETURN = r"""
patched:
  description: Names of the nodes patched (in check mode, those that would be).
  returned: always
  type: list
  elements: str
  sample: [gpu-node-01]
refused:
  description: The nodes the server refused, each with the reason (changed since the plan read it, or not found).
  returned: always
  type: dict
  sample: {gpu-node-02: changed since the plan read it}
"""

import copy
import traceback

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import node_patches
from ansible_collections.gpuops.platform.plugins.module_utils._k8s.api import Api, Conflict

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException

try:
    from kubernetes.dynamic.exceptions import NotFoundError
except ImportError:  # AnsibleK8SModule fails first with kubernetes.core's missing-library message
    NotFoundError = None

NODE_ROW = {"group": "", "version": "v1", "kind": "Node", "resource": "nodes", "namespaced": False}


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(patches=dict(type="list", elements="dict", required=True, options=dict(
        name=dict(type="str", required=True),
        patch=dict(type="dict", required=True))))
    return spec


def main():
    module = AnsibleK8SModule(argument_spec=argspec(), supports_check_mode=True)
    try:
        patches = node_patches.check_patches(module.params["patches"])
    except node_patches.PatchError as exc:
        module.fail_json(msg="k8s_node_patches: %s; nothing was patched" % exc)
    patched, refused = [], {}
    if patches and not module.check_mode:
        try:
            api = Api(get_api_client(module=module), [NODE_ROW])
            patched, refused = node_patches.apply(lambda name, body: api.merge_patch(NODE_ROW, name, body), patches,
                                                  conflict=Conflict, missing=NotFoundError)
        except CoreException as exc:
            module.fail_from_exception(exc)
        except Exception as exc:  # the API client raises many types (connection, TLS, 401, 422); all stop the run
            module.fail_json(msg="k8s_node_patches: patching %s failed: %s" % (", ".join(n for n, _p in patches), exc),
                             exception=traceback.format_exc())
    elif patches:
        patched = [name for name, _patch in patches]
    if refused:
        module.fail_json(msg="k8s_node_patches: the API server refused the patch of %s: run again to plan them anew"
                         % "; ".join("%s (%s)" % item for item in sorted(refused.items())),
                         changed=bool(patched), patched=patched, refused=refused)
    module.exit_json(changed=bool(patched), patched=patched, refused=refused)


if __name__ == "__main__":
    main()
