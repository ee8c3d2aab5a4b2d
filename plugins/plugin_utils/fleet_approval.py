# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""An approved plan is what runs: the inputs of each host's plan, and the check that they still hold.

The planner records, per host, a digest of what its plan was made from (plan.json
version 3): its recorded facts (the part of the record that says whether the node
changed, ``recorded_facts.stable``) and each plan-relevant inventory variable of the
host (``SETTINGS``), each as a SHA-256 of its canonical JSON. Hosts with the same
settings share one entry of the plan's ``inputs.settings`` table.

A playbook given ``gpuops_approved_plan`` (``gpuops.platform.upgrade_waves``) acts
on that plan's hosts and waves only, and refuses it before any change when a
host's inputs changed since the plan was made, naming the hosts and what changed
(the facts, or which variable): like ``terraform apply PLANFILE`` refusing a stale plan.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_schema, fleet_waves, recorded_facts

# The host variables a host's plan (driver, MIG, capacity, wave) is made from.
SETTINGS = (
    "nvidia_driver_state", "nvidia_driver_branch", "nvidia_driver_version", "nvidia_driver_fabricmanager",
    "mig_config_name", "mig_config", "mig_config_file", "gpuops_nvml_replay_file", "gpu_nodes_node_name",
    "mig_k8s_node_name", "gpu_nodes_device_plugin_config", "gpu_nodes_host_labels", "gpu_nodes_dra",
    "gpu_upgrade_driver_version",
) + fleet_waves.SETTINGS
APPROVED_VARIABLE = "gpuops_approved_plan"


class ApprovalError(Exception):
    """An approved plan that cannot be run as it is; nothing was changed."""


def digest(value, length=64, from_json=False):
    """SHA-256 (hex, first ``length`` characters) of ``value``'s canonical JSON.

    ``from_json``: ``value`` was read from a JSON document, so it holds no cycle and the check for one is
    skipped (it halves the time, for 20,000 records).
    """
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str, check_circular=not from_json)
    except (TypeError, ValueError, RecursionError):  # a value that refers to itself (a YAML anchor inside itself)
        text = repr(value)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def settings_digests(variables):
    """``{variable: digest}`` of the plan-relevant variables of one host (an unset one digests as null)."""
    return dict((name, digest(variables.get(name) if name in variables else None, 16)) for name in SETTINGS)


def facts_digest(record):
    """The digest of a host's recorded facts, without when they were recorded or the readings that always move."""
    return digest(recorded_facts.stable(record), from_json=True) if record is not None else None


def record_inputs(plan, inputs):
    """Put each host's inputs into ``plan`` (version 3): ``inputs`` ``{host: (facts digest, settings digests)}``."""
    table = {}
    for name, (facts, per_setting) in inputs.items():
        key = digest(per_setting)
        table.setdefault(key, per_setting)
        plan["hosts"][name]["inputs"] = {"facts": facts, "settings": key}
    plan["inputs"] = {"settings": table}
    return plan


def changes(plan, current):
    """``{host: [what changed]}`` for the plan's hosts whose inputs differ from ``current``
    (``{host: (facts digest, settings digests)}``).

    A plan host missing from ``current`` is not a change: this run does not act on it (an AWX job slice or
    ``--limit`` holds part of the fleet, or the host left the inventory), so what runs is still part of the
    approved plan; ``outside`` names those hosts for the run's output.
    """
    table = (plan.get("inputs") or {}).get("settings") or {}
    out = {}
    for name in plan.get("order") or sorted(plan["hosts"]):
        if name not in current:
            continue
        recorded = plan["hosts"][name].get("inputs") or {}
        facts, per_setting = current[name]
        what = []
        if recorded.get("facts") != facts:
            what.append("facts" if facts is not None else "facts (no recorded facts now)")
        before = table.get(recorded.get("settings")) or {}
        what.extend(sorted(n for n in set(before) | set(per_setting) if before.get(n) != per_setting.get(n)))
        if what:
            out[name] = what
    return out


def outside(plan, group):
    """The plan's hosts that are not in this run's inventory ``group``, in the plan's order."""
    present = set(group)
    return [n for n in plan["order"] if n not in present]


def load(path):
    """The approved plan.json: checked against its schema, of version 3 or later, and valid."""
    # A path with a NUL byte (refused by the read) is named escaped: the byte itself would cut the message.
    shown = path if "\x00" not in path else repr(path)
    try:
        plan = fleet_schema.load(path, "the approved plan %s" % shown)
    except fleet_schema.FleetPlanDataError as exc:
        raise ApprovalError(str(exc))
    if plan["version"] < 3:
        raise ApprovalError("the approved plan %s is of plan.json version %d, which does not record what each host "
                            "was planned from: plan again with playbooks/plan_fleet.yml and approve that plan.json"
                            % (path, plan["version"]))
    without = [n for n in plan["order"] if not isinstance(plan["hosts"][n].get("inputs"), dict)]
    if without or not isinstance(plan.get("inputs"), dict):
        raise ApprovalError("the approved plan %s does not record what %s planned from (inputs): approve a "
                            "plan.json that playbooks/plan_fleet.yml wrote" % (
                                path, "these hosts were (%s)" % ", ".join(without[:10]) if without else "it was"))
    if not plan["valid"]:
        raise ApprovalError("the approved plan %s has hosts that cannot be planned (%s): fix them, plan again "
                            "and approve that plan.json" % (path, ", ".join(plan["summary"]["hosts_invalid"][:10])))
    return plan


def refusal(path, changed):
    """The message that refuses a stale plan: each host and what changed since the plan was made."""
    lines = ["%s: changed: %s" % (name, ", ".join(what)) for name, what in changed.items()]
    shown = lines[:20] + (["... and %d more host(s)" % (len(lines) - 20)] if len(lines) > 20 else [])
    return ("The approved plan %s is stale: the inputs of %d host(s) changed since it was made, and nothing was "
            "changed. Plan again (playbooks/plan_fleet.yml) and approve the new plan.json.\n  - %s"
            % (path, len(changed), "\n  - ".join(shown)))


def waves(plan, selected=None):
    """The plan's waves as lists of hosts, of the ``selected`` hosts only (``--limit``), empty waves left out."""
    order = plan["order"]
    out = []
    for batch in plan["waves"]["batches"]:
        wave = [n for n in order[batch["first"]:batch["first"] + batch["size"]] if selected is None or n in selected]
        if wave:
            out.append(wave)
    return out
