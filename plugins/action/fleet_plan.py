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

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan, fleet_report, recorded_facts
from ansible_collections.gpuops.platform.plugins.plugin_utils.controller_files import write_atomic

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
}


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


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGS)
        inventory = task_vars.get("groups") or {}
        names = args["hosts"] if args["hosts"] is not None else inventory.get("gpu_nodes", [])
        hostvars = task_vars.get("hostvars") or {}
        unknown = [n for n in names if n not in hostvars]
        if unknown:
            raise AnsibleActionFail("hosts not in the inventory: %s" % ", ".join(unknown))
        if not args["facts_dir"]:
            without = [n for n in names if recorded_facts.source(hostvars[n], n, "")[0] is None]
            if without:
                raise AnsibleActionFail(
                    "set facts_dir (gpuops_fleet_facts_dir), gpuops_fleet_facts_cache, or gpuops_nvml_replay_file for %s"
                    % ", ".join(without[:10]))
        elif not os.path.isdir(args["facts_dir"]):
            raise AnsibleActionFail("facts_dir %s is not a directory: give the folder of recorded nvml_facts "
                                    "outputs, one <inventory_hostname>.json per host" % args["facts_dir"])
        nodes = {} if args["return_facts"] else None
        try:
            plan = fleet_plan.plan_fleet([(n, hostvars[n]) for n in names], args["facts_dir"], args["mig_strategy"],
                                         args["sharing_configs"], args["default_config"], args["labels"], nodes)
        except fleet_plan.FleetPlanError as exc:
            raise AnsibleActionFail(to_text(exc))

        report_dir = os.path.abspath(args["report_dir"])
        try:
            if not os.path.isdir(report_dir):
                os.makedirs(report_dir)
            changed = _write(os.path.join(report_dir, "plan.json"), json.dumps(plan, indent=1, sort_keys=True) + "\n")
            changed = _write(os.path.join(report_dir, "index.html"), fleet_report.render(plan, args["title"])) or changed
        except (IOError, OSError) as exc:
            raise AnsibleActionFail("cannot write the report into %s: %s" % (report_dir, exc))

        s = plan["summary"]
        result.update(
            changed=changed, valid=plan["valid"], errors=plan["errors"], summary=s,
            plan_file=os.path.join(report_dir, "plan.json"), report_file=os.path.join(report_dir, "index.html"))
        if nodes is not None:
            result["nodes"] = nodes
        if not plan["valid"] and args["fail_on_invalid"]:
            result["failed"] = True
            result["msg"] = ("%d of %d host(s) cannot be planned (report written to %s):\n%s"
                             % (len(s["hosts_invalid"]), s["hosts"], result["report_file"], "\n".join(plan["errors"])))
        return result
