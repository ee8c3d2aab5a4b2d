# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""k8s_apply's decisions: the release an add-on role's variables describe, and the count of the rendered layers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.parsing.convert_bool import boolean

# The <prefix>_* variables of an add-on role that describe its release, in the order k8s_apply reads them.
RELEASE_SUFFIXES = ["_manage_release", "_release_name", "_namespace", "_chart_ref", "_chart_version",
                    "_chart_repo_url", "_chart_path"]


def role_release(role_vars, objects):
    """The release an add-on role describes, as a list of one; empty when the role manages none.

    ``role_vars`` holds the role's release variables by suffix (RELEASE_SUFFIXES) and
    ``values``: its chart values. Helm creates the namespace only when the layer's
    objects do not (with its labels).
    """
    if not boolean(role_vars["_manage_release"], strict=False):
        return []
    namespaces = [o.get("metadata", {}).get("name") for o in objects or [] if o.get("kind") == "Namespace"]
    return [{"name": role_vars["_release_name"],
             "namespace": role_vars["_namespace"],
             "chart": role_vars["_chart_ref"],
             "version": str(role_vars["_chart_version"]),
             "repo_url": role_vars["_chart_repo_url"],
             "chart_path": role_vars["_chart_path"],
             "create_namespace": role_vars["_namespace"] not in namespaces,
             "values": role_vars["values"]}]


def stats_add_layer(stats, layer):
    """gpuops_k8s_stats with one more rendered layer: the layer's entry, and its objects and releases in the totals.

    ``layer``: ``name``, ``order``, ``objects`` (a count), ``releases`` (the names) and ``files``.
    """
    stats = dict(stats or {})
    entry = {"name": layer["name"], "order": int(layer["order"]), "objects": int(layer["objects"]),
             "releases": list(layer["releases"]), "files": list(layer["files"])}
    stats.update({"layers": list(stats.get("layers") or []) + [entry],
                  "objects": int(stats.get("objects") or 0) + entry["objects"],
                  "releases": int(stats.get("releases") or 0) + len(entry["releases"])})
    return stats


def stats_add_rendered(stats, layers):
    """gpuops_k8s_stats with the rendered ``layers`` (k8s_layers entries with ``render``) counted.

    Each becomes a layer entry (name, order, the object count, the release names and the files written,
    relative to the render folder), in the order given.
    """
    for layer in layers or []:
        stats = stats_add_layer(stats, {
            "name": layer["layer"], "order": layer["order"], "objects": layer["objects"],
            "releases": [release["name"] for release in layer.get("releases") or []],
            "files": ["%s/%s" % (layer["folder"], f["path"]) for f in layer.get("files") or []]})
    return stats
