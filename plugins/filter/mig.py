# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Thin filter over plugin_utils/mig_disruption.py: what a node's MIG plan does to it, as the fleet plan says."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

decision = lazy_module("plugin_utils.mig_disruption")


def mig_disruption(result):
    """``{drain, gpu_reset}`` of the nvidia_mig module's result (its ``changed`` and ``plan``)."""
    if not isinstance(result, Mapping) or not isinstance(result.get("plan"), Mapping):
        raise AnsibleFilterError("mig_disruption needs the registered result of gpuops.platform.nvidia_mig, got %r"
                                 % (result,))
    plan = result["plan"]
    return decision.mig_disruption(result.get("changed"), plan.get("valid", True), plan.get("gpus"))


FilterModule = filter_module(
    mig_disruption,
)
