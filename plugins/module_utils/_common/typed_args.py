# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): module arguments read as they were given.
"""Versions given as numbers, and negative counts, refused before a module reads them.

``version: 570.190`` unquoted in YAML is the float 570.19, and AnsibleModule's
``type='str'`` turns it into "570.19" without a word: a downgrade. So a module
declares its versions ``type='raw'`` and calls :func:`version_arguments` right
after AnsibleModule, which refuses a number (or a boolean) where a version
belongs, naming the option, and gives the module the value as text. The
controller's check of the same variables (plugin_utils/driver_action) words
its refusal with :func:`number_problem` too. Pure Python 3.9.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.platform.plugins.module_utils._common.shown import shown, type_words

EXAMPLES = {"version": "570.172.08", "branch": "570"}


def number_problem(name, value, kind="version", example=None):
    """Why ``value`` of ``name`` is not text where a ``kind`` belongs (a version, or a branch, which may be a whole
    number), or None. The text itself is the caller's to check."""
    example = example or EXAMPLES.get(kind, EXAMPLES["version"])
    if isinstance(value, bool):
        return ("%s is the boolean %s, not a string: YAML reads an unquoted yes, no, true or false as a boolean, so "
                "set the %s, quoted, such as %s: \"%s\"" % (name, shown(value), kind, name, example))
    if isinstance(value, (int, float)) and (kind != "branch" or not isinstance(value, int)):
        return ("%s is the number %s, not a string: YAML reads an unquoted %s as a number (570.190 becomes 570.19, "
                "570.10 becomes 570.1), so quote it, such as %s: \"%s\"" % (name, shown(value), kind, name, example))
    if value is not None and not isinstance(value, (str, int)):
        return "%s must be a string such as \"%s\", got %s %s" % (name, example, type_words(value), shown(value))
    return None


def version_arguments(module, params, versions=(), branches=(), prefix=""):
    """Fail ``module`` (nothing changed) on a version or branch of ``params`` given as a number; else give each
    one as text (a whole-number branch, 570, is "570"). ``prefix`` names a suboption's parent (``cdi.``)."""
    for names, kind in ((versions, "version"), (branches, "branch")):
        for name in names:
            value = params.get(name)
            problem = number_problem(prefix + name, value, kind)
            if problem:
                module.fail_json(msg="%s. Nothing was changed." % problem, changed=False)
            if value is not None:
                params[name] = str(value)


def count_arguments(module, params, names):
    """Fail ``module`` (nothing changed) on a count of ``params`` below 0."""
    for name in names:
        value = params.get(name)
        if value is not None and value < 0:
            module.fail_json(msg="%s is %d: a count is 0 or more. Nothing was changed." % (name, value), changed=False)
