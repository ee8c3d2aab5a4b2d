#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: helm_chart_upgrades
short_description: Read what moving Helm releases to a new chart version brings - its CRDs and changed values
version_added: 0.1.0
author:
  - gpuops.platform maintainers (@gpuops)
description:
  - For each release of O(releases) (one whose deployed chart version differs from the wanted one), asks helm for
    the new chart's CRDs, C(helm template --include-crds) with the wanted values, from the same chart path, OCI
    reference or repository the release is installed from. A CRD from the chart's C(crds/) folder, which
    C(helm upgrade) never updates, is returned apart from one a template makes.
  - Compares the keys the wanted values set with the deployed chart's own values (C(helm get all --template), read
    from the release, whatever the chart's source) and the new chart's (C(helm show values)) - keys renamed or
    dropped - and names the chart defaults that change for the keys the inventory does not set (neither in the
    wanted values nor in the deployed release's).
  - The values never leave the module's result; with C(sensitive), not even the changed defaults. Run the task with
    C(no_log) for a release whose values hold secrets, as for C(kubernetes.core.helm).
  - Reads the CRDs the deployed chart ships from the release (C(helm get all --template), its C(crds/) files and
    the CRDs of its manifest), so that the CRDs the new chart no longer ships are named, with whether
    C(helm upgrade) deletes them (RV(upgrades[].previous_crds)).
  - Reads the cluster's CRDs of the names the new and the deployed charts ship (RV(live_crds)), one C(GET) each
    through the same connection, so that the caller can compare them with the new ones in the same step.
  - Lists the objects of a CRD that the new chart changes so that objects lose something - a field that a version
    keeps no longer has, or a version no longer served - and names those that hold such a field, or exist
    (RV(upgrades[].held)).
  - Changes nothing.
  - Connection options as kubernetes.core's helm modules; in the collection's action group
    C(gpuops.platform.k8s), so C(module_defaults) of C(group/gpuops.platform.k8s) give them.
options:
  releases:
    description:
      - The releases to read, as P(gpuops.platform.k8s_chart_upgrades#filter) returns them.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Name of the Helm release.
        type: str
        required: true
      namespace:
        description: Namespace of the Helm release.
        type: str
        required: true
      chart_ref:
        description: The chart, as the release is installed from it (a path, an OCI reference or a chart name in O(releases[].chart_repo_url)).
        type: str
        required: true
      chart_repo_url:
        description: The chart repository, when O(releases[].source=repo).
        type: str
      chart_version:
        description: The chart version wanted.
        type: str
        required: true
      source:
        description: Where the chart comes from.
        type: str
        required: true
        choices: [path, oci, repo]
      deployed_version:
        description: The chart version deployed now.
        type: str
        required: true
      values:
        description:
          - The wanted values, whose keys are compared with both charts' values.
          - Not C(no_log), since Ansible would then mask each of their leaf values everywhere in the result; run the
            task with C(no_log) for a release whose values hold secrets.
        type: dict
        default: {}
      sensitive:
        description: The release's values hold secrets; its changed defaults are left out of the result too.
        type: bool
        default: false
      layer:
        description: The layer the release belongs to, for the messages.
        type: str
        default: ""
extends_documentation_fragment:
  - gpuops.platform.attributes
  - gpuops.platform.attributes.node
  - gpuops.platform.attributes.read_only
  - kubernetes.core.helm_common_options
requirements:
  - helm >= 3.0.0 (on C(PATH), or O(binary_path))
  - kubernetes (Python) >= 24.2.0, to read the cluster's CRDs
seealso:
  - module: gpuops.platform.helm_releases
  - module: gpuops.platform.k8s_server_side_apply
"""

EXAMPLES = r"""
- name: Read what the chart upgrades bring
  gpuops.platform.helm_chart_upgrades:
    releases:
      - name: kuberay-operator
        namespace: kuberay
        chart_ref: kuberay-operator
        chart_repo_url: https://ray-project.github.io/kuberay-helm/
        chart_version: 1.7.0
        source: repo
        deployed_version: 1.6.2
        values: {}
  register: upgrades
"""

RETURN = r"""
upgrades:
  description: One entry per release of O(releases), in the same order.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Release name.
      type: str
    namespace:
      description: Release namespace.
      type: str
    layer:
      description: The k8s_apply layer of the release, as given.
      type: str
    from_version:
      description: The chart version deployed now.
      type: str
    to_version:
      description: The wanted chart version.
      type: str
    crds:
      description: The new chart's CRDs, each with C(crds_dir) (from the chart's C(crds/) folder) and C(object).
      type: list
      elements: dict
    previous_crds:
      description:
        - The CRDs the deployed chart ships (its C(crds/) folder and its templates), each C(name) and C(deleted) - whether
          C(helm upgrade) deletes it, with every object of its kind, once the new chart no longer ships it (one its
          templates make, without the C(helm.sh/resource-policy=keep) annotation; Helm never deletes a C(crds/) one).
      type: list
      elements: dict
    held:
      description:
        - The live objects that the new chart's CRDs leave behind, per CRD, kind and version - C(version) and
          C(fields) (the fields that version no longer has) with C(objects), each C(name) and the C(fields) it holds;
          or C(versions) (no longer served) with every object of the kind in C(objects).
      type: list
      elements: dict
    values_renamed:
      description: Keys the wanted values set that the new chart no longer has, each with C(candidates), the keys
        that appeared beside it.
      type: list
      elements: dict
    values_defaults:
      description: Chart defaults that change (C(key), C(old), C(new); without the values for a sensitive release).
      type: list
      elements: dict
  sample:
    - name: kuberay-operator
      namespace: kuberay
      from_version: 1.6.2
      to_version: 1.7.0
      crds: []
      previous_crds: [{"name": "rayclusters.ray.io", "deleted": false}]
      held: []
      values_renamed: [{"key": "metrics.serviceMonitor.selector", "candidates": ["metrics.serviceMonitor.additionalLabels"]}]
      values_defaults: [{"key": "featureGates[RayServiceIncrementalUpgrade].enabled", "old": false, "new": true}]
live_crds:
  description:
    - The cluster's CustomResourceDefinitions of the names that the new charts ship (RV(upgrades[].crds)) and the
      deployed ones shipped (RV(upgrades[].previous_crds)), as the API server returns them, one C(GET) each; a CRD
      the cluster does not have is left out.
  returned: always
  type: list
  elements: dict
commands:
  description: The helm commands run (arguments after the binary), in order, the values file's path left out.
  returned: always
  type: list
  elements: list
"""

import json
import os
import shutil
import tempfile

from ansible_collections.kubernetes.core.plugins.module_utils.helm_args_common import (
    HELM_AUTH_ARG_SPEC, HELM_AUTH_MUTUALLY_EXCLUSIVE)

from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import discovery, helm, upgrade
from ansible_collections.gpuops.platform.plugins.module_utils._k8s.api import Api
from ansible_collections.gpuops.platform.plugins.module_utils._k8s.helm_cli import HelmModule

try:
    import yaml
    LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
except ImportError:  # kubernetes.core needs PyYAML; the helm module reports the missing library first
    yaml = LOADER = None

RELEASE_SPEC = dict(
    name=dict(type="str", required=True),
    namespace=dict(type="str", required=True),
    chart_ref=dict(type="str", required=True),
    chart_repo_url=dict(type="str"),
    chart_version=dict(type="str", required=True),
    source=dict(type="str", required=True, choices=["path", "oci", "repo"]),
    deployed_version=dict(type="str", required=True),
    # Not no_log: Ansible would then mask every leaf value of the values (a "1") in the whole result, CRD versions
    # included. The task hides its output for a sensitive release instead, as kubernetes.core.helm's does.
    values=dict(type="dict", default={}),
    sensitive=dict(type="bool", default=False),
    layer=dict(type="str", default=""),
)


CRD_ROW = discovery.entry("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
                          False, True)
# The connection options this module shares with kubernetes.core's helm modules, for the API client.
AUTH_KEYS = ("kubeconfig", "context", "host", "api_key", "ca_cert", "validate_certs")


def _load(text):
    return yaml.load(text, Loader=LOADER)


class Helm(object):
    """helm with the module's connection settings; a failure names the command (never the values)."""

    def __init__(self, module):
        self.module = module
        self.commands = []
        self._binary = None

    def __call__(self, args, shown=None):
        if self._binary is None:
            self._binary = self.module.get_helm_binary()
        self.commands.append(list(shown or args))
        rc, out, err = self.module.run_helm_command([self._binary] + list(args), fails_on_error=False)
        if rc != 0:
            self.module.fail_json(msg="`helm %s` failed (exit %d): %s" % (" ".join(shown or args), rc,
                                                                          (err or "").strip() or "no message"),
                                  commands=self.commands)
        return out


def read_release(run, release, workdir):
    """What one release's move to its wanted chart brings (see RETURN)."""
    where = [release["name"], "--namespace", release["namespace"]]
    values_file = os.path.join(workdir, "values.json")
    with open(values_file, "w") as handle:
        json.dump(release["values"] or {}, handle)
    chart = upgrade.chart_args(release)
    template = ["template"] + where + chart + ["--include-crds", "--values"]
    rendered = run(template + [values_file], shown=template + ["<values>"])
    try:
        crds = upgrade.rendered_crds(rendered, _load)
        new_defaults = _load(run(["show", "values"] + chart)) or {}
        old_defaults = json.loads(run(["get", "all"] + where + ["--template", upgrade.CHART_VALUES_TEMPLATE],
                                      shown=["get", "all"] + where + ["--template", "<the chart's values as JSON>"]) or "{}")
        deployed = json.loads(run(["get", "values"] + where + ["-o", "json"]) or "null") or {}
        previous = upgrade.rendered_crds(run(["get", "all"] + where + ["--template", upgrade.DEPLOYED_CRDS_TEMPLATE],
                                             shown=["get", "all"] + where + ["--template", "<the deployed chart's CRDs>"]),
                                         _load)
        renamed = upgrade.values_renamed(old_defaults, new_defaults, release["values"])
        defaults = upgrade.values_defaults(old_defaults, new_defaults, upgrade.merged_values(deployed, release["values"]))
    except (ValueError, yaml.YAMLError) as exc:
        run.module.fail_json(msg="Helm release %s: could not read what chart %s brings: %s"
                                 % (release["name"], release["chart_version"], exc), commands=run.commands)
    if release["sensitive"]:
        defaults = [{"key": d["key"]} for d in defaults]
    return {"name": release["name"], "namespace": release["namespace"], "layer": release["layer"],
            "from_version": release["deployed_version"],
            "to_version": release["chart_version"], "crds": [{"crds_dir": d, "object": c} for c, d in crds],
            "previous_crds": upgrade.shipped_crds(previous),
            "values_renamed": renamed, "values_defaults": defaults}


def _kind_row(crd, version):
    """The API table row of a CRD's kind at ``version``."""
    spec = crd["spec"]
    return discovery.entry(spec["group"], version, spec["names"]["kind"], spec["names"]["plural"],
                           spec.get("scope") == "Namespaced", False)


def read_held(api, upgrades, live):
    """Per upgrade, the live objects that the new chart's CRDs leave behind (see RETURN, ``held``): those holding a
    field that a version the CRD keeps no longer has (listed through that version), and those of a CRD that stops
    serving a version (listed through the storage version). One LIST per CRD and version concerned."""
    current = dict((upgrade.crd_name(crd), crd) for crd in live)
    for entry in upgrades:
        entry["held"] = []
        for new in [c["object"] for c in entry["crds"]]:
            old = current.get(upgrade.crd_name(new))
            change = upgrade.crd_changes(old, new) if old else None
            if not change:
                continue
            kind = old["spec"]["names"]["kind"]
            for version, paths in sorted(change["fields_removed"].items()):
                holders = upgrade.held_fields(api.list(_kind_row(old, version)), paths)
                if holders:
                    entry["held"].append({"crd": change["name"], "kind": kind, "version": version, "fields": paths,
                                          "objects": holders})
            gone = sorted(set(change["served_removed"]) | (set(change["versions_removed"]) & set(upgrade.served_versions(old))))
            storage = upgrade.storage_version(old)
            if gone and storage:
                # Every object holds the root (""): each one is named.
                names = [h["name"] for h in upgrade.held_fields(api.list(_kind_row(old, storage)), [""])]
                if names:
                    entry["held"].append({"crd": change["name"], "kind": kind, "versions": gone,
                                          "objects": [{"name": n} for n in names]})


def read_cluster(module, upgrades):
    """The cluster's CRDs of the names the new charts ship and the deployed charts shipped, one GET each through the
    same connection as helm's (a CRD the cluster lacks is left out), and the objects they leave behind (read_held)."""
    shipped = set(upgrade.crd_name(c["object"]) for u in upgrades for c in u["crds"])
    names = sorted(shipped.union(c["name"] for u in upgrades for c in u["previous_crds"]))
    if not names:
        return []
    try:
        api = Api(get_api_client(**dict((k, module.params.get(k)) for k in AUTH_KEYS)), [CRD_ROW])
        live = [crd for crd in (api.get(CRD_ROW, name) for name in names) if crd]
        read_held(api, upgrades, live)
        return live
    except ValueError as exc:
        module.fail_json(msg="Comparing the cluster's CRDs with the new charts' failed: %s" % exc)
    except CoreException as exc:
        module.fail_json(msg="Reading the cluster's CRDs that the charts ship, and their objects: %s" % exc)
    except Exception as exc:  # the API client raises many types (connection, TLS, 401); all mean the same here
        module.fail_json(msg="Reading the cluster's CRDs that the charts ship, and their objects, failed: %s" % exc)


def main():
    spec = dict(HELM_AUTH_ARG_SPEC)
    spec.update(releases=dict(type="list", elements="dict", required=True, options=RELEASE_SPEC))
    module = HelmModule(argument_spec=spec, mutually_exclusive=HELM_AUTH_MUTUALLY_EXCLUSIVE,
                        supports_check_mode=True)
    releases = module.params["releases"]
    try:
        for release in releases:
            helm.check_release(release)
            upgrade.chart_args(release)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    run = Helm(module)
    workdir = tempfile.mkdtemp(prefix="gpuops-chart-upgrade-")  # 0700: the values file is private
    try:
        upgrades = [read_release(run, release, workdir) for release in releases]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    live = read_cluster(module, upgrades)
    module.exit_json(changed=False, upgrades=upgrades, live_crds=live, commands=run.commands)


if __name__ == "__main__":
    main()
