# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Thin filter over plugin_utils/k8s_apply.py: the render's count."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

k8s_apply = lazy_module("plugin_utils.k8s_apply")


def k8s_stats_add(stats, layers):
    """gpuops_k8s_stats with the rendered layers counted."""
    return k8s_apply.stats_add_rendered(stats, layers)


FilterModule = filter_module(
    k8s_stats_add,
)
