# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): validating and planning MIG layouts from facts.
"""Validate a mig-parted config against a node's GPUs and plan the change.

Input is the ``nvml_facts`` schema (live or replayed), so a whole fleet can be
validated and planned without hardware. Layouts are compared by profile and
count, never by instance ids; a partial change keeps every instance that can
stay at its placement and destroys and creates only the rest.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.platform.plugins.module_utils._mig import profiles as mig_profiles
from ansible_collections.gpuops.platform.plugins.module_utils._mig.model import (
    DISABLED, ENABLED, UNNAMED, GpuMigPlan, MigState, NodeMigPlan)
from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as nvml_facts


def table_rules(gpu):
    """Rules for a GPU from the built-in table (by PCI device id)."""
    return mig_profiles.family_for((gpu.get("pci") or {}).get("device_id"))


def _order(value):
    """A sort key for an int that may be missing (None last)."""
    return (value is None, value if value is not None else 0)


def _existing(gpu):
    """Current GPU instances from the facts' MIG devices, grouped by GPU instance id.

    A device without a GPU instance id (NVML did not say) is an instance of its
    own; like a device without a profile name it is never kept as it is.
    """
    by_gi, unknown = {}, []
    for dev in (gpu.get("mig") or {}).get("devices") or []:
        gi = dev.get("gpu_instance_id")
        if gi is None:
            unknown.append([dev])
        else:
            by_gi.setdefault(gi, []).append(dev)
    instances = []
    for cis in [by_gi[gi] for gi in sorted(by_gi)] + unknown:
        first = cis[0]
        placement = first.get("placement") or {}
        name = mig_profiles.strip_ci_prefix(first.get("profile"))
        # a GI is a plain layout member only with exactly one full-size compute instance
        clean = len(cis) == 1 and name is not None and first.get("profile") == name \
            and first.get("gpu_instance_id") is not None and first.get("compute_instance_id") is not None
        instances.append({"gpu_instance_id": first.get("gpu_instance_id"), "profile": name,
                          "start": placement.get("start"), "size": placement.get("size"), "clean": clean,
                          "uuids": [c.get("uuid") for c in cis if c.get("uuid")]})
    instances.sort(key=lambda i: (_order(i["start"]), _order(i["gpu_instance_id"])))
    return instances


def _counts(instances):
    counts = {}
    for inst in instances:
        key = inst["profile"] if inst["profile"] is not None else UNNAMED
        counts[key] = counts.get(key, 0) + 1
    return counts


def _label(gpu, family):
    model = family.name if family is not None else "unknown MIG family"
    return "GPU %s (%s, %s)" % (gpu.get("index"), gpu.get("name") or "unknown", model)


def _selection(entry):
    devices = "devices all" if entry.devices == "all" else "devices %s" % (
        ", ".join(str(i) for i in entry.devices) or "none")
    if entry.device_filter:
        return "%s, device-filter %s" % (devices, ", ".join(entry.device_filter))
    return devices


def _public(inst):
    return dict((k, inst[k]) for k in ("gpu_instance_id", "profile", "start", "size") if k in inst)


def plan_gpu(gpu, entry, family, config_name, offline, notes=None):
    """Plan one GPU. Returns (GpuMigPlan, problems); ``notes`` collects what was skipped and why."""
    mig = gpu.get("mig") or {}
    supported = bool(mig.get("supported"))
    current = mig.get("current_mode") if supported else None
    pending = mig.get("pending_mode") if supported else None
    existing = _existing(gpu) if current == ENABLED else []
    plan = GpuMigPlan(
        gpu.get("index"), gpu.get("uuid"), gpu.get("name"), (gpu.get("pci") or {}).get("device_id"),
        family.name if family is not None else None, family.source if family is not None else None,
        entry.position if entry is not None else None, supported, current, pending,
        MigState(current, _counts(existing), [_public(i) for i in existing]))
    if entry is None:
        return plan, []

    where = "config '%s' entry %d, %s" % (config_name, entry.position, _label(gpu, family))
    wanted = ENABLED if entry.mig_enabled else DISABLED
    if not supported:
        # mig-parted: a GPU without MIG is skipped when selected by "devices: all" or
        # when the entry disables MIG; only an explicit index that enables MIG fails.
        if entry.mig_enabled and entry.devices != "all":
            return plan, ["%s: MIG is not supported on this GPU, but the entry enables it for GPU index %s"
                          % (where, gpu.get("index"))]
        if notes is not None:
            notes.append("%s: skipped, the GPU does not support MIG" % where)
        return plan, []

    plan.wanted_mode = wanted
    problems = []
    if entry.mig_enabled:
        if family is None:
            if offline:
                why = ("device id %s is not in the MIG profile table and NVML is not available (replayed "
                       "facts), so its layout cannot be validated offline; plan against the live node"
                       % plan.device_id)
            else:
                why = ("device id %s is not in the MIG profile table and NVML lists its MIG profiles only while "
                       "MIG mode is enabled; apply a config that enables MIG with no mig-devices first, then "
                       "this layout" % plan.device_id) if current != ENABLED else (
                    "NVML reports no MIG GPU instance profiles for device id %s" % plan.device_id)
            return plan, ["%s: %s" % (where, why)]
        problems = ["%s: %s" % (where, p) for p in mig_profiles.check_layout(family, entry.mig_devices)]
        if problems:
            return plan, problems

    # Recorded facts can be damaged: a placement start must be a slice of this GPU before any mask is built.
    slices = family.memory_slices if family is not None else 64
    starts = [i["start"] for i in existing if i["start"] is not None]
    bad = [v for v in starts if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < slices]
    if bad:
        return plan, ["%s: MIG device placement.start %r in the node's facts is not a memory slice of this GPU "
                      "(0 to %d): record the node's facts again" % (where, bad[0], slices - 1)]
    plan.set_mode = pending != wanted
    plan.reset_required = current != wanted
    destroy, keep, create = [], [], []
    if wanted == DISABLED:
        destroy = existing
    elif current == ENABLED and _counts(existing) == entry.mig_devices and all(i["clean"] for i in existing):
        keep = existing  # idempotent: same profiles and counts, whatever the ids
    else:
        candidates = [(i["gpu_instance_id"], i["profile"], i["start"]) for i in existing
                      if i["clean"] and i["start"] is not None and i["profile"] in family.profiles]
        kept_ids, placed = mig_profiles.best_keep(family, entry.mig_devices, candidates)
        kept_ids = set(kept_ids or [])
        keep = [i for i in existing if i["gpu_instance_id"] in kept_ids]
        destroy = [i for i in existing if i["gpu_instance_id"] not in kept_ids]
        create = [{"profile": n, "start": s, "size": family.profiles[n].memory_slices} for n, s in placed or []]
    plan.keep = [_public(i) for i in keep]
    plan.destroy = [_public(i) for i in destroy]
    plan.create = create
    created = [dict((k, c[k]) for k in ("profile", "start", "size")) for c in create]
    after_instances = sorted([_public(i) for i in keep] + created,
                             key=lambda i: (_order(i["start"]), i["profile"] or ""))
    plan.after = MigState(wanted, _counts(after_instances) if wanted == ENABLED else {},
                          after_instances if wanted == ENABLED else [])
    return plan, problems


def k8s_resources(gpu_plans):
    """What the node exposes to Kubernetes under each MIG strategy of the device plugin (GpuMigPlans or their dict form)."""
    mixed = {}
    profiles = set()
    mig_gpus = whole_gpus = 0
    single_count = 0
    empty, unnamed = [], []
    for gp in (GpuMigPlan.of(gp) for gp in gpu_plans):
        after = gp.after
        if after.mig == ENABLED:
            mig_gpus += 1
            if not after.instances:
                empty.append(gp.index)
            for inst in after.instances:
                if inst["profile"] is None:
                    unnamed.append(gp.index)
                    continue
                key = mig_profiles.mig_resource_name(inst["profile"])
                mixed[key] = mixed.get(key, 0) + 1
                profiles.add(inst["profile"])
                single_count += 1
        else:
            whole_gpus += 1
            mixed["nvidia.com/gpu"] = mixed.get("nvidia.com/gpu", 0) + 1
    reason = None
    if mig_gpus and whole_gpus:
        reason = "the single strategy needs every GPU in MIG mode; %d of %d are not" % (whole_gpus, mig_gpus + whole_gpus)
    elif len(profiles) > 1:
        reason = "the single strategy needs one profile on the node; the layout has %s" % ", ".join(sorted(profiles))
    elif empty:
        reason = "GPU %s in MIG mode without instances exposes nothing" % ", ".join(str(i) for i in empty)
    elif unnamed:
        reason = ("GPU %s has a MIG device whose profile NVML did not name, so what it exposes is unknown"
                  % ", ".join(str(i) for i in sorted(set(unnamed), key=_order)))
    if reason:
        single = {"valid": False, "reason": reason, "resources": {}}
    else:
        count = single_count if mig_gpus else whole_gpus
        single = {"valid": True, "reason": None, "resources": {"nvidia.com/gpu": count} if count else {}}
        if mig_gpus:
            single["profile"] = sorted(profiles)[0]
    return {"single": single, "mixed": {"valid": True, "reason": None, "resources": mixed}}


def plan(facts, entries, config_name, rules_for=table_rules, offline=True):
    """:func:`plan_node`'s plan in its dict form, as module results and plan.json give it."""
    return plan_node(facts, entries, config_name, rules_for=rules_for, offline=offline).to_dict()


def plan_node(facts, entries, config_name, rules_for=table_rules, offline=True):
    """Validate and plan config ``config_name`` (its parsed ``entries``) for the node in ``facts``.

    Returns a NodeMigPlan with ``valid``, ``errors`` (every problem, each naming the config,
    entry, GPU index, model and profile), ``warnings``, ``notes`` (GPUs skipped
    because they lack MIG, entries that select no GPU), ``mig_unsupported`` (MIG asked
    of a node where no GPU can do it, also a warning), ``gpus`` (per-GPU plans),
    ``changed`` and ``k8s_resources``.
    """
    errors, warnings, notes, gpu_plans = [], [], [], []
    shape = nvml_facts.check_facts(facts, check_count=False)
    if shape:
        # Never plan from facts of the wrong shape: say what is wrong with them instead.
        errors.append("the GPU facts are not nvml_facts output (%d problem(s)): %s" % (len(shape), "; ".join(shape)))
        return NodeMigPlan(config_name, errors, warnings, notes, None, [], k8s_resources([]))
    gpus = sorted(facts.get("gpus") or [], key=lambda g: g.get("index", 0))
    if not facts.get("present", bool(gpus)):
        reason = facts.get("reason") or "NVML reports no GPU"
        if facts.get("pci_gpu_count"):
            # NVIDIA GPUs on the PCI bus that NVML cannot read: not a node without GPUs.
            errors.append("MIG cannot be planned: %s" % reason)
        else:
            errors.append("no NVIDIA GPU to configure: %s" % reason)
    indices = set(g.get("index") for g in gpus)
    for entry in entries:
        if entry.devices != "all":
            missing = [i for i in entry.devices if i not in indices]
            if missing:
                warnings.append("config '%s' entry %d selects GPU %s, which this node does not have"
                                % (config_name, entry.position, ", ".join(str(i) for i in missing)))
    used = set()
    for gpu in gpus:
        device_id = (gpu.get("pci") or {}).get("device_id")
        chosen = [e for e in entries if e.selects(gpu.get("index"), device_id)]
        used.update(e.position for e in chosen)
        family = rules_for(gpu)
        if len(chosen) > 1:
            errors.append("config '%s', %s is selected by entries %s; each GPU may match one entry"
                          % (config_name, _label(gpu, family), ", ".join(str(e.position) for e in chosen)))
            chosen = chosen[:1]
        gp, problems = plan_gpu(gpu, chosen[0] if chosen else None, family, config_name, offline, notes)
        errors.extend(problems)
        gpu_plans.append(gp)
    # mig-parted passes over an entry that matches no GPU (NVIDIA's configs carry one
    # entry per model); say so, and warn when the whole config touches nothing.
    for entry in entries:
        if entry.position not in used:
            notes.append("config '%s' entry %d (%s) selects no GPU on this node"
                         % (config_name, entry.position, _selection(entry)))
    if gpus and not used:
        warnings.append("config '%s' selects no GPU on this node (device ids: %s); nothing would change"
                        % (config_name, ", ".join(sorted(set(str((g.get("pci") or {}).get("device_id"))
                                                             for g in gpus)))))
    mig_unsupported = _mig_unsupported(gpus, [e for e in entries if e.position in used], config_name)
    if mig_unsupported:
        warnings.append(mig_unsupported)
    return NodeMigPlan(config_name, errors, warnings, notes, bool(mig_unsupported), gpu_plans, k8s_resources(gpu_plans))


def _mig_unsupported(gpus, chosen, config_name):
    """The warning for a config that enables MIG on a node where no GPU can do MIG; None otherwise.

    mig-parted skips each such GPU (a note per GPU), which is right for a mixed node,
    but a node where every GPU is skipped keeps whole GPUs while its config asks for MIG.
    """
    asking = [e.position for e in chosen if e.mig_enabled]
    if not gpus or not asking or any((g.get("mig") or {}).get("supported") for g in gpus):
        return None
    models = {}
    for gpu in gpus:
        models[gpu.get("name") or "unknown"] = models.get(gpu.get("name") or "unknown", 0) + 1
    entries = ", ".join(str(p) for p in asking)
    found = ", ".join("%s x%d" % item for item in sorted(models.items()))
    return ("config '%s' asks for MIG (entry %s) but no GPU on this node supports MIG (%s): mig-parted skips such "
            "GPUs, so the node keeps its whole GPUs; give it a config without MIG (mig-enabled: false) or check "
            "which config this node gets" % (config_name, entries, found))


def describe(gpu_plan, side):
    """One line per GPU for diff output (a GpuMigPlan or its dict form): mode and instances at their placements."""
    return GpuMigPlan.of(gpu_plan).describe(side)


def diff(result):
    """The before and after of a node's plan (a NodeMigPlan or its dict form), one line per GPU."""
    gpus = result.gpus if isinstance(result, NodeMigPlan) else result["gpus"]
    return {
        "before": "\n".join(describe(gp, "before") for gp in gpus) + "\n",
        "after": "\n".join(describe(gp, "after") for gp in gpus) + "\n",
    }
