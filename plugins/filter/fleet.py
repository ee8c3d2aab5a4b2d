# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Filters over the fleet plan: a node's driver plan from replayed facts, and the page from plan.json.

With replayed facts the node's packages are not known, and the controller's
own are not the node's: the plan compares the wanted driver with the facts'
user-space and kernel module versions only: plugin_utils/driver_action.py, the
fleet planner's and the rolling upgrade's decision.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

fleet_plan = lazy_module("plugin_utils.fleet_plan")
fleet_report = lazy_module("plugin_utils.fleet_report")
fleet_schema = lazy_module("plugin_utils.fleet_schema")


def nvidia_driver_replay_plan(facts, state="present", version="", branch=None, open_modules=True, source="cuda",
                              fabricmanager="auto", allow_downgrade=False, provenance=None):
    """The nvidia_driver role's plan from replayed facts; ``provenance``: the record's node.driver_provenance."""
    if not isinstance(facts, Mapping) or "gpus" not in facts:
        raise AnsibleFilterError("nvidia_driver_replay_plan needs the replayed ansible_facts.nvidia (with gpus)")
    if provenance:
        facts = dict(facts, driver_provenance=provenance)
    # As the inventory gives them: a version that is a YAML number is refused, never read as text.
    settings = dict(fleet_plan.DEFAULTS, nvidia_driver_state=state, nvidia_driver_version=version,
                    nvidia_driver_branch=fleet_plan.DEFAULTS["nvidia_driver_branch"] if branch is None else branch,
                    nvidia_driver_fabricmanager=str(fabricmanager).lower(), nvidia_driver_allow_downgrade=allow_downgrade)
    errors = fleet_plan.setting_errors(settings)
    if errors:
        # A result that failed, like the module's, so the role reports the message itself (a filter that
        # raised would come wrapped in ansible-core's "Finalization of task args ... failed").
        return {"failed": True, "changed": False, "replayed": True, "reboot_required": False, "reboot_reasons": [],
                "msg": "; ".join(message for variable, message in errors)}
    driver, errors = fleet_plan.plan_driver(settings, facts)
    if errors:
        # A downgrade without consent, a driver from outside the packages that is not the wanted one.
        return {"failed": True, "changed": False, "replayed": True, "reboot_required": False, "reboot_reasons": [],
                "action": driver["action"], "msg": "; ".join(errors)}
    fabric, errors, warnings = fleet_plan.plan_fabric(settings, facts)
    actions = []
    if driver["action"] != "none":
        actions.append("%s the driver (%s): %s" % (driver["action"], driver["wanted"], "; ".join(driver["reasons"])))
    elif driver.get("foreign"):
        warnings = warnings + driver["reasons"][:1]
    services = (["nvidia-persistenced"] + (["nvidia-fabricmanager"] if fabric["fabric_manager"] else [])
                if state != "absent" else [])
    return {
        "changed": bool(actions), "check_mode": True, "replayed": True, "actions": actions,
        # the fleet plan's word for it (plugin_utils/driver_action.py): install, upgrade, downgrade, remove or none
        "action": driver["action"],
        "previous_version": driver["installed"],
        # after the change; a branch change installs a version only the repository knows
        "installed_version": None if state == "absent" else (
            driver["version"] or (driver["installed"] if driver["action"] == "none" else None)),
        "loaded_version": driver["loaded"],
        "wanted": {"version": driver["version"] or None, "branch": driver["branch"] or None, "open": bool(open_modules),
                   "source": source},
        "reboot_required": driver["reboot_required"],
        "reboot_reasons": driver["reasons"] if driver["reboot_required"] else [],
        "gpu_count": len(facts.get("gpus") or []), "nvswitch_count": fabric["nvswitches"],
        "fabricmanager": fabric["fabric_manager"], "services": services,
        "kernel": "unknown (replayed facts)", "secure_boot": "unknown (replayed facts)", "warnings_list": warnings,
        "kept": driver["reasons"][0] if driver.get("foreign") else None,
    }


def fleet_page(plan, title="GPU fleet plan"):
    """The fleet page (index.html) from a plan.json, checked against its schema: no inventory, no facts."""
    try:
        return fleet_report.render(fleet_schema.check(plan), title)
    except fleet_schema.FleetPlanDataError as exc:
        raise AnsibleFilterError("fleet_page: %s" % exc)


FilterModule = filter_module(
    nvidia_driver_replay_plan,
    fleet_page,
)
