# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""ApplySet membership of a layer's objects (see module_utils/_k8s/applyset.py).

Rendered and applied objects both carry the label, so the two stay equal.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

aset = lazy_module("module_utils._k8s.applyset")


def k8s_applyset_id(name, namespace):
    """The id of the ApplySet whose parent is Secret <namespace>/<name>."""
    return aset.applyset_id(to_text(name), to_text(namespace))


def k8s_applyset_members(objects, name, namespace):
    """The objects, each labelled ``applyset.kubernetes.io/part-of`` (Nodes are never members)."""
    for obj in objects or []:
        if not isinstance(obj, Mapping):
            raise AnsibleFilterError("k8s_applyset_members: every object must be a mapping, got %r" % (obj,))
    return aset.with_membership(objects, k8s_applyset_id(name, namespace))


def k8s_applyset_identities(objects):
    """Only what identifies each object (apiVersion, kind, name, namespace): no data reaches the module's arguments."""
    out = []
    for obj in objects or []:
        meta = obj.get("metadata") or {}
        ident = {"name": meta.get("name")}
        if meta.get("namespace"):
            ident["namespace"] = meta["namespace"]
        out.append({"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": ident})
    return out


FilterModule = filter_module(
    k8s_applyset_id,
    k8s_applyset_members,
    k8s_applyset_identities,
)
