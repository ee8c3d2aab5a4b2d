# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The layers of the data-only add-on roles that k8s_addons plans.

Each enabled add-on is one k8s_apply layer: its objects come from its
``templates/objects.yml.j2`` (rendered by k8s_apply with every other layer's),
its checks from its ``<role>__refuse``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.module_utils.parsing.convert_bool import boolean

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


# The variables of each enabled add-on that its layer reads, in this order (k8s_addon_layers).
LAYER_VARIABLES = ["_layer_order", "_manage_release", "__wait_crds", "__refuse"]


def layers(role_templates, values):
    """One k8s_apply layer per enabled add-on of ``role_templates`` (templates(), ``{role: path or ""}``), in that order.

    ``values`` holds each role's LAYER_VARIABLES in turn (``[]`` for a ``__wait_crds`` or ``__refuse`` the role
    does not have): the layer's order, whether the role manages its release (then its release, from the role's
    release variables, and the chart CRDs its objects need, waited for), whether a template makes its objects,
    and its errors (a non-empty ``__refuse``: why its settings cannot work with the rest of the plan).
    """
    roles = list(role_templates)
    width = len(LAYER_VARIABLES)
    if len(values) != len(roles) * width:
        raise ValueError("k8s_addon_layers: %d values for %d add-ons (%s of each)"
                         % (len(values), len(roles), ", ".join(LAYER_VARIABLES)))
    out = []
    for index, role in enumerate(roles):
        order, manage, wait_crds, refuse = values[index * width:(index + 1) * width]
        out.append({"layer": role, "order": order, "release_from": role, "template": bool(role_templates[role]),
                    "wait_crds": list(wait_crds or []) if boolean(manage, strict=False) else [],
                    "errors": [refuse] if refuse else []})
    return out
