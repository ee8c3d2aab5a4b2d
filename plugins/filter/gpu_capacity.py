# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Thin filters over plugin_utils/gpu_capacity.py, the one capacity model (the fleet planner uses it too)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_function

_CAPACITY = "plugin_utils.gpu_capacity"
gpu_capacity = lazy_function(_CAPACITY, "gpu_capacity")
gpu_sharing_configs = lazy_function(_CAPACITY, "gpu_sharing_configs")
gpu_product_label = lazy_function(_CAPACITY, "gpu_product_label")
gpu_quota_check = lazy_function(_CAPACITY, "gpu_quota_check")
gpu_tolerations = lazy_function(_CAPACITY, "gpu_tolerations")
gpu_tenant_quota = lazy_function(_CAPACITY, "gpu_tenant_quota")
gpu_allocatable_diff = lazy_function(_CAPACITY, "gpu_allocatable_diff")
gpu_nodes_allocatable = lazy_function(_CAPACITY, "gpu_nodes_allocatable")
gpu_tenants_plan = lazy_function(_CAPACITY, "gpu_tenants_plan")
gpu_dra_driver_check = lazy_function(_CAPACITY, "gpu_dra_driver_check")
gpu_plan_refusal = lazy_function("plugin_utils.variable_types", "plan_refusal", "gpu_plan_refusal")

FilterModule = filter_module(
    gpu_capacity,
    gpu_sharing_configs,
    gpu_product_label,
    gpu_quota_check,
    gpu_tolerations,
    gpu_tenant_quota,
    gpu_allocatable_diff,
    gpu_nodes_allocatable,
    gpu_tenants_plan,
    gpu_dra_driver_check,
    gpu_plan_refusal,
)
