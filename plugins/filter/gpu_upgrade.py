# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Decisions of the rolling driver upgrade, kept out of YAML so they can be tested.

``gpu_upgrade_plan``: from a node's nvml_facts and the wanted driver, what the
upgrade does there (skip, upgrade or only reboot) and whether it reboots.
``gpu_upgrade_verify``: the problems found after the upgrade (driver, GPUs, health).
``k8s_blocking_pods``: the pods a drain leaves behind that block it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module

_VERSION_RE = re.compile(r"^[0-9]+\.[0-9]+(\.[0-9]+)?\Z")


def _check_version(wanted):
    wanted = to_text(wanted or "").strip()
    if not _VERSION_RE.match(wanted):
        raise AnsibleFilterError(
            "gpu_upgrade_driver_version must be an exact driver version such as 580.82.07, got %r" % wanted)
    return wanted


def gpu_upgrade_plan(facts, wanted):
    """``{action, reboot, loaded, installed, gpus, reason}`` for one node.

    action: ``skip`` (the wanted driver is installed and loaded, or there is no
    driver to upgrade), ``upgrade`` (install the wanted driver) or ``reboot``
    (it is installed, an older module is still loaded). ``reboot`` says whether
    the node will need one: whenever the loaded module is not the wanted one.
    """
    wanted = _check_version(wanted)
    if not isinstance(facts, Mapping):
        raise AnsibleFilterError("gpu_upgrade_plan needs the node's nvml_facts, got %r" % (facts,))
    loaded = facts.get("kernel_module_version")
    installed = facts.get("driver_version")
    gpus = sorted(g.get("uuid") for g in facts.get("gpus") or [] if g.get("uuid"))
    plan = {"loaded": loaded, "installed": installed, "gpus": gpus, "wanted": wanted}
    if installed == wanted and loaded == wanted:
        plan.update(action="skip", reboot=False, reason="driver %s is installed and loaded" % wanted)
    elif installed is None and loaded is None:
        plan.update(action="skip", reboot=False,
                    reason="no NVIDIA driver here (%s): install it with playbooks/nodes.yml, this upgrades one"
                    % (facts.get("reason") or "none found"))
    elif installed == wanted:
        plan.update(action="reboot", reboot=True,
                    reason="driver %s is installed but module %s is loaded" % (wanted, loaded or "none"))
    else:
        plan.update(action="upgrade", reboot=loaded != wanted,
                    reason="driver %s -> %s" % (installed or "unknown", wanted))
    return plan


def gpu_upgrade_verify(facts, plan):
    """Messages for what is wrong after the upgrade; empty when all is well."""
    if not isinstance(facts, Mapping) or not isinstance(plan, Mapping):
        raise AnsibleFilterError("gpu_upgrade_verify needs the node's nvml_facts and its gpu_upgrade_plan")
    wanted = plan["wanted"]
    problems = []
    if not facts.get("present"):
        problems.append("NVML sees no GPU: %s" % (facts.get("reason") or "unknown reason"))
    if facts.get("driver_version") != wanted or facts.get("kernel_module_version") not in (wanted, None):
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
