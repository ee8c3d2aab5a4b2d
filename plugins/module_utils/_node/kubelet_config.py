# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): planning the kubelet resource-manager settings.
"""The kubelet's resource managers in its KubeletConfiguration, planned without touching anything.

Two ways to set them: a drop-in under the kubelet's ``--config-dir``
(Kubernetes 1.28 and newer; the kubeadm-owned config file stays as it is), or
a merge into the config file that keeps every other key. The effective
configuration is the config file overlaid with every ``*.conf`` drop-in in
lexical order, the way the kubelet reads it; a drop-in after ours that sets
the same key would win, so that is an error here rather than a surprise.

Changing the CPU manager policy (or the reserved CPUs under the static
policy) makes the kubelet refuse its ``cpu_manager_state`` checkpoint; the
same holds for the memory manager. The plan says which checkpoints must go.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.common.dict_transformations import dict_merge

from ansible_collections.gpuops.platform.plugins.module_utils._common.imports import optional_import

yaml, YAML_IMPORT_ERROR = optional_import("yaml")
HAS_YAML = yaml is not None

API_VERSION = "kubelet.config.k8s.io/v1beta1"
KIND = "KubeletConfiguration"
# Names and values from the Kubernetes documentation (KubeletConfiguration v1beta1).
CPU_POLICIES = ("none", "static")
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_SCOPES = ("container", "pod")
MEMORY_POLICIES = ("None", "Static")
# setting -> KubeletConfiguration key
KEYS = (
    ("cpu_manager_policy", "cpuManagerPolicy"),
    ("reserved_system_cpus", "reservedSystemCPUs"),
    ("topology_manager_policy", "topologyManagerPolicy"),
    ("topology_manager_scope", "topologyManagerScope"),
    ("memory_manager_policy", "memoryManagerPolicy"),
    ("reserved_memory", "reservedMemory"),
)
DEFAULTS = {"cpuManagerPolicy": "none", "topologyManagerPolicy": "none", "topologyManagerScope": "container",
            "memoryManagerPolicy": "None"}
CPU_STATE = "/var/lib/kubelet/cpu_manager_state"
MEMORY_STATE = "/var/lib/kubelet/memory_manager_state"
_CPUSET_RE = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*\Z")


class KubeletConfigError(Exception):
    pass


def parse_cpuset(text, what="CPU set"):
    """``"0-3,8"`` -> {0, 1, 2, 3, 8}; a clear error for anything else."""
    text = (text or "").strip().replace(" ", "")
    if not _CPUSET_RE.match(text):
        raise KubeletConfigError("%s %r is not a CPU list such as 0-1 or 0,32" % (what, text))
    cpus = set()
    for part in text.split(","):
        low, dummy, high = part.partition("-")
        low, high = int(low), int(high or low)
        if high < low:
            raise KubeletConfigError("%s %r: range %s runs backwards" % (what, text, part))
        cpus.update(range(low, high + 1))
    return cpus


def load(text, where):
    """A KubeletConfiguration document (YAML or JSON) as a dict; {} for an empty file."""
    if not (text or "").strip():
        return {}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise KubeletConfigError("%s is not valid YAML: %s" % (where, err))
    if not isinstance(data, dict):
        raise KubeletConfigError("%s does not hold a KubeletConfiguration mapping" % where)
    if data.get("kind", KIND) != KIND:
        raise KubeletConfigError("%s holds a %s, not a KubeletConfiguration" % (where, data.get("kind")))
    return data


def dump(data):
    return yaml.safe_dump(data, default_flow_style=False, sort_keys=False)


def effective(config, drop_ins):
    """The configuration the kubelet runs with: the file, then each drop-in by name.

    dict_merge is the kubelet's overlay: maps merge key by key, anything else
    (lists included) is replaced whole, and neither input is changed.
    """
    result = dict(config)
    for dummy, data in sorted(drop_ins.items()):
        result = dict_merge(result, data)
    return result


def wanted_keys(settings):
    """The KubeletConfiguration keys this run manages, from the module's settings (None: not managed)."""
    wanted = {}
    for option, key in KEYS:
        value = settings.get(option)
        if value is not None:
            wanted[key] = value
    return wanted


def validate(wanted, after, online_cpus):
    """Errors in what the kubelet would run with; every problem named with what to do."""
    errors = []
    for key, allowed in (("cpuManagerPolicy", CPU_POLICIES), ("topologyManagerPolicy", TOPOLOGY_POLICIES),
                         ("topologyManagerScope", TOPOLOGY_SCOPES), ("memoryManagerPolicy", MEMORY_POLICIES)):
        if key in wanted and wanted[key] not in allowed:
            errors.append("%s %r is not a kubelet policy: use one of %s" % (key, wanted[key], ", ".join(allowed)))
    if "reservedSystemCPUs" in wanted:
        try:
            cpus = parse_cpuset(wanted["reservedSystemCPUs"], "reservedSystemCPUs")
        except KubeletConfigError as err:
            errors.append(str(err))
        else:
            if online_cpus is not None:
                missing = sorted(cpus - online_cpus)
                if missing:
                    errors.append("reservedSystemCPUs %s names CPU(s) %s that this node does not have (online: %s)"
                                  % (wanted["reservedSystemCPUs"], ",".join(str(c) for c in missing),
                                     format_cpuset(online_cpus)))
                elif cpus >= online_cpus:
                    errors.append("reservedSystemCPUs %s reserves every CPU of the node: leave some for pods"
                                  % wanted["reservedSystemCPUs"])
    reserved_cpus = any((after.get("reservedSystemCPUs"), (after.get("kubeReserved") or {}).get("cpu"),
                         (after.get("systemReserved") or {}).get("cpu")))
    if after.get("cpuManagerPolicy") == "static" and not reserved_cpus:
        errors.append("cpuManagerPolicy static needs reserved CPUs: set reserved_system_cpus (or kubeReserved/"
                      "systemReserved cpu in the kubelet config)")
    if after.get("memoryManagerPolicy") == "Static" and not after.get("reservedMemory"):
        errors.append("memoryManagerPolicy Static needs reservedMemory per NUMA node: set reserved_memory")
    if "reservedMemory" in wanted and not isinstance(wanted["reservedMemory"], list):
        errors.append("reservedMemory must be a list of {numaNode, limits}")
    return errors


def format_cpuset(cpus):
    ranges, start, prev = [], None, None
    for cpu in sorted(cpus):
        if start is None:
            start = prev = cpu
        elif cpu == prev + 1:
            prev = cpu
        else:
            ranges.append((start, prev))
            start = prev = cpu
    if start is not None:
        ranges.append((start, prev))
    return ",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in ranges)


def _value(config, key):
    return config.get(key, DEFAULTS.get(key))


def _cpus(config):
    value = config.get("reservedSystemCPUs")
    try:
        return parse_cpuset(value) if value else set()
    except KubeletConfigError:
        return value


def plan(config_text, drop_in_texts, settings, drop_in_name=None, online_cpus=None, config_path="config.yaml"):
    """What to write and what it does.

    ``config_text``: the kubelet config file; ``drop_in_texts``: {file name:
    text} of the ``*.conf`` files in the config dir (None when there is no
    drop-in dir); ``drop_in_name``: our drop-in's file name, or None to merge
    into the config file. Returns ``{target, before, after, changed,
    effective_before, effective_after, reset_cpu_state, reset_memory_state}``.
    """
    wanted = wanted_keys(settings)
    config = load(config_text, config_path)
    drop_ins = {}
    for name, text in (drop_in_texts or {}).items():
        drop_ins[name] = load(text, name)
    before_effective = effective(config, drop_ins)

    if drop_in_name is not None:
        if drop_in_texts is None:
            raise KubeletConfigError(
                "the kubelet config dir does not exist: the kubelet runs without --config-dir here, so merge into "
                "%s instead (leave the drop-in dir empty)" % config_path)
        if not drop_in_name.endswith(".conf"):
            raise KubeletConfigError("the kubelet only reads drop-ins named *.conf, not %s" % drop_in_name)
        ours = dict(drop_ins.get(drop_in_name) or {})
        new = {"apiVersion": API_VERSION, "kind": KIND}
        new.update((k, v) for k, v in ours.items() if k not in ("apiVersion", "kind"))
        new.update(wanted)
        later = [n for n in sorted(drop_ins) if n > drop_in_name]
        for name in later:
            overriding = sorted(k for k in wanted if k in drop_ins[name] and drop_ins[name][k] != wanted[k])
            if overriding:
                raise KubeletConfigError("drop-in %s comes after %s and sets %s differently: the kubelet would use "
                                         "its values; rename ours to sort after it or remove the keys there"
                                         % (name, drop_in_name, ", ".join(overriding)))
        after_drop_ins = dict(drop_ins)
        after_drop_ins[drop_in_name] = new
        after_effective = effective(config, after_drop_ins)
        before_text = drop_in_texts.get(drop_in_name, "")
        after_text = before_text if ours == new else dump(new)
        target = drop_in_name
    else:
        new = dict(config) if config else {"apiVersion": API_VERSION, "kind": KIND}
        new.update(wanted)
        after_effective = effective(new, drop_ins)
        overridden = sorted(k for k in wanted if after_effective.get(k) != wanted[k])
        if overridden:
            raise KubeletConfigError("a drop-in in the kubelet config dir sets %s differently and would win over %s: "
                                     "manage them in a drop-in instead" % (", ".join(overridden), config_path))
        before_text = config_text or ""
        after_text = before_text if new == config else dump(new)
        target = None

    errors = validate(wanted, after_effective, online_cpus)
    if errors:
        raise KubeletConfigError("; ".join(errors))

    cpu_before, cpu_after = _value(before_effective, "cpuManagerPolicy"), _value(after_effective, "cpuManagerPolicy")
    reset_cpu = cpu_before != cpu_after or (
        cpu_after == "static" and _cpus(before_effective) != _cpus(after_effective))
    mem_before = _value(before_effective, "memoryManagerPolicy")
    mem_after = _value(after_effective, "memoryManagerPolicy")
    reset_memory = mem_before != mem_after or (
        mem_after == "Static" and before_effective.get("reservedMemory") != after_effective.get("reservedMemory"))
    managed = [k for dummy, k in KEYS]
    return {
        "target": target,
        "before": before_text,
        "after": after_text,
        "changed": before_text != after_text,
        "effective_before": dict((k, _value(before_effective, k)) for k in managed if _value(before_effective, k) is not None),
        "effective_after": dict((k, _value(after_effective, k)) for k in managed if _value(after_effective, k) is not None),
        "reset_cpu_state": reset_cpu,
        "reset_memory_state": reset_memory,
    }
