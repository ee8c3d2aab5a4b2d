#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_applyset
short_description: Track each layer's objects as an ApplySet and prune what it no longer plans
version_added: 0.1.0
author:
  - gpuops.platform maintainers (@gpuops)
description:
  - Keeps one ApplySet (KEP-3659, the specification behind C(kubectl apply --prune --applyset)) per layer.
    Its parent is a Secret labelled C(applyset.kubernetes.io/id) with the annotations
    C(applyset.kubernetes.io/tooling) and C(applyset.kubernetes.io/contains-group-kinds); members carry
    C(applyset.kubernetes.io/part-of=<id>), with the id computed as kubectl does.
  - Lists the members of every group-kind the parent names or the plan has (one list call each, by label selector),
    deletes those the plan no longer has (namespaced objects first, namespaces last), then records the
    group-kinds in the parent.
  - With O(sets), one run reconciles the ApplySets of several layers, in their order, with one list call per
    group-kind for all of them (C(part-of in (...))) and one for their parents.
  - Only objects that carry this ApplySet's C(part-of) label are ever deleted. A namespace that holds objects the
    collection did not create (no C(part-of) label of the collection, no owner, not one of Kubernetes' own
    defaults) is kept unless O(prune_namespaces_with_foreign_objects) is set. C(default), C(kube-system),
    C(kube-public) and C(kube-node-lease) are never deleted. That check lists each namespaced kind that takes a
    list (its discovery verbs in O(api_table); v1 C(Binding) and C(LocalSubjectAccessReview) take a create only)
    once, at its group's preferred version (never v1 Endpoints or Events), so no deprecated API version is called.
  - A member whose deletion began earlier (C(metadata.deletionTimestamp) set; finalizers hold it) counts as gone.
    It is not deleted again and does not make the run changed; RV(finalizing) names it.
  - Used by the C(gpuops.platform.k8s_apply) role after a layer's objects are applied; connection options come from
    the play's C(module_defaults) (C(group/gpuops.platform.k8s)) like those of kubernetes.core.
options:
  name:
    description: Name of the parent Secret; one of O(name) and O(sets) is required.
    type: str
  namespace:
    description: Namespace of the parent Secrets; created when missing.
    type: str
    required: true
  objects:
    description: The layer's planned objects (only C(apiVersion), C(kind) and C(metadata.name)/C(namespace) are read).
    type: list
    elements: dict
    default: []
  sets:
    description:
      - Several ApplySets at once, instead of O(name) and O(objects); reconciled in this order.
    type: list
    elements: dict
    suboptions:
      name:
        description: Name of the parent Secret.
        type: str
        required: true
      objects:
        description: The layer's planned objects.
        type: list
        elements: dict
        default: []
  prune:
    description: Delete members that the plan no longer has. With V(false) they are listed and kept in the set.
    type: bool
    default: true
  prune_namespaces_with_foreign_objects:
    description: Delete a pruned namespace even when it holds objects the collection did not create.
    type: bool
    default: false
  field_manager:
    description: Field manager of the parent's server-side apply.
    type: str
    default: gpuops-platform
  api_table:
    description:
      - The served API table (RV(gpuops.platform.k8s_discovery#module:api_table), the C(gpuops_k8s_api_table) fact
        of the C(gpuops.platform.k8s_apply) role). Every resource is looked up there, so this module makes no
        discovery call.
      - Empty or not given, the module reads it itself first (C(GET /api) and C(GET /apis) where the server
        aggregates discovery); so it does, once, when a kind it has to list is missing from the table (a CRD
        established after the table was read).
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpuops.platform.attributes
  - gpuops.platform.attributes.node
attributes:
  check_mode:
    support: full
    details: Lists what would be deleted, deletes nothing and writes no parent.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Once the stale members are pruned and the parent is written, a second run changes nothing.
requirements:
  - kubernetes (Python) >= 24.2.0
"""

EXAMPLES = r"""
- name: Prune what the sharing layer no longer plans
  gpuops.platform.k8s_applyset:
    name: gpuops-gpu-sharing
    namespace: gpuops-system
    objects: "{{ layer_objects }}"

- name: Prune what two layers no longer plan, in one run
  gpuops.platform.k8s_applyset:
    namespace: gpuops-system
    sets:
      - name: gpuops-gpu-sharing
        objects: "{{ sharing_objects }}"
      - name: gpuops-gpu-tenants
        objects: "{{ tenant_objects }}"
"""

RETURN = r"""
id:
  description: The ApplySet id, the value of every member's C(applyset.kubernetes.io/part-of) label.
  returned: with O(name)
  type: str
  sample: applyset-0eFHV8ySqp7XoShsGvyWFQD3s96yqwHmzc4e0HR1dsY-v1
pruned:
  description:
    - Members deleted (in check mode, or with O(prune=false), that would be deleted), as C(Kind.group ns/name).
    - With O(sets), those of every set.
  returned: always
  type: list
  elements: str
kept:
  description: Members the plan no longer has but that were kept, with the reason (with O(sets), of every set).
  returned: always
  type: list
  elements: str
finalizing:
  description:
    - Members the plan no longer has whose deletion began before this run (C(metadata.deletionTimestamp) set) and
      that wait for their finalizers, with the time deletion began (with O(sets), of every set).
    - They count as gone; no DELETE is sent again and they do not make the run changed.
  returned: always
  type: list
  elements: str
group_kinds:
  description: The group-kinds recorded in the parent.
  returned: with O(name)
  type: list
  elements: str
sets:
  description: One result per ApplySet, in the order given (one entry with O(name)).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Name of the parent Secret.
      type: str
    id:
      description: The ApplySet id.
      type: str
    changed:
      description: Whether members were pruned or the parent was written.
      type: bool
    pruned:
      description: As the top-level RV(pruned), for this set.
      type: list
      elements: str
    kept:
      description: As the top-level RV(kept), for this set.
      type: list
      elements: str
    finalizing:
      description: As the top-level RV(finalizing), for this set.
      type: list
      elements: str
    group_kinds:
      description: The group-kinds recorded in this set's parent.
      type: list
      elements: str
    unlisted_group_kinds:
      description: Group-kinds the parent named that the API no longer serves.
      type: list
      elements: str
"""

import copy
import traceback

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import discovery
from ansible_collections.gpuops.platform.plugins.module_utils._k8s.api import Api
from ansible_collections.gpuops.platform.plugins.module_utils._k8s.reconcile import ApplySetError, reconcile, sets_of, summary

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        name=dict(type="str"),
        namespace=dict(type="str", required=True),
        objects=dict(type="list", elements="dict", default=[]),
        sets=dict(type="list", elements="dict", options=dict(
            name=dict(type="str", required=True),
            objects=dict(type="list", elements="dict", default=[]),
        )),
        prune=dict(type="bool", default=True),
        prune_namespaces_with_foreign_objects=dict(type="bool", default=False),
        field_manager=dict(type="str", default="gpuops-platform"),
        api_table=dict(type="list", elements="dict", default=[]),
    )
    return spec


def main():
    module = AnsibleK8SModule(argument_spec=argspec(), required_one_of=[("name", "sets")],
                              mutually_exclusive=[("name", "sets")], supports_check_mode=True)
    params = module.params
    sets = []
    try:
        sets = sets_of(params)
        api = Api(get_api_client(module=module), discovery.check_table(params["api_table"]))
        results = reconcile(api, sets, params["namespace"], prune=params["prune"],
                            prune_namespaces_with_foreign_objects=params["prune_namespaces_with_foreign_objects"],
                            field_manager=params["field_manager"], check_mode=module.check_mode)
    except (ApplySetError, discovery.DiscoveryError) as exc:
        module.fail_json(msg=str(exc))
    except CoreException as exc:
        module.fail_from_exception(exc)
    except Exception as exc:  # the API client raises many types; all mean the same to the user
        module.fail_json(msg="ApplySet %s/%s: %s" % (params["namespace"], ", ".join(s["name"] for s in sets), exc),
                         exception=traceback.format_exc())
    module.exit_json(**summary(results, params["sets"] is None))


if __name__ == "__main__":
    main()
