# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Where an inventory variable was set, and hosts named in groups, for the controller's error messages.

Private to the collection. A message about a variable names the variable to
change, the files that set it (the ``group_vars`` and ``host_vars`` files
beside the inventory or the playbook, which Ansible reads for every host) and
its hosts once (``4 hosts: a, b, c, d``), not one line per host.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpuops.platform.plugins.module_utils._common.shown import shown_name
from ansible_collections.gpuops.platform.plugins.plugin_utils import documents

VARS_EXTENSIONS = (".yml", ".yaml", ".json")


def hosts_phrase(hosts):
    """``host a`` or ``4 hosts: a, b, c, d``; a name with a character outside printable ASCII (a lookalike letter)
    shown escaped and quoted (shown_name)."""
    hosts = [shown_name(host) for host in hosts]
    return "host %s" % hosts[0] if len(hosts) == 1 else "%d hosts: %s" % (len(hosts), ", ".join(hosts))


def shown_path(path, cwd=None):
    """``path`` normalised (no ``a/../b``), relative to ``cwd`` (default the current folder) when under it."""
    path = os.path.normpath(os.path.abspath(to_text(path)))
    cwd = os.path.normpath(os.path.abspath(cwd or os.getcwd()))
    return os.path.relpath(path, cwd) if path.startswith(cwd + os.sep) else path


def _vars_files(stem):
    files = []
    if os.path.isdir(stem):
        for dirpath, dirnames, filenames in os.walk(stem):
            dirnames.sort()
            files.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(VARS_EXTENSIONS))
    for ext in ("",) + VARS_EXTENSIONS:
        if os.path.isfile(stem + ext):
            files.append(stem + ext)
    return files


def inventory_files(variables, listed=None):
    """The group_vars and host_vars files that can hold one host's variables: beside its inventory and the
    playbook, for the groups ``all`` and ``group_names`` and the host itself.

    ``listed``: a dict kept across hosts, so each group's folder is looked at once (20,000 hosts share them).
    """
    listed = {} if listed is None else listed
    host = to_text(variables.get("inventory_hostname") or "")
    groups = ["all"] + [to_text(g) for g in variables.get("group_names") or []]
    bases = []
    for key in ("inventory_dir", "playbook_dir"):
        base = variables.get(key)
        if base and os.path.normpath(to_text(base)) not in bases:
            bases.append(os.path.normpath(to_text(base)))
    files = []
    for base in bases:
        for folder, name in [("group_vars", g) for g in groups] + ([("host_vars", host)] if host else []):
            try:  # a name that is not one file name ("../escape") names no file of that folder
                stem = documents.inside(os.path.join(base, folder), name, "", folder)
            except documents.DocumentError:
                continue
            if stem not in listed:
                listed[stem] = _vars_files(stem)
            files.extend(listed[stem])
    return files


class InventoryFileError(AnsibleActionFail):
    """An inventory variables file the collection refuses to read (its aliases expand past the budget)."""


def _refused(exc):
    return InventoryFileError(str(exc))


def _load(path, cache):
    if path not in cache:
        try:  # size, depth and size written out (aliases) checked before it is built
            data = documents.read_yaml(shown_path(path), "inventory variables file")
        except documents.ExpansionError as exc:
            raise _refused(exc)
        except documents.DocumentError:
            data = None  # what Ansible reads and PyYAML does not (!vault): no source to name
        cache[path] = data if isinstance(data, dict) else {}
    return cache[path]


def check_inventory_files(variables_list, checked=None):
    """Refuse the run when an inventory variables file of these hosts expands past the budget (YAML aliases).

    Ansible builds such a file with its aliases shared, and templating one of
    its values (a planned variable read through hostvars) then writes out
    billions of values. Each file is composed, not built, once; a file
    without ``*`` holds no alias and is not parsed at all.
    """
    checked, listed = set() if checked is None else checked, {}
    for variables in variables_list:
        for path in inventory_files(variables, listed):
            if path in checked:
                continue
            checked.add(path)
            try:
                text = documents.read_text(path, "inventory variables file")
                if "*" in text:
                    documents.compose_yaml(text, "inventory variables file %s" % shown_path(path))
            except documents.ExpansionError as exc:
                raise _refused(exc)
            except documents.DocumentError:
                continue  # Ansible has read it: its own errors are not this check's


def variable_sources(names, variables_list, cwd=None):
    """``{name: [file, ...]}``: the inventory variable files that set each of ``names`` for the hosts whose
    variables are given (normalised, relative to ``cwd`` when under it).

    Where several files set a name, the ones whose value is the host's own come first and alone (the file
    that won); a value that differs from every file's (templated) keeps them all. A variable set another
    way (an inventory file's own vars, an inventory plugin, ``-e``) has no entry.
    """
    wanted = set(to_text(n) for n in names)
    found = {}
    cache, listed = {}, {}
    for variables in variables_list:
        files = inventory_files(variables, listed)
        for name in sorted(wanted):
            setting = [path for path in files if name in _load(path, cache)]
            same = [path for path in setting if variables.get(name) == _load(path, cache)[name]]
            for path in same or setting:
                shown = shown_path(path, cwd)
                if shown not in found.setdefault(name, []):
                    found[name].append(shown)
    return dict((name, paths) for name, paths in found.items() if paths)
