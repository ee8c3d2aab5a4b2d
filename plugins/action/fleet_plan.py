# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Controller side of gpuops.platform.fleet_plan: the whole fleet in one task."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from collections import ChainMap
from collections.abc import Mapping

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.vars.hostvars import HostVarsVars
from ansible.plugins.action import ActionBase

from ansible_collections.gpuops.platform.plugins.plugin_utils import (
    documents, fleet_approval, fleet_plan, fleet_report, fleet_schema, fleet_views, fleet_waves, recorded_facts,
    variable_sources)
from ansible_collections.gpuops.platform.plugins.plugin_utils.controller_files import write_atomic
from ansible_collections.gpuops.platform.plugins.plugin_utils.driver_action import refusal_lines
from ansible_collections.gpuops.platform.plugins.plugin_utils import variable_types
from ansible_collections.gpuops.platform.plugins.plugin_utils.variable_check import (
    GLOBAL_PREFIX, check_hosts, load_catalog, owner, refusal, set_by_tasks)
from ansible_collections.gpuops.platform.plugins.plugin_utils.controller_action import ControllerAction

ARGS = {
    "facts_dir": {"type": "path"},
    "report_dir": {"type": "path", "required": True},
    "hosts": {"type": "list", "elements": "str"},
    "mig_strategy": {"type": "str", "default": "single", "choices": ["none", "single", "mixed"]},
    "sharing_configs": {"type": "list", "elements": "dict", "default": []},
    "default_config": {"type": "str", "default": ""},
    "labels": {"type": "dict", "default": {}},
    "fail_on_invalid": {"type": "bool", "default": True},
    "title": {"type": "str", "default": "GPU fleet plan"},
    "return_facts": {"type": "bool", "default": False},
    "group": {"type": "str", "default": "gpu_nodes"},
    "previous_plan": {"type": "path"},
    "serial": {"type": "raw"},
    "canary": {"type": "raw"},
    "tenants": {"type": "dict", "default": {}},
    "stale_after_hours": {"type": "float", "default": 168},
}
PREVIEW = 5


def _write(path, text):
    """Write ``path`` atomically (temporary file in the same folder, then rename); True when it changed."""
    try:
        with open(path) as handle:
            if handle.read() == text:
                return False
    except (IOError, OSError):
        pass
    write_atomic(path, text.encode("utf-8"))
    return True


def _dump(plan):
    return json.dumps(plan, sort_keys=True, separators=(",", ":")) + "\n"


def _with_diff(plan, plan_file, previous_path):
    """(plan.json text, the old plan.json text to keep as plan.previous.json or None, True when the plan is the
    one already in plan.json).

    With ``previous_path`` the diff is against that plan. Otherwise against the
    plan.json already in the report folder: when the new plan is the same as
    that one but for its diff, that file stays as it is (a second run changes
    nothing, and says there was no change); when it differs, it becomes plan.previous.json.
    """
    if previous_path:
        plan["diff"] = fleet_views.diff(fleet_schema.load(previous_path, "previous_plan %s" % previous_path), plan,
                                        previous_path)
        return _dump(plan), None, False
    if not os.path.lexists(plan_file):
        return _dump(plan), None, False
    try:
        # Size and depth before it is parsed: a damaged plan.json is no diff, never the run's end.
        old_text, previous = documents.read_json(plan_file, "the plan.json already in report_dir",
                                                 documents.MAX_PLAN_BYTES, fleet_schema.PLAN_DEPTH)
    except documents.DocumentError as exc:
        plan["diff"] = {"previous": None, "problem": "no diff: %s" % exc}
        return _dump(plan), None, False
    if not isinstance(previous, dict):
        plan["diff"] = {"previous": None, "problem": "no diff: the plan.json already in report_dir %s is not a JSON "
                                                     "object" % plan_file}
        return _dump(plan), old_text, False
    if previous.get("version") == plan["version"] and isinstance(previous.get("diff"), dict):
        plan["diff"] = previous["diff"]
        if _dump(plan) == old_text:
            return old_text, None, True
    try:
        plan["diff"] = fleet_views.diff(previous, plan, os.path.join(os.path.dirname(plan_file), "plan.previous.json"))
    except fleet_schema.FleetPlanDataError as exc:
        plan["diff"] = {"previous": None, "problem": "no diff: %s" % exc}
    return _dump(plan), old_text, False


def _source_kind(hostvars, name):
    """The kind of store of a host's facts; a refused path is a store, whose problem is that host's error."""
    try:
        return recorded_facts.source(hostvars, name, "")[0]
    except recorded_facts.RecordedFactsError:
        return "file"


class _Variables(Mapping):
    """One host's variables, read from the inventory once; each is templated (in the host's context) once."""

    def __init__(self, variables):
        self._variables = variables
        self._templated = {}

    def __getitem__(self, key):
        if key not in self._templated:
            self._templated[key] = self._variables[key]
        return self._templated[key]

    def __contains__(self, key):
        return key in self._variables

    def __iter__(self):
        return iter(self._variables)

    def __len__(self):
        return len(self._variables)


def _templated(variables, name):
    """One host's variable, templated; LookupError when it reads something not defined yet."""
    try:
        return variables[name]
    except AnsibleError as exc:
        raise LookupError(to_text(exc))


def read_variables(hostvars, names, loader):
    """``{name: variables}`` of ``names``: one read of each host's variables serves every check and the plan.

    ``hostvars[name]`` asks Ansible's VariableManager for every variable of the host on each access (vars
    plugins, group and host variables, facts): at 20,000 hosts, a few seconds each time.
    """
    raw_get = getattr(hostvars, "raw_get", None)
    if raw_get is None:  # a plain mapping of variables
        return dict((name, hostvars[name]) for name in names)
    return dict((name, _Variables(_host_view(raw_get(name), loader, name))) for name in names)


def known_hosts(task_vars, names):
    """A task's ``hostvars``; AnsibleActionFail naming those of ``names`` that the inventory lacks."""
    hostvars = task_vars.get("hostvars") or {}
    unknown = [n for n in names if n not in hostvars]
    if unknown:
        raise AnsibleActionFail("hosts not in the inventory: %s" % ", ".join(unknown))
    return hostvars


def inventory_variables(task_vars, names, loader):
    """read_variables of ``names`` from a task's ``hostvars`` (known_hosts)."""
    return read_variables(known_hosts(task_vars, names), names, loader)


def _host_view(variables, loader, host):
    """The view ``hostvars[host]`` gives of ``variables``: templated on access, in the host's context."""
    try:
        return HostVarsVars(variables, loader=loader, host=host)
    except TypeError:  # ansible-core before 2.19 (the execution environment's) takes no host
        return HostVarsVars(variables, loader=loader)


class ActionModule(ControllerAction, ActionBase):
    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result, args = self.begin(tmp, task_vars, ARGS)
        for option in ("report_dir", "facts_dir", "previous_plan"):
            try:
                documents.refuse_nul(args[option] or "", option)
            except documents.DocumentError as exc:
                raise AnsibleActionFail("%s; nothing was planned or written" % exc)
        inventory = task_vars.get("groups") or {}
        names = args["hosts"] if args["hosts"] is not None else inventory.get(args["group"], [])
        hostvars = known_hosts(task_vars, names)
        variables = read_variables(hostvars, names, self._loader)
        # Before any of them is templated: a value whose YAML aliases expand past the budget would hang it.
        variable_sources.check_inventory_files(variables[n] for n in names)
        # Before anything is planned or written: a misspelt variable (nvidia_driver_verison) would be ignored and
        # its host planned with the default. The hosts run no play of their own, so their gpuops_* are checked too.
        manager, catalog = getattr(hostvars, "_variable_manager", None), load_catalog()
        _checked, _names, lines = check_hosts([(n, variables[n], True) for n in names], manager, catalog)
        if lines:
            result.update(failed=True, changed=False, msg=refusal(lines))
            return result
        # Their other versions (container_toolkit_version: 1.17 is a number), as check_variables checks a play's
        # hosts; the driver settings and the rollout's serial are the planner's own checks below.
        lines = variable_types.value_problems(
            [(n, variables[n]) for n in names], _templated,
            lambda name: name.startswith(GLOBAL_PREFIX) or owner(name, catalog["roles"]), variable_types.extra_var_names(manager),
            lambda host: set_by_tasks(manager, host) | set(variable_types.DRIVER_KINDS))
        if lines:
            result.update(failed=True, changed=False, msg=variable_types.refusal(lines))
            return result
        hosts = [(n, variables[n]) for n in names]
        if not args["facts_dir"]:
            without = [n for n, v in hosts if _source_kind(v, n) is None]
            if without:
                raise AnsibleActionFail(
                    "set facts_dir (gpuops_fleet_facts_dir), gpuops_fleet_facts_cache, or gpuops_nvml_replay_file for %s"
                    % ", ".join(without[:10]))
        elif not os.path.isdir(args["facts_dir"]):
            raise AnsibleActionFail("facts_dir %s is not a directory: give the folder of recorded nvml_facts "
                                    "outputs, one <inventory_hostname>.json per host" % args["facts_dir"])
        # Every host's settings before anything is planned or written: a run that is refused writes nothing.
        problems = fleet_plan.check_settings(hosts)
        if problems:
            # The lines upgrade.yml and nodes.yml refuse the same settings with (plugin_utils/driver_action.py).
            raise AnsibleActionFail("Nothing was planned or written:\n" + "\n".join(refusal_lines(problems, variables.get)))
        # The waves upgrade.yml runs, from the hosts' own rollout variables (or this task's serial and canary).
        given = dict((key, args[arg]) for key, arg in ((fleet_waves.SERIAL, "serial"), (fleet_waves.CANARY, "canary"))
                     if args[arg] is not None)
        try:
            rollout = fleet_waves.rollout([(n, ChainMap(given, v)) for n, v in hosts])
        except fleet_waves.WavesError as exc:
            raise AnsibleActionFail("Nothing was planned or written:\n%s" % exc) from None
        nodes = {} if args["return_facts"] else None
        inputs = {}
        try:
            plan = fleet_plan.plan_fleet(hosts, args["facts_dir"], args["mig_strategy"],
                                         args["sharing_configs"], args["default_config"], args["labels"], nodes, inputs)
        except fleet_plan.FleetPlanError as exc:
            raise AnsibleActionFail(to_text(exc)) from None

        report_dir = os.path.abspath(args["report_dir"])
        plan_file = os.path.join(report_dir, "plan.json")
        try:
            fleet_views.enrich(plan, names, fleet_views.pools(names, inventory, args["group"]), rollout["serial"][-1],
                               rollout["canary"], args["tenants"], args["stale_after_hours"],
                               max_fail_percentage=rollout["max_fail_percentage"], planned_waves=rollout["waves"])
            fleet_approval.record_inputs(plan, inputs)
            # The inventory's other hosts: a job slice that holds none of the plan's hosts is one of this inventory.
            plan["unplanned"] = sorted(set(inventory.get("all") or ()) - set(names))
            text, kept, same = _with_diff(plan, plan_file, args["previous_plan"])
        except fleet_schema.FleetPlanDataError as exc:
            raise AnsibleActionFail(to_text(exc))
        try:
            if not os.path.isdir(report_dir):
                os.makedirs(report_dir)
            changed = False
            if kept is not None:
                changed = _write(os.path.join(report_dir, "plan.previous.json"), kept)
            changed = _write(plan_file, text) or changed
            changed = _write(os.path.join(report_dir, "index.html"), fleet_report.render(plan, args["title"])) or changed
        except (IOError, OSError) as exc:
            raise AnsibleActionFail("cannot write the report into %s: %s" % (report_dir, exc))

        s = plan["summary"]
        result.update(
            changed=changed, valid=plan["valid"], errors=plan["errors"], summary=s,
            plan_file=plan_file, report_file=os.path.join(report_dir, "index.html"),
            overview=fleet_views.overview(plan, PREVIEW, same_as=plan_file if same else None),
            previews=fleet_views.previews(s, PREVIEW))
        if nodes is not None:
            result["nodes"] = nodes
        result["quota_errors"] = plan["tenants"]["errors"]
        if not plan["valid"] and args["fail_on_invalid"]:
            result["failed"] = True
            parts = []
            if plan["errors"]:
                parts.append("%d of %d host(s) cannot be planned:\n%s" % (len(s["hosts_invalid"]), s["hosts"],
                                                                          "\n".join(plan["errors"])))
            if result["quota_errors"]:
                parts.append("%d quota(s) cannot be read:\n%s" % (len(result["quota_errors"]),
                                                                  "\n".join(result["quota_errors"])))
            result["msg"] = "The plan is not valid (report written to %s):\n%s" % (result["report_file"], "\n".join(parts))
        return result
