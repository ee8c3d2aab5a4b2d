# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Thin filters over plugin_utils/gpu_monitoring.py (the gpu_monitoring plan, the adapter's rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

gpu_alerts = lazy_module("plugin_utils.gpu_alerts")
gpu_dashboards = lazy_module("plugin_utils.gpu_dashboards")
plan = lazy_module("plugin_utils.gpu_monitoring")


def gpu_monitoring_errors(settings, alert_names, autoscalers, adapter_enabled):
    """Every problem of the gpu_monitoring settings, one message each; empty when valid."""
    return plan.errors(settings, alert_names, autoscalers, adapter_enabled)


def gpu_monitoring_autoscalers(entries, tenants):
    """gpu_monitoring_autoscalers with each tenant resolved to its namespace and the defaults filled in."""
    return plan.autoscalers(entries, tenants)


def gpu_monitoring_rule_groups(settings):
    """The PrometheusRule groups of gpu_monitoring: recording rules, then the enabled alerts."""
    return gpu_alerts.rule_groups(settings)


def gpu_monitoring_dashboards(names, node_label):
    """The Grafana dashboards of gpu_monitoring, by name."""
    return gpu_dashboards.dashboards(names, node_label)


def prometheus_adapter_rules(metrics=None):
    """prometheus-adapter custom rules for the recording rules of gpu_monitoring."""
    return plan.adapter_rules(metrics)


FilterModule = filter_module(
    gpu_monitoring_errors,
    gpu_monitoring_autoscalers,
    gpu_monitoring_rule_groups,
    gpu_monitoring_dashboards,
    prometheus_adapter_rules,
)
