# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""GPU health as Kubernetes node state: a label, an annotation, a taint and a cordon.

From each node's health (the verdict of plugin_utils/health_verdict.py over
its nvml_facts, the fleet planner's too, and optionally a DCGM diagnostic's result) and the Node object as the API server
returns it, compute the one merge patch that brings the node to the wanted
state, and say in words what it changes. Only what this collection owns is
touched: its label, its annotations, its taint (by key) and a cordon it set
itself (remembered in an annotation). Every other taint is kept as it is.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

verdicts = lazy_module("plugin_utils.health_verdict")

EFFECTS = ("NoSchedule", "NoExecute", "none")
# The node label; the annotations are named after it.
HEALTH_KEY = "gpuops.io/gpu-health"
DEFAULTS = {
    "label": HEALTH_KEY,
    "reasons_annotation": HEALTH_KEY + "-reasons",
    "cordon_annotation": HEALTH_KEY + "-cordoned",
    "taint_key": "gpuops.io/gpu-unhealthy",
    "taint_value": "true",
    "taint_effect": "NoSchedule",
    "cordon": False,
}
# Annotation values are free text, but a kilobyte is plenty for a summary.
MAX_REASONS_CHARS = 1024


def _worst(statuses):
    return max(statuses, key=verdicts.STATUSES.index) if statuses else "ok"


def _options(options):
    opts = dict(DEFAULTS)
    opts.update(dict((k, v) for k, v in (options or {}).items() if v is not None))
    if opts["taint_effect"] not in EFFECTS:
        raise AnsibleFilterError("gpu_health taint effect must be one of %s, got %r"
                                 % (", ".join(EFFECTS), opts["taint_effect"]))
    return opts


def _node_health(entry):
    """(status or None, reasons) of one inventory node: None when it has no GPU facts to judge.

    The facts' verdict is plugin_utils/health_verdict.py's, the fleet planner's too; extra results
    (a DCGM diagnostic) can only make it worse.
    """
    facts = entry.get("nvidia")
    statuses, reasons = [], []
    if isinstance(facts, Mapping):
        try:
            verdict = verdicts.health_verdict(facts)
        except verdicts.HealthVerdictError as exc:
            raise AnsibleFilterError("node %s: %s" % (entry["name"], exc))
        # A host without NVIDIA GPU (and no NVML failure that makes it critical) is not judged.
        if verdict["judged"]:
            statuses.append(verdict["status"])
            reasons.extend(to_text(r) for r in verdict["reasons"])
    for extra in entry.get("extra") or []:
        if not isinstance(extra, Mapping):
            continue
        status = extra.get("status", "ok")
        if status not in verdicts.STATUSES:
            raise AnsibleFilterError("node %s: unknown health status %r from %s"
                                     % (entry["name"], status, extra.get("source", "an extra check")))
        statuses.append(status)
        reasons.extend(to_text(r) for r in extra.get("reasons") or [])
    if not statuses:
        return None, []
    return _worst(statuses), reasons


def _reasons_text(reasons):
    text = "; ".join(reasons)
    if len(text) > MAX_REASONS_CHARS:
        text = text[:MAX_REASONS_CHARS - 3] + "..."
    return text


def _why_not_judged(facts):
    """Why a node without GPU health is not judged, and what to set when that is not what was meant."""
    if not isinstance(facts, Mapping):
        return ("no NVIDIA GPU facts for this host in this run (nvml_facts did not run or did not reach it; with "
                "gpu_health_gather false, ansible_facts.nvidia from an earlier play or the fact cache is used): not judged")
    reason = to_text(facts.get("reason") or "NVML reports none")
    if facts.get("source") == "replay":
        return "no NVIDIA GPU in its recorded facts (%s): not judged" % reason
    return ("no NVIDIA GPU found on the host (%s): not judged; to judge the node from its recorded facts "
            "instead, set gpuops_nvml_replay_file or gpuops_fleet_facts_dir (playbooks/record_facts.yml)" % reason)


def _plan_node(entry, node, opts, render):
    name = entry["name"]
    status, reasons = _node_health(entry)
    plan = {"name": name, "host": entry.get("host", name), "status": status, "reasons": reasons,
            "changes": [], "changed": False, "patch": {}, "in_cluster": node is not None or render}
    if status is None:
        plan["skipped"] = _why_not_judged(entry.get("nvidia"))
        return plan
    if node is None and not render:
        plan["skipped"] = "not a Kubernetes node (set gpu_health_node_name on the host to its node name)"
        return plan
    current = node or {}
    meta = current.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    spec = current.get("spec") or {}
    taints = list(spec.get("taints") or [])
    patch_meta, patch_spec, changes = {}, {}, []

    if labels.get(opts["label"]) != status:
        patch_meta.setdefault("labels", {})[opts["label"]] = status
        changes.append("label %s=%s (was %s)" % (opts["label"], status, labels.get(opts["label"], "unset")))

    text = _reasons_text(reasons) if status != "ok" else None
    if annotations.get(opts["reasons_annotation"]) != text:
        patch_meta.setdefault("annotations", {})[opts["reasons_annotation"]] = text
        changes.append("annotation %s %s" % (opts["reasons_annotation"], "set" if text else "removed"))

    # Our taint is the one with our key; any other taint is someone else's and stays.
    ours = [t for t in taints if t.get("key") == opts["taint_key"]]
    foreign = [t for t in taints if t.get("key") != opts["taint_key"]]
    wanted = []
    if status == "critical" and opts["taint_effect"] != "none":
        wanted = [{"key": opts["taint_key"], "value": opts["taint_value"], "effect": opts["taint_effect"]}]
    if [(t.get("key"), t.get("value"), t.get("effect")) for t in ours] != \
            [(t["key"], t["value"], t["effect"]) for t in wanted]:
        patch_spec["taints"] = foreign + wanted
        if wanted:
            changes.append("taint %s=%s:%s" % (opts["taint_key"], opts["taint_value"], opts["taint_effect"]))
        else:
            changes.append("taint %s removed" % opts["taint_key"])

    cordoned = bool(spec.get("unschedulable"))
    ours_cordon = opts["cordon_annotation"] in annotations
    if status == "critical" and opts["cordon"]:
        if not cordoned:
            patch_spec["unschedulable"] = True
            patch_meta.setdefault("annotations", {})[opts["cordon_annotation"]] = "true"
            changes.append("cordon")
        # A cordon set by someone else is theirs: we neither claim nor lift it.
    elif ours_cordon:
        if cordoned:
            patch_spec["unschedulable"] = None
            changes.append("uncordon (the collection cordoned it)")
        patch_meta.setdefault("annotations", {})[opts["cordon_annotation"]] = None
        if not cordoned:
            changes.append("annotation %s removed" % opts["cordon_annotation"])

    if changes:
        patch = {}
        if patch_meta:
            patch["metadata"] = patch_meta
        if patch_spec:
            patch["spec"] = patch_spec
        # The taint list is replaced as a whole: resourceVersion makes the API
        # server refuse the patch (409) if the node changed since it was read.
        if "taints" in patch_spec and meta.get("resourceVersion"):
            patch.setdefault("metadata", {})["resourceVersion"] = meta["resourceVersion"]
        plan.update(changes=changes, changed=True, patch=patch)
    return plan


def gpu_health_plan(nodes, k8s_nodes=None, options=None, render=False):
    """One plan per inventory node: its health and the Node patch that would apply it.

    ``nodes``: ``[{host, name, nvidia, extra}]`` (``nvidia``: nvml_facts; ``extra``:
    more ``{status, reasons, source}`` results such as a DCGM diagnostic).
    ``k8s_nodes``: Node objects from kubernetes.core.k8s_info; ignored with
    ``render`` true, where every node is planned from nothing (no API call).
    """
    opts = _options(options)
    by_name = {}
    for obj in k8s_nodes or []:
        if isinstance(obj, Mapping):
            by_name[(obj.get("metadata") or {}).get("name")] = copy.deepcopy(obj)
    plans = []
    for entry in nodes or []:
        if not isinstance(entry, Mapping) or not entry.get("name"):
            raise AnsibleFilterError("gpu_health_plan: each node needs a name, got %r" % (entry,))
        plans.append(_plan_node(entry, None if render else by_name.get(entry["name"]), opts, render))
    return plans


def gpu_health_line(plan, verb="changes"):
    """One line of a node's plan for the run's report."""
    if plan.get("skipped"):
        return "left alone: %s" % plan["skipped"]
    head = plan["status"]
    if plan.get("reasons"):
        head += " (%s)" % "; ".join(plan["reasons"])
    if not plan.get("changed"):
        return "%s; no change" % head
    return "%s; %s: %s" % (head, verb, ", ".join(plan["changes"]))


def gpu_health_patches(plans):
    """``[{name, patch}]`` of the plans that change their node, for gpuops.platform.k8s_node_patches."""
    if not isinstance(plans, list) or not all(isinstance(p, Mapping) for p in plans):
        raise AnsibleFilterError("gpu_health_patches needs the list that gpu_health_plan returns, got %r" % (plans,))
    return [{"name": p["name"], "patch": p["patch"]} for p in plans if p.get("changed")]


FilterModule = filter_module(
    gpu_health_plan,
    gpu_health_line,
    gpu_health_patches,
)
