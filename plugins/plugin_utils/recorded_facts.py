# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Recorded host facts: where each host's are kept, how they are read, and how they are written.

The one place that decides, for every playbook and the fleet planner, whether a
host is planned from recorded facts and from which store:

1. ``gpuops_nvml_replay_file`` of the host: that file (a recorded fixture);
2. ``gpuops_fleet_facts_dir``: ``<dir>/<inventory_hostname>.json``, as
   ``playbooks/record_facts.yml`` writes it;
3. ``gpuops_fleet_facts_cache: true``: Ansible's fact cache, the
   ``ansible_facts.gpuops_recorded`` fact that ``playbooks/record_facts.yml``
   left there (the ``jsonfile`` cache plugin on the command line, AWX's fact
   storage with ``use_fact_cache`` on a job template);
4. none of them: the host is read live.

A record is ``{format, host, recorded_at, collection_version, nvidia, node}``:
``nvidia`` is the ``ansible_facts.nvidia`` of ``nvml_facts``, ``node`` what
``gpu_node_preflight`` sees (OS, kernel, loaded driver, PCI). A record is also a
valid ``nvml_facts`` ``replay_file`` (its ``nvidia`` key), and a plain
``nvml_facts`` output or ``nvidia`` dictionary is read as a record without
``node``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import os
import re
from datetime import datetime, timezone

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as nvml
from ansible_collections.gpuops.platform.plugins.plugin_utils import documents
from ansible_collections.gpuops.platform.plugins.plugin_utils.controller_files import write_atomic

FORMAT = 1
CACHE_FACT = "gpuops_recorded"
# What gpu_node_preflight returns that describes the node (not its findings under
# this run's options, nor the free disk space, which changes all the time).
NODE_KEYS = ("distro", "os_supported", "arch", "kernel", "kernel_headers_present", "secure_boot",
             "nouveau_loaded", "loaded_version", "loaded_flavor", "gpus", "nvswitches", "driver_provenance")
# Readings that change from one second to the next: two records that differ only
# in these (and in when they were made) are the same facts.
VOLATILE_GPU = (("clocks", "graphics_mhz"), ("clocks", "sm_mhz"), ("clocks", "memory_mhz"), ("temperature_c",),
                ("power", "draw_w"), ("memory", "used_mib"), ("compute_processes",), ("utilization",),
                # Idle or SW power cap follow the load; a hardware slowdown still changes the GPU's health.
                ("clocks_event_reasons",))
METADATA = ("recorded_at", "collection_version")
# The type of each field of a record (and of its node facts) that is read: (field, types, its name in messages).
_STR, _BOOL = ((str,), "a string"), ((bool,), "true or false")
RECORD_FIELDS = (("host", _STR), ("recorded_at", _STR), ("collection_version", _STR), ("node", ((dict,), "a mapping")))
NODE_FIELDS = (("distro", ((dict,), "a mapping")), ("os_supported", _BOOL), ("arch", _STR), ("kernel", _STR),
               ("kernel_headers_present", _BOOL), ("secure_boot", _BOOL), ("nouveau_loaded", _BOOL),
               ("loaded_version", _STR), ("loaded_flavor", _STR), ("gpus", ((list,), "a list")),
               ("nvswitches", ((list,), "a list")), ("driver_provenance", ((dict,), "a mapping")))
# Where a host's facts are when they come from the fact cache (a plan's facts_file then).
CACHE_WHERE = "the fact cache (ansible_facts.%s)" % CACHE_FACT


class RecordedFactsError(Exception):
    """Recorded facts that cannot be used, with what to do."""


def source(hostvars, name, facts_dir=None):
    """``(kind, where)`` of a host's recorded facts: ``("file", path)``, ``("cache", text)`` or ``(None, "")``.

    ``facts_dir`` stands for the host's ``gpuops_fleet_facts_dir`` when given (the planner's option).
    Raises RecordedFactsError for a path that holds a NUL byte, and for a host name that would put its file
    outside the folder (``../escape``).
    """
    try:
        replay = hostvars.get("gpuops_nvml_replay_file")
        if replay:
            return "file", os.path.normpath(documents.refuse_nul(replay, "gpuops_nvml_replay_file"))
        folder = facts_dir if facts_dir is not None else hostvars.get("gpuops_fleet_facts_dir")
        if folder:
            return "file", record_path(folder, name)
    except documents.DocumentError as exc:
        raise RecordedFactsError(str(exc))
    if boolean(hostvars.get("gpuops_fleet_facts_cache", False), strict=False):
        return "cache", CACHE_WHERE
    return None, ""


def record_path(folder, name):
    """``<folder>/<name>.json``, the record of host ``name``; raises DocumentError when it would be elsewhere."""
    folder = documents.refuse_nul(folder, "gpuops_fleet_facts_dir")
    return documents.inside(folder, name, ".json", "the inventory host name")


def _type_problems(data, fields, prefix=""):
    problems = []
    for key, (types, expected) in fields:
        value = data.get(key)
        if value is not None and not (isinstance(value, types) and (bool in types or not isinstance(value, bool))):
            problems.append("%s%s must be %s or null, got %s" % (prefix, key, expected, nvml._type_name(value)))
    return problems


def record_problems(data):
    """Every problem with the shape of a record, each naming its field's path (nvidia.gpus[0].mig, node.kernel)."""
    if not isinstance(data, dict):
        return ["the record must be a mapping, got %s" % nvml._type_name(data)]
    version = data.get("format")
    problems = []
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        problems.append("format must be a positive integer, got %r" % (version,))
    problems.extend(_type_problems(data, RECORD_FIELDS))
    if isinstance(data.get("node"), dict):
        problems.extend(_type_problems(data["node"], NODE_FIELDS, "node."))
    nvidia = data.get("nvidia")
    if not isinstance(nvidia, dict):
        problems.append("nvidia must be a mapping (the ansible_facts.nvidia of nvml_facts), got %s"
                        % nvml._type_name(nvidia))
    else:
        problems.extend("nvidia.%s" % p if not p.startswith("lacks") else "nvidia " + p for p in nvml.check_facts(nvidia))
    return problems


_EPOCH_TEXT = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,9})?")
_ISO_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?)?"
                       r"(?:Z|[+-][0-9]{2}:[0-9]{2})?")


def epoch(value):
    """Seconds since the epoch of a recording time: a number, or ISO 8601 text (UTC unless it says otherwise);
    None when it is neither (or missing)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    # Text: whole, in ASCII digits (float() and fromisoformat() take "nan", "inf" and other scripts' digits).
    text = value if isinstance(value, str) else ""
    if _EPOCH_TEXT.fullmatch(text):
        return float(text)
    if not _ISO_TEXT.fullmatch(text):
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def from_document(data, where):
    """``{nvidia, node, recorded_at, collection_version, format}`` of a loaded record or nvml_facts output."""
    if isinstance(data, dict) and "format" in data:
        version = data.get("format")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise RecordedFactsError("%s: format must be a positive integer, got %r" % (where, version))
        if version > FORMAT:
            raise RecordedFactsError("%s has format %d, newer than the %d this collection reads: upgrade the "
                                     "collection, or record the facts again with this one" % (where, version, FORMAT))
        problems = record_problems(data)
        if problems:
            raise RecordedFactsError("%s is not a facts record (%d problem(s)): %s; record the facts again"
                                     % (where, len(problems), "; ".join(problems)))
        node = data.get("node") or {}
        meta = dict((key, data.get(key)) for key in METADATA)
    else:
        node, meta, version = {}, dict((key, None) for key in METADATA), None
    try:
        facts = nvml.validate_replay(data, where)
    except nvml.ReplayError as exc:
        raise RecordedFactsError(str(exc))
    return dict(meta, nvidia=facts, node=node, format=version)


def read_file(path):
    """The record in ``path`` (see from_document); raises RecordedFactsError."""
    try:
        data = documents.read_json(path, "recorded facts file")[1]
    except documents.DocumentError as exc:
        raise RecordedFactsError(str(exc))
    return from_document(data, "recorded facts file %s" % path)


def load(hostvars, name, facts_dir=None):
    """``(where, record)`` of a host; ``record`` None when the host is read live.

    Raises RecordedFactsError naming the store and what to do when the host should
    have recorded facts and they are missing or unusable.
    """
    kind, where = source(hostvars, name, facts_dir)
    if kind is None:
        return "", None
    if kind == "file":
        if not os.path.exists(where) and not os.path.islink(where):
            raise RecordedFactsError(
                "no facts file for this host (%s): record it with playbooks/record_facts.yml "
                "(gpuops_fleet_facts_dir), or set gpuops_nvml_replay_file for it" % where)
        return where, read_file(where)
    facts = hostvars.get("ansible_facts") or {}
    data = facts.get(CACHE_FACT) if isinstance(facts, dict) or hasattr(facts, "get") else None
    if not data:
        raise RecordedFactsError(
            "no recorded facts for this host in %s: run playbooks/record_facts.yml with fact caching on (the "
            "jsonfile cache plugin, or use_fact_cache on the AWX job template), or unset gpuops_fleet_facts_cache"
            % where)
    try:
        documents.check_depth(data, "%s of %s" % (where, name))
    except documents.DocumentError as exc:
        raise RecordedFactsError(str(exc))
    return where, from_document(data, "%s of %s" % (where, name))


# ---------------------------------------------------------------------------
# Recording
# ---------------------------------------------------------------------------

def node_facts(preflight):
    """What a record keeps of a gpu_node_preflight result."""
    preflight = preflight or {}
    return dict((key, preflight[key]) for key in NODE_KEYS if key in preflight)


def make_record(name, nvidia, node, recorded_at, collection_version):
    nvidia = dict(nvidia)
    nvidia.pop("source", None)
    return {"format": FORMAT, "host": name, "recorded_at": recorded_at, "collection_version": collection_version,
            "nvidia": nvidia, "node": node_facts(node)}


def stable(record):
    """The part of a record that says whether the host changed: no metadata, no volatile readings.

    A new structure that shares the unchanged parts with ``record`` (copied only along the paths it drops:
    the fleet planner digests every host's record, and a deep copy would cost more than the plan)."""
    out = dict((k, v) for k, v in record.items() if k not in METADATA)
    nvidia = out.get("nvidia")
    if not isinstance(nvidia, dict):
        return out
    nvidia = out["nvidia"] = dict(nvidia)
    nvidia.pop("source", None)
    if "gpus" in nvidia and isinstance(nvidia["gpus"], list):
        nvidia["gpus"] = [_without_volatile(gpu) for gpu in nvidia["gpus"]]
    return out


def usable(data):
    """Whether ``data`` (a record from the fact cache, say) is a record that can be compared with a new one."""
    try:
        documents.check_depth(data, "the record")
    except documents.DocumentError:
        return False
    return not record_problems(data)


def _without_volatile(gpu):
    if not isinstance(gpu, dict):
        return gpu
    gpu = dict(gpu)
    for path in VOLATILE_GPU:
        holder = gpu
        for key in path[:-1]:
            inner = holder.get(key)
            if not isinstance(inner, dict):
                holder = None
                break
            holder[key] = inner = dict(inner)
            holder = inner
        if isinstance(holder, dict):
            holder.pop(path[-1], None)
    return gpu


def same_facts(old, new):
    return stable(old) == stable(new)


def render(record):
    return json.dumps(record, indent=1, sort_keys=True) + "\n"


def existing(path):
    """``(record, problem)``: the record in ``path``, or None and why it cannot be compared (None: no file)."""
    if not os.path.lexists(path):
        return None, None
    try:
        data = documents.read_json(path, "the existing record")[1]
    except documents.DocumentError as exc:
        return None, str(exc)
    problems = record_problems(data)
    if problems:
        return None, "the existing record %s is not a facts record: %s" % (path, "; ".join(problems[:5]))
    return data, None


def write(path, record, check_mode=False, notes=None):
    """``"written"`` or ``"unchanged"``; an unchanged host's file is left as it is (its time too).

    An existing file that is no usable record is replaced; why goes into the list ``notes`` when given.
    """
    old, problem = existing(path)
    if problem and notes is not None:
        notes.append("%s; it is replaced by the new record" % problem)
    if old is not None and old.get("format") == record["format"] and same_facts(old, record):
        return "unchanged"
    if not check_mode:
        write_atomic(path, render(record).encode("utf-8"))
    return "written"
