# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Decide, per Helm release, what a run does: install, upgrade, nothing, or
first recover from an interrupted operation.

The state comes from Helm's own storage (one Secret per revision, labelled
``owner=helm,name=<release>``; Helm's default ``secrets`` driver), read with one
API call for all the releases of a run (or one per release). Each Secret holds the release exactly as
``helm status -o json`` prints that revision; the history entries are built
as ``helm history -o json`` prints them. The decision itself is a pure
function of those two documents, so it is tested on recorded outputs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import gzip
import json
import re
import zlib
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module

# Helm's release statuses (pkg/release/status.go).
PENDING = ("pending-install", "pending-upgrade", "pending-rollback")
KNOWN = ("unknown", "deployed", "uninstalled", "superseded", "failed", "uninstalling") + PENDING
# Helm's release name rule (pkg/chartutil/validate_name.go), and a namespace (DNS label).
RELEASE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _decode_storage(secret):
    """One Helm storage Secret to its release: base64 (the Secret's own) of base64 of gzip of JSON."""
    name = (secret.get("metadata") or {}).get("name", "?")
    data = (secret.get("data") or {}).get("release")
    if not data:
        raise AnsibleFilterError("Helm storage Secret %s has no data.release" % name)
    try:
        raw = base64.b64decode(base64.b64decode(data))
        if raw[:3] == b"\x1f\x8b\x08":  # Helm gzips; older releases may be plain JSON
            raw = gzip.decompress(raw)
        return json.loads(raw)
    except (binascii.Error, ValueError, OSError, EOFError, zlib.error) as exc:
        raise AnsibleFilterError("Helm storage Secret %s cannot be decoded: %s" % (name, exc))


def _history_entry(release):
    """A release as ``helm history -o json`` lists it (cmd/helm/history.go, releaseHistory)."""
    info = release.get("info") or {}
    meta = (release.get("chart") or {}).get("metadata") or {}
    return {
        "revision": int(release.get("version") or 0),
        "updated": info.get("last_deployed") or "",
        "status": info.get("status") or "unknown",
        "chart": "%s-%s" % (meta.get("name", ""), meta.get("version", "")),
        "app_version": meta.get("appVersion", ""),
        "description": info.get("description", ""),
    }


def k8s_helm_state(secrets):
    """Helm storage Secrets of one release to ``{"history": [...], "status": <latest release>}``.

    ``history`` is what ``helm history -o json`` prints; ``status`` what
    ``helm status -o json`` prints (the latest revision), or None when the
    release does not exist.
    """
    releases = [_decode_storage(s) for s in secrets or []
                if ((s.get("metadata") or {}).get("labels") or {}).get("owner") == "helm"]
    releases.sort(key=lambda r: int(r.get("version") or 0))
    return {"history": [_history_entry(r) for r in releases], "status": releases[-1] if releases else None}


def _normal(value):
    """Values as Helm stores them (JSON), so that 1 and 1.0 or tuples and lists compare alike."""
    return json.loads(json.dumps(value if value is not None else {}, sort_keys=True, default=to_text))


def _cmd(release, *args):
    return "helm %s %s --namespace %s" % (args[0], " ".join((release["name"],) + args[1:]), release["namespace"])


def k8s_helm_decide(release, history, status=None, recover=True):
    """What to do with one release, given ``helm history -o json`` and ``helm status -o json``.

    ``release`` is a k8s_helm_release result (name, namespace, chart,
    chart_version, values). Returns ``{name, namespace, state, revision,
    recover, rollback_to, action, reason, command}`` where ``recover`` is
    ``""``, ``uninstall`` (a release that never deployed) or ``rollback`` (to
    ``rollback_to``, the last deployed revision), and ``action`` is
    ``install``, ``upgrade``, ``unchanged`` or ``fail`` (with ``reason`` and the
    helm ``command`` to run by hand).
    """
    if not isinstance(release, Mapping) or not release.get("name") or not release.get("namespace"):
        raise AnsibleFilterError("k8s_helm_decide needs a release with name and namespace, got %r" % (release,))
    # Both reach a label selector and a helm command line.
    if len(release["name"]) > 53 or not RELEASE_NAME.match(release["name"]):
        raise AnsibleFilterError("Helm release name %r is invalid: lower-case letters, digits, '-' and '.', "
                                 "at most 53 characters (Helm's rule)" % (release["name"],))
    if len(release["namespace"]) > 63 or not NAMESPACE.match(release["namespace"]):
        raise AnsibleFilterError("Helm release %s: namespace %r is not a valid namespace name (a DNS label)"
                                 % (release["name"], release["namespace"]))
    entries = sorted(history or [], key=lambda h: int(h.get("revision") or 0))
    out = {"name": release["name"], "namespace": release["namespace"], "state": "", "revision": 0,
           "recover": "", "rollback_to": 0, "action": "install", "reason": "", "command": ""}
    if not entries:
        out["reason"] = "not installed"
        return out
    latest = entries[-1]
    state = latest.get("status") or "unknown"
    out.update(state=state, revision=int(latest.get("revision") or 0))
    if state == "uninstalled":
        out["reason"] = "uninstalled (history kept)"
        return out
    if state in PENDING or state == "uninstalling":
        # Helm's maintainers' advice: roll back to the last deployed revision,
        # or uninstall a release that never deployed. A pending upgrade leaves
        # the previous revision `deployed`; `superseded` is the fallback for a
        # rollback interrupted after its target was superseded.
        earlier = [h for h in entries[:-1] if h.get("status") in ("deployed", "superseded")]
        deployed = [h for h in earlier if h.get("status") == "deployed"] or earlier
        if state != "uninstalling" and deployed:
            target = int(deployed[-1]["revision"])
            out.update(recover="rollback", rollback_to=target, action="upgrade",
                       command=_cmd(release, "rollback", str(target)),
                       reason="%s at revision %d: rolled back to revision %d" % (state, out["revision"], target))
        else:
            out.update(recover="uninstall", action="install", command=_cmd(release, "uninstall"),
                       reason="%s at revision %d and never deployed: uninstalled" % (state, out["revision"]))
        if not recover:
            out.update(action="fail", reason=(
                "Helm release %s in namespace %s is %s (revision %d): an earlier Helm operation was interrupted, and "
                "every install or upgrade fails until it is cleared. Run `%s`, or set gpuops_k8s_helm_recover: true "
                "to let the run do it." % (release["name"], release["namespace"], state, out["revision"], out["command"])))
        return out
    if state not in KNOWN or state == "unknown":
        out.update(action="fail", command="helm history %s --namespace %s" % (release["name"], release["namespace"]),
                   reason="Helm release %s in namespace %s has status %r, which this collection does not handle: "
                          "inspect it with `helm history %s --namespace %s`."
                          % (release["name"], release["namespace"], state, release["name"], release["namespace"]))
        return out
    if state == "deployed" and status:
        meta = (status.get("chart") or {}).get("metadata") or {}
        same_chart = not release.get("chart") or meta.get("name") == release.get("chart")
        if same_chart and to_text(meta.get("version")) == to_text(release.get("chart_version")) \
                and _normal(status.get("config")) == _normal(release.get("values")):
            out.update(action="unchanged", reason="chart %s and values already deployed" % meta.get("version"))
            return out
        out.update(action="upgrade", reason="chart or values differ from revision %d" % out["revision"])
        return out
    # failed, superseded (or deployed without its document): Helm upgrades from these.
    out.update(action="upgrade", reason="%s at revision %d" % (state, out["revision"]))
    return out


def k8s_helm_plans(releases, lookups, recover=True):
    """One decision per release from Helm's storage Secrets.

    ``lookups`` is either the registered loop of one lookup per release (same
    order), or one lookup of every release's Secrets at once (a k8s_info
    result, ``owner=helm,name in (...)`` across namespaces), split here by the
    Secrets' namespace and ``name`` label.
    """
    if isinstance(lookups, Mapping) and "results" not in lookups and "resources" in lookups:
        found = {}
        for secret in lookups.get("resources") or []:
            meta = secret.get("metadata") or {}
            key = (meta.get("namespace"), (meta.get("labels") or {}).get("name"))
            found.setdefault(key, []).append(secret)
        lookups = [{"resources": found.get((to_text((r or {}).get("namespace")), to_text((r or {}).get("name"))), [])}
                   for r in releases or []]
    results = (lookups or {}).get("results", lookups) if isinstance(lookups, Mapping) else lookups
    results = list(results or [])
    if len(results) != len(releases or []):
        raise AnsibleFilterError("k8s_helm_plans: %d releases but %d lookups" % (len(releases or []), len(results)))
    plans = []
    for release, lookup in zip(releases or [], results):
        state = k8s_helm_state((lookup or {}).get("resources") or [])
        plans.append(k8s_helm_decide(release, state["history"], state["status"], recover))
    return plans


FilterModule = filter_module(
    k8s_helm_state,
    k8s_helm_decide,
    k8s_helm_plans,
)
