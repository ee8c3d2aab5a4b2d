# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""What an operator of a large fleet decides from: the views of plan.json.

``enrich`` adds to a plan from ``fleet_plan.plan_fleet`` (schema version 1)
everything the page and the play's summary show (schema version 2, see
``fleet_schema``):

* the inventory order and each host's pool (its most specific inventory group);
* each host's disruption (drain, GPU reset, reboot) and the age of its facts;
* per-pool rollups;
* the reboot waves of ``playbooks/upgrade.yml`` (``fleet_waves``: a canary
  batch of one, then ``gpuops_upgrade_serial``, with Ansible's own percentage
  rule), and what each wave takes from the cluster;
* tenant quotas and Kueue ClusterQueue nominal quotas against the capacity;
* what changed since a previous plan (``diff``).

Everything here reads plan dictionaries only, so a plan.json alone is enough
to render the page again.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import time

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_schema, recorded_facts
from ansible_collections.gpuops.platform.plugins.plugin_utils.mig_disruption import mig_disruption
# The waves are decided in fleet_waves alone (the planner and upgrade.yml both call it).
from ansible_collections.gpuops.platform.plugins.plugin_utils.fleet_waves import batches, serial_list  # noqa: F401

STATUSES = ("ok", "warning", "critical", "invalid")
UNGROUPED = "ungrouped"
# A recorded facts file may carry the time it was recorded (top level or in
# the nvidia facts): ISO 8601 text or seconds since the epoch.
_RECORDED = re.compile(r'"(?:recorded_at|recorded_time|recorded)"\s*:\s*("([^"]{1,64})"|[0-9]+(?:\.[0-9]+)?)', re.ASCII)
_PEEK = 4096


# ---------------------------------------------------------------------------
# Per host
# ---------------------------------------------------------------------------

def status(host):
    """ok, warning, critical or invalid: the worst of the plan's validity and the GPUs' health."""
    health = host.get("health")
    if health is not None and health.get("status") not in (None, "ok"):
        return health["status"]
    return "ok" if host.get("valid") else "invalid"


def disruption(host):
    """What applying the plan does to the node: drain, GPU reset, reboot.

    A driver change or a reboot drains the node; a MIG change stops the GPU
    clients (so the node is drained too), and a MIG mode change resets the GPU.
    """
    driver = host.get("driver") or {}
    mig = host.get("mig") or {}
    # What the MIG change does is mig.yml's decision too (plugin_utils/mig_disruption.py).
    mig_change = mig_disruption(mig.get("changed"), mig.get("valid"), mig.get("gpus"))
    reboot = bool(driver.get("reboot_required"))
    reset = mig_change["gpu_reset"]
    driver_change = driver.get("action") not in (None, "none", "invalid")
    drain = reboot or reset or driver_change or mig_change["drain"]
    parts = [word for word, on in (("drain", drain), ("GPU reset", reset), ("reboot", reboot)) if on]
    return {"drain": drain, "gpu_reset": reset, "reboot": reboot, "summary": " + ".join(parts) or "none"}


def facts_time(path):
    """(seconds since the epoch, "recorded" or "mtime") of a facts file; (None, None) when unreadable.

    The recording time written into the file wins; only the first and last few
    kilobytes are read, where a top-level field sits, so 20,000 files stay cheap.
    """
    try:
        size = os.path.getsize(path)
        mtime = os.path.getmtime(path)
        with open(path, "rb") as handle:
            head = handle.read(_PEEK)
            tail = b""
            if size > _PEEK:
                handle.seek(max(_PEEK, size - _PEEK))
                tail = handle.read(_PEEK)
    except (IOError, OSError, ValueError):  # ValueError: a NUL byte in the path
        return None, None
    for chunk in (head, tail):
        match = _RECORDED.search(chunk.decode("utf-8", "replace"))
        if match:
            when = recorded_facts.epoch(match.group(2) if match.group(2) is not None else match.group(1))
            if when is not None:
                return round(when, 3), "recorded"
    return round(mtime, 3), "mtime"


def facts_age(host):
    """(seconds since the epoch, "recorded" or "mtime") of a host's facts; (None, None) when it has none.

    The time the planner read from the record wins (a record from the fact cache has no file to date it
    by); a facts file without one is dated by facts_time. A host whose facts could not be read (the planner
    left no ``facts_recorded_at``: no file, no record in the fact cache, or one it could not use) has none.
    """
    if "facts_recorded_at" not in host:
        return None, None
    recorded = host["facts_recorded_at"]
    if recorded is not None:
        return round(float(recorded), 3), "recorded"
    path = host.get("facts_file")
    if not path or path == recorded_facts.CACHE_WHERE:
        return None, None
    return facts_time(path)


def pools(names, groups, fleet_group):
    """{host: pool}: the smallest inventory group (then by name) below the fleet that holds the host."""
    fleet = set(names)
    candidates = []
    for group, members in (groups or {}).items():
        if group in (fleet_group, "all", UNGROUPED) or not members:
            continue
        if set(members) <= fleet:
            candidates.append((len(members), group, members))
    out = {}
    for _size, group, members in sorted(candidates):
        for name in members:
            out.setdefault(name, group)
    return dict((name, out.get(name, UNGROUPED)) for name in names)


# ---------------------------------------------------------------------------
# Waves
# ---------------------------------------------------------------------------

def _upgrade_disrupts(host):
    """Whether upgrade.yml drains the node: it skips nodes without a driver or already on it, loaded."""
    driver = host.get("driver") or {}
    if not driver.get("installed"):
        return False
    return driver.get("action") not in (None, "none", "invalid") or bool(driver.get("reboot_required"))


def waves(order, hosts, serial, canary, max_fail_percentage=0, planned=None):
    """Each wave of ``order`` with what it takes from the cluster; ``planned``: the waves of
    ``fleet_waves.rollout`` for these hosts (else cut here by the same rule)."""
    out = []
    first = 0
    for number, batch in enumerate(planned if planned is not None else batches(order, serial, canary), 1):
        drained = [n for n in batch if _upgrade_disrupts(hosts[n])]
        removed = {}
        for name in drained:
            for res, count in ((hosts[name].get("capacity") or {}).get("resources") or {}).items():
                removed[res] = removed.get(res, 0) + count
        out.append({"wave": number, "first": first, "size": len(batch), "drained": len(drained),
                    "reboots": sum(1 for n in drained if (hosts[n].get("driver") or {}).get("reboot_required")),
                    "capacity_removed": removed})
        first += len(batch)
    return {"serial": serial_list(serial, canary), "canary": bool(canary), "max_fail_percentage": max_fail_percentage,
            "batches": out}


# ---------------------------------------------------------------------------
# Rollups
# ---------------------------------------------------------------------------

def _add(total, counts):
    for key, value in (counts or {}).items():
        total[key] = total.get(key, 0) + value


def rollups(order, hosts, stale_before):
    out = {}
    for name in order:
        host = hosts[name]
        pool = out.setdefault(host["pool"], {
            "hosts": 0, "gpus": 0, "models": {}, "drivers": {}, "mig_layouts": {}, "capacity": {},
            "health": dict((s, 0) for s in STATUSES), "drain": 0, "gpu_reset": 0, "reboot": 0, "stale": 0,
            "no_facts": 0})
        pool["hosts"] += 1
        pool["gpus"] += host.get("gpu_count") or 0
        _add(pool["models"], host.get("gpu_models"))
        driver = (host.get("driver") or {}).get("installed")
        if host.get("driver") is not None:
            _add(pool["drivers"], {driver or "none": 1})
        mig = (host.get("mig") or {}).get("config")
        _add(pool["mig_layouts"], {mig or "none": 1})
        _add(pool["capacity"], (host.get("capacity") or {}).get("resources"))
        pool["health"][status(host)] += 1
        for key in ("drain", "gpu_reset", "reboot"):
            pool[key] += 1 if host["disruption"][key] else 0
        recorded = host.get("facts_recorded_at")
        if recorded is None:
            pool["no_facts"] += 1
        elif recorded < stale_before:
            pool["stale"] += 1
    return out


# ---------------------------------------------------------------------------
# Tenants and queues
# ---------------------------------------------------------------------------

def flavor_of(product):
    """The Kueue ResourceFlavor the kueue role makes for a GPU product."""
    return re.sub(r"[^a-z0-9]+", "-", product.lower()).strip("-")


def _count(value):
    try:
        return int(str(value))
    except ValueError:
        return None


def tenants(summary, tenant_list, default_share=1.0, default_quota=None, cluster_queues=None,
            default_cluster_queue="gpu-fleet", tenant_cluster_queues=True):
    """Each tenant's GPU quota and each ClusterQueue's nominal GPU quota against the capacity.

    The same rules as the gpu_tenants role (explicit quota entries, else a
    share of each GPU resource of the fleet) and the kueue role (a queue
    without quotas gets the whole fleet, a queue only a tenant names gets
    none); what exceeds the capacity is flagged, not refused. A GPU quota or
    share that cannot be read (``eight``) is an error of the plan (``errors``),
    never left out: the roles would refuse it when they apply.
    """
    capacity = summary.get("capacity") or {}
    resources = sorted(set(capacity) | set(["nvidia.com/gpu"]))
    rows, errors = [], []
    for tenant in tenant_list or []:
        if not isinstance(tenant, dict) or not tenant.get("name"):
            errors.append("gpu_tenants_list: each tenant needs a name, got %r" % (tenant,))
            continue
        name = str(tenant["name"])
        share = tenant.get("gpu_share", default_share)
        try:
            share = float(share)
        except (TypeError, ValueError):
            share = None
        if share is None or not 0 <= share <= 1:
            errors.append("gpu_tenants_list: tenant %s: gpu_share must be a number between 0 and 1, got %r"
                          % (name, tenant.get("gpu_share", default_share)))
            share = 0.0
        quota = dict(default_quota or {})
        quota.update(tenant.get("quota") or {})
        hard = {}
        for res in resources:
            given = quota.get("requests." + res)
            hard[res] = _count(given) if given is not None else int(capacity.get(res, 0) * share)
        for key, given in sorted(quota.items()):
            if str(key).startswith("requests.nvidia.com/") and _count(given) is None:
                errors.append("gpu_tenants_list: tenant %s: quota %s %r is not a whole number of devices: "
                              "write a number, such as 8" % (name, key, given))
        rows.append({"name": name, "cluster_queue": str(tenant.get("kueue_cluster_queue") or ""),
                     "quota": dict((k, v) for k, v in hard.items() if v is not None)})
    by_flavor = dict((flavor_of(p), res) for p, res in (summary.get("capacity_by_model") or {}).items())
    queues = list(cluster_queues or []) or [{"name": default_cluster_queue}]
    given = set(q.get("name") for q in queues)
    if boolean(tenant_cluster_queues, strict=False):
        for row in rows:
            if row["cluster_queue"] and row["cluster_queue"] not in given:
                given.add(row["cluster_queue"])
                queues.append({"name": row["cluster_queue"], "quotas": {}})
    cq_rows = []
    for queue in queues:
        quotas = queue.get("quotas")
        nominal = {}
        for flavor, per in (by_flavor.items() if quotas is None else (quotas or {}).items()):
            for res, amount in (per or {}).items():
                if not str(res).startswith("nvidia.com/"):
                    continue
                if _count(amount) is None:
                    errors.append("kueue_cluster_queues: ClusterQueue %s: nominal quota %s of flavor %s %r is not a "
                                  "whole number of devices: write a number, such as 8" % (queue.get("name"), res, flavor, amount))
                    continue
                nominal.setdefault(flavor, {})[res] = _count(amount)
        cq_rows.append({"name": str(queue.get("name")), "nominal": nominal})
    per_resource = []
    for res in resources:
        asked = sum(r["quota"].get(res, 0) for r in rows)
        per_resource.append({"resource": res, "capacity": capacity.get(res, 0), "tenants": asked,
                             "overcommitted": asked > capacity.get(res, 0)})
    per_flavor = []
    for flavor in sorted(set(by_flavor) | set(f for q in cq_rows for f in q["nominal"])):
        for res in sorted(set(by_flavor.get(flavor, {})) | set(r for q in cq_rows for r in q["nominal"].get(flavor, {}))):
            nominal = sum(q["nominal"].get(flavor, {}).get(res, 0) for q in cq_rows)
            have = by_flavor.get(flavor, {}).get(res, 0)
            per_flavor.append({"flavor": flavor, "resource": res, "capacity": have, "nominal": nominal,
                               "overcommitted": nominal > have})
    return {"tenants": rows, "cluster_queues": cq_rows, "resources": per_resource, "flavors": per_flavor,
            "overcommitted": any(r["overcommitted"] for r in per_resource + per_flavor), "errors": errors}


# ---------------------------------------------------------------------------
# What changed since a previous plan
# ---------------------------------------------------------------------------

def _resources(host):
    return (host.get("capacity") or {}).get("resources") or {}


def _facets(host):
    """What a host's change is judged on: driver, MIG, health and capacity."""
    driver = host.get("driver") or {}
    mig = host.get("mig") or {}
    layout = "; ".join((gp.get("before") or "").split(": ", 1)[-1] for gp in mig.get("gpus") or [])
    return {
        "driver": driver.get("installed") or "none",
        "wanted": driver.get("wanted") or "-",
        "mig": "%s%s" % (mig.get("config") or "none", " [%s]" % layout if layout else ""),
        "health": status(host),
        "capacity": ", ".join("%s: %s" % kv for kv in sorted(_resources(host).items())) or "none",
    }


def _totals(plan):
    s = plan.get("summary") or {}
    return {"hosts": s.get("hosts", 0), "gpus": s.get("gpus", 0), "reboot": len(s.get("reboot") or []),
            "driver_changes": len(s.get("driver_changes") or []), "unhealthy_nodes": len(s.get("unhealthy_nodes") or []),
            "invalid": len(s.get("hosts_invalid") or []), "capacity": dict(s.get("capacity") or {}),
            "driver_versions": dict(s.get("driver_versions") or {})}


# What more of a diff total means: True better (capacity), False worse (unhealthy nodes); not listed, neither
# (how many GPUs are on one driver version). Keys as fleet_report's diff rows: hosts, capacity:<resource>, ...
MORE_IS_BETTER = {"hosts": True, "gpus": True, "capacity": True, "reboot": False, "driver_changes": False,
                  "unhealthy_nodes": False, "invalid": False}


def trend(key, old, new):
    """``better``, ``worse``, ``neutral`` or ``same``: what a change of a diff total means for the fleet."""
    if old == new:
        return "same"
    better = MORE_IS_BETTER.get(key.split(":", 1)[0])
    if better is None:
        return "neutral"
    return "better" if (new > old) == better else "worse"


def unchanged(d):
    """True when a diff found nothing: no host added, removed or changed, no total moved."""
    if d.get("previous") is None:
        return False
    totals = d.get("totals") or {}
    return not (d.get("added") or d.get("removed") or d.get("changed")) and all(
        (v[0] == v[1]) if isinstance(v, list) else not v for v in totals.values())


def diff(previous, current, previous_path=None):
    """Hosts added and removed, and per host and in total what changed (both plans through the schema)."""
    if previous is None:
        return {"previous": None}
    fleet_schema.check(previous, "the previous plan%s" % (" " + previous_path if previous_path else ""))
    before, after = previous.get("hosts") or {}, current.get("hosts") or {}
    changed, counts = {}, dict((k, 0) for k in ("driver", "wanted", "mig", "health", "capacity"))
    for name in sorted(set(before) & set(after)):
        old, new = _facets(before[name]), _facets(after[name])
        delta = dict((k, [old[k], new[k]]) for k in old if old[k] != new[k])
        if delta:
            changed[name] = delta
            for key in delta:
                counts[key] += 1
    old_t, new_t = _totals(previous), _totals(current)
    totals = {}
    for key in ("hosts", "gpus", "reboot", "driver_changes", "unhealthy_nodes", "invalid"):
        totals[key] = [old_t[key], new_t[key]]
    for key in ("capacity", "driver_versions"):
        keys = sorted(set(old_t[key]) | set(new_t[key]))
        totals[key] = dict((k, [old_t[key].get(k, 0), new_t[key].get(k, 0)]) for k in keys
                           if old_t[key].get(k, 0) != new_t[key].get(k, 0))
    return {"previous": previous_path or "", "previous_version": previous.get("version"),
            "added": sorted(set(after) - set(before)), "removed": sorted(set(before) - set(after)),
            "changed": changed, "counts": counts, "totals": totals}


# ---------------------------------------------------------------------------
# All of it
# ---------------------------------------------------------------------------

def common_dir(paths):
    paths = [p for p in paths if p]
    if not paths:
        return ""
    try:
        return os.path.dirname(os.path.commonpath(paths)) if len(paths) == 1 else os.path.commonpath(paths)
    except ValueError:
        return ""


def enrich(plan, order, pool_of, serial=1, canary=False, tenant_settings=None, stale_after_hours=168, now=None,
           max_fail_percentage=0, planned_waves=None):
    """Add the views (schema version 2 and up) to a plan from fleet_plan.plan_fleet, in place; returns it.

    ``planned_waves``: the waves of ``fleet_waves.rollout`` (what upgrade.yml runs) for ``order``."""
    hosts = plan["hosts"]
    for name in order:
        host = hosts[name]
        path = host.get("facts_file")
        if path and path != recorded_facts.CACHE_WHERE:
            host["facts_file"] = os.path.normpath(os.path.abspath(path))
        host["pool"] = pool_of.get(name, UNGROUPED)
        host["disruption"] = disruption(host)
        host["facts_recorded_at"], host["facts_time_source"] = facts_age(host)
    plan["version"] = fleet_schema.VERSION
    plan["order"] = list(order)
    plan["facts_root"] = common_dir([hosts[n].get("facts_file") for n in order
                                     if hosts[n].get("facts_file") != recorded_facts.CACHE_WHERE])
    plan["stale_after_hours"] = stale_after_hours
    stale_before = (time.time() if now is None else now) - 3600.0 * stale_after_hours
    plan["pools"] = rollups(order, hosts, stale_before)
    plan["waves"] = waves(order, hosts, serial, canary, max_fail_percentage, planned_waves)
    wave_of = {}
    for batch in plan["waves"]["batches"]:
        for name in order[batch["first"]:batch["first"] + batch["size"]]:
            wave_of[name] = batch["wave"]
    for name in order:
        hosts[name]["wave"] = wave_of[name]
    settings = dict(tenant_settings or {})
    plan["tenants"] = tenants(plan["summary"], settings.pop("tenants", []), **settings)
    if plan["tenants"]["errors"]:
        # Not a host's problem: the plan is invalid without any host being so (summary.hosts_invalid).
        plan["valid"] = False
    plan.setdefault("diff", {"previous": None})
    return plan


def stale_hosts(plan, now=None):
    """Hosts whose facts are older than the plan's stale_after_hours, at ``now`` (hosts without facts are
    no_facts_hosts, not stale)."""
    limit = (time.time() if now is None else now) - 3600.0 * plan.get("stale_after_hours", 168)
    return [n for n in plan.get("order") or sorted(plan["hosts"])
            if plan["hosts"][n].get("facts_recorded_at") is not None and plan["hosts"][n]["facts_recorded_at"] < limit]


def no_facts_hosts(plan):
    """Hosts without facts: none could be read (no facts file, no record in the fact cache, a broken one)."""
    return [n for n in plan.get("order") or sorted(plan["hosts"]) if plan["hosts"][n].get("facts_recorded_at") is None]


def _preview(names, count, where):
    if not names:
        return "none"
    shown = ", ".join(names[:count])
    if len(names) <= count:
        return "%d (%s)" % (len(names), shown)
    return "%d (%s and %d more: %s)" % (len(names), shown, len(names) - count, where)


def _pairs(mapping):
    return ", ".join("%s %s -> %s" % (k, v[0], v[1]) for k, v in sorted(mapping.items()))


PREVIEWS = {"reboot": "disruption:reboot", "invalid_mig": "mig:invalid", "unhealthy_nodes": "status:critical",
            "mig_unsupported": "mig:", "hosts_invalid": "status:invalid"}


def previews(summary, count=5):
    """Each list of the summary as a count and its first ``count`` names, never every host."""
    return dict((key, _preview(summary.get(key) or [], count, "plan.json summary.%s, or the page's node table with "
                               "the filter %s" % (key, flt))) for key, flt in PREVIEWS.items())


def overview(plan, count=5, now=None, same_as=None):
    """The play's summary lines for the views: counts and the first few names, never every host.

    ``same_as``: the plan.json this plan is the same as (nothing was written): said instead of its stored diff.
    """
    s, waves_, d = plan["summary"], plan["waves"], plan["diff"]
    lines = ["reboots: %s" % previews(s, count)["reboot"]]
    batches_ = waves_["batches"]
    busy = [b for b in batches_ if b["drained"]]
    worst = max(batches_, key=lambda b: sum(b["capacity_removed"].values()), default=None)
    lines.append("upgrade waves (serial %s%s): %d, %d of them drain nodes%s" % (
        waves_["serial"][-1], ", canary first" if waves_["canary"] else "", len(batches_), len(busy),
        "; most capacity away in wave %d: %s" % (worst["wave"], ", ".join("%s: %d" % kv for kv in sorted(
            worst["capacity_removed"].items()))) if worst and worst["capacity_removed"] else ""))
    if same_as:
        lines.append("since the last plan: no change since the last plan (%s)" % same_as)
    elif unchanged(d):
        lines.append("since the last plan: no change since the last plan (%s)" % d["previous"])
    elif d.get("previous") is None:
        lines.append("since the last plan: %s" % (d.get("problem") or "no previous plan to compare with"))
    else:
        c = d["counts"]
        lines.append("since the last plan (%s): %d host(s) added, %d removed; changed: driver %d, wanted driver %d, "
                     "MIG %d, health %d, capacity %d%s" % (
                         d["previous"], len(d["added"]), len(d["removed"]), c["driver"], c["wanted"], c["mig"],
                         c["health"], c["capacity"],
                         "; capacity " + _pairs(d["totals"]["capacity"]) if d["totals"]["capacity"] else ""))
    stale = stale_hosts(plan, now)
    missing = no_facts_hosts(plan)
    lines.append("facts older than %g h: %s%s" % (plan["stale_after_hours"], _preview(
        stale, count, "the page's node table sorted by facts age"), "; no facts: %s" % _preview(
        missing, count, "the page's node table with the filter stale:none") if missing else ""))
    over = ["%s %d > %d" % (r["resource"], r["tenants"], r["capacity"]) for r in plan["tenants"]["resources"]
            if r["overcommitted"]]
    over += ["ClusterQueues %s %s %d > %d" % (r["flavor"], r["resource"], r["nominal"], r["capacity"])
             for r in plan["tenants"]["flavors"] if r["overcommitted"]]
    errors = plan["tenants"].get("errors") or []
    if errors:
        lines.append("quotas against capacity: %d cannot be read (%s)%s" % (
            len(errors), "; ".join(errors[:2]) + (" and more" if len(errors) > 2 else ""),
            "; overcommitted: " + "; ".join(over) if over else ""))
    else:
        lines.append("quotas against capacity: %s" % ("overcommitted: " + "; ".join(over) if over else "within capacity"))
    return lines
