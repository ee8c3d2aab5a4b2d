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
import re

from ansible_collections.gpuops.platform.plugins.plugin_utils import documents, fleet_schema, fleet_waves, recorded_facts

# The host variables a host's plan (driver, MIG, capacity, wave) is made from.
SETTINGS = (
    "nvidia_driver_state", "nvidia_driver_branch", "nvidia_driver_version", "nvidia_driver_fabricmanager",
    "mig_config_name", "mig_config", "mig_config_file", "gpuops_nvml_replay_file", "gpu_nodes_node_name",
    "mig_k8s_node_name", "gpu_nodes_device_plugin_config", "gpu_nodes_host_labels", "gpu_nodes_dra",
    "gpu_upgrade_driver_version",
) + fleet_waves.SETTINGS
APPROVED_VARIABLE = "gpuops_approved_plan"
SHA256_VARIABLE = "gpuops_approved_plan_sha256"
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")


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


def _sha256(given):
    """``given`` (gpuops_approved_plan_sha256) as 64 lowercase hex digits; ApprovalError when it is none."""
    text = given.strip().lower() if isinstance(given, str) else given
    if not isinstance(text, str) or not _SHA256.match(text):
        shown = repr(given)
        raise ApprovalError("%s %s is not a SHA-256 digest (64 hexadecimal digits): give the digest that Plan fleet "
                            "published with its plan.json, and nothing was changed" % (
                                SHA256_VARIABLE, shown if len(shown) <= 80 else shown[:80] + "... (%d characters)" % len(shown)))
    return text


def of_this_run(plan, path, names, group):
    """The plan's hosts that this run holds, in the plan's order: ``names`` are the play's hosts (``--limit``
    applied), ``group`` this run's whole inventory group. ApprovalError when it holds none of them, unless the run
    is a job slice that holds none.

    A job slice is recognised by its inventory. AWX gives each slice an inventory of that slice's hosts alone, so
    the plan's hosts of the other slices are missing from ``group`` (``--limit`` leaves the group whole), and each
    host of the slice is one the planner's inventory held: planned (``order``), or outside the planned group
    (``unplanned``, recorded by the planner). A run whose group holds some of the plan's hosts but selects none,
    or whose hosts the planner's inventory never held (another inventory, hosts added since), is refused.
    """
    selected = set(names)
    present = [n for n in plan["order"] if n in selected]
    if present:
        return present
    members = set(group)
    held = [n for n in plan["order"] if n in members]
    known = set(plan["order"]).union(plan.get("unplanned") or ())
    if names and not held and all(n in known for n in group):
        return []
    if held:
        why = ("this run's inventory holds %d of its hosts, but the run (--limit) selects none of them" % len(held))
    else:
        why = ("none of this run's hosts is one the plan's inventory held: it was made from another inventory, or "
               "these hosts were added since")
    raise ApprovalError("the approved plan %s names none of this run's hosts (%s): %s. Nothing was changed. Approve "
                        "a plan.json that playbooks/plan_fleet.yml made from this run's inventory, and select some "
                        "of its hosts." % (path, _names(list(names)) or "no hosts", why))


def load(path, sha256=None):
    """The approved plan.json: of the digest ``sha256`` when one is given (``gpuops_approved_plan_sha256``), checked
    against its schema, of version 3 or later, valid, and whole (``check_whole``)."""
    # A path with a NUL byte (refused by the read) is named escaped: the byte itself would cut the message.
    shown = path if "\x00" not in path else repr(path)
    what = "the approved plan %s" % shown
    wanted = _sha256(sha256) if sha256 is not None else None
    try:
        # One read: the digest is of the very text that is parsed (strict UTF-8, so the text's bytes are the file's).
        text = documents.read_text(path, "plan.json", documents.MAX_PLAN_BYTES)
    except documents.DocumentError as exc:
        raise ApprovalError("cannot read %s: %s" % (what, exc))
    if wanted is not None:
        actual = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if actual != wanted:
            raise ApprovalError("%s is not the plan that was approved: its SHA-256 is %s, and %s is %s. It was changed "
                                "or replaced after Plan fleet wrote it; nothing was changed. Plan again and approve the "
                                "new plan.json." % (what, actual, SHA256_VARIABLE, wanted))
    try:
        plan = fleet_schema.loads(text, what)
    except fleet_schema.FleetPlanDataError as exc:
        raise ApprovalError(str(exc))
    if plan["version"] < 3:
        raise ApprovalError("the approved plan %s is of plan.json version %d, which does not record what each host "
                            "was planned from: plan again with playbooks/plan_fleet.yml and approve that plan.json"
                            % (path, plan["version"]))
    check_whole(plan, path)
    without = [n for n in plan["order"] if not isinstance(plan["hosts"][n].get("inputs"), dict)]
    if without or not isinstance(plan.get("inputs"), dict):
        raise ApprovalError("the approved plan %s does not record what %s planned from (inputs): approve a "
                            "plan.json that playbooks/plan_fleet.yml wrote" % (
                                path, "these hosts were (%s)" % ", ".join(without[:10]) if without else "it was"))
    if not plan["valid"]:
        raise ApprovalError("the approved plan %s has hosts that cannot be planned (%s): fix them, plan again "
                            "and approve that plan.json" % (path, ", ".join(plan["summary"]["hosts_invalid"][:10])))
    return plan


def _names(names, shown=10):
    more = len(names) - shown
    return ", ".join(names[:shown]) + (" and %d more" % more if more > 0 else "")


def check_whole(plan, path):
    """ApprovalError unless ``plan`` is whole: hosts, each once in ``order``, cut into the waves its own serial,
    canary and max_fail_percentage give (``fleet_waves.rollout``, the one waves function), each host's ``wave`` that
    of its batch. An edited plan is refused, whatever else it says."""
    edited = ("; nothing was changed. Approve a plan.json as playbooks/plan_fleet.yml wrote it (plan again if it "
              "was edited)")
    order, hosts = plan["order"], plan["hosts"]
    if not order or not hosts:
        raise ApprovalError("the approved plan %s has no hosts: there is nothing it approves%s" % (path, edited))
    seen, twice = set(), []
    for name in order:
        if name in seen and name not in twice:
            twice.append(name)
        seen.add(name)
    if twice:
        raise ApprovalError("the approved plan %s lists %s more than once in its order, so its waves do not hold "
                            "each host once%s" % (path, _names(twice), edited))
    unplanned = [n for n in order if n not in hosts]
    unordered = sorted(n for n in hosts if n not in seen)
    if unplanned or unordered:
        raise ApprovalError("the approved plan %s does not hold the same hosts in its order and its hosts%s%s%s" % (
            path, ("; in its order without a plan: %s" % _names(unplanned)) if unplanned else "",
            ("; planned but in no wave: %s" % _names(unordered)) if unordered else "", edited))
    given = plan["waves"]
    serial = given["serial"][-1] if given["serial"] else None
    settings = {fleet_waves.SERIAL: serial, fleet_waves.CANARY: given["canary"],
                fleet_waves.MAX_FAIL: given.get("max_fail_percentage", 0)}
    try:
        rollout = fleet_waves.rollout([(n, settings) for n in order])
    except fleet_waves.WavesError as exc:
        raise ApprovalError("the approved plan %s has wave settings no wave can be cut from (%s)%s" % (
            path, str(exc).split(" (", 1)[0], edited))
    cut, first = [], 0
    for number, wave in enumerate(rollout["waves"], 1):
        cut.append((number, first, len(wave)))
        first += len(wave)
    recorded = [(b["wave"], b["first"], b["size"]) for b in given["batches"]]
    moved = [n for number, wave in enumerate(rollout["waves"], 1) for n in wave if hosts[n].get("wave") != number]
    if recorded != cut or given["serial"] != rollout["serial"] or moved:
        raise ApprovalError(
            "the approved plan %s holds waves that its own settings (serial %s%s, %d host(s)) do not give: "
            "it says %s, and they give %s%s%s" % (
                path, serial, ", a canary wave of one first" if given["canary"] else "", len(order),
                _sizes(recorded, given["serial"]), _sizes(cut, rollout["serial"]),
                ("; hosts in another wave than their batch: %s" % _names(moved)) if moved and recorded == cut else "",
                edited))
    return rollout


def _sizes(batches, serial):
    sizes = [size for _number, _first, size in batches]
    shown = ", ".join(str(s) for s in sizes[:12]) + (", ..." if len(sizes) > 12 else "")
    return "%d wave(s) of %s host(s) (serial %s)" % (len(sizes), shown or "no", "/".join(serial))


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
