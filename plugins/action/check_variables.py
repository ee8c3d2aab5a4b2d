# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Fail a plan on variables that look like a role's (or the platform's) but that nothing defines.

The check itself is plugin_utils/variable_check.py, which the fleet planner uses too.

Argument specs validate the variables a role knows; a misspelt one
(``gpu_sharing_config`` for ``gpu_sharing_configs``) is simply never read.
This action finds, among the variables of the current host (and of the hosts
named in ``hosts``), every name with a role's prefix ``<role>_`` or
``gpuops_`` that the role's ``meta/argument_specs.yml`` (or ``meta/variables.yml``
for ``gpuops_*``) does not define, and fails naming the closest known one, or
the new name of a variable that ``meta/variables.yml`` lists as renamed.

A name belongs to the role with the longest matching prefix, so ``gpu_nodes_x``
is gpu_nodes' even if a role ``gpu`` existed. Facts and registered results
(set by tasks, not by the user) and internal names (``__x``, ``<role>__x``)
are not checked.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.gpuops.platform.plugins.plugin_utils.variable_check import (
    GLOBAL_PREFIX, check_hosts, invalid_values, load_catalog, load_specs, name_sources, owner, refusal, set_by_tasks)
from ansible_collections.gpuops.platform.plugins.plugin_utils.variable_types import refusal as types_refusal
from ansible_collections.gpuops.platform.plugins.plugin_utils.variable_types import (
    extra_var_names, node_name_problems, value_problems)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("roles", "hosts", "globals", "host_globals", "validate", "validate_hosts"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        dummy, args = self.validate_argument_spec(argument_spec=dict(
            roles=dict(type="list", elements="str"),
            hosts=dict(type="list", elements="str", default=[]),
            globals=dict(type="bool", default=True),
            host_globals=dict(type="bool", default=False),
            validate=dict(type="bool", default=False),
            validate_hosts=dict(type="bool", default=False),
        ))
        catalog = load_catalog()
        if args["roles"] is not None:
            missing = sorted(set(args["roles"]) - set(catalog["roles"]))
            if missing:
                raise AnsibleError("check_variables: no role %s in this collection (roles: %s)"
                                   % (", ".join(missing), ", ".join(sorted(catalog["roles"]))))
        hostvars = task_vars.get("hostvars") or {}
        manager = getattr(hostvars, "_variable_manager", None)
        current = to_text(task_vars.get("inventory_hostname") or "localhost")

        targets = [(current, task_vars, args["globals"])]
        for host in args["hosts"]:
            if host != current and host in hostvars:
                # Other hosts: their role variables; their gpuops_* too with host_globals (hosts that never run
                # a play of their own, as in plan_fleet.yml), else they are checked where they run.
                targets.append((host, hostvars[host], args["globals"] and args["host_globals"]))
        checked, unknown, lines = check_hosts(targets, manager, catalog, args["roles"])
        result.update(changed=False, checked=checked, unknown=unknown)
        if lines:
            result.update(failed=True, msg=refusal(lines))
            return result
        # Versions and batch sizes as the operator set them, before any play copies them (a float version
        # through "{{ x | string }}" would be planned as "570.19").
        lines = value_problems([(host, variables) for host, variables, _globals in targets], self._any_value,
                               lambda name: name.startswith(GLOBAL_PREFIX) or owner(name, catalog["roles"]),
                               extra_var_names(manager),
                               lambda host: set_by_tasks(manager, host))
        # The GPU hosts' Kubernetes node names (L40S-01 is no node's name), as the planner checks them.
        lines += node_name_problems([(host, variables) for host, variables, _globals in targets
                                     if "gpu_nodes" in (variables.get("group_names") or ())])
        if lines:
            result.update(failed=True, msg=types_refusal(lines))
            return result
        result["msg"] = "No unknown variables among %d checked" % checked
        specs = load_specs()
        names = frozenset(task_vars) - set_by_tasks(manager, current)
        if args["validate"]:
            # The current host's values against the roles' argument specs, as each role's include would; with
            # validate_hosts, the named hosts' too (plan_fleet.yml reads the control host's role variables).
            validated, errors = invalid_values(names, specs, lambda name: self._value(task_vars, name), args["roles"])
            errors = name_sources(errors, names, [task_vars], extra_var_names(manager), [current])
            for host, variables, _globals in targets[1:] if args["validate_hosts"] else []:
                their = frozenset(variables) - set_by_tasks(manager, host)
                count, found = invalid_values(their, specs, lambda name: self._any_value(variables, name), args["roles"])
                validated += count
                errors += name_sources(found, their, [variables], extra_var_names(manager), [host])
            result["validated"] = validated
            if errors:
                result.update(failed=True, argument_errors=errors,
                              msg="Variables that their role's argument specs refuse (meta/argument_specs.yml):\n" + "\n".join(errors))
                return result
        result["enabled"] = self._enabled(task_vars, names, specs)
        return result

    def _enabled(self, task_vars, names, specs):
        """``{role: bool}``: each role's ``<role>_enabled`` switch, as set here or by its argument spec's default, so
        that a play can leave a switched-off role out before loading it. A value that reads another role's default
        is templated with the argument specs' defaults beside the host's variables."""
        enabled = {}
        for role, options in sorted(specs.items()):
            name = role + "_enabled"
            if name not in options:
                continue
            if name not in names:
                enabled[role] = boolean(options[name].get("default", False), strict=False)
                continue
            try:
                value = self._value(task_vars, name)
            except LookupError:
                defaults = dict((n, o["default"]) for opts in specs.values() for n, o in opts.items() if "default" in o)
                defaults.update(task_vars)
                with self._templar.set_temporary_context(available_variables=defaults):
                    try:
                        value = self._value(defaults, name)
                    except LookupError as exc:
                        raise AnsibleError("check_variables: cannot tell whether role %s is enabled: %s (set %s to true or false)"
                                           % (role, exc, name))
            enabled[role] = boolean(value, strict=False)
        return enabled

    def _any_value(self, variables, name):
        """``variables[name]`` templated: the current host's with this task's templar, another host's (hostvars)
        by its own view, which templates in that host's context. LookupError when it cannot be known yet."""
        try:
            return self._templar.template(variables[name]) if isinstance(variables, dict) else variables[name]
        except AnsibleError as exc:
            raise LookupError(to_text(exc))

    def _value(self, task_vars, name):
        """The variable's value, templated; LookupError when it reads something not defined yet."""
        try:
            return self._templar.template(task_vars[name])
        except AnsibleError as exc:
            raise LookupError(to_text(exc))
