#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

# The work is done by the action plugin of the same name on the controller;
# this file holds its documentation.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_nodes_plan
short_description: Plan the GPU nodes of the Kubernetes layer from every GPU host's facts, in one task
version_added: 0.1.0
description:
  - The plan of the C(gpuops.platform.gpu_nodes) role, for every host of O(hosts) at once, on the controller; no host
    is contacted. One pass over the hosts' variables and facts, however many there are.
  - Each host's facts come from its recorded facts, through the same store as M(gpuops.platform.recorded_facts)
    (C(gpuops_nvml_replay_file), C(gpuops_fleet_facts_dir), C(gpuops_fleet_facts_cache)); a host without recorded
    facts keeps the C(ansible_facts.nvidia) that M(gpuops.platform.nvml_facts) or the fact cache gave it. A host whose
    recorded facts are missing or unusable fails the task, named.
  - Its MIG resources are the fleet plan's (O(fleet_nodes)) where the host is in it, else its C(mig_k8s_resources).
  - The capacity is the C(gpuops.platform.gpu_capacity) filter's; each node with GPUs (or a DRA node) gets the labels
    of its product, GPU count, device-plugin config and MIG config, then C(gpu_nodes_labels) and the host's
    C(gpu_nodes_host_labels); a DRA node's C(nvidia.com/gpu.deploy.device-plugin) is always C(false).
  - The plan is returned (RV(capacity), RV(nodes)), not set as facts of the host.
  - A host without NVIDIA facts (none recorded, none gathered) is counted without GPUs, and the task warns, naming it.
author:
  - gpuops.platform maintainers (@gpuops)
options:
  hosts:
    description: The GPU hosts, in inventory order.
    type: list
    elements: str
    required: true
  mig_strategy:
    description: The GPU Operator's MIG strategy.
    type: str
    default: single
  sharing_configs:
    description: The device-plugin sharing configs, as the C(gpuops.platform.gpu_sharing_configs) filter returns them.
    type: dict
    default: {}
  default_config:
    description: The device-plugin config of a node that names none.
    type: str
    default: ""
  labels:
    description: Labels of every GPU node (C(gpu_nodes_labels)); a host's C(gpu_nodes_host_labels) win.
    type: dict
    default: {}
  label_prefix:
    description: Prefix of the labels the collection owns (C(gpu_nodes_label_prefix)).
    type: str
    required: true
  taints:
    description: The taints of every GPU node, returned as they are in RV(nodes) (its C(taints)).
    type: list
    elements: dict
    default: []
  fleet_nodes:
    description: The C(nodes) of the fleet plan of the same run (C(gpuops_fleet_plan)); empty without one.
    type: dict
    default: {}
  render:
    description: The Node patches are rendered for GitOps (the annotations that turn pruning off for Argo CD and Flux).
    type: bool
    default: false
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.controller, gpuops.platform.attributes.read_only]
seealso:
  - module: gpuops.platform.recorded_facts
  - module: gpuops.platform.fleet_plan
"""

EXAMPLES = r"""
- name: Plan the GPU nodes
  gpuops.platform.gpu_nodes_plan:
    hosts: "{{ groups['gpu_nodes'] }}"
    label_prefix: platform.gpuops.io
    taints: [{key: gpu, value: "true", effect: NoSchedule}]
  register: planned
"""

RETURN = r"""
capacity:
  description: The C(gpuops.platform.gpu_capacity) filter's result for the GPU nodes (the role's C(gpuops_k8s_capacity)).
  returned: success
  type: dict
nodes:
  description: C(taints) (O(taints)), C(nodes) (C([{name, host, labels}]) of the nodes with GPUs) and C(objects)
    (their Node label patches); the role's C(gpuops_k8s_nodes).
  returned: success
  type: dict
  sample: {"taints": [], "nodes": [{"name": "gpu-01", "host": "gpu-01", "labels": {"platform.gpuops.io/gpu": "true"}}],
           "objects": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-01",
                                                                     "labels": {"platform.gpuops.io/gpu": "true"}}}]}
"""
