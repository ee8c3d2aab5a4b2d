# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Thin filter over plugin_utils/driver_action.py: the driver settings every play refuses before it runs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

decisions = lazy_module("plugin_utils.driver_action")


def nvidia_driver_settings_refusal(hosts, hostvars, version_variable="nvidia_driver_version"):
    """One line per driver settings problem of ``hosts`` (their hosts and the files that set it); empty when
    every host's settings can be planned. The fleet planner refuses the same settings with the same lines."""
    try:
        variables = dict((host, hostvars[host]) for host in hosts or [])
    except KeyError as exc:
        raise AnsibleFilterError("nvidia_driver_settings_refusal: %s is not in hostvars" % exc)
    problems = decisions.check_driver_settings([(host, variables[host]) for host in hosts or []], version_variable)
    return decisions.refusal_lines(problems, variables.get)


FilterModule = filter_module(
    nvidia_driver_settings_refusal,
)
