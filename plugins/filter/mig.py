# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Thin filters: what a node's MIG plan does to it, as the fleet plan says (plugin_utils/mig_disruption.py), and the
plan of recorded facts on the controller, by the nvidia_mig module's own function (module_utils/_mig/module.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

decision = lazy_module("plugin_utils.mig_disruption")
mig_module = lazy_module("module_utils._mig.module")


def mig_replay_plan(facts, config, config_file, config_name):
    """The result that gpuops.platform.nvidia_mig returns in check mode for these recorded facts, computed here.

    ``config``: an inline mig-parted document (a mapping, or empty); ``config_file``: the path of one on the
    controller (or empty); exactly one of them is set. The plan's warnings are shown as the module's would be.
    """
    from ansible.utils.display import Display

    if not isinstance(facts, Mapping):
        raise AnsibleFilterError("mig_replay_plan needs the recorded ansible_facts.nvidia of the node, got %r" % (facts,))
    if config and not isinstance(config, Mapping):
        raise AnsibleFilterError("mig_config must be a mig-parted document (a mapping), got %s" % type(config).__name__)
    if config_file and not isinstance(config_file, str):
        raise AnsibleFilterError("mig_config_file must be a path, got %s" % type(config_file).__name__)
    if not isinstance(config_name, str):
        raise AnsibleFilterError("mig_config_name must be a string, got %s" % type(config_name).__name__)
    if bool(config) == bool(config_file):
        raise AnsibleFilterError("Set exactly one of mig_config (an inline mig-parted document) and mig_config_file.")
    # The module's config_file is of type path: ~ is expanded the same way.
    params = {"config": dict(config) if config else None,
              "config_file": __import__("os").path.expanduser(config_file) if config_file else None,
              "config_name": config_name, "facts": dict(facts), "facts_file": None}
    try:
        entries, replayed = mig_module.read_inputs(params)
        _plan, result = mig_module.plan_offline(replayed, entries, config_name, Display().warning)
    except mig_module.MigError as exc:
        raise AnsibleFilterError(str(exc))
    return result


def mig_disruption(result):
    """``{drain, gpu_reset}`` of the nvidia_mig module's result (its ``changed`` and ``plan``)."""
    if not isinstance(result, Mapping) or not isinstance(result.get("plan"), Mapping):
        raise AnsibleFilterError("mig_disruption needs the registered result of gpuops.platform.nvidia_mig, got %r"
                                 % (result,))
    plan = result["plan"]
    return decision.mig_disruption(result.get("changed"), plan.get("valid", True), plan.get("gpus"))


FilterModule = filter_module(
    mig_disruption,
    mig_replay_plan,
)
