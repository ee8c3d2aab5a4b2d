# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Decisions of the rolling driver upgrade, kept out of YAML so they can be tested.

``gpu_upgrade_plan``: from a node's nvml_facts and the wanted driver, what the
upgrade does there and whether it reboots: the driver decision of
plugin_utils/driver_action.py, the fleet planner's, in the rollout's words.
``gpu_upgrade_verify``: the problems found after the upgrade (driver, GPUs, health).
``k8s_blocking_pods``: the pods a drain leaves behind that block it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

decisions = lazy_module("plugin_utils.driver_action")


def _reason(decision):
    """The plan's reason in the rollout's words."""
    installed, loaded, wanted = decision["installed"], decision["loaded"], decision["wanted"]
    if decision["action"] == "none" and not decision["reboot_required"]:
        return "driver %s is installed and loaded" % installed
    if decision["action"] == "none":
        return "driver %s is installed but module %s is loaded" % (installed, loaded or "none")
    if decision["action"] == "install":
        return "no NVIDIA driver installed -> %s" % wanted
    return "driver %s -> %s" % (installed or "unknown", wanted)


def gpu_upgrade_plan(facts, version, branch=None, state="present", version_variable="gpu_upgrade_driver_version",
                     allow_downgrade=False, provenance=None):
    """``{action, reboot, step, reason, installed, loaded, wanted, version, branch, gpus}`` for one node.

    ``action`` and ``reboot`` are plugin_utils/driver_action.driver_action's, the fleet planner's answer for
    the same facts and settings: ``install``, ``upgrade``, ``downgrade``, ``remove`` or ``none``. ``version``
    empty follows ``branch`` as the planner does. ``step``, what the rollout does: ``skip`` (nothing to do, no
    drain), ``reboot`` (the driver is right, its module is not loaded yet) or the action.
    """
    if not isinstance(facts, Mapping):
        raise AnsibleFilterError("gpu_upgrade_plan needs the node's nvml_facts, got %r" % (facts,))
    # No branch given: the nvidia_driver role's default, as the planner reads it.
    settings = {"nvidia_driver_version": version, "nvidia_driver_state": state,
                "nvidia_driver_branch": decisions.DRIVER_DEFAULTS["nvidia_driver_branch"] if branch is None else branch,
                "nvidia_driver_allow_downgrade": allow_downgrade}
    if provenance:
        # The record's node.driver_provenance: a driver from outside the packages is kept or refused alike.
        facts = dict(facts, driver_provenance=provenance)
    decision, errors = decisions.driver_action(settings, facts, version_variable)
    if errors:
        raise AnsibleFilterError("; ".join(errors))
    gpus = sorted(g.get("uuid") for g in facts.get("gpus") or [] if g.get("uuid"))
    step = decision["action"] if decision["action"] != "none" else ("reboot" if decision["reboot_required"] else "skip")
    return {"action": decision["action"], "reboot": decision["reboot_required"], "step": step,
            "reason": _reason(decision), "installed": decision["installed"], "loaded": decision["loaded"],
            "wanted": decision["wanted"], "version": decision["version"], "branch": decision["branch"],
            "state": decision["state"], "gpus": gpus}


def gpu_upgrade_verify(facts, plan):
    """Messages for what is wrong after the upgrade; empty when all is well."""
    if not isinstance(facts, Mapping) or not isinstance(plan, Mapping):
        raise AnsibleFilterError("gpu_upgrade_verify needs the node's nvml_facts and its gpu_upgrade_plan")
    wanted = plan["wanted"]
    problems = []
    if not facts.get("present"):
        problems.append("NVML sees no GPU: %s" % (facts.get("reason") or "unknown reason"))
    if not decisions.driver_is_current(plan, facts):
        problems.append("driver %s is wanted, but %s is installed and module %s is loaded"
                        % (wanted, facts.get("driver_version") or "none", facts.get("kernel_module_version") or "none"))
    before = list(plan.get("gpus") or [])
    after = sorted(g.get("uuid") for g in facts.get("gpus") or [] if g.get("uuid"))
    if before and after != before:
        missing = [u for u in before if u not in after]
        added = [u for u in after if u not in before]
        text = "%d GPU(s) before, %d after" % (len(before), len(after))
        if missing:
            text += "; missing: %s" % ", ".join(missing)
        if added:
            text += "; new: %s" % ", ".join(added)
        problems.append(text)
    health = facts.get("health") or {}
    if health.get("status") == "critical":
        problems.append("GPU health is critical: %s" % "; ".join(health.get("reasons") or []))
    return problems


def k8s_blocking_pods(pods):
    """``namespace/name`` of the pods a drain must evict that are still there.

    Like the drain itself (kubectl and kubernetes.core.k8s_drain): DaemonSet
    pods and mirror (static) pods are not evicted, and finished pods do not count.
    """
    blocking = []
    for pod in pods or []:
        meta = pod.get("metadata") or {}
        if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
            continue
        if any(ref.get("kind") == "DaemonSet" for ref in meta.get("ownerReferences") or []):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        blocking.append("%s/%s" % (meta.get("namespace", "default"), meta.get("name")))
    return sorted(blocking)


FilterModule = filter_module(
    gpu_upgrade_plan,
    gpu_upgrade_verify,
    k8s_blocking_pods,
)
