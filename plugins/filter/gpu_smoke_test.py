# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Thin filters over plugin_utils/gpu_smoke_test.py (the smoke tests' nodes, pods and verdicts)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

smoke = lazy_module("plugin_utils.gpu_smoke_test")


def gpu_smoke_test_api_nodes(nodes):
    """The Nodes the API server lists that advertise an NVIDIA resource."""
    return smoke.api_nodes(nodes)


def gpu_smoke_test_results(read, settings):
    """The verdict of every smoke test, and the totals."""
    return smoke.results(read, settings)


def gpu_smoke_test_cuda_pods(nodes, mig_strategy, gpu_resource):
    """One CUDA pod per node, and per MIG resource under the mixed strategy."""
    return smoke.cuda_pods(nodes, mig_strategy, gpu_resource)


def gpu_smoke_test_summary(results):
    """The smoke tests' totals and one line per test."""
    return smoke.summary(results)


def gpu_smoke_test_plan_nodes(capacity, node_plan=None):
    """The GPU nodes of the capacity plan that the smoke tests run on."""
    return smoke.plan_nodes(capacity, node_plan)


FilterModule = filter_module(
    gpu_smoke_test_api_nodes,
    gpu_smoke_test_results,
    gpu_smoke_test_cuda_pods,
    gpu_smoke_test_summary,
    gpu_smoke_test_plan_nodes,
)
