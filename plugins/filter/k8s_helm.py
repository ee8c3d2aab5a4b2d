# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Decide, per Helm release, what a run does: install, upgrade, nothing, or
first recover from an interrupted operation; thin filters over
module_utils/_k8s/helm.py, which the gpuops.platform.helm_releases module runs
on helm's own output (``helm list``, ``helm get values``, ``helm history``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter.k8s_objects import k8s_helm_release
from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

helm = lazy_module("module_utils._k8s.helm")


def k8s_helm_decide(release, listed=None, history=None, values=None, recover=True):
    """What to do with one release, given its ``helm list --all -o json`` entry and, where needed,
    ``helm history -o json`` and ``helm get values -o json`` (see module_utils/_k8s/helm.py, decide)."""
    try:
        return helm.decide(release, listed, history, values, recover)
    except ValueError as exc:
        raise AnsibleFilterError("k8s_helm_decide: %s" % exc)


def k8s_helm_wanted(releases):
    """The releases as gpuops.platform.helm_releases takes them: name, namespace, chart, chart_version and
    the digest of the values, never the values themselves."""
    try:
        return [helm.wanted(k8s_helm_release(r)) for r in releases or []]
    except ValueError as exc:
        raise AnsibleFilterError("k8s_helm_wanted: %s" % exc)


FilterModule = filter_module(
    k8s_helm_decide,
    k8s_helm_wanted,
)
