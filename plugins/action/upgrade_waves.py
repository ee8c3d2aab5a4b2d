# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Controller side of gpuops.platform.upgrade_waves: the waves a rolling change runs, decided once."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.gpuops.platform.plugins.action.fleet_plan import known_hosts, read_variables
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_approval, fleet_waves, recorded_facts
from ansible_collections.gpuops.platform.plugins.plugin_utils.controller_action import ControllerAction

ARGS = {
    "hosts": {"type": "list", "elements": "str", "required": True},
    "group": {"type": "str", "default": "gpu_nodes"},
    "approved_plan": {"type": "path"},
    "approved_plan_sha256": {"type": "str"},
    "facts_dir": {"type": "path"},
    "fact": {"type": "str", "default": "gpuops_upgrade_rollout"},
}


def current_inputs(plan, names, variables, facts_dir):
    """``{host: (facts digest, settings digests)}`` now, read as the planner reads them (fleet_plan._recorded).

    A host this run reads live (its recorded facts were given to the planner alone, as a change is never made
    from recorded facts) is checked against the facts file its plan was made from, as that file is now.
    """
    out = {}
    for name in names:
        try:
            _where, record = recorded_facts.load(variables[name], name, facts_dir or "")
            planned_from = plan["hosts"][name].get("facts_file")
            if record is None and planned_from:
                record = recorded_facts.read_file(planned_from)
        except recorded_facts.RecordedFactsError:
            record = None
        out[name] = (fleet_approval.facts_digest(record), fleet_approval.settings_digests(variables[name]))
    return out


def approved(args, names, inventory, hostvars, loader):
    """The rollout of the approved plan, for the selected ``names``; ApprovalError when the plan is not the one
    approved (``approved_plan_sha256``), not whole, of none of this run's hosts, or stale for them.

    Only the selected hosts (``--limit``, a job slice) are checked: they are the ones this run changes, and the
    run's own settings (gpuops_driver_version) are set on them alone.
    """
    path = args["approved_plan"]
    plan = fleet_approval.load(path, args["approved_plan_sha256"])
    group = inventory.get(args["group"]) or []
    present = fleet_approval.of_this_run(plan, path, names, group)
    variables = read_variables(hostvars, present, loader)
    changed = fleet_approval.changes(plan, current_inputs(plan, present, variables, args["facts_dir"]))
    if changed:
        raise fleet_approval.ApprovalError(fleet_approval.refusal(path, changed))
    waves = fleet_approval.waves(plan, set(names))
    return {"waves": waves, "max_fail_percentage": plan["waves"].get("max_fail_percentage", 0),
            "serial": plan["waves"]["serial"], "canary": plan["waves"]["canary"],
            "left_out": [n for n in names if n not in plan["hosts"]],
            "outside": fleet_approval.outside(plan, group),
            "sha256": args["approved_plan_sha256"] is not None}


def _some(names, shown=20):
    """``a, b, c`` for at most ``shown`` names, then how many more (a slice of 20,000 hosts leaves out most)."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (" and %d more" % more if more > 0 else "")


class ActionModule(ControllerAction, ActionBase):
    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result, args = self.begin(tmp, task_vars, ARGS)
        inventory = task_vars.get("groups") or {}
        names = args["hosts"]
        if args["approved_plan_sha256"] is not None and not args["approved_plan"]:
            raise AnsibleActionFail("%s is set, but %s is not: give the plan.json it is the digest of, and nothing was "
                                    "changed" % (fleet_approval.SHA256_VARIABLE, fleet_approval.APPROVED_VARIABLE))
        hostvars = known_hosts(task_vars, names)
        try:
            if args["approved_plan"]:
                rollout = approved(args, names, inventory, hostvars, self._loader)
            else:
                variables = read_variables(hostvars, names, self._loader)
                rollout = fleet_waves.rollout([(n, variables[n]) for n in names])
                rollout["left_out"] = rollout["outside"] = []
        except (fleet_approval.ApprovalError, fleet_waves.WavesError) as exc:
            raise AnsibleActionFail(to_text(exc)) from None
        waves = rollout["waves"]
        lines = fleet_waves.wave_lines(waves)
        if args["approved_plan"]:
            if waves:
                lines.insert(0, "the approved plan %s: %d host(s) in %d wave(s), inputs unchanged since it was made, "
                             "its waves the ones its settings cut%s" % (
                                 args["approved_plan"], sum(len(w) for w in waves), len(waves),
                                 ", its SHA-256 the approved one" if rollout["sha256"] else ""))
            else:
                lines.insert(0, "the approved plan %s: this run is a job slice that holds none of its hosts, so "
                             "nothing runs here" % args["approved_plan"])
        if rollout["left_out"]:
            lines.append("not in the approved plan, left alone: %s" % ", ".join(rollout["left_out"]))
        if rollout["outside"]:
            lines.append("in the approved plan but not in this run's inventory (a job slice, or a host taken out), "
                         "not run here: %s" % _some(rollout["outside"]))
        fact = {"hosts": [n for wave in waves for n in wave], "serial": [len(w) for w in waves],
                "max_fail_percentage": rollout["max_fail_percentage"], "waves": waves,
                "approved_plan": args["approved_plan"] or ""}
        result.update(changed=False, lines=lines, ansible_facts={args["fact"]: fact})
        return result
