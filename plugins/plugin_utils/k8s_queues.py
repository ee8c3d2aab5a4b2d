# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The queues of the batch schedulers: Kueue's flavors and ClusterQueues, Volcano's and KAI's queues.

Each ``*_plan`` normalises what the role's variables say (defaults filled in,
queues the tenants name made) and each ``*_errors`` returns one message per
problem, so that the role's assert reports them all at once.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuops.platform.plugins.plugin_utils.jinja_tests import (
    DNS_SUBDOMAIN, QUANTITY, dictsort, is_integer, is_number, matches, to_int, to_str, unique)

KUEUE_MAX_PRIORITY = 1000000000
# The default of kueue_default_cluster_queue (roles/kueue/defaults/main.yml).
DEFAULT_CLUSTER_QUEUE = "gpu-fleet"
DEVICE_PLUGIN_OFF = "nvidia.com/gpu.deploy.device-plugin"
# A KAI queue name: a DNS-1123 label (the length is left to the API server).
KAI_QUEUE_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z"


def _flavor_name(product):
    """A GPU product label as a ResourceFlavor name: lower case, runs of other characters as one "-"."""
    return re.sub(r"[^a-z0-9]+", "-", to_str(product).lower()).strip("-")


def kueue_fleet(capacity, nodes):
    """The fleet per GPU product: ``{<flavor>: {label: <product>, resources: {<resource>: <count>}}}``.

    ``capacity`` is gpuops_k8s_capacity; nodes that ``nodes`` (gpuops_k8s_nodes)
    labels ``nvidia.com/gpu.deploy.device-plugin=false`` (DRA nodes) run no
    device plugin and count for nothing.
    """
    off = [n.get("name") for n in (nodes or {}).get("nodes", []) if (n.get("labels") or {}).get(DEVICE_PLUGIN_OFF) == "false"]
    fleet = {}
    for name, node in dictsort((capacity or {}).get("nodes") or {}):
        if not node.get("product") or not node.get("resources") or name in off:
            continue
        entry = fleet.setdefault(_flavor_name(node["product"]), {"label": node["product"], "resources": {}})
        for res, count in node["resources"].items():
            entry["resources"][res] = entry["resources"].get(res, 0) + count
    return fleet


def _tenants(tenants):
    return [{"name": t["name"], "namespace": t.get("namespace") or t["name"], "cluster_queue": t.get("kueue_cluster_queue") or ""}
            for t in tenants or []]


def _cluster_queue_sources(settings, fleet, tenants):
    """The ClusterQueues as given (or the default one), then one with zero quota per queue a tenant names."""
    out = list(settings["cluster_queues"] or [{"name": settings["default_cluster_queue"]}])
    given = [cq.get("name") for cq in out]
    if settings["tenant_cluster_queues"]:
        zero = dict((name, dict((res, 0) for res in entry["resources"])) for name, entry in fleet.items())
        named = unique(t["cluster_queue"] for t in tenants if t["cluster_queue"])
        for cq in named:
            if cq not in given:
                out.append({"name": cq, "quotas": zero, "namespaces": [t["namespace"] for t in tenants if t["cluster_queue"] == cq]})
    return out


def _cluster_queue(cq, settings, fleet):
    """One ClusterQueue with every default filled in: the whole fleet without quotas, CPU and memory per GPU."""
    given = cq["quotas"] if "quotas" in cq else dict((name, entry["resources"]) for name, entry in fleet.items())
    quotas = {}
    for flavor, resources in given.items():
        units = sum(to_int(v) for k, v in resources.items() if re.match(r"nvidia\.com/", to_str(k)))
        quotas[flavor] = {"cpu": units * to_int(settings["cpu_per_gpu"]),
                          "memory": "%dGi" % (units * to_int(settings["memory_gib_per_gpu"]))}
        quotas[flavor].update(resources)
    return {
        "name": cq.get("name"),
        "cohort": cq.get("cohort", settings["cohort"]),
        "namespaces": cq.get("namespaces", []),
        "quotas": quotas,
        "borrowing_limits": cq.get("borrowing_limits", {}),
        "lending_limits": cq.get("lending_limits", {}),
        "queueing_strategy": cq.get("queueing_strategy", settings["queueing_strategy"]),
        "preemption": cq.get("preemption", settings["preemption"]),
    }


def kueue_plan(settings, capacity, nodes, tenants):
    """The Kueue plan: ``{fleet, flavors, tenants, cluster_queues, errors}``.

    ``settings`` holds the role's variables without the ``kueue_`` prefix
    (resource_flavors, flavor_node_label, flavor_tolerations, cluster_queues,
    default_cluster_queue, cohort, tenant_cluster_queues, cpu_per_gpu,
    memory_gib_per_gpu, queueing_strategy, preemption,
    workload_priority_classes). Without resource_flavors there is one flavor
    per GPU product of the fleet; without cluster_queues one queue that gets the
    whole fleet.
    """
    fleet = kueue_fleet(capacity, nodes)
    flavors = settings["resource_flavors"] or [
        {"name": name, "node_labels": {settings["flavor_node_label"]: entry["label"]}, "tolerations": settings["flavor_tolerations"]}
        for name, entry in dictsort(fleet)]
    tenants = _tenants(tenants)
    queues = [_cluster_queue(cq, settings, fleet) for cq in _cluster_queue_sources(settings, fleet, tenants)]
    plan = {"fleet": fleet, "flavors": flavors, "tenants": tenants, "cluster_queues": queues}
    plan["errors"] = kueue_errors(plan, settings)
    return plan


def _quota_errors(queues, flavor_names, fleet):
    """Quota on unknown flavors, GPU quotas that are not whole devices, and GPU quotas over the fleet."""
    errors = []
    used = {}
    for cq in queues:
        for flavor, resources in cq["quotas"].items():
            if flavor not in flavor_names:
                errors.append("kueue: ClusterQueue %s sets quota on flavor %s, which is not one of the ResourceFlavors (%s)"
                              % (cq["name"], flavor, ", ".join(flavor_names) or "none"))
            for res, amount in resources.items():
                if not to_str(res).startswith("nvidia.com/"):
                    continue
                if not is_integer(amount) or amount < 0:
                    errors.append("kueue: ClusterQueue %s: %s quota of flavor %s must be a whole number of devices, "
                                  "not negative, got %r" % (cq["name"], res, flavor, amount))
                else:
                    used.setdefault("%s %s" % (flavor, res), []).append((cq["name"], amount))
    for key, claims in dictsort(used):
        flavor, res = key.split(" ")
        have = to_int(fleet.get(flavor, {}).get("resources", {}).get(res, 0))
        want = sum(amount for dummy, amount in claims)
        if want > have:
            errors.append("kueue: ClusterQueues %s ask for %d %s on flavor %s, but the fleet has %d (gpuops_k8s_capacity); "
                          "lower the nominal quotas or let queues borrow within the cohort"
                          % (", ".join(name for name, dummy in claims), want, res, flavor, have))
    return errors


def kueue_errors(plan, settings):
    """Every problem of a Kueue plan, one message each; empty when valid."""
    errors = []
    flavor_names = [f.get("name") for f in plan["flavors"]]
    queue_names = [cq["name"] for cq in plan["cluster_queues"]]
    classes = settings["workload_priority_classes"]
    for kind, names in [("ResourceFlavor", flavor_names), ("ClusterQueue", queue_names),
                        ("WorkloadPriorityClass", [c.get("name") for c in classes])]:
        for name in names:
            if not matches(name, DNS_SUBDOMAIN):
                errors.append("kueue: %s name %r must be a DNS-1123 subdomain" % (kind, name))
        if len(names) != len(unique(names)):
            errors.append("kueue: %s names must be unique, got %s" % (kind, ", ".join(to_str(n) for n in names)))
    for wpc in classes:
        value = wpc.get("value")
        if not is_integer(value) or value < -2147483648 or value > KUEUE_MAX_PRIORITY:
            errors.append("kueue: WorkloadPriorityClass %s: value must be an integer up to 1000000000, got %r" % (wpc.get("name"), value))
    # kueue_default_cluster_queue names the queue made only without kueue_cluster_queues:
    # a name other than its default beside them would silently do nothing.
    if settings["cluster_queues"] and settings["default_cluster_queue"] != DEFAULT_CLUSTER_QUEUE:
        errors.append("kueue: kueue_default_cluster_queue (%s) names the one ClusterQueue made when "
                      "kueue_cluster_queues is empty, so beside kueue_cluster_queues it would be ignored; "
                      "unset it or add that queue to kueue_cluster_queues" % settings["default_cluster_queue"])
    for t in plan["tenants"]:
        if t["cluster_queue"] and t["cluster_queue"] not in queue_names:
            errors.append("kueue: tenant %s uses kueue_cluster_queue %s, which is not one of the ClusterQueues (%s); "
                          "define it in kueue_cluster_queues or set kueue_tenant_cluster_queues"
                          % (t["name"], t["cluster_queue"], ", ".join(queue_names)))
    given = [cq.get("name") for cq in settings["cluster_queues"] or [{"name": settings["default_cluster_queue"]}]]
    made = [name for name in queue_names if name not in given]
    if made and not settings["cohort"]:
        errors.append("kueue: the tenant ClusterQueues %s have no quota of their own and borrow from the cohort; "
                      "set kueue_cohort or define them in kueue_cluster_queues" % ", ".join(made))
    return errors + _quota_errors(plan["cluster_queues"], flavor_names, plan["fleet"])


def volcano_queues(queues, tenant_queues, tenants):
    """The Volcano queues as given, then (with ``tenant_queues``) one, weight 1 and reclaimable, per queue a tenant names."""
    out = list(queues or [])
    if tenant_queues:
        given = [q.get("name") for q in out]
        for name in unique(t.get("volcano_queue", "") for t in tenants or []):
            if name and name not in given:
                out.append({"name": name, "weight": 1, "reclaimable": True})
    return out


def volcano_errors(queues, tenants):
    """Every problem of the Volcano queues (names, weights, quantities, tenants' queues), one message each."""
    errors = []
    for q in queues:
        name = q.get("name", "?")
        if "name" not in q or not matches(q["name"], DNS_SUBDOMAIN) or len(to_str(q["name"])) > 253:
            errors.append("queue name %r must be a DNS-1123 subdomain" % (q.get("name", ""),))
        weight = q.get("weight", 1)
        if not is_integer(weight) or weight < 1 or weight > 65535:
            errors.append("queue %s: weight must be an integer from 1 to 65535, got %r" % (name, weight))
        for field in ("capability", "guarantee"):
            for res, amount in (q.get(field) or {}).items():
                if isinstance(amount, bool) or not matches(amount, QUANTITY):
                    errors.append("queue %s: %s[%s] must be a non-negative quantity, got %r" % (name, field, res, amount))
        for res, amount in (q.get("guarantee") or {}).items():
            cap = (q.get("capability") or {}).get(res)
            if cap is not None and is_integer(amount) and is_integer(cap) and amount > cap:
                errors.append("queue %s: guarantee %s=%d is more than its capability %d" % (name, res, amount, cap))
    names = [q.get("name") for q in queues]
    for t in tenants or []:
        if t.get("volcano_queue") and t["volcano_queue"] not in names:
            errors.append("tenant %s uses volcano_queue %s, which is not one of the queues (%s); "
                          "define it in volcano_queues or set volcano_tenant_queues"
                          % (t.get("name"), t["volcano_queue"], ", ".join(to_str(n) for n in names)))
    if len(names) != len(unique(names)):
        errors.append("queue names must be unique")
    return errors


def kai_queue_errors(queues):
    """Every problem of the KAI Scheduler queues (names, parents, quota, limit, over-quota weight), one message each."""
    errors = []
    names = [q.get("name") for q in queues]
    if len(names) != len(unique(names)):
        errors.append("queue names must be unique")
    for q in queues:
        if not matches(q.get("name", ""), KAI_QUEUE_NAME):
            errors.append("queue name %r must be a DNS-1123 label" % (q.get("name", ""),))
        if q.get("parent") and q["parent"] not in names:
            errors.append("queue %s: parent %s is not one of kai_scheduler_queues" % (q.get("name"), q["parent"]))
        for res in ("cpu", "gpu", "memory"):
            r = q.get(res) or {}
            for key, low in (("quota", -1), ("limit", -1), ("over_quota_weight", 0)):
                if key in r and (not is_number(r[key]) or r[key] < low):
                    errors.append("queue %s: %s.%s must be a number >= %d, got %r" % (q.get("name"), res, key, low, r[key]))
            limit, quota = r.get("limit", -1), r.get("quota", 0)
            if is_number(limit) and is_number(quota) and limit != -1 and quota > limit:
                errors.append("queue %s: %s quota %s is above its limit %s" % (q.get("name"), res, quota, limit))
    return errors
