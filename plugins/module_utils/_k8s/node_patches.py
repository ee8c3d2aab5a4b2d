# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): planned merge patches of several nodes.
"""JSON merge patches of several Nodes, as a plan made them, in one run.

Each patch goes out as planned. One that carries ``metadata.resourceVersion``
(a plan that replaces the atomic taint list does) is refused by the server with
409 Conflict when the node changed since the plan read it; that node is named
and left for the next run, which plans it again. Every patch is checked before
the first is sent.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.platform.plugins.module_utils._k8s.node_taints import TaintError, check_names

# A plan nests labels, annotations and spec fields; deeper input is not a plan.
MAX_DEPTH = 8


class PatchError(Exception):
    """Bad input: the message names the patch and what is wrong."""


def _depth(value, level=0):
    if level > MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max([_depth(v, level + 1) for v in value.values()] or [level])
    if isinstance(value, list):
        return max([_depth(v, level + 1) for v in value] or [level])
    return level


def check_patches(patches):
    """``patches`` as ``[(name, patch)]``, or PatchError naming the first bad one."""
    if not isinstance(patches, list):
        raise PatchError("patches must be a list of {name, patch}, got %r" % (patches,))
    out = []
    for number, item in enumerate(patches, 1):
        if not isinstance(item, dict) or sorted(item) != ["name", "patch"]:
            raise PatchError("patch %d must be a mapping of exactly name and patch, got %r" % (number, item))
        patch = item["patch"]
        if not isinstance(patch, dict) or not patch:
            raise PatchError("patch %d (%r): patch must be a non-empty mapping, got %r" % (number, item["name"], patch))
        unknown = sorted(set(patch) - {"metadata", "spec"})
        if unknown:
            raise PatchError("patch %d (%r) sets %s: a node patch sets metadata and spec only"
                             % (number, item["name"], ", ".join(unknown)))
        if _depth(patch) > MAX_DEPTH:
            raise PatchError("patch %d (%r) nests deeper than %d levels" % (number, item["name"], MAX_DEPTH))
        out.append((item["name"], patch))
    try:
        check_names([name for name, _patch in out])
    except TaintError as exc:
        raise PatchError(str(exc))
    return out


def apply(patch, patches, conflict, missing):
    """Send each ``(name, patch)`` through ``patch(name, body)``, which raises ``conflict`` on a 409 and ``missing``
    on a 404. Returns ``(patched, refused)``: the names patched, and ``{name: reason}`` of those the server refused."""
    patched, refused = [], {}
    for name, body in patches:
        try:
            patch(name, body)
        except conflict:
            refused[name] = "changed since the plan read it"
        except missing:
            refused[name] = "not found"
        else:
            patched.append(name)
    return patched, refused
