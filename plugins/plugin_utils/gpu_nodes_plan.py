# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The GPU nodes of the Kubernetes layer in one pass over every GPU host's facts and variables.

What the gpu_nodes role plans: each host's identity, facts and settings (``node_inputs``), the capacity
(gpu_capacity, the one capacity model), each node's labels (``node_labels``) and the Node label patches
(``node_objects``). No template walks the hosts: at thousands of hosts, Jinja over ``hostvars`` costs
seconds per walk.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpuops.platform.plugins.plugin_utils import gpu_capacity, recorded_facts

DEVICE_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
MIG_CONFIG = "nvidia.com/mig.config"
# In render mode only: a GitOps tool must never delete a Node because its patch left the repository.
RENDER_ANNOTATIONS = {"argocd.argoproj.io/sync-options": "Prune=false,ServerSideApply=true",
                      "kustomize.toolkit.fluxcd.io/prune": "disabled"}


class GpuNodesPlanError(Exception):
    """A host that cannot be planned: the message names it and says what to do."""


def _facts_of(variables, name):
    """The host's nvml facts: its recorded ones (recorded_facts, the one facts source of every playbook), else the
    ones nodes.yml or the fact cache gave it; None without any."""
    try:
        _where, record = recorded_facts.load(variables, name)
    except recorded_facts.RecordedFactsError as exc:
        raise GpuNodesPlanError("%s: %s" % (name, exc))
    if record is not None:
        return record["nvidia"]
    return (variables.get("ansible_facts") or {}).get("nvidia")


def node_input(name, variables, common_labels, fleet_nodes=None):
    """One host as gpu_capacity takes it: ``{host, name, nvidia, mig_k8s_resources, config, mig_config, labels,
    dra}``. ``fleet_nodes``: the fleet plan of the same run (its ``nodes``), whose MIG resources win over the
    host's own ``mig_k8s_resources``."""
    fleet_nodes = fleet_nodes or {}
    if name in fleet_nodes:
        mig_resources = (fleet_nodes[name] or {}).get("mig_k8s_resources")
    else:
        mig_resources = variables.get("mig_k8s_resources")
    node_name = variables["gpu_nodes_node_name"] if "gpu_nodes_node_name" in variables else (
        variables["mig_k8s_node_name"] if "mig_k8s_node_name" in variables else name)
    labels = dict(common_labels or {})
    own = variables.get("gpu_nodes_host_labels") or {}
    if not isinstance(own, Mapping):
        raise GpuNodesPlanError("%s: gpu_nodes_host_labels must map label names to values, got %r" % (name, own))
    labels.update(own)
    return {"host": name, "name": node_name, "nvidia": _facts_of(variables, name), "mig_k8s_resources": mig_resources,
            "config": variables.get("gpu_nodes_device_plugin_config") or "",
            "mig_config": variables.get("gpu_nodes_mig_config") or "", "labels": labels,
            "dra": boolean(variables.get("gpu_nodes_dra", False), strict=False)}


def node_labels(inputs, capacity, prefix):
    """``[{name, host, labels}]`` of the nodes with GPUs (or DRA nodes, labelled even without facts: the label is
    what keeps the GPU Operator's device plugin off them), in inventory order. The host's labels win, except the
    DRA switch: always the string "false"."""
    out = []
    for item in inputs:
        plan = capacity["nodes"][item["name"]]
        gpus = plan["gpu_count"] > 0 or bool(plan["resources"])
        if not (gpus or plan["dra"]):
            continue
        labels = {}
        if gpus:
            labels.update({prefix + "/gpu": "true", prefix + "/gpu.count": str(plan["gpu_count"])})
        if plan["product"]:
            labels[prefix + "/gpu.product"] = plan["product"]
        if plan["config"]:
            labels[DEVICE_PLUGIN_CONFIG] = plan["config"]
        if item["mig_config"]:
            labels[MIG_CONFIG] = item["mig_config"]
        labels.update(item["labels"])
        if plan["dra"]:
            labels[gpu_capacity.DEVICE_PLUGIN_LABEL] = "false"
        out.append({"name": item["name"], "host": item["host"], "labels": labels})
    return out


def node_objects(nodes, render=False):
    """The Node label patches (server-side apply owns only these labels); in render mode with the annotations that
    turn pruning off for Argo CD and Flux (they mean nothing to the API server, so live Nodes never get them)."""
    out = []
    for node in nodes:
        meta = {"name": node["name"], "labels": dict(node["labels"])}
        if render:
            meta["annotations"] = dict(RENDER_ANNOTATIONS)
        out.append({"apiVersion": "v1", "kind": "Node", "metadata": meta})
    return out


def plan(hosts, mig_strategy, sharing, default_config, common_labels, prefix, taints, fleet_nodes=None, render=False):
    """``(capacity, nodes)``: gpuops_k8s_capacity and gpuops_k8s_nodes (``{taints, nodes, objects}``) of ``hosts``
    (``[(name, variables)]``, inventory order)."""
    inputs = [node_input(name, variables, common_labels, fleet_nodes) for name, variables in hosts]
    capacity = gpu_capacity.gpu_capacity(inputs, mig_strategy, sharing, default_config)
    nodes = node_labels(inputs, capacity, prefix)
    return capacity, {"taints": taints, "nodes": nodes, "objects": node_objects(nodes, render)}
