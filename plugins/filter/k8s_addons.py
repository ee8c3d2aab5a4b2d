# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The add-on roles that are data only: defaults, argument specs and a template.

The k8s_addons role plans and applies each of them, so that cluster.yml never
lists them and a new add-on needs no task file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import yaml

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native, to_text

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module


def k8s_addon_roles(roles_dir):
    """Sorted names of the roles in ``roles_dir`` with no tasks whose defaults set ``<role>_manage_release``."""
    roles_dir = to_text(roles_dir)
    if not os.path.isdir(roles_dir):
        raise AnsibleFilterError("k8s_addon_roles: %s is not a folder of roles" % roles_dir)
    out = []
    for name in sorted(os.listdir(roles_dir)):
        base = os.path.join(roles_dir, name)
        defaults = os.path.join(base, "defaults", "main.yml")
        if os.path.isdir(os.path.join(base, "tasks")) or not os.path.isfile(defaults):
            continue
        try:
            with open(defaults, "rb") as handle:
                data = yaml.safe_load(handle) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise AnsibleFilterError("k8s_addon_roles: cannot read %s: %s" % (defaults, to_native(exc)))
        if isinstance(data, dict) and name + "_manage_release" in data:
            out.append(name)
    return out


FilterModule = filter_module(
    k8s_addon_roles,
)
