# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Thin filters over plugin_utils/k8s_apply.py (an add-on role's release, the render's count)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.platform.plugins.plugin_utils import k8s_apply
from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module


def k8s_role_release(role_vars, objects):
    """The release an add-on role's variables describe, as a list of one; empty when it manages none."""
    return k8s_apply.role_release(role_vars, objects)


def k8s_stats_add(stats, layer):
    """gpuops_k8s_stats with one more rendered layer."""
    return k8s_apply.stats_add_layer(stats, layer)


FilterModule = filter_module(
    k8s_role_release,
    k8s_stats_add,
)
