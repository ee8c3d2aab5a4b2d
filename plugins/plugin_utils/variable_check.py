# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Variables that look like a role's (or the platform's) but that nothing defines: the one check of every entry point.

Private to the collection; the ``check_variables`` action and the fleet planner
(which reads the variables of hosts that run no play of their own) use it.

Argument specs validate the variables a role knows; a misspelt one
(``gpu_sharing_config`` for ``gpu_sharing_configs``) is simply never read.
This finds, among the variables of a host, every name with a role's prefix
``<role>_`` or ``gpuops_`` that the role's ``meta/argument_specs.yml`` (or
``meta/variables.yml`` for ``gpuops_*``) does not define, naming the closest
known one, or the new name of a variable that ``meta/variables.yml`` lists as
renamed.

A name belongs to the role with the longest matching prefix, so ``gpu_nodes_x``
is gpu_nodes' even if a role ``gpu`` existed. Facts and registered results
(set by tasks, not by the user) and internal names (``__x``, ``<role>__x``)
are not checked.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import os
import re
from collections.abc import Mapping

import yaml

from ansible.errors import AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.parameters import remove_values
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpuops.platform.plugins.module_utils._common.shown import MAX_SHOWN, shown, shown_name, type_words
from ansible_collections.gpuops.platform.plugins.plugin_utils.jinja_tests import unique
from ansible_collections.gpuops.platform.plugins.plugin_utils.variable_sources import hosts_phrase, variable_sources

GLOBAL_PREFIX = "gpuops_"
# This file is <collection>/plugins/plugin_utils/variable_check.py.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_CATALOGS = {}
_SPECS = {}


# libyaml's loader where PyYAML has it: every playbook's first task reads every role's specs, and the pure
# Python loader spends most of that task's time on them.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FILES = {}


def _yaml(path):
    """The YAML document of ``path`` ({} when missing), read once per process."""
    if path in _FILES:
        return _FILES[path]
    try:
        with open(path, "rb") as handle:
            data = yaml.load(handle, Loader=_LOADER) or {}  # nosec B506 - a safe loader, C or Python
    except FileNotFoundError:
        data = {}
    except (OSError, yaml.YAMLError) as exc:
        raise AnsibleError("cannot read %s: %s" % (path, to_text(exc)))
    _FILES[path] = data
    return data


def load_catalog(root=COLLECTION_ROOT):
    """``{"roles": {role: set(names)}, "globals": set(names), "renamed": {old: new}}`` from the collection's
    files (read once per process)."""
    if root in _CATALOGS:
        return _CATALOGS[root]
    roles, global_names = {}, set()
    roles_dir = os.path.join(root, "roles")
    for role in sorted(os.listdir(roles_dir)) if os.path.isdir(roles_dir) else []:
        base = os.path.join(roles_dir, role)
        specs = _yaml(os.path.join(base, "meta", "argument_specs.yml")).get("argument_specs") or {}
        names = set()
        for entry in specs.values():
            names.update((entry or {}).get("options") or {})
        # Defaults and role vars are defined by the role itself, so never a typo.
        for folder in ("defaults", "vars"):
            names.update(_yaml(os.path.join(base, folder, "main.yml")))
        global_names.update(n for n in names if n.startswith(GLOBAL_PREFIX))
        roles[role] = set(n for n in names if n.startswith(role + "_"))
    listed = _yaml(os.path.join(root, "meta", "variables.yml"))
    for section in ("variables", "facts"):
        global_names.update(listed.get(section) or {})
    catalog = {"roles": roles, "globals": global_names, "renamed": dict(listed.get("renamed") or {})}
    _CATALOGS[root] = catalog
    return catalog


def load_specs(root=COLLECTION_ROOT):
    """``{role: {name: spec}}``: every role's options, of all its entry points (the first entry point that
    defines an option wins), read once per process."""
    if root in _SPECS:
        return _SPECS[root]
    specs = {}
    roles_dir = os.path.join(root, "roles")
    for role in sorted(os.listdir(roles_dir)) if os.path.isdir(roles_dir) else []:
        entries = _yaml(os.path.join(roles_dir, role, "meta", "argument_specs.yml")).get("argument_specs") or {}
        options = {}
        for entry in entries.values():
            for name, spec in ((entry or {}).get("options") or {}).items():
                options.setdefault(name, spec or {})
        specs[role] = options
    _SPECS[root] = specs
    return specs


# Spec keys that describe an option for the reader, or that only the role's own
# include can judge (required, and the default it fills in): not validated here.
_NOT_VALIDATED = frozenset(("description", "version_added", "required", "default"))


def invalid_values(names, specs, value_of, roles=None):
    """``(checked, errors)``: the values of ``names`` that a role's argument spec refuses.

    The same validation as a role's include (ansible-core's ArgumentSpecValidator, with the
    same messages), for the variables that are set, so that a play which includes many
    roles can check them all at once and include them with ``rolespec_validate: false``.
    ``value_of(name)`` returns the value, templated, or raises ``LookupError`` when it cannot
    be known yet (a template that reads a variable set later): such a value is left to the
    role. ``roles``: the roles whose options are validated (default every role).
    """
    spec, values = {}, {}
    for role in sorted(specs if roles is None else roles):
        for name, option in (specs.get(role) or {}).items():
            if name in names and name not in spec:
                spec[name] = dict((k, v) for k, v in option.items() if k not in _NOT_VALIDATED)
    for name in sorted(spec):
        try:
            values[name] = value_of(name)
        except LookupError:
            del spec[name]
    if not spec:
        return 0, []
    # A list or a mapping given as something else: said in words here, as ansible-core would convert it first
    # (gpu_sharing_configs: 3 became ["3"], refused as "Elements value ... is of type str").
    shaped = [(name, _shape_problem(name, spec[name], values[name])) for name in sorted(spec)]
    errors = [problem for _name, problem in shaped if problem]
    for name, problem in shaped:
        if problem:
            del spec[name], values[name]
    result = ArgumentSpecValidator(spec).validate(values)
    # A message may quote the value (a choice, a conversion): a no_log option's never shows.
    # ansible-core's messages quote the value whole (a 1 MiB string, 1 MiB of message): each is cut.
    return len(spec) + len(errors), errors + [_bounded(e) for e in remove_values(
        [to_text(e) for e in result.error_messages], result._no_log_values)]


def _bounded(message, limit=4 * MAX_SHOWN):
    """``message`` cut after ``limit`` characters, its length given."""
    return message if len(message) <= limit else "%s... (%d characters)" % (message[:limit], len(message))


def _shape_problem(name, option, value):
    """Why ``value`` is not the list or mapping (or list of mappings) ``option`` asks for, or None."""
    kind, elements = option.get("type"), option.get("elements")
    if value is None or option.get("no_log"):
        return None
    if kind == "list" and elements == "dict" and not isinstance(value, (list, tuple)):
        return "%s must be a list of mappings, got %s %s" % (name, type_words(value), shown(value))
    if kind == "list" and elements == "dict":
        for position, item in enumerate(value):
            if not isinstance(item, Mapping):
                return "%s[%d] must be a mapping, got %s %s" % (name, position, type_words(item), shown(item))
    if kind == "list" and not isinstance(value, (list, tuple, str)):
        return "%s must be a list, got %s %s" % (name, type_words(value), shown(value))
    if kind == "dict" and not isinstance(value, (Mapping, str)):
        return "%s must be a mapping, got %s %s" % (name, type_words(value), shown(value))
    return None


def name_sources(errors, names, variables_list, extra_vars=frozenset(), hosts=None):
    """``errors`` (messages that name a variable of ``names``) each followed by where that variable was set:
    ``(host h; set in <file>)`` from the inventory files of ``variables_list``, or ``(set in extra vars)``."""
    ordered = sorted((to_text(n) for n in names), key=len, reverse=True)
    out = []
    for error in errors:
        name = next((n for n in ordered if re.search(r"(?<![\w])%s(?![\w])" % re.escape(n), error)), None)
        where = []
        if hosts:
            where.append(hosts_phrase(hosts))
        if name in extra_vars:
            where.append("set in extra vars")
        elif name:
            files = variable_sources([name], variables_list).get(name)
            if files:
                where.append("set in %s" % ", ".join(files))
        out.append("%s (%s)" % (error, "; ".join(where)) if where else error)
    return out


def owner(name, roles):
    """The role whose prefix ``<role>_`` is the longest start of ``name``, or None."""
    best = None
    for role in roles:
        if name.startswith(role + "_") and (best is None or len(role) > len(best)):
            best = role
    return best


def _internal(name, role):
    # _x, <role>__x and gpuops_<area>__x are internal (play vars, set_fact)
    return name.startswith("_") or "__" in name


def _public(names):
    """The names a message may offer: never an internal one (``<role>__x``), which no inventory should set."""
    return sorted(n for n in names if not _internal(n, None))


def targets(new):
    """The variables a ``renamed`` entry sends an old name to: one name, or a list of them."""
    return [to_text(n) for n in (new if isinstance(new, (list, tuple)) else [new])]


def unknown_variables(names, catalog, roles=None, check_globals=True):
    """``[(name, owner, closest known name or None, known names)]`` for the names nothing defines.

    ``roles``: the roles whose prefixes are checked (default every role of the catalog). A name of the
    ``renamed`` table (another tool's, such as DeepOps' ``k8s_gpu_mig_strategy``) is reported even without
    a role's prefix, with the platform-wide variables when ``check_globals``. Internal names are never offered.
    """
    all_roles = catalog["roles"]
    renamed = catalog.get("renamed") or {}
    checked = set(all_roles if roles is None else roles)
    problems = []
    for name in sorted(set(to_text(n) for n in names)):
        role = owner(name, all_roles)
        if role is not None:
            if role not in checked or _internal(name, role) or name in all_roles[role]:
                continue
            known = all_roles[role]
        elif name.startswith(GLOBAL_PREFIX) and check_globals and not _internal(name, None):
            if name in catalog["globals"]:
                continue
            role, known = "gpuops", catalog["globals"]
        elif name in renamed and check_globals:
            role, known = "gpuops", catalog["globals"]
        else:
            continue
        if name in renamed:
            problems.append((name, role, renamed[name], _public(known)))
            continue
        # Compare what follows the shared prefix, or every name would look close.
        prefix = GLOBAL_PREFIX if role == "gpuops" else role + "_"
        suffixes = dict((k[len(prefix):], k) for k in _public(known))
        close = difflib.get_close_matches(name[len(prefix):], sorted(suffixes), n=1, cutoff=0.6)
        problems.append((name, role, suffixes[close[0]] if close else None, _public(known)))
    return problems


def format_problems(problems_by_host, renamed=None, sources=None):
    """One line per unknown variable and hint, its hosts grouped; ``renamed`` ({old: new or [new, ...]}) names
    the new variables of a renamed one, ``sources`` ({name: [file, ...]}) the inventory files that set it."""
    renamed = renamed or {}
    sources = sources or {}
    grouped = {}
    for host, problems in problems_by_host:
        for name, role, close, known in problems:
            key = (name, role, tuple(targets(close)) if isinstance(close, list) else close, tuple(known))
            if key not in grouped:
                grouped[key] = []
            if host not in grouped[key]:
                grouped[key].append(host)
    lines = []
    for (name, role, close, known), hosts in grouped.items():
        where = "platform-wide (meta/variables.yml)" if role == "gpuops" else "role %s" % role
        if name in renamed:
            hint = "it was renamed: set %s instead" % " and ".join(targets(renamed[name]))
        else:
            hint = "did you mean %s?" % close if close else "known: %s" % ", ".join(known)
        files = sources.get(name) or []
        origin = "; set in %s" % ", ".join(files) if files else ""
        lines.append("%s (%s%s): no such variable in %s, so it would be ignored; %s" % (
            shown_name(name), hosts_phrase(hosts), origin, where, hint))
    return lines


def refusal(lines):
    """The failure message of the lines of check_hosts."""
    return "Unknown variables (a typo is never read):\n" + "\n".join(lines)


def check_hosts(targets, manager, catalog, roles=None):
    """``(checked, unknown, lines)`` for ``targets``, ``[(host, variables mapping, check_globals)]``.

    ``checked``: how many names were looked at; ``unknown``: the unknown names; ``lines``: one message line per
    unknown variable (format_problems), empty when there is none. ``manager``: the VariableManager whose facts
    and registered results are left out (None: nothing is). Hosts with the same variable names (a group's
    hosts) are judged once.
    """
    found, checked, where, judged = [], 0, [], {}
    for host, variables, check_globals in targets:
        names = frozenset(variables) - set_by_tasks(manager, host)
        checked += len(names)
        key = (names, check_globals)
        if key not in judged:
            judged[key] = unknown_variables(names, catalog, roles, check_globals)
        if judged[key]:
            found.append((host, judged[key]))
            where.append(variables)
    unknown = unique(p[0] for host, ps in found for p in ps)
    lines = format_problems(found, catalog["renamed"], variable_sources(unknown, where)) if found else []
    return checked, unknown, lines


def set_by_tasks(manager, host):
    """Names set by set_fact, register or fact gathering on ``host``: results, not user input."""
    names = set()
    if manager is None:
        return names
    names.update(getattr(manager, "_nonpersistent_fact_cache", {}).get(host) or {})
    try:
        names.update(manager._fact_cache.get(host) or {})
    except (KeyError, AttributeError):
        pass
    return names
