# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Values of the wrong type, refused at the first task of every playbook, before any play copies them.

Private to the collection; the ``check_variables`` action uses it.

A version written unquoted in YAML is a number: ``gpuops_driver_version: 570.190``
is the float 570.19, and a play that copies it (``{{ gpuops_driver_version | string }}``)
plans "570.19", a downgrade of every node. So every version-like variable (a
driver version or branch, and any ``*_version`` or ``*_branch``) is checked as
the operator set it, whatever the source (inventory, ``-e key=value``,
``-e @file``, AWX extra_vars), and so are the batch sizes of nodes.yml and mig.yml.
Each refusal names the variable, the value (bounded, in ASCII), and where it
was set: the extra vars file, the command line, or the inventory files.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
from collections.abc import Mapping

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpuops.platform.plugins.module_utils._common.shown import shown, type_words
from ansible_collections.gpuops.platform.plugins.plugin_utils import documents
from ansible_collections.gpuops.platform.plugins.plugin_utils.driver_action import value_problem
from ansible_collections.gpuops.platform.plugins.plugin_utils.fleet_waves import WavesError, check_serial
from ansible_collections.gpuops.platform.plugins.plugin_utils.jinja_tests import DNS_SUBDOMAIN
from ansible_collections.gpuops.platform.plugins.plugin_utils.variable_sources import (
    hosts_phrase, shown_path, variable_sources)

# The driver's exact versions and branch: the driver decision's own check (driver_action.value_problem).
DRIVER_KINDS = {"gpuops_driver_version": "version", "nvidia_driver_version": "version",
                "gpu_upgrade_driver_version": "version", "nvidia_driver_branch": "branch"}
# Batch sizes of the rolling playbooks' serial keyword: a number of hosts above 0 or a percentage ("100%" is every
# host). gpuops_upgrade_serial is the waves' (plugin_utils/fleet_waves), checked where they are cut.
SERIALS = ("gpuops_nodes_serial", "gpuops_mig_serial")


def checked(name, owned):
    """Whether ``name`` is a variable whose type this module checks: a driver setting, a batch size, or a
    ``*_version``/``*_branch`` that ``owned(name)`` says is the collection's (not ansible_version)."""
    return name in DRIVER_KINDS or name in SERIALS or (name.endswith(("_version", "_branch")) and bool(owned(name)))


def problem(name, value):
    """Why ``value`` cannot be the value of ``name``, or None."""
    if name in DRIVER_KINDS:
        return value_problem(name, value, DRIVER_KINDS[name])
    if name in SERIALS:
        if isinstance(value, (bool, float)) or not isinstance(value, (int, str, type(None))):
            return "%s must be a number of hosts or a percentage such as \"25%%\", got %s %s" % (
                name, type_words(value), shown(value))
        try:
            check_serial(value, name)
        except WavesError as exc:
            return to_text(exc)
        return None
    if isinstance(value, (bool, float)):
        return ("%s is %s %s, not a string: YAML reads an unquoted version as a number (1.10 becomes 1.1), "
                "so quote it as written, such as %s: \"1.10\"" % (name, type_words(value), shown(value), name))
    if value is not None and not isinstance(value, (str, int)):
        return "%s must be a version (a string), got %s %s" % (name, type_words(value), shown(value))
    return None


# The variables that give a GPU host's Kubernetes node name, first set first; else the inventory host name.
NODE_NAME_VARIABLES = ("gpu_nodes_node_name", "mig_k8s_node_name")
_NODE_NAME = re.compile(DNS_SUBDOMAIN)


def node_name_problem(host, variables):
    """``(variable, message)`` when the Kubernetes node name of ``host`` (its ``gpu_nodes_node_name`` or
    ``mig_k8s_node_name``, else the inventory host name) is no lowercase RFC 1123 name, else None. A value that is
    not text is the type check's (fleet_plan.setting_type_errors)."""
    for variable in NODE_NAME_VARIABLES:
        value = variables.get(variable) if variable in variables else None
        if value:
            break
    else:
        variable, value = "inventory_hostname", host
    if not isinstance(value, str) or (len(value) <= 253 and _NODE_NAME.match(value)):
        return None
    if variable == "inventory_hostname":
        where, fix = "the inventory host name", "name the host as its Kubernetes node is named, or set gpu_nodes_node_name"
    else:
        where, fix = variable, "set %s to the node's name as Kubernetes has it" % variable
    return variable, ("Kubernetes node name %s (%s) is not a lowercase RFC 1123 name (a-z, 0-9, '-' and '.', starting "
                      "and ending with a letter or digit, at most 253 characters), so no node of the cluster has it: %s"
                      % (shown(value), where, fix))


def node_name_problems(targets):
    """``[line]``: one line per host of ``targets`` (``[(host, variables)]``) whose node name node_name_problem
    refuses, naming the variable's files."""
    lines = []
    for host, variables in targets:
        found = node_name_problem(host, variables)
        if found:
            files = variable_sources([found[0]], [variables]).get(found[0])
            lines.append("%s (%s%s)" % (found[1], hosts_phrase([host]), "; set in %s" % ", ".join(files) if files else ""))
    return lines


def extra_var_names(manager):
    """The names set as extra vars (``-e``, AWX extra_vars) of this run, from the VariableManager (None: none)."""
    extra = getattr(manager, "extra_vars", None)
    return frozenset(extra) if isinstance(extra, Mapping) else frozenset()


def _extra_vars_arguments():
    """The ``-e`` arguments of this run, in order (ansible-runner, and so AWX, passes ``-e @<file>``)."""
    try:
        from ansible import context
        return [to_text(arg) for arg in context.CLIARGS.get("extra_vars") or ()]
    except Exception:  # pylint: disable=broad-except  # no CLI (a test, an API run): no -e to name
        return []


def extra_vars_source(name, arguments=None):
    """Where the extra var ``name`` was set: ``extra vars file <path>`` (the last ``-e @file`` that sets it)
    or ``extra vars (-e on the command line)``."""
    arguments = _extra_vars_arguments() if arguments is None else arguments
    for argument in reversed(arguments):
        if argument.startswith("@"):
            path = argument[1:]
            try:
                data = documents.read_yaml(os.path.expanduser(path), "extra vars file")
            except documents.DocumentError:
                continue
            if isinstance(data, dict) and name in data:
                return "extra vars file %s" % shown_path(path)
        elif argument.startswith(name + "=") or ('"%s"' % name) in argument or (name + ":") in argument:
            return "extra vars (-e on the command line)"
    return "extra vars"


def value_problems(targets, value_of, owned, extra_vars=(), skip=None):
    """``[line]``: one line per refused value of ``targets`` (``[(host, variables)]``), its hosts grouped, naming
    where it was set. ``value_of(variables, name)``: the value, templated (LookupError: not known yet, left to
    the role); ``owned(name)``: whether the name is a role's or platform-wide (see checked); ``extra_vars``: the
    names set as extra vars (every host has their value); ``skip(host)``: names set by tasks, not checked."""
    grouped, order = {}, []
    for host, variables in targets:
        left_out = skip(host) if skip else ()
        for name in sorted(n for n in variables if n not in left_out and checked(to_text(n), owned)):
            try:
                value = value_of(variables, name)
            except LookupError:
                continue
            message = problem(to_text(name), value)
            if message is None:
                continue
            key = (to_text(name), message)
            if key not in grouped:
                grouped[key] = []
                order.append(key)
            grouped[key].append((host, variables))
    lines = []
    for name, message in order:
        hosts = grouped[(name, message)]
        if name in extra_vars:
            lines.append("%s (set in %s)" % (message, extra_vars_source(name)))
            continue
        files = variable_sources([name], [variables for _host, variables in hosts]).get(name)
        lines.append("%s (%s%s)" % (message, hosts_phrase(h for h, _v in hosts),
                                    "; set in %s" % ", ".join(files) if files else ""))
    return lines


def refusal(lines):
    """The failure message of value_problems' lines."""
    return "Variables of the wrong type or form (nothing was planned or changed):\n" + "\n".join(lines)


# The checks of the Kubernetes layer's plans that a role runs before it publishes them (gpu_plan_refusal).
PLAN_CHECKS = ("gpu_sharing_configs", "gpu_tenants_plan")


def plan_refusal(value, check, variable, variables, *args):
    """``[line]``: the refusal of ``check`` (a planner of plugin_utils/gpu_capacity, one of PLAN_CHECKS) for the
    operator's ``variable`` (``value``, then ``args`` as the planner takes them), naming the variable, the host and
    the files that set it; empty when the planner takes the value. A role asserts this before the set_fact that
    publishes the plan, so the refusal is the collection's own message, not one wrapped in set_fact's."""
    from ansible_collections.gpuops.platform.plugins.plugin_utils import gpu_capacity

    if check not in PLAN_CHECKS:
        raise ValueError("gpu_plan_refusal: unknown check %s (one of %s)" % (shown(check), ", ".join(PLAN_CHECKS)))
    try:
        getattr(gpu_capacity, check)(value, *args)
    except (gpu_capacity.CapacityError, TypeError, ValueError) as exc:
        variables = variables or {}
        files = variable_sources([variable], [variables]).get(variable)
        host = to_text(variables.get("inventory_hostname") or "")
        where = [hosts_phrase([host])] if host else []
        where += ["set in %s" % ", ".join(files)] if files else []
        return ["%s: %s%s" % (variable, to_text(exc), " (%s)" % "; ".join(where) if where else "")]
    return []
