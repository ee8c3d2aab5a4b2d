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

import copy
import json
import os
from datetime import datetime, timezone

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as nvml
from ansible_collections.gpuops.platform.plugins.plugin_utils.controller_files import write_atomic

FORMAT = 1
CACHE_FACT = "gpuops_recorded"
# What gpu_node_preflight returns that describes the node (not its findings under
# this run's options, nor the free disk space, which changes all the time).
NODE_KEYS = ("distro", "os_supported", "arch", "kernel", "kernel_headers_present", "secure_boot",
             "nouveau_loaded", "loaded_version", "loaded_flavor", "gpus", "nvswitches")
# Readings that change from one second to the next: two records that differ only
# in these (and in when they were made) are the same facts.
VOLATILE_GPU = (("clocks", "graphics_mhz"), ("clocks", "sm_mhz"), ("clocks", "memory_mhz"), ("temperature_c",),
                ("power", "draw_w"), ("memory", "used_mib"), ("compute_processes",))
METADATA = ("recorded_at", "collection_version")
# Where a host's facts are when they come from the fact cache (a plan's facts_file then).
CACHE_WHERE = "the fact cache (ansible_facts.%s)" % CACHE_FACT


class RecordedFactsError(Exception):
    """Recorded facts that cannot be used, with what to do."""


def source(hostvars, name, facts_dir=None):
    """``(kind, where)`` of a host's recorded facts: ``("file", path)``, ``("cache", text)`` or ``(None, "")``.

    ``facts_dir`` stands for the host's ``gpuops_fleet_facts_dir`` when given (the planner's option).
    """
    replay = hostvars.get("gpuops_nvml_replay_file")
    if replay:
        return "file", os.path.normpath(str(replay))
    folder = facts_dir if facts_dir is not None else hostvars.get("gpuops_fleet_facts_dir")
    if folder:
        return "file", os.path.normpath(os.path.join(str(folder), "%s.json" % name))
    if boolean(hostvars.get("gpuops_fleet_facts_cache", False), strict=False):
        return "cache", CACHE_WHERE
    return None, ""


def epoch(value):
    """Seconds since the epoch of a recording time: a number, or ISO 8601 text (UTC unless it says otherwise);
    None when it is neither (or missing)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    try:
        when = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def from_document(data, where):
    """``{nvidia, node, recorded_at, collection_version, format}`` of a loaded record or nvml_facts output."""
    if isinstance(data, dict) and "format" in data and isinstance(data.get("nvidia"), dict):
        version = data.get("format")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise RecordedFactsError("%s: format must be a positive integer, got %r" % (where, version))
        if version > FORMAT:
            raise RecordedFactsError("%s has format %d, newer than the %d this collection reads: upgrade the "
                                     "collection, or record the facts again with this one" % (where, version, FORMAT))
        node = data.get("node") or {}
        if not isinstance(node, dict):
            raise RecordedFactsError("%s: node must be a mapping, got %s" % (where, type(node).__name__))
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
        text = nvml.read_text_file(path, "recorded facts file")
    except nvml.ReplayError as exc:
        raise RecordedFactsError(str(exc))
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RecordedFactsError("recorded facts file %s is not JSON: %s" % (path, exc))
    except RecursionError:
        raise RecordedFactsError("recorded facts file %s is nested too deeply to be a record" % path)
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
    """The part of a record that says whether the host changed: no metadata, no volatile readings."""
    out = copy.deepcopy(dict((k, v) for k, v in record.items() if k not in METADATA))
    nvidia = out.get("nvidia") or {}
    nvidia.pop("source", None)
    for gpu in nvidia.get("gpus") or []:
        for path in VOLATILE_GPU:
            holder = gpu
            for key in path[:-1]:
                holder = holder.get(key) if isinstance(holder, dict) else None
            if isinstance(holder, dict):
                holder.pop(path[-1], None)
    return out


def same_facts(old, new):
    return stable(old) == stable(new)


def render(record):
    return json.dumps(record, indent=1, sort_keys=True) + "\n"


def existing(path):
    """The record in ``path`` as a document, or None when there is none or it cannot be read."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write(path, record, check_mode=False):
    """``"written"`` or ``"unchanged"``; an unchanged host's file is left as it is (its time too)."""
    old = existing(path)
    if old is not None and old.get("format") == record["format"] and same_facts(old, record):
        return "unchanged"
    if not check_mode:
        write_atomic(path, render(record).encode("utf-8"))
    return "written"
