# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Tolerations for the taints on GPU nodes.

Every workload and add-on that must run on GPU nodes (Kueue flavors, Ray
workers, the DRA kubelet plugin, the Network Operator's daemons, smoke tests)
tolerates the taints the ``gpu_nodes`` role puts on them, so changing
``gpu_nodes_taints`` never strands them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

from collections.abc import Mapping

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

DOCUMENTATION = r"""
name: gpu_tolerations
short_description: Tolerations for the taints on GPU nodes
description:
  - Turns node taints (C(key), C(value), C(effect)) into tolerations with operator C(Exists) for the same key and
    effect, followed by C(extra) tolerations, without duplicates and in a stable order.
author: gpuops.platform maintainers
positional: extra
options:
  _input:
    description: Taints, for example C(gpuops_k8s_nodes.taints) from the gpu_nodes plan.
    type: list
    elements: dict
    required: true
  extra:
    description: Tolerations to add as they are.
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: Tolerate the GPU node taints and nvidia.com/gpu
  ansible.builtin.debug:
    msg: "{{ [{'key': 'gpu', 'value': 'true', 'effect': 'NoSchedule'}] | gpuops.platform.gpu_tolerations([{'key': 'nvidia.com/gpu', 'operator': 'Exists'}]) }}"
"""

RETURN = r"""
_value:
  description: The tolerations.
  type: list
  elements: dict
"""


def gpu_tolerations(taints, extra=None):
    """Tolerations (operator Exists) for ``taints``, then ``extra``, each once."""
    out = []
    for taint in taints or []:
        if not isinstance(taint, Mapping) or not taint.get("key"):
            raise AnsibleFilterError("each taint must be a mapping with a key, got %r" % (taint,))
        effect = taint.get("effect")
        if effect and effect not in EFFECTS:
            raise AnsibleFilterError("taint %s: effect must be one of %s, got %r" % (taint["key"], ", ".join(EFFECTS), effect))
        toleration = {"key": to_text(taint["key"]), "operator": "Exists"}
        if effect:
            toleration["effect"] = to_text(effect)
        if toleration not in out:
            out.append(toleration)
    for toleration in extra or []:
        if not isinstance(toleration, Mapping):
            raise AnsibleFilterError("each toleration must be a mapping, got %r" % (toleration,))
        if dict(toleration) not in out:
            out.append(dict(toleration))
    return out


class FilterModule(object):
    def filters(self):
        return {"gpu_tolerations": gpu_tolerations}
