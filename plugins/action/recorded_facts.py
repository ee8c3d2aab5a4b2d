# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Controller side of gpuops.platform.recorded_facts: load or record one host's facts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os

from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.gpuops.platform.plugins.plugin_utils import recorded_facts
from ansible_collections.gpuops.platform.plugins.plugin_utils.controller_action import ControllerAction

ARGS = {
    "record": {"type": "bool", "default": False},
    "nvidia": {"type": "dict"},
    "node": {"type": "dict", "default": {}},
    "facts_dir": {"type": "path"},
    "refuse_changes": {"type": "bool", "default": False},
    "plan_only": {"type": "bool", "default": False},
}
PLAN_ONLY = ("This inventory is plan-only (gpuops_nodes_plan_only is true): run ansible-playbook with --check to see "
             "the plan, or set gpuops_nodes_plan_only to false to change the nodes.")
# This file is <collection>/plugins/action/recorded_facts.py.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def collection_version(root=COLLECTION_ROOT):
    """The version of this collection: MANIFEST.json once installed, galaxy.yml in a source tree."""
    try:
        with open(os.path.join(root, "MANIFEST.json")) as handle:
            return json.load(handle)["collection_info"]["version"]
    except (IOError, OSError, ValueError, KeyError, TypeError):
        pass
    try:
        import yaml  # the controller always has PyYAML (ansible-core needs it)

        with open(os.path.join(root, "galaxy.yml")) as handle:
            return str(yaml.safe_load(handle)["version"])
    except (IOError, OSError, ValueError, KeyError, TypeError, ImportError):
        return "unknown"


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ActionModule(ControllerAction, ActionBase):
    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result, args = self.begin(tmp, task_vars, ARGS)
        if args["plan_only"] and not self._task.check_mode:
            raise AnsibleActionFail(PLAN_ONLY)
        name = task_vars.get("inventory_hostname")
        # The host's variables, templated as they are read (task_vars holds them raw).
        hostvars = (task_vars.get("hostvars") or {}).get(name) or {}
        if args["record"]:
            return self._record(result, name, args, hostvars)
        try:
            where, record = recorded_facts.load(hostvars, name, args["facts_dir"])
        except recorded_facts.RecordedFactsError as exc:
            raise AnsibleActionFail("%s: %s" % (name, to_text(exc)))
        if record is not None and args["refuse_changes"] and not self._task.check_mode:
            raise AnsibleActionFail(
                "%s is planned from recorded facts (%s): run with --check, or unset gpuops_nvml_replay_file / "
                "gpuops_fleet_facts_dir / gpuops_fleet_facts_cache to change the live host" % (name, where))
        result.update(changed=False, recorded=record is not None, source=where)
        if record is not None:
            result.update(recorded_at=record["recorded_at"], collection_version=record["collection_version"],
                          node=record["node"],
                          ansible_facts={"nvidia": record["nvidia"]})
        return result

    def _record(self, result, name, args, hostvars):
        if not args["nvidia"]:
            raise AnsibleActionFail("record needs nvidia (the ansible_facts.nvidia of gpuops.platform.nvml_facts)")
        record = recorded_facts.make_record(name, args["nvidia"], args["node"], now(), collection_version())
        folder = args["facts_dir"] if args["facts_dir"] is not None else hostvars.get("gpuops_fleet_facts_dir")
        check = bool(self._task.check_mode)
        result.setdefault("warnings", [])
        nowhere = ("%s: nowhere to record its facts: set gpuops_fleet_facts_dir (a folder on the controller), or turn "
                   "on Ansible's fact cache (fact_caching = jsonfile in ansible.cfg, or use_fact_cache on the AWX job "
                   "template)" % name)
        if not folder and C.CACHE_PLUGIN == "memory":
            if not check:
                raise AnsibleActionFail(nowhere)
            # A check run records nothing anyway; the real run would stop here.
            result["warnings"].append(nowhere)
        state, path = None, None
        if folder:
            try:
                path = recorded_facts.record_path(os.path.abspath(str(folder)), name)
            except recorded_facts.documents.DocumentError as exc:
                raise AnsibleActionFail("%s: nothing was recorded: %s" % (name, to_text(exc)))
            try:
                state = recorded_facts.write(path, record, check_mode=check, notes=result["warnings"])
            except (IOError, OSError) as exc:
                raise AnsibleActionFail("%s: cannot write its recorded facts to %s: %s" % (name, path, to_text(exc)))
        cached = (hostvars.get("ansible_facts") or {}).get(recorded_facts.CACHE_FACT)
        cache_changed = not (recorded_facts.usable(cached) and recorded_facts.same_facts(cached, record))
        if not path:
            state = "written" if cache_changed else "unchanged"
        result.update(changed=state == "written", state=state, path=path,
                      recorded_at=record["recorded_at"])
        # Into Ansible's fact cache (AWX's fact storage), unless this is a check run,
        # or the facts there are the same (the recording time is not a change).
        if not check and cache_changed:
            result["ansible_facts"] = {recorded_facts.CACHE_FACT: record}
        return result
