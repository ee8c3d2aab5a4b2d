# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): taints of several nodes in one run.
"""Merge taints into the taints of several Nodes, each guarded by the resourceVersion it was read at.

A Node's ``spec.taints`` is an atomic list (no patch merge key): a patch
replaces it whole. So each node is read, the wanted taints are merged into its
own as kubernetes.core.k8s_taint merges them (a taint is its key and effect; a
wanted value replaces the node's), and the whole list goes back in a JSON merge
patch that carries the resourceVersion read. A taint that another controller
changed in between makes the server answer 409 Conflict instead of losing it;
the node is then read and merged again.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# A Node's name is a DNS subdomain (RFC 1123, as Kubernetes validates it): ASCII only, matched whole.
NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z", re.ASCII)
# A node whose taints keep changing under us (another controller writing them) stops the run, named.
ATTEMPTS = 5


class TaintError(Exception):
    """Bad input or a node that cannot be tainted: the message says which and what to do."""


def _text(value):
    return isinstance(value, str) and value == value.strip() and "\x00" not in value


def check_taints(taints):
    """``taints`` as a list of ``{key, value, effect}`` (value "" when unset), or TaintError naming the bad one."""
    if not isinstance(taints, list) or not taints:
        raise TaintError("taints must be a non-empty list of {key, value, effect}, got %r" % (taints,))
    out, seen = [], set()
    for number, taint in enumerate(taints, 1):
        if not isinstance(taint, dict):
            raise TaintError("taint %d must be a mapping of key, value and effect, got %r" % (number, taint))
        unknown = sorted(set(taint) - {"key", "value", "effect"})
        if unknown:
            raise TaintError("taint %d has unknown field(s) %s: a taint has key, value and effect" % (number, ", ".join(unknown)))
        key, value, effect = taint.get("key"), taint.get("value"), taint.get("effect")
        if not _text(key) or not key:
            raise TaintError("taint %d: key must be a non-empty string without surrounding whitespace, got %r" % (number, key))
        if value is not None and not _text(value):
            raise TaintError("taint %d (%s): value must be a string without surrounding whitespace, got %r" % (number, key, value))
        if effect not in EFFECTS:
            raise TaintError("taint %d (%s): effect must be one of %s, got %r" % (number, key, ", ".join(EFFECTS), effect))
        if (key, effect) in seen:
            raise TaintError("taint %d repeats %s:%s: a node holds one taint per key and effect" % (number, key, effect))
        seen.add((key, effect))
        out.append({"key": key, "value": value or "", "effect": effect})
    return out


def check_names(names):
    """``names`` as a list of node names without repeats, or TaintError."""
    if not isinstance(names, list):
        raise TaintError("nodes must be a list of node names, got %r" % (names,))
    for name in names:
        if not isinstance(name, str) or len(name) > 253 or not NODE_NAME.match(name):
            raise TaintError("nodes: %r is not a node name (a DNS subdomain: lowercase ASCII letters, digits, '-' "
                             "and '.')" % (name,))
    repeated = sorted(set(n for n in names if names.count(n) > 1))
    if repeated:
        raise TaintError("nodes: %s named more than once" % ", ".join(repeated))
    return names


def _same(a, b):
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")


def merged(existing, wanted, state="present"):
    """The node's new taint list, or None when ``existing`` needs no change.

    present: each wanted taint is added, or replaces the value of the node's taint with its key and effect; the
    node's other taints stay, in their order. absent: the node's taints with a wanted key and effect go.
    """
    existing = list(existing or [])
    if state == "absent":
        kept = [t for t in existing if not any(_same(t, w) for w in wanted)]
        return kept if len(kept) != len(existing) else None
    out, changed = [], False
    for taint in existing:
        match = [w for w in wanted if _same(taint, w)]
        if match and (taint.get("value") or "") != match[0]["value"]:
            taint, changed = dict(taint, value=match[0]["value"]), True
        out.append(taint)
    for want in wanted:
        if not any(_same(t, want) for t in existing):
            out.append(dict((k, v) for k, v in want.items() if k != "value" or v))
            changed = True
    return out if changed else None


def read_already(listed):
    """``{name: Node}`` of the Nodes read already (each with its metadata.resourceVersion, the guard of its patch);
    one without a name or a resourceVersion is left out, to be read."""
    out = {}
    for node in listed or []:
        meta = (node.get("metadata") or {}) if isinstance(node, dict) else {}
        if isinstance(meta, dict) and meta.get("name") and meta.get("resourceVersion"):
            out[meta["name"]] = node
    return out


def converge(get, patch, names, taints, state="present", check_mode=False, conflict=Exception, listed=None):
    """Read every named node, then patch those whose taints differ.

    ``get(name)`` returns the Node or None; ``patch(name, body)`` raises ``conflict`` on a 409. Every node is
    read before any is patched, so a missing one changes nothing. ``listed``: Nodes read already (a label apply's
    answers): a named node found there is not read again (its patch carries the resourceVersion it holds, so a
    change since is a 409 and a read, as always). Returns one ``{name, changed, before, after}`` per node, in the
    order given.
    """
    known = read_already(listed)
    nodes = dict((name, known[name] if name in known else get(name)) for name in names)
    missing = [name for name in names if nodes[name] is None]
    if missing:
        raise TaintError("Node(s) %s not found: nothing was tainted. Is the node's inventory name its Kubernetes "
                         "node name?" % ", ".join(missing))
    results = []
    for name in names:
        node = nodes[name]
        before = ((node.get("spec") or {}).get("taints")) or []
        after = merged(before, taints, state)
        for _attempt in range(ATTEMPTS):
            if after is None or check_mode:
                break
            body = {"metadata": {"resourceVersion": (node.get("metadata") or {}).get("resourceVersion")},
                    "spec": {"taints": after}}
            try:
                patch(name, body)
                break
            except conflict:
                node = get(name)
                if node is None:
                    raise TaintError("Node %s was deleted while its taints were being written" % name)
                before = ((node.get("spec") or {}).get("taints")) or []
                after = merged(before, taints, state)
        else:
            raise TaintError("Node %s changed %d times while its taints were being written (another controller "
                             "writes them): run again" % (name, ATTEMPTS))
        results.append({"name": name, "changed": after is not None, "before": before,
                        "after": before if after is None else after})
    return results
