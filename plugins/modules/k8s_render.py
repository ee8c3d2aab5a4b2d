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
module: k8s_render
short_description: Write the rendered files of the Kubernetes layers for GitOps, and prune stale ones
version_added: 0.1.0
description:
  - Writes the files that render mode of the C(k8s_apply) role produces (C(<NN>-<layer>/manifests.yaml) and
    C(<NN>-<layer>/helm/<release>/release.yaml) and C(values.yaml)) in one step on the controller, each
    atomically and only where its content differs.
  - With O(prune=true), removes the render's own files under O(path) that neither O(files) nor O(keep) names, so
    a layer, release or object that is no longer planned does not linger in a GitOps repository. Other files
    there (a README, a kustomization) are never touched.
author:
  - gpuops.platform maintainers (@gpuops)
options:
  path:
    description:
      - The render folder. Created when missing.
    type: path
    required: true
  folder:
    description:
      - A layer's folder under O(path) (C(<NN>-<layer>)) that the paths in O(files) are relative to.
    type: str
    default: ""
  files:
    description:
      - The files to write, each with C(path) (relative to O(path), or to O(folder) when given; a name the render
        uses) and C(content).
    type: list
    elements: dict
    default: []
  prune:
    description:
      - Remove the render's files under O(path) that O(files) and O(keep) do not name.
    type: bool
    default: false
  keep:
    description:
      - With O(prune), rendered files (relative names) to keep besides O(files), for example those that other
        layers wrote earlier in the run.
    type: list
    elements: str
    default: []
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.controller, gpuops.platform.attributes.converge]
attributes:
  check_mode:
    details: Reports what would be written and removed without writing. The k8s_apply role runs it with
      C(check_mode=false), because the render folder is the output of a plan, not state on a host.
  diff_mode:
    details: Before and after text of every manifest written or removed.
notes:
  - One task writes a whole layer, where a copy loop costs a module run per file.
"""

EXAMPLES = r"""
- name: Write a layer's manifest
  gpuops.platform.k8s_render:
    path: /srv/gitops/gpu-platform
    folder: 30-gpu_nodes
    files:
      - path: manifests.yaml
        content: "{{ objects | gpuops.platform.k8s_manifest }}"

- name: Remove what this run no longer renders
  gpuops.platform.k8s_render:
    path: /srv/gitops/gpu-platform
    prune: true
    keep: "{{ gpuops_k8s_stats.layers | map(attribute='files') | flatten }}"
"""

RETURN = r"""
written:
  description: Files (relative to O(path)) written, or that would be in check mode, because they were missing or differed.
  returned: always
  type: list
  elements: str
  sample: [30-gpu_nodes/manifests.yaml]
removed:
  description: Rendered files (relative to O(path)) removed, or that would be in check mode.
  returned: always
  type: list
  elements: str
  sample: [60-kuberay/helm/kuberay-operator/values.yaml]
unchanged:
  description: How many of O(files) already had the wanted content.
  returned: always
  type: int
  sample: 3
path:
  description: The render folder.
  returned: always
  type: str
  sample: /srv/gitops/gpu-platform
"""
