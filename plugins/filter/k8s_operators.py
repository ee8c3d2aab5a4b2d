# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Thin filters over plugin_utils/k8s_operators.py (values of NVIDIA's operators)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

k8s_operators = lazy_module("plugin_utils.k8s_operators")


def gpu_operator_registry_values(repositories, registry, components, pull_secrets):
    """Dotted GPU Operator values moving nvcr.io images to a registry and adding pull secrets."""
    return k8s_operators.registry_values(repositories, registry, components, pull_secrets)


def rdma_shared_device_config(resources):
    """The RDMA shared device plugin's configList for network_operator_rdma_resources."""
    return k8s_operators.rdma_config(resources)


FilterModule = filter_module(
    gpu_operator_registry_values,
    rdma_shared_device_config,
)
