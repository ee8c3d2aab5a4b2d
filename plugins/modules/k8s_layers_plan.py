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
module: k8s_layers_plan
short_description: Check, build and plan every Kubernetes layer of a run in one task
version_added: 0.1.0
description:
  - The plan of the C(gpuops.platform.k8s_apply) role (C(tasks_from=layers) and C(tasks_from=objects)), on the
    controller, in one pass; nothing is applied or written, and no API call is made.
  - First each layer's C(errors) (its role's checks of its settings against the rest of the plan) refuse the run, all
    of them in one message, each named with its layer (P(gpuops.platform.k8s_layer_errors#filter)).
  - Then the C(templates/objects.yml.j2) of every layer that says C(template) is rendered with the task's variables
    (the C(gpuops.platform.template) lookup), parsed, and added by layer to O(built) (RV(objects)).
  - With O(plan), every layer is then planned as the flush applies it or, with O(render), as its files render
    (P(gpuops.platform.k8s_layers#filter), its releases' variables read with one C(ansible.builtin.vars) lookup), and
    the calls of all of them phase by phase (P(gpuops.platform.k8s_batch#filter)).
  - The result holds the objects, a Secret's data among them, so it is never shown, as with C(no_log); a refusal of
    the layers' errors is.
author:
  - gpuops.platform maintainers (@gpuops)
options:
  layers:
    description: The layers, as P(gpuops.platform.k8s_layers#filter) takes them (a role's C(<role>__layer) may be a list).
    type: list
    elements: raw
    required: true
  roles_dir:
    description: The collection's roles folder on the controller, where each layer's role has its template.
    type: path
    required: true
  built:
    description: The objects built before in the same run, by layer (C(gpuops_k8s_objects)); a layer built again is replaced.
    type: dict
    default: {}
  plan:
    description: Whether to plan the layers too (V(false) - check and build only).
    type: bool
    default: true
  settings:
    description: The k8s_apply settings that every layer is applied with (field manager, timeouts, Helm recovery,
      pruning, the ApplySets' namespace, C(force_conflicts)).
    type: dict
    default: {}
  render:
    description: Plan the layers' files for GitOps (RV(layers)) instead of the calls that apply them (RV(batch)).
    type: bool
    default: false
  api_kinds:
    description: The served C(apiVersion/Kind) strings (C(gpuops_k8s_api_kinds)); in check mode, the objects whose kind
      is not served yet are left out of the calls.
    type: list
    elements: str
    default: []
  namespaces:
    description: The namespaces that exist; in check mode, the objects in another are left out of the calls.
    type: list
    elements: str
    default: []
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.controller, gpuops.platform.attributes.read_only]
seealso:
  - module: gpuops.platform.k8s_server_side_apply
"""

EXAMPLES = r"""
- name: Check, build and plan the layers
  gpuops.platform.k8s_layers_plan:
    layers: "{{ [gpu_tenants__layer, kueue__layer] }}"
    roles_dir: "{{ role_path ~ '/..' }}"
    settings: {field_manager: gpuops-platform, applyset_namespace: gpuops-system, force_conflicts: false}
  register: planned
"""

RETURN = r"""
objects:
  description: O(built), with the objects of every layer that says C(template), by layer (the role's C(gpuops_k8s_objects)).
  returned: success
  type: dict
batch:
  description: The calls of every layer, phase by phase, and the layers themselves (C(queue)), as
    P(gpuops.platform.k8s_batch#filter) returns them.
  returned: with O(plan), without O(render)
  type: dict
layers:
  description: Every layer with the files it renders, as P(gpuops.platform.k8s_layers#filter) returns them.
  returned: with O(plan) and O(render)
  type: list
  elements: dict
"""
