# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Values of NVIDIA's operators that the roles compute: the GPU Operator's image overrides, the RDMA plugin's config."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuops.platform.plugins.plugin_utils.jinja_tests import to_int

NVCR = re.compile(r"^nvcr\.io")
# RDMA shared device plugin selectors: (its config key, the role's field).
RDMA_SELECTORS = [("vendors", "vendors"), ("deviceIDs", "device_ids"), ("ifNames", "if_names")]
RDMA_HCA_MAX = 63


def registry_values(repositories, registry, components, pull_secrets):
    """Dotted GPU Operator chart values for an air-gapped registry and pull secrets.

    Every ``<component>.repository`` of ``repositories`` moves from nvcr.io to
    ``registry`` (empty: no override); every component of ``components`` gets
    ``<component>.imagePullSecrets`` (none without ``pull_secrets``).
    """
    out = {}
    if registry:
        base = re.sub(r"/+\Z", "", registry)
        for component, repository in repositories.items():
            out[component + ".repository"] = NVCR.sub(lambda match: base, repository)
    if pull_secrets:
        for component in components:
            out[component + ".imagePullSecrets"] = pull_secrets
    return out


def rdma_config(resources):
    """The RDMA shared device plugin's config document: one ``configList`` entry per resource.

    Each resource ``{name, rdma_hca_max (default 63), vendors, device_ids,
    if_names}`` selects its devices by the selectors it sets.
    """
    out = []
    for resource in resources:
        selectors = dict((key, resource[field]) for key, field in RDMA_SELECTORS if resource.get(field))
        out.append({"resourceName": resource["name"], "rdmaHcaMax": to_int(resource.get("rdma_hca_max", RDMA_HCA_MAX)),
                    "selectors": selectors})
    return {"configList": out}
