# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The objects of the data-only add-on roles that k8s_addons plans.

Ansible renders each enabled add-on's ``templates/objects.yml.j2`` (a template
needs the play's variables); these functions pick the templates and key the
rendered objects by role.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

OBJECTS_TEMPLATE = os.path.join("templates", "objects.yml.j2")


def templates(roles, enabled, roles_dir):
    """``{role: path of its objects template, or "" without one}`` for each role whose switch in ``enabled`` is on.

    ``enabled`` holds each role's ``<role>_enabled``, as booleans, in the order of ``roles``.
    """
    if len(roles) != len(enabled):
        raise ValueError("k8s_addon_templates: %d roles but %d switches" % (len(roles), len(enabled)))
    out = {}
    for role, on in zip(roles, enabled):
        if on:
            path = os.path.join(roles_dir, role, OBJECTS_TEMPLATE)
            out[role] = path if os.path.isfile(path) else ""
    return out


def objects(role_templates, rendered):
    """``{role: objects}``: the rendered objects of each template in turn, none for a role without one.

    ``rendered`` holds one list of objects per non-empty path of
    ``role_templates``, in order; empty documents are dropped.
    """
    paths = [path for path in role_templates.values() if path]
    if len(paths) != len(rendered):
        raise ValueError("k8s_addon_objects: %d templates but %d rendered" % (len(paths), len(rendered)))
    documents = iter(rendered)
    return dict((role, [o for o in next(documents) if o] if path else []) for role, path in role_templates.items())
