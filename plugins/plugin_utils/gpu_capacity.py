# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""GPU capacity of the cluster, computed from the node layer's facts: the one capacity model.

The fleet planner (plugin_utils/fleet_plan.py) and the gpu_capacity filters
(plugins/filter/gpu_capacity.py, a thin wrapper for the roles) both call it.

What each node advertises to Kubernetes follows from three things: its GPUs
and MIG devices (``ansible_facts.nvidia`` from nvml_facts, or the MIG plan's
``mig_k8s_resources``), the MIG strategy of the device plugin, and the sharing
config (time-slicing or MPS replicas) the node selects. The same numbers feed
tenant quotas, Kueue nominal quotas and the allocatable check after apply.

A node labelled ``nvidia.com/gpu.deploy.device-plugin: "false"`` (the GPU
Operator's switch that keeps its device plugin off a node) is a DRA node: the
NVIDIA DRA driver publishes its GPUs as ResourceSlices, so it advertises no
``nvidia.com/*`` extended resource. Its GPUs are listed under ``dra_nodes``
and are in no resource total, quota or flavor.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re
from collections.abc import Mapping, Sequence

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpuops.platform.plugins.module_utils._mig.profiles import (
    MIG_RESOURCE_PREFIX as MIG_PREFIX, mig_resource_name)

GPU = "nvidia.com/gpu"
MIG_STRATEGIES = ("none", "single", "mixed")
# The variable to change when a layout needs the mixed strategy.
MIXED_HINT = "set gpuops_k8s_mig_strategy: mixed (the Kubernetes layer's MIG strategy, e.g. in group_vars/all)"
SHARING_MODES = ("none", "time-slicing", "mps")
# The GPU Operator runs its device plugin on a node unless this label is "false".
DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
_NAME_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
# The device plugin's resource names: nvidia.com/<DNS-1123 subdomain>, 63 characters in all.
RESOURCE_PREFIX = "nvidia.com/"
MAX_RESOURCE_NAME_LENGTH = 63
SHARED_SUFFIX = ".shared"
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# Keys of a sharing config and of one of its resources (anything else is a typo).
SHARING_KEYS = ("name", "mode", "replicas", "resources", "rename_by_default", "fail_requests_greater_than_one")
RESOURCE_KEYS = ("name", "replicas")
# The device plugin's MPS control daemon serves at most 48 clients per GPU of compute capability
# 7.5 or newer and 16 below (cmd/mps-control-daemon/mps/device.go, maxClients); with more replicas
# it refuses the config and the device plugin waits for it for ever, advertising nothing.
MPS_MAX_CLIENTS = 48
MPS_MAX_CLIENTS_BEFORE_7_5 = 16
MPS_LIMIT_SOURCE = ("the device plugin's MPS control daemon allows at most %d clients per GPU of compute "
                    "capability 7.5 or newer and %d below (cmd/mps-control-daemon/mps/device.go)"
                    % (MPS_MAX_CLIENTS, MPS_MAX_CLIENTS_BEFORE_7_5))
# Facts recorded before cuda_compute_capability was: the architecture settles which side of 7.5.
_ARCH_FROM_7_5 = {"kepler": False, "maxwell": False, "pascal": False, "volta": False,
                  "turing": True, "ampere": True, "ada": True, "hopper": True, "blackwell": True, "rubin": True}
# A MIG device of a compute instance smaller than its GPU instance: "1c.3g.40gb".
_SUB_PROFILE = re.compile(r"([0-9]+)c\.([0-9]+)g\.")


class CapacityError(AnsibleFilterError):
    """A capacity input that cannot be used; the message says which and what to set.

    An AnsibleFilterError, so that the filters that wrap this model report it as their own.
    """


def _int(value, what):
    if isinstance(value, bool):
        raise CapacityError("%s must be an integer, got %r" % (what, value))
    try:
        return int(value)
    except (TypeError, ValueError):
        raise CapacityError("%s must be an integer, got %r" % (what, value))


def _whole(value, what):
    """A whole number: 4, 4.0 and "4" pass; 2.7, "2.7", true and "many" fail (the device plugin
    reads replicas into a Go int, so a fraction is an error there, never a rounding)."""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value) or not value.is_integer():
            raise CapacityError("%s must be a whole number, got %r" % (what, value))
        return int(value)
    if isinstance(value, str) and not re.fullmatch(r"\s*-?[0-9]+\s*", value):
        raise CapacityError("%s must be a whole number, got %r" % (what, value))
    return _int(value, what)


def _flag(value, what):
    """A boolean; the device plugin reads these into Go bools, so "maybe" or 2 is an error, not a guess."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no"):
        return value.strip().lower() in ("true", "yes")
    raise CapacityError("%s must be true or false, got %r" % (what, value))


def _unknown_keys(mapping, known, where):
    unknown = sorted(to_text(k) for k in mapping if to_text(k) not in known)
    if unknown:
        raise CapacityError("%s: unknown key%s %s; known keys: %s" % (
            where, "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(known)))


def mps_max_clients(gpu):
    """``(limit, basis)``: the MPS clients one GPU (its nvml facts) may serve, and what that rests on."""
    gpu = gpu if isinstance(gpu, Mapping) else {}
    capability = to_text(gpu.get("cuda_compute_capability") or "")
    match = re.fullmatch(r"([0-9]+)\.([0-9]+)", capability)
    if match:
        recent = (int(match.group(1)), int(match.group(2))) >= (7, 5)
        basis = "compute capability %s" % capability
    else:
        arch = to_text(gpu.get("architecture") or "").lower()
        recent = _ARCH_FROM_7_5.get(arch)
        if recent is None:
            return MPS_MAX_CLIENTS_BEFORE_7_5, "no compute capability recorded, so the lower limit"
        basis = "architecture %s, compute capability %s 7.5" % (arch, "at least" if recent else "below")
    return (MPS_MAX_CLIENTS if recent else MPS_MAX_CLIENTS_BEFORE_7_5), basis


def is_compute_sub_profile(profile):
    """Whether a MIG device's profile is a compute instance smaller than its GPU instance (1c.3g.40gb)."""
    match = _SUB_PROFILE.match(to_text(profile or ""))
    return bool(match) and match.group(1) != match.group(2)


def gpu_product_label(name):
    """A GPU's product name as a label value, the way GPU Feature Discovery writes it."""
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", to_text(name or "").strip()).strip("-._")
    return text[:63].rstrip("-._") or "unknown"


def _check_resource_name(rname, where, mig_strategy, advertised=True):
    """The device plugin's rules for a shared resource name (api/config/v1 NewResourceName, and what it advertises)."""
    if not rname.startswith(RESOURCE_PREFIX):
        rname = RESOURCE_PREFIX + rname
    if len(rname) > MAX_RESOURCE_NAME_LENGTH:
        raise CapacityError("%s: fully-qualified resource name must be %d characters or less: %s%s"
                            % (where, MAX_RESOURCE_NAME_LENGTH, rname, "" if advertised else (
                                " (this collection's own rule: the device plugin limits every name it is given to %d "
                                "characters but appends %s without checking, so the renamed resource is held to the "
                                "same limit)" % (MAX_RESOURCE_NAME_LENGTH, SHARED_SUFFIX))))
    if not _DNS_SUBDOMAIN.fullmatch(rname[len(RESOURCE_PREFIX):]):
        raise CapacityError("%s: incorrect format for resource name %r: the part after nvidia.com/ must be a "
                            "DNS-1123 subdomain (a-z, 0-9, '-' and '.')" % (where, rname))
    if not advertised:
        return rname
    if rname.startswith(MIG_PREFIX):
        if mig_strategy != "mixed":
            raise CapacityError(
                "%s: %s exists only under the mixed MIG strategy (the strategy is %s)" % (where, rname, mig_strategy))
    elif rname != GPU:
        raise CapacityError(
            "%s: the device plugin advertises no resource %s, so it would share nothing; use %s%s"
            % (where, rname, GPU, " or nvidia.com/mig-<profile>" if mig_strategy == "mixed" else
               " (MIG devices are nvidia.com/mig-<profile> only under the mixed strategy)"))
    return rname


def gpu_sharing_configs(configs, mig_strategy="single", default=""):
    """Check and normalise the device-plugin sharing configs.

    ``configs`` is a list of ``{name, mode, replicas, resources, rename_by_default,
    fail_requests_greater_than_one}``; returns ``{name: {mode, resources: [{name,
    replicas}], rename_by_default, document}}`` where ``document`` is the
    device-plugin config file (``version: v1``) for the ConfigMap key ``name``.
    ``default``, the config of nodes that name none, must be one of them (or empty).

    The rules are the device plugin's own (api/config/v1 in NVIDIA/k8s-device-plugin,
    and the checks of its main program), so a config it would refuse (and crash-loop
    on) fails here, at plan time, with the plugin's message.
    """
    if mig_strategy not in MIG_STRATEGIES:
        raise CapacityError("unknown MIG strategy %r: use one of %s" % (mig_strategy, ", ".join(MIG_STRATEGIES)))
    if configs is None:
        configs = []
    if isinstance(configs, Mapping) or isinstance(configs, str):
        raise CapacityError("the sharing configs must be a list of {name, mode, ...} mappings")
    result = {}
    for index, cfg in enumerate(configs):
        if not isinstance(cfg, Mapping):
            raise CapacityError("sharing config #%d must be a mapping, got %r" % (index, cfg))
        name = to_text(cfg.get("name") or "")
        where = "sharing config %r" % (name or "#%d" % index)
        _unknown_keys(cfg, SHARING_KEYS, where)
        if not _NAME_RE.fullmatch(name):
            raise CapacityError(
                "%s: name must be 1-63 letters, digits, '-', '_' or '.' (it is a ConfigMap key and a node label value)" % where)
        if name in result:
            raise CapacityError("%s is defined twice" % where)
        mode = to_text(cfg.get("mode") or "none")
        if mode not in SHARING_MODES:
            raise CapacityError("%s: unknown mode %r: use one of %s" % (where, mode, ", ".join(SHARING_MODES)))
        if mode == "none":
            # Silently dropping replicas here would advertise whole GPUs where sharing was meant.
            extra = sorted(k for k in ("replicas", "resources", "rename_by_default", "fail_requests_greater_than_one")
                           if cfg.get(k) is not None)
            if extra:
                raise CapacityError("%s: mode none shares nothing, so %s would be ignored; set mode to "
                                    "time-slicing or mps, or remove %s" % (where, ", ".join(extra), ", ".join(extra)))
            result[name] = {"mode": mode, "resources": [], "rename_by_default": False,
                            "document": {"version": "v1", "flags": {"migStrategy": mig_strategy}}}
            continue
        if mode == "mps" and mig_strategy == "mixed":
            raise CapacityError(
                "%s: the device plugin refuses MPS under the mixed MIG strategy (\"using --mig-strategy=mixed is not "
                "supported with MPS\"); use time-slicing, or the single or none strategy" % where)
        rename_by_default = _flag(cfg.get("rename_by_default", False), "%s: rename_by_default" % where)
        fail_more = cfg.get("fail_requests_greater_than_one")
        if fail_more is not None:
            fail_more = _flag(fail_more, "%s: fail_requests_greater_than_one" % where)
        raw = cfg.get("resources")
        if raw is None:
            if cfg.get("replicas") is None:
                raise CapacityError("%s: %s needs replicas (or resources with replicas)" % (where, mode))
            raw = [{"name": GPU, "replicas": cfg.get("replicas")}]
        elif cfg.get("replicas") is not None:
            raise CapacityError("%s: set either replicas (for %s) or resources, not both" % (where, GPU))
        if isinstance(raw, (Mapping, str)) or not isinstance(raw, Sequence):
            raise CapacityError("%s: resources must be a list of {name, replicas}, got %r" % (where, raw))
        if not raw:
            raise CapacityError("%s: no resources specified (%s needs at least one)" % (where, mode))
        resources, seen = [], set()
        for res in raw:
            if not isinstance(res, Mapping):
                raise CapacityError("%s: each resource must be a mapping {name, replicas}, got %r" % (where, res))
            if "rename" in res:
                # The plugin drops per-resource renames (DisableResourceNamingInConfig: "not yet supported").
                raise CapacityError(
                    "%s: the device plugin ignores 'rename' in sharing resources (not yet supported there); "
                    "use rename_by_default to advertise <resource>.shared" % where)
            _unknown_keys(res, RESOURCE_KEYS, "%s, resource %s" % (where, to_text(res.get("name") or "?")))
            if not res.get("name"):
                raise CapacityError("%s: no resource name specified in %r" % (where, dict(res)))
            rname = _check_resource_name(to_text(res["name"]), where, mig_strategy)
            if rname in seen:
                raise CapacityError("%s: resource %s is listed twice" % (where, rname))
            seen.add(rname)
            if res.get("replicas") is None:
                raise CapacityError("%s: no replicas specified for %s" % (where, rname))
            replicas = _whole(res["replicas"], "%s: replicas of %s" % (where, rname))
            if replicas < 2:
                raise CapacityError(
                    "%s: replicas of %s is %d, but the device plugin refuses it (\"number of replicas must be >= 2\"); "
                    "for whole GPUs use mode none" % (where, rname, replicas))
            if mode == "mps" and replicas > MPS_MAX_CLIENTS:
                raise CapacityError(
                    "%s: MPS replicas of %s is %d, more than any GPU serves: %s, and the device plugin then waits "
                    "for the daemon for ever, advertising nothing; use at most %d (%d for GPUs below compute "
                    "capability 7.5)" % (where, rname, replicas, MPS_LIMIT_SOURCE, MPS_MAX_CLIENTS,
                                         MPS_MAX_CLIENTS_BEFORE_7_5))
            if rename_by_default:
                _check_resource_name(rname + SHARED_SUFFIX, where + " (rename_by_default)", mig_strategy, advertised=False)
            resources.append({"name": rname, "replicas": replicas})
        doc = {"version": "v1", "flags": {"migStrategy": mig_strategy}}
        if mode == "time-slicing":
            doc["sharing"] = {"timeSlicing": {
                "renameByDefault": rename_by_default,
                "failRequestsGreaterThanOne": bool(fail_more),
                "resources": resources}}
        else:
            # MPS fails requests for more than one replica unless the config says otherwise.
            doc["sharing"] = {"mps": {"renameByDefault": rename_by_default, "resources": resources}}
            if fail_more is not None:
                doc["sharing"]["mps"]["failRequestsGreaterThanOne"] = fail_more
        result[name] = {"mode": mode, "resources": resources, "rename_by_default": rename_by_default, "document": doc}
    default = to_text(default or "")
    if default and default not in result:
        raise CapacityError("gpu_sharing_default_config %s is not one of the configs in gpu_sharing_configs (%s)"
                            % (default, ", ".join(result) or "none defined"))
    return result


def _mig_profiles(gpus):
    """(full GPUs without MIG, {profile: MIG device count}, MIG-enabled GPUs) from nvml facts."""
    full, profiles, mig = 0, {}, 0
    for gpu in gpus or []:
        state = (gpu.get("mig") or {})
        if state.get("current_mode") == "enabled":
            mig += 1
            for dev in state.get("devices") or []:
                profile = to_text(dev.get("profile") or "")
                profiles[profile] = profiles.get(profile, 0) + 1
        else:
            full += 1
    return full, profiles, mig


def _planned_counts(name, strategy, entry):
    """Counts of the MIG plan for one strategy.

    Accepts the mig role's form ``{valid, reason, resources: {...}}`` and a
    plain ``{resource: count}``; an invalid plan fails with its reason.
    """
    if not isinstance(entry, Mapping):
        raise CapacityError("node %s: mig_k8s_resources.%s must be a mapping" % (name, strategy))
    if "resources" in entry or "valid" in entry:
        if entry.get("valid") is False:
            raise CapacityError("node %s: the MIG layout cannot be used with the %s strategy: %s%s"
                                % (name, strategy, entry.get("reason") or "invalid",
                                   "; %s, or change the node's MIG layout (mig_config_name)" % MIXED_HINT
                                   if strategy == "single" and entry.get("reason") else ""))
        entry = entry.get("resources") or {}
    return dict((to_text(k), _int(v, "node %s: mig_k8s_resources.%s.%s" % (name, strategy, k)))
                for k, v in entry.items())


def _base_resources(node, strategy):
    """Device-plugin resources of one node before sharing, and whether it uses MIG."""
    name = node["name"]
    planned = node.get("mig_k8s_resources")
    facts = node.get("nvidia") or {}
    if planned:
        if not isinstance(planned, Mapping):
            raise CapacityError("node %s: mig_k8s_resources must be a mapping per strategy" % name)
        if strategy in planned:
            counts = _planned_counts(name, strategy, planned[strategy])
            mixed = planned.get("mixed") or {}
            mixed = mixed.get("resources", mixed) if isinstance(mixed, Mapping) else {}
            planned_mig = [k for k in list(counts) + list(mixed) if to_text(k).startswith(MIG_PREFIX)]
            return counts, bool(planned_mig) or bool(_mig_profiles(facts.get("gpus"))[2])
    if not facts.get("present"):
        return {}, False
    full, profiles, mig = _mig_profiles(facts.get("gpus"))
    if not facts.get("gpus"):
        full = _int(facts.get("gpu_count") or 0, "node %s: gpu_count" % name)
    if not mig:
        return {GPU: full}, False
    if strategy == "mixed":
        _refuse_sub_profiles(name, facts.get("gpus"))
    if strategy == "none":
        # The device plugin ignores MIG under none: a MIG-enabled GPU is one whole nvidia.com/gpu.
        return {GPU: full + mig}, True
    if strategy == "single":
        if full or len(profiles) > 1:
            found = ["%d full GPU(s)" % full] if full else []
            found += ["%d x %s" % (n, p) for p, n in sorted(profiles.items())]
            raise CapacityError(
                "node %s: the single MIG strategy needs every GPU MIG-enabled with one profile, found %s; "
                "%s, or give the node one MIG profile on every GPU" % (name, ", ".join(found), MIXED_HINT))
        return {GPU: sum(profiles.values())}, True
    counts = dict((mig_resource_name(p), n) for p, n in profiles.items())
    if full:
        counts[GPU] = full
    return counts, True


def _refuse_sub_profiles(name, gpus):
    """Under the mixed strategy the device plugin names MIG resources after whole GPU-instance profiles
    only (internal/rm/rm.go, AddDefaultResourcesToConfig skips a profile whose C differs from its G): a
    sub-profile device matches none of them, and the plugin fails for the whole node."""
    for gpu in gpus or []:
        for dev in ((gpu.get("mig") or {}).get("devices") or []):
            profile = to_text(dev.get("profile") or "")
            if is_compute_sub_profile(profile):
                raise CapacityError(
                    "node %s: GPU %s has the MIG device %s, a compute instance smaller than its GPU instance; under "
                    "the mixed strategy the device plugin fails on it (\"MIG profile '%s' does not match any "
                    "resource patterns\") and advertises nothing on this node, its full GPUs included; give the "
                    "node a MIG layout without sub-profiles (mig_config_name, which the mig role applies)"
                    % (name, gpu.get("index"), profile, profile))


def _check_mps_clients(name, facts, config, resource, replicas):
    """A node's MPS replicas against what each of its GPUs' MPS daemon serves (mps_max_clients)."""
    gpus = (facts or {}).get("gpus") or [{}]
    for gpu in gpus:
        limit, basis = mps_max_clients(gpu)
        if replicas > limit:
            raise CapacityError(
                "node %s: device-plugin config %r shares %s %d ways with MPS, but %s at most %d MPS "
                "clients (%s): %s; select a config with at most %d replicas for this node"
                % (name, config, resource, replicas,
                   "GPU %s allows" % gpu["index"] if "index" in gpu else "its GPUs allow",
                   limit, basis, MPS_LIMIT_SOURCE, limit))


def _driver(facts):
    """The loaded driver version from nvml facts, or None when unknown."""
    version = (facts or {}).get("driver_version")
    return to_text(version) if version else None


def _version_tuple(version, what):
    text = to_text(version).strip()
    # ASCII digits only: str.isdigit() would take other scripts' digits.
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*", text):
        raise CapacityError("%s must be a driver version such as 580 or 580.65.06, got %r" % (what, version))
    return tuple(int(p) for p in text.split("."))


def gpu_dra_driver_check(nodes, capacity, node_selector, minimum="580"):
    """Nodes that will run the DRA kubelet plugin with a driver older than ``minimum``, one line each.

    ``nodes``: the gpu_nodes plan's ``[{name, host, labels}]`` (the labels each node will
    carry); a node runs the kubelet plugin when its labels hold every ``node_selector``
    entry. Its driver is the one in its facts (``capacity.nodes[name].driver``); a node
    without facts is not judged here (gpu_nodes reports missing facts).
    """
    wanted = _version_tuple(minimum, "the minimum driver version")
    if not isinstance(node_selector, Mapping):
        raise CapacityError("the DRA node selector must be a mapping of label to value, got %r" % (node_selector,))
    selector = dict((to_text(k), to_text(v)) for k, v in node_selector.items())
    planned = (capacity or {}).get("nodes") or {}
    old = []
    for node in nodes or []:
        labels = dict((to_text(k), to_text(v)) for k, v in ((node or {}).get("labels") or {}).items())
        if any(labels.get(k) != v for k, v in selector.items()):
            continue
        name = to_text(node.get("name"))
        driver = (planned.get(name) or {}).get("driver")
        if driver and _version_tuple(driver, "node %s: driver_version" % name) < wanted:
            old.append("%s (host %s) has driver %s" % (name, to_text(node.get("host") or name), driver))
    return old


def _is_dra(node, name):
    """Whether the node runs the DRA driver instead of the device plugin.

    ``dra: true`` asks for it; a planned ``nvidia.com/gpu.deploy.device-plugin``
    label of "false" means it. Asking for DRA while a label turns the device
    plugin on is a contradiction the GPU Operator would resolve the wrong way.
    """
    labels = node.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise CapacityError("node %s: labels must be a mapping of label to value, got %r" % (name, labels))
    label = labels.get(DEVICE_PLUGIN_LABEL)
    label = None if label is None else to_text(label).lower()
    if node.get("dra"):
        if label not in (None, "false"):
            raise CapacityError(
                "node %s is a DRA node (gpu_nodes_dra) but its labels set %s=%s, which runs the device plugin "
                "there too; remove that label or set gpu_nodes_dra to false"
                % (name, DEVICE_PLUGIN_LABEL, labels.get(DEVICE_PLUGIN_LABEL)))
        return True
    return label == "false"


def gpu_capacity(nodes, mig_strategy="single", sharing=None, default_config=""):
    """Per node and in total, the GPU resources Kubernetes should advertise.

    ``nodes``: list of ``{name, host, nvidia (nvml facts), mig_k8s_resources, config,
    labels, dra}`` (``config``: the node's ``nvidia.com/device-plugin.config`` label,
    else ``default_config``; ``labels``: the node's planned labels; ``dra``: true for
    a DRA node). ``sharing``: the output of ``gpu_sharing_configs``.

    A DRA node (``dra`` true, or ``nvidia.com/gpu.deploy.device-plugin: "false"``
    in ``labels``) has no resources and no device-plugin config; it is listed
    in ``dra_nodes`` with its GPU count.
    """
    if mig_strategy not in MIG_STRATEGIES:
        raise CapacityError("unknown MIG strategy %r: use one of %s" % (mig_strategy, ", ".join(MIG_STRATEGIES)))
    sharing = sharing or {}
    out = {"mig_strategy": mig_strategy, "nodes": {}, "resources": {}, "by_product": {}, "missing_facts": [],
           "dra_nodes": {}}
    for node in nodes or []:
        if not isinstance(node, Mapping) or not node.get("name"):
            raise CapacityError("each node must be a mapping with a name, got %r" % (node,))
        name = to_text(node["name"])
        if name in out["nodes"]:
            raise CapacityError("Kubernetes node name %s is used by two inventory hosts" % name)
        facts = node.get("nvidia")
        if facts is None and not node.get("mig_k8s_resources"):
            out["missing_facts"].append(to_text(node.get("host") or name))
        gpus = (facts or {}).get("gpus") or []
        product = gpu_product_label(gpus[0].get("name")) if gpus else None
        gpu_count = len(gpus) if gpus else _int((facts or {}).get("gpu_count") or 0, "node %s: gpu_count" % name)
        if _is_dra(node, name):
            # No device plugin: neither the MIG strategy nor a sharing config
            # (a pool's group_vars may still name one) applies here.
            mig = bool(_mig_profiles(gpus)[2])
            out["nodes"][name] = {"host": to_text(node.get("host") or name), "product": product, "gpu_count": gpu_count,
                                  "mig": mig, "config": None, "resources": {}, "dra": True, "driver": _driver(facts)}
            out["dra_nodes"][name] = {"host": to_text(node.get("host") or name), "product": product,
                                      "gpu_count": gpu_count, "mig": mig}
            continue
        base, mig = _base_resources(node, mig_strategy)
        config = to_text(node.get("config") or default_config or "")
        resources = dict(base)
        # {advertised resource: {devices, replicas, mode}}: what sharing multiplied, so a count of
        # nvidia.com/gpu above the GPUs of the node can be explained.
        shared = {}
        if config:
            if config not in sharing:
                raise CapacityError("node %s selects device-plugin config %r, which is not defined (defined: %s)"
                                    % (name, config, ", ".join(sorted(sharing)) or "none"))
            cfg = sharing[config]
            if cfg["mode"] == "mps" and mig:
                raise CapacityError(
                    "node %s: MPS sharing (config %r) cannot be used with MIG; select a time-slicing config "
                    "for this node or disable MIG on it" % (name, config))
            for res in cfg["resources"]:
                count = resources.pop(res["name"], None)
                if count is None:
                    continue
                if cfg["mode"] == "mps" and count:
                    _check_mps_clients(name, facts, config, res["name"], res["replicas"])
                # renameByDefault advertises <resource>.shared; the plugin has no other rename.
                new = res["name"] + SHARED_SUFFIX if cfg["rename_by_default"] else res["name"]
                resources[new] = resources.get(new, 0) + count * res["replicas"]
                entry = shared.setdefault(new, {"devices": 0, "replicas": 0, "mode": cfg["mode"]})
                entry["devices"] += count
                entry["replicas"] += count * res["replicas"]
        out["nodes"][name] = {
            "host": to_text(node.get("host") or name),
            "product": product,
            "gpu_count": gpu_count,
            "mig": mig,
            "config": config or None,
            "resources": resources,
            "shared": shared,
            "dra": False,
            "driver": _driver(facts),
        }
        for res, count in resources.items():
            out["resources"][res] = out["resources"].get(res, 0) + count
            if product:
                per = out["by_product"].setdefault(product, {})
                per[res] = per.get(res, 0) + count
    return out


def gpu_quota_check(requests, capacity, what="quota"):
    """Fail when requested GPU resources exceed the fleet; returns the requests unchanged."""
    total = (capacity or {}).get("resources") or {}
    over = []
    for res, qty in sorted((requests or {}).items()):
        if not to_text(res).startswith("nvidia.com/") and not to_text(res).startswith("requests.nvidia.com/") \
                and not to_text(res).startswith("limits.nvidia.com/"):
            continue
        plain = to_text(res).split(".", 1)[1] if to_text(res).startswith(("requests.", "limits.")) else to_text(res)
        want = _int(qty, "%s %s" % (what, res))
        have = total.get(plain, 0)
        if want > have:
            over.append("%s=%d but the fleet has %d" % (res, want, have))
    if over:
        raise CapacityError("%s is larger than the fleet: %s (capacity from the node facts: %s)"
                            % (what, "; ".join(over), ", ".join("%s=%d" % kv for kv in sorted(total.items())) or "no GPUs"))
    return requests


def gpu_tolerations(taints):
    """Tolerations matching the given taints (``{key, value, effect}``), for the GPU operands."""
    out = []
    for taint in taints or []:
        if not isinstance(taint, Mapping) or not taint.get("key") or not taint.get("effect"):
            raise CapacityError("a taint needs key and effect, got %r" % (taint,))
        tol = {"key": to_text(taint["key"]), "effect": to_text(taint["effect"])}
        if taint.get("value") not in (None, ""):
            tol.update(operator="Equal", value=to_text(taint["value"]))
        else:
            tol["operator"] = "Exists"
        if tol not in out:
            out.append(tol)
    return out


def gpu_tenant_quota(tenant, capacity, default_share=1.0):
    """ResourceQuota ``hard`` of one tenant: explicit entries, plus a share of every GPU resource of the fleet.

    ``tenant.quota`` entries win; every GPU resource the fleet advertises
    (nvidia.com/gpu, nvidia.com/mig-*, renamed .shared resources) that the
    tenant does not set gets ``requests.<resource>`` = floor(fleet x gpu_share).
    Explicit GPU entries larger than the fleet fail.
    """
    if not isinstance(tenant, Mapping) or not tenant.get("name"):
        raise CapacityError("each tenant needs a name, got %r" % (tenant,))
    name = to_text(tenant["name"])
    share = tenant.get("gpu_share", default_share)
    try:
        share = float(share)
    except (TypeError, ValueError):
        raise CapacityError("tenant %s: gpu_share must be a number between 0 and 1, got %r" % (name, share))
    if not 0 <= share <= 1:
        raise CapacityError("tenant %s: gpu_share must be between 0 and 1, got %s" % (name, share))
    quota = tenant.get("quota") or {}
    if not isinstance(quota, Mapping):
        raise CapacityError("tenant %s: quota must be a mapping of resource to quantity" % name)
    hard = dict((to_text(k), v) for k, v in quota.items())
    gpu_quota_check(dict((k, v) for k, v in hard.items() if "nvidia.com/" in k),
                    capacity, what="tenant %s quota" % name)
    total = (capacity or {}).get("resources") or {}
    resources = set(total)
    resources.add(GPU)
    for res in sorted(resources):
        key = "requests." + res
        if key not in hard:
            hard[key] = int(total.get(res, 0) * share)
    return dict((k, v if isinstance(v, int) and not isinstance(v, bool) else to_text(v)) for k, v in hard.items())


def _quantity(value):
    try:
        return int(to_text(value))
    except ValueError:
        return -1


def gpu_nodes_allocatable(k8s_nodes):
    """Of whole Node objects (a server-side apply's answers, a k8s_info list), what gpu_allocatable_diff reads:
    each one's name and allocatable. Anything that is not a named Node object is left out."""
    out = []
    for node in k8s_nodes or []:
        if not isinstance(node, Mapping) or node.get("kind", "Node") != "Node":
            continue
        meta = node.get("metadata") if isinstance(node.get("metadata"), Mapping) else {}
        if not meta.get("name"):
            continue
        status = node.get("status") if isinstance(node.get("status"), Mapping) else {}
        allocatable = status.get("allocatable") if isinstance(status.get("allocatable"), Mapping) else {}
        out.append({"metadata": {"name": to_text(meta.get("name"))}, "status": {"allocatable": dict(allocatable)}})
    return out


def gpu_allocatable_diff(k8s_nodes, capacity):
    """Differences between each GPU node's allocatable (Node objects from k8s_info) and the capacity plan.

    A DRA node must advertise no ``nvidia.com/*`` resource (zero is what the
    kubelet leaves behind once the device plugin is gone): anything else means
    the device plugin still runs there, next to the DRA driver.
    """
    actual = {}
    for node in k8s_nodes or []:
        meta = node.get("metadata") or {}
        actual[to_text(meta.get("name"))] = (node.get("status") or {}).get("allocatable") or {}
    problems = []
    dra_nodes = (capacity or {}).get("dra_nodes") or {}
    for name, plan in sorted(((capacity or {}).get("nodes") or {}).items()):
        expected = plan.get("resources") or {}
        dra = name in dra_nodes or plan.get("dra")
        if not expected and not dra:
            continue
        if name not in actual:
            problems.append("node %s (host %s) is not in the cluster" % (name, plan.get("host")))
            continue
        have = dict((k, v) for k, v in actual[name].items() if to_text(k).startswith("nvidia.com/"))
        if dra:
            advertised = ["%s=%s" % (res, to_text(have[res])) for res in sorted(have) if _quantity(have[res]) != 0]
            if advertised:
                problems.append(
                    "node %s is a DRA node (%s=false, %d GPU(s) through the DRA driver) but advertises %s: "
                    "the device plugin must not run on a DRA node; check the node's labels and the GPU Operator's "
                    "device plugin DaemonSet" % (name, DEVICE_PLUGIN_LABEL, plan.get("gpu_count") or 0,
                                                 ", ".join(advertised)))
            continue
        for res in sorted(set(expected) | set(have)):
            got = _quantity(have.get(res, 0))
            want = int(expected.get(res, 0))
            if got != want:
                problems.append("node %s: allocatable %s is %d, expected %d (%d GPU(s)%s%s)" % (
                    name, res, got, want, plan.get("gpu_count") or 0,
                    ", MIG" if plan.get("mig") else "",
                    ", device-plugin config %s" % plan["config"] if plan.get("config") else ""))
    return problems


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
PSA_LEVELS = ("privileged", "baseline", "restricted")
# Keys of one tenant (anything else is a typo).
TENANT_KEYS = ("name", "namespace", "pod_security", "gpu_share", "quota", "limits", "admins", "members",
               "ingress_from_namespaces", "egress_cidrs", "kueue_cluster_queue", "kueue_local_queue", "volcano_queue")


def gpu_tenants_plan(tenants, capacity, default_share=1.0, default_quota=None, default_pod_security="baseline",
                     default_limits=None):
    """Check and complete the tenant list: namespace, Pod Security level, quota from the fleet, limits, queues."""
    if tenants is None:
        tenants = []
    if isinstance(tenants, Mapping) or isinstance(tenants, str):
        raise CapacityError("the tenants must be a list of {name, ...} mappings")
    plans, namespaces, names = [], {}, set()
    for index, tenant in enumerate(tenants):
        if not isinstance(tenant, Mapping) or not tenant.get("name"):
            raise CapacityError("each tenant needs a name, got %r" % (tenant,))
        name = to_text(tenant["name"])
        _unknown_keys(tenant, TENANT_KEYS, "tenant %s" % name)
        # The name is the value of the label platform.gpuops.io/tenant, the default namespace
        # and the default LocalQueue name: a DNS-1123 label is valid as all three.
        if not _DNS_LABEL.fullmatch(name):
            raise CapacityError(
                "tenant %r: name must be a DNS-1123 label (a-z, 0-9 and '-', starting and ending with a letter or "
                "digit, at most 63 characters): it is the label value platform.gpuops.io/tenant, the default "
                "namespace and the default LocalQueue name" % name)
        if name in names:
            raise CapacityError("tenant %s is defined twice (tenant #%d); each tenant needs its own name" % (name, index + 1))
        names.add(name)
        namespace = to_text(tenant.get("namespace") or name)
        if not _DNS_LABEL.fullmatch(namespace):
            raise CapacityError("tenant %s: namespace %r is not a DNS label (a-z, 0-9, '-', at most 63)" % (name, namespace))
        if namespace in namespaces:
            raise CapacityError("tenants %s and %s share the namespace %s" % (namespaces[namespace], name, namespace))
        namespaces[namespace] = name
        level = to_text(tenant.get("pod_security") or default_pod_security)
        if level not in PSA_LEVELS:
            raise CapacityError("tenant %s: pod_security must be one of %s, got %r" % (name, ", ".join(PSA_LEVELS), level))
        quota = dict(default_quota or {})
        quota.update(tenant.get("quota") or {})
        hard = gpu_tenant_quota(dict(tenant, quota=quota), capacity, default_share)
        plans.append({
            "name": name,
            "namespace": namespace,
            "pod_security": level,
            "quota": hard,
            "limits": tenant.get("limits") or default_limits or {},
            "admins": list(tenant.get("admins") or []),
            "members": list(tenant.get("members") or []),
            "ingress_from_namespaces": list(tenant.get("ingress_from_namespaces") or []),
            "egress_cidrs": list(tenant.get("egress_cidrs") or []),
            "kueue_cluster_queue": to_text(tenant.get("kueue_cluster_queue") or ""),
            "kueue_local_queue": to_text(tenant.get("kueue_local_queue") or name),
            "volcano_queue": to_text(tenant.get("volcano_queue") or ""),
        })
    return plans
