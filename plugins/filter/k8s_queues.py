# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Thin filters over plugin_utils/k8s_queues.py (Kueue, Volcano and KAI Scheduler queues)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

k8s_queues = lazy_module("plugin_utils.k8s_queues")


def kueue_plan(settings, capacity, nodes, tenants):
    """The Kueue plan (fleet, flavors, tenants, cluster_queues, errors) from the role's settings and the facts."""
    return k8s_queues.kueue_plan(settings, capacity, nodes, tenants)


def volcano_queues(queues, tenant_queues, tenants):
    """volcano_queues, then one queue per queue a tenant names that is not given."""
    return k8s_queues.volcano_queues(queues, tenant_queues, tenants)


def volcano_queue_errors(queues, tenants):
    """Every problem of the Volcano queues, one message each; empty when valid."""
    return k8s_queues.volcano_errors(queues, tenants)


def kai_queue_errors(queues):
    """Every problem of the KAI Scheduler queues, one message each; empty when valid."""
    return k8s_queues.kai_queue_errors(queues)


FilterModule = filter_module(
    kueue_plan,
    volcano_queues,
    volcano_queue_errors,
    kai_queue_errors,
)
