# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""k8s_apply's chart upgrades: which releases move to another chart version, what that brings, and what refuses it.

A release moves when helm_releases finds it deployed (or failed or superseded) at another chart version than the
wanted one. For those, helm_chart_upgrades reads the new chart's CRDs and values; upgrade_plan compares the CRDs with
the cluster's (module_utils/_k8s/upgrade.py) and picks the CRDs of the chart's ``crds/`` folder, which k8s_apply
applies server-side before the release is upgraded (Helm never updates them); upgrade_refusals names the objects a
CRD update would strand. upgrade_lines is the summary.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import upgrade

# Helm states from which `helm upgrade` moves the release to the wanted chart.
UPGRADABLE = ("deployed", "failed", "superseded")


# What helm_chart_upgrades takes of a release (k8s_helm_release's shape).
MODULE_KEYS = ("name", "namespace", "chart_ref", "chart_repo_url", "chart_version", "source", "values", "sensitive")


def chart_upgrades(layers, plans, normalise):
    """The releases of the queued ``layers`` (their ``releases``, normalised by ``normalise``, k8s_helm_release) whose
    helm_releases plan (``plans``) upgrades them from another chart version, as helm_chart_upgrades takes them: with
    ``layer`` and ``deployed_version``.

    A release that is installed, recovered first or upgraded at the same chart version (values only) is left out.
    """
    by_key = dict(((p.get("namespace"), p.get("name")), p) for p in plans or [] if isinstance(p, Mapping))
    out = []
    for layer in layers or []:
        for release in [normalise(r) for r in layer.get("releases") or []]:
            plan = by_key.get((release["namespace"], release["name"]))
            if not plan or plan.get("action") != "upgrade" or plan.get("recover") or plan.get("state") not in UPGRADABLE:
                continue
            chart = release.get("chart") or ""
            deployed = upgrade.deployed_version(plan.get("chart"), chart)
            if deployed and deployed != str(release["chart_version"]):
                out.append(dict([(k, release[k]) for k in MODULE_KEYS], layer=layer["layer"], deployed_version=deployed))
    return out


def _found(crds):
    """CRDs by name from the cluster's CRDs (helm_chart_upgrades' ``live_crds``)."""
    if not isinstance(crds, list):
        raise TypeError("the cluster's CRDs must be a list of CustomResourceDefinitions, got %s" % type(crds).__name__)
    return dict((upgrade.crd_name(crd), crd) for crd in crds)


def upgrade_plan(upgrades, live):
    """The chart upgrades of ``upgrades`` (helm_chart_upgrades' result) against the cluster's ``live`` CRDs (its
    ``live_crds``).

    Returns ``releases``: per release, in order, ``layer``, ``name``, ``namespace``, ``from_version``,
    ``to_version``, ``crds`` (``added`` and ``dropped`` names - a dropped CRD is one the deployed chart ships and
    the new one does not, still in the cluster; ``deleted`` those of them that helm upgrade deletes -, ``changed``:
    crd_changes entries), ``applied`` (the names of the
    CRDs of the chart's crds/ folder, which Helm never updates), ``held`` (the live objects the new CRDs leave
    behind, as helm_chart_upgrades names them), ``values_renamed`` and ``values_defaults``; ``apply``:
    those CRDs, applied server-side before the releases are upgraded; ``at_risk``: the CRDs whose update stops
    serving a version that status.storedVersions lists (``crd``, ``api_version`` and ``kind`` to list their objects
    by, ``new`` and the release), to be decided on (upgrade_refusals) once their objects are listed.
    """
    current = _found(live)
    out = {"releases": [], "apply": [], "at_risk": []}
    for entry in upgrades or []:
        new = [c["object"] for c in entry.get("crds") or []]
        release = {"layer": entry.get("layer") or "", "name": entry["name"], "namespace": entry["namespace"],
                   "from_version": entry["from_version"], "to_version": entry["to_version"]}
        # The cluster's CRDs of the names either chart ships: those only the deployed chart ships are dropped (Helm
        # leaves them in place, with their objects).
        previous = dict((c["name"], c) for c in entry.get("previous_crds") or [])
        names = set(upgrade.crd_name(c) for c in new) | set(previous)
        found = upgrade.crd_set_changes([current[n] for n in sorted(names) if n in current], new)
        changes = {"added": found["added"], "dropped": found["removed"], "changed": found["changed"],
                   "deleted": [n for n in found["removed"] if previous[n].get("deleted")]}
        for crd in new:
            live_crd = current.get(upgrade.crd_name(crd))
            if live_crd is None:
                continue
            stored = [v for v in ((live_crd.get("status") or {}).get("storedVersions") or [])
                      if v in upgrade.served_versions(live_crd)]
            if [v for v in stored if v not in upgrade.served_versions(crd)]:
                spec = live_crd["spec"]
                out["at_risk"].append({"crd": upgrade.crd_name(crd), "api_version": "%s/%s" % (spec["group"], stored[0]),
                                       "kind": spec["names"]["kind"], "new": crd, "release": release})
        applied = [c["object"] for c in entry.get("crds") or [] if c.get("crds_dir")]
        out["apply"] += applied
        out["releases"].append(dict(release, crds=changes, applied=[upgrade.crd_name(c) for c in applied],
                                    held=list(entry.get("held") or []),
                                    values_renamed=list(entry.get("values_renamed") or []),
                                    values_defaults=list(entry.get("values_defaults") or [])))
    return out


def upgrade_refusals(plan, live, listed):
    """Why the chart upgrades of ``plan`` (upgrade_plan) must not go ahead: one message per CRD update that would stop
    serving a version in which objects are stored (module_utils/_k8s/upgrade.py, stored_version_refusal).
    ``listed`` is the k8s_info loop over the plan's ``at_risk`` entries (each item's ``crd``; its ``resources``)."""
    current = _found(live)
    objects = {}
    for result in (listed or {}).get("results") or []:
        objects[result["item"]["crd"]] = result.get("resources") or []
    out = []
    for risk in (plan or {}).get("at_risk") or []:
        if risk["crd"] not in objects or risk["crd"] not in current:
            raise ValueError("CRD %s: the CRD and its objects must be read before deciding" % risk["crd"])
        why = upgrade.stored_version_refusal(current[risk["crd"]], risk["new"], objects[risk["crd"]])
        if why:
            release = risk["release"]
            out.append("Helm release %s (layer %s), chart %s -> %s: %s" % (
                release["name"], release["layer"], release["from_version"], release["to_version"], why))
    return out


def _short(value):
    text = "%s" % (value,)
    return "(%d characters)" % len(text) if "\n" in text or len(text) > 40 else text


def upgrade_lines(plan, check=False):
    """The summary of the chart upgrades (upgrade_plan's ``releases``): per release, its CRD changes, renamed values
    keys and changed defaults."""
    lines = []
    for entry in plan or []:
        lines.append("%s %s (layer %s): chart %s -> %s" % ("Chart upgrade planned:" if check else "Chart upgrade:",
                                                           entry["name"], entry["layer"], entry["from_version"],
                                                           entry["to_version"]))
        crds = entry.get("crds") or {}
        applied = set(entry.get("applied") or [])
        for name in crds.get("added") or []:
            lines.append("    CRD %s: new%s" % (name, ", applied server-side first" if name in applied else ""))
        for change in crds.get("changed") or []:
            parts = []
            for key, word in (("versions_added", "versions added"), ("versions_removed", "versions removed"),
                              ("served_removed", "no longer served"), ("deprecated", "deprecated")):
                if change.get(key):
                    parts.append("%s %s" % (word, ", ".join(change[key])))
            if change.get("storage"):
                parts.append("storage version %s -> %s" % tuple(change["storage"]))
            for key, word in (("fields_removed", "fields removed"), ("fields_added", "fields added")):
                for version, paths in sorted((change.get(key) or {}).items()):
                    parts.append("%s in %s: %s" % (word, version, ", ".join(paths)))
            for version, paths in sorted((change.get("validation_changed") or {}).items()):
                parts.append("validation changed in %s: %s" % (version, ", ".join(sorted(paths))))
            lines.append("    CRD %s%s: %s" % (change["name"], " (applied server-side first)" if change["name"] in applied
                                               else "", "; ".join(parts)))
        for name in crds.get("dropped") or []:
            if name in (crds.get("deleted") or []):
                lines.append("    CRD %s: no longer in the new chart, made by the templates of the deployed chart: helm upgrade "
                             "deletes it, and every object of its kind with it" % name)
            else:
                lines.append("    CRD %s: no longer in the new chart; Helm leaves it and its objects in place (delete it "
                             "once nothing uses it)" % name)
        for held in entry.get("held") or []:
            objects = held.get("objects") or []
            what = "%d %s object%s" % (len(objects), held["kind"], "" if len(objects) == 1 else "s")
            if held.get("versions"):
                lines.append("    CRD %s: %s no longer served, and %s exist%s: %s" % (
                    held["crd"], ", ".join(held["versions"]), what, "s" if len(objects) == 1 else "",
                    ", ".join(o["name"] for o in objects)))
            else:
                lines.append("    CRD %s: %s hold%s fields that %s no longer has (the API server prunes them): %s" % (
                    held["crd"], what, "s" if len(objects) == 1 else "", held["version"],
                    "; ".join("%s (%s)" % (o["name"], ", ".join(o["fields"])) for o in objects)))
        for renamed in entry.get("values_renamed") or []:
            lines.append("    values key %s is set but the new chart no longer has it%s" % (
                renamed["key"], " (now %s?)" % " or ".join(renamed["candidates"]) if renamed.get("candidates") else ""))
        for default in entry.get("values_defaults") or []:
            change = " %s -> %s" % (_short(default["old"]), _short(default["new"])) if "old" in default else ""
            lines.append("    default %s changes:%s" % (default["key"], change or " (values hidden)"))
    return lines
