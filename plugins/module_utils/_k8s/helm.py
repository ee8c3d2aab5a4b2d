# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release).
"""Decide, per Helm release, what a run does: install, upgrade, nothing, or
first recover from an interrupted operation.

The state is what helm itself prints, whatever its storage driver: one
``helm list --all --all-namespaces -o json`` for every release of a run (the
latest revision of each: ``name``, ``namespace``, ``revision``, ``status``,
``chart`` as ``<name>-<version>``), ``helm get values -o json`` of a release
deployed at the wanted chart version (its user-supplied values, compared by
digest so that they never leave this module), and ``helm history -o json`` of a
release left pending (to find the revision to roll back to). The decision is a
pure function of those outputs, so it is tested on recorded ones.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re
from collections.abc import Mapping

from ansible.module_utils.common.text.converters import to_bytes, to_text

# Helm's release statuses (pkg/release/status.go), as helm prints them.
PENDING = ("pending-install", "pending-upgrade", "pending-rollback")
KNOWN = ("unknown", "deployed", "uninstalled", "superseded", "failed", "uninstalling") + PENDING
# Helm's release name rule (pkg/chartutil/validate_name.go), and a namespace (DNS label).
RELEASE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")


def check_release(release):
    """Raise ValueError unless ``release`` has a valid Helm release name and namespace (both reach a helm command line)."""
    if not isinstance(release, Mapping) or not release.get("name") or not release.get("namespace"):
        raise ValueError("a Helm release needs a name and a namespace, got %r" % (release,))
    name, namespace = to_text(release["name"]), to_text(release["namespace"])
    if len(name) > 53 or not RELEASE_NAME.match(name):
        raise ValueError("Helm release name %r is invalid: lower-case letters, digits, '-' and '.', "
                         "at most 53 characters (Helm's rule)" % (name,))
    if len(namespace) > 63 or not NAMESPACE.match(namespace):
        raise ValueError("Helm release %s: namespace %r is not a valid namespace name (a DNS label)" % (name, namespace))


def _canonical(value):
    """Values as helm keeps them (JSON; numbers as float64), so that 1 and 1.0 or tuples and lists are alike."""
    if isinstance(value, Mapping):
        return dict((to_text(k), _canonical(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, int):
        return value
    return to_text(value)


def values_digest(values):
    """``sha256:<hex>`` of a release's values (None is no values), the same for equal values however written."""
    text = json.dumps(_canonical(values if values is not None else {}), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(to_bytes(text)).hexdigest()


def wanted(release):
    """What the state read needs of a wanted release: never its values, only their digest."""
    check_release(release)
    digest = release.get("values_digest") or values_digest(release.get("values"))
    return {"name": to_text(release["name"]), "namespace": to_text(release["namespace"]),
            "chart": to_text(release.get("chart") or ""), "chart_version": to_text(release.get("chart_version") or ""),
            "values_digest": digest}


def list_args(releases):
    """``helm list`` arguments for these releases: every state, every namespace, only their names, no page limit."""
    names = sorted(set(re.escape(to_text(r["name"])) for r in releases))
    return ["list", "--all", "--all-namespaces", "--max", "0", "--filter", "^(?:%s)$" % "|".join(names), "-o", "json"]


def listed_by_release(listed):
    """``helm list -o json`` output (parsed) to ``{(namespace, name): entry}``."""
    if not isinstance(listed, list):
        raise ValueError("helm list printed %s, not a list of releases" % type(listed).__name__)
    return dict(((to_text(e.get("namespace")), to_text(e.get("name"))), e) for e in listed if isinstance(e, Mapping))


def _same_chart(release, entry):
    """Whether the listed revision runs the wanted chart and version (helm prints ``<name>-<version>``)."""
    version = to_text(release.get("chart_version") or "")
    chart = to_text(entry.get("chart") or "")
    if release.get("chart"):
        return bool(version) and chart == "%s-%s" % (to_text(release["chart"]), version)
    return bool(version) and chart.endswith("-" + version)


def needs(release, entry):
    """What else the decision needs to read of a listed release: ``values``, ``history`` or nothing (``""``)."""
    status = to_text((entry or {}).get("status") or "")
    if status == "deployed" and _same_chart(release, entry):
        return "values"
    if status in PENDING:
        return "history"
    return ""


def _cmd(release, *args):
    return "helm %s %s --namespace %s" % (args[0], " ".join((release["name"],) + args[1:]), release["namespace"])


def _recover(release, out, history, recover):
    """A pending (or uninstalling) release: roll back to the last deployed revision, or uninstall one that never deployed.

    Helm's maintainers' advice. A pending upgrade leaves the previous revision
    ``deployed``; ``superseded`` is the fallback for a rollback interrupted
    after its target was superseded.
    """
    state = out["state"]
    earlier = [h for h in sorted(history or [], key=lambda h: int(h.get("revision") or 0))
               if int(h.get("revision") or 0) < out["revision"] and h.get("status") in ("deployed", "superseded")]
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


def decide(release, listed=None, history=None, values=None, recover=True):
    """What to do with one release, given what helm printed about it.

    ``release``: name, namespace, chart, chart_version, and values (or their
    ``values_digest``). ``listed``: its entry of ``helm list --all -o json``
    (None when helm does not list it). ``history``: ``helm history -o json``,
    read for a pending release. ``values``: ``helm get values -o json`` ({} for
    helm's ``null``), read for a release deployed at the wanted chart version;
    None when not read. Returns ``{name, namespace, state, revision, recover,
    rollback_to, action, reason, command, chart}``: ``recover`` is ``""``,
    ``uninstall`` or ``rollback`` (to ``rollback_to``); ``action`` is
    ``install``, ``upgrade``, ``unchanged`` or ``fail`` (``reason`` says why,
    ``command`` is the helm command to run by hand).
    """
    check_release(release)
    out = {"name": to_text(release["name"]), "namespace": to_text(release["namespace"]), "state": "", "revision": 0,
           "recover": "", "rollback_to": 0, "action": "install", "reason": "", "command": "", "chart": ""}
    if not listed:
        out["reason"] = "not installed"
        return out
    state = to_text(listed.get("status") or "unknown")
    # The chart of the latest revision, as helm lists it (<name>-<version>): a chart upgrade is planned from it.
    out.update(state=state, revision=int(listed.get("revision") or 0), chart=to_text(listed.get("chart") or ""))
    if state == "uninstalled":
        out["reason"] = "uninstalled (history kept)"
        return out
    if state in PENDING or state == "uninstalling":
        return _recover(release, out, history, recover)
    if state not in KNOWN or state == "unknown":
        out.update(action="fail", command=_cmd(release, "history"),
                   reason="Helm release %s in namespace %s has status %r, which this collection does not handle: "
                          "inspect it with `%s`." % (release["name"], release["namespace"], state, _cmd(release, "history")))
        return out
    if state == "deployed" and needs(release, listed) == "values" and values is not None:
        wanted_digest = release.get("values_digest") or values_digest(release.get("values"))
        if values_digest(values) == wanted_digest:
            out.update(action="unchanged", reason="chart %s and values already deployed" % release["chart_version"])
            return out
    if state == "deployed":
        out.update(action="upgrade", reason="chart or values differ from revision %d" % out["revision"])
        return out
    # failed or superseded: Helm upgrades from these.
    out.update(action="upgrade", reason="%s at revision %d" % (state, out["revision"]))
    return out


ACTIONS = ("install", "upgrade", "rollback", "uninstall")


def action_args(action, release, timeout, values_file=None, wait=True):
    """The one helm command of an action on a release (``release``: name, namespace, chart_ref, chart_repo_url,
    chart_version, create_namespace, rollback_to), connection settings aside (environment variables).

    ``install`` and ``upgrade`` are one ``helm upgrade --install`` (as kubernetes.core.helm runs it: the values reset
    to the chart's and then the given file's), printing the release as JSON; ``rollback`` rolls back to
    ``rollback_to``; ``uninstall`` removes the release and its history. Each waits (``wait``) up to ``timeout``."""
    if action not in ACTIONS:
        raise ValueError("action must be one of %s, got %r" % (", ".join(ACTIONS), action))
    check_release(release)
    name, where = to_text(release["name"]), ["--namespace", to_text(release["namespace"])]
    waits = (["--wait"] if wait else []) + (["--timeout", to_text(timeout)] if timeout else [])
    if action == "uninstall":
        return ["uninstall", name] + where + waits
    if action == "rollback":
        target = int(release.get("rollback_to") or 0)
        if target < 1:
            raise ValueError("Helm release %s: a rollback needs the revision to roll back to (rollback_to), got %r"
                             % (name, release.get("rollback_to")))
        return ["rollback", name, str(target)] + where + waits
    if not release.get("chart_ref"):
        raise ValueError("Helm release %s: an %s needs chart_ref (a chart name, path or oci:// reference)" % (name, action))
    args = ["upgrade", "--install", name, to_text(release["chart_ref"])] + where
    if release.get("chart_version") and release.get("source") != "path":  # a chart from a path is the version it is
        args += ["--version", to_text(release["chart_version"])]
    if release.get("chart_repo_url"):
        args += ["--repo", to_text(release["chart_repo_url"])]
    if release.get("create_namespace"):
        args.append("--create-namespace")
    args += ["--reset-values"] + waits
    if values_file:
        args += ["--values", values_file]
    return args + ["-o", "json"]


def deployed(printed):
    """What a result may say of the release that ``helm upgrade --install -o json`` printed: name, namespace,
    revision, status, chart and version; never its values (``config``) or manifest."""
    if not isinstance(printed, Mapping):
        raise ValueError("helm printed %s, not a release" % type(printed).__name__)
    chart = ((printed.get("chart") or {}).get("metadata")) or {}
    return {"name": to_text(printed.get("name") or ""), "namespace": to_text(printed.get("namespace") or ""),
            "revision": int(printed.get("version") or 0), "status": to_text((printed.get("info") or {}).get("status") or ""),
            "chart": to_text(chart.get("name") or ""), "chart_version": to_text(chart.get("version") or "")}


def action_diff(action, release, plan):
    """The before/after block of an action (a task's ``diff``): the release as helm_releases found it (``plan``: state,
    revision) and as the action leaves it; chart and version only, never values (their digest neither)."""
    plan = plan or {}
    label = "Helm release %s/%s" % (to_text(release["namespace"]), to_text(release["name"]))
    before = {"status": to_text(plan.get("state") or "") or "not installed", "revision": int(plan.get("revision") or 0)}
    if action == "uninstall":
        after = {"status": "not installed"}
    elif action == "rollback":
        after = {"status": "deployed", "revision": int(release.get("rollback_to") or 0), "rolled back": True}
    else:
        after = {"status": "deployed", "chart": to_text(release.get("chart_ref") or ""),
                 "chart_version": to_text(release.get("chart_version") or ""), "values": "as given (not shown)"}
    if plan.get("reason"):
        after["reason"] = to_text(plan["reason"])
    return {"before": before, "after": after, "before_header": label, "after_header": "%s (%s)" % (label, action)}
