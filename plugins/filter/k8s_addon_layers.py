# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Thin filters over plugin_utils/k8s_addons.py: the enabled add-ons' templates and layers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native, to_text

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

k8s_addons = lazy_module("plugin_utils.k8s_addons")


def k8s_addon_templates(roles, enabled, roles_dir):
    """``{role: objects template path or ""}`` of the enabled add-on roles."""
    try:
        return k8s_addons.templates(roles, enabled, to_text(roles_dir))
    except ValueError as exc:
        raise AnsibleFilterError(to_native(exc))


def k8s_addon_layers(role_templates, values):
    """One k8s_apply layer per enabled add-on role."""
    try:
        return k8s_addons.layers(role_templates, values)
    except ValueError as exc:
        raise AnsibleFilterError(to_native(exc))


FilterModule = filter_module(
    k8s_addon_templates,
    k8s_addon_layers,
)
