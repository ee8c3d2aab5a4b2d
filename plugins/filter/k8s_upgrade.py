# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""k8s_apply's chart upgrades (tasks/upgrade.yml); thin filters over plugin_utils/k8s_upgrade.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter.k8s_objects import k8s_helm_release
from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

k8s_upgrade = lazy_module("plugin_utils.k8s_upgrade")


def k8s_chart_upgrades(queue, plans):
    """The queued releases that helm_releases' ``plans`` upgrade from another chart version (helm_chart_upgrades' input)."""
    try:
        return k8s_upgrade.chart_upgrades(queue, plans, k8s_helm_release)
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("k8s_chart_upgrades: %s" % exc)


def k8s_upgrade_plan(upgrades, live):
    """Per upgraded release: the CRD changes against the cluster's CRDs, the CRDs to apply first, the CRDs at risk."""
    try:
        return k8s_upgrade.upgrade_plan(upgrades, live)
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("k8s_upgrade_plan: %s" % exc)


def k8s_upgrade_refusals(plan, live, listed):
    """Why the planned chart upgrades must not go ahead (a stored CRD version that would stop being served)."""
    try:
        return k8s_upgrade.upgrade_refusals(plan, live, listed)
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("k8s_upgrade_refusals: %s" % exc)


FilterModule = filter_module(
    k8s_chart_upgrades,
    k8s_upgrade_plan,
    k8s_upgrade_refusals,
)
