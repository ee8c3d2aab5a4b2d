# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The health decision: one verdict per node from its nvml_facts, for every reader.

The fleet planner (plugin_utils/fleet_plan.py) and playbooks/health.yml (the
gpu_health_plan filter of roles/gpu_health) both call :func:`health_verdict`, so
a node the plan shows critical is the node health.yml taints.

The verdict is the worst of:

* each GPU's own fields (ECC and row-remap counters, retired pages, temperature
  against its thresholds, hardware clocks slowdown (HW slowdown, HW thermal, power
  brake; SW power cap is not one), pending MIG or ECC modes, fabric registration), by
  nvml_facts' rules (module_utils/_nvml/collect.gpu_health);
* a reboot the facts say is due (the loaded module is not the installed driver):
  a warning, as nvml_facts makes it;
* the summary nvml_facts recorded with the facts (``health``): it also holds what
  the GPU fields cannot show, such as NVML that could not start, or a temperature
  limit given to nvml_facts.

So a recorded summary that says ok never hides a counter that says otherwise.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import reprlib
from collections.abc import Mapping

from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as nvml

STATUSES = ("ok", "warning", "critical")

# A refused value as the error shows it: a few levels, items and characters, never the whole of a huge or
# thousands-deep value (whose full repr is megabytes, or a RecursionError).
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict, _SHOWN.maxstring, _SHOWN.maxother = 3, 5, 5, 60, 60


class HealthVerdictError(ValueError):
    """Facts whose recorded health cannot be read; the message says which value."""


def _worse(status, other):
    return other if nvml.HEALTH_ORDER[other] > nvml.HEALTH_ORDER[status] else status


def _texts(value, field):
    """A recorded list of reasons: absent or a list of strings, else the field is named (a string would be read
    letter by letter, a number not at all)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(text, str) for text in value):
        raise HealthVerdictError("%s in the node's facts must be a list of strings, got %s" % (field, _SHOWN.repr(value)))
    return list(value)


def health_verdict(facts):
    """``{status, reasons, gpus, unhealthy_gpus, judged}`` of one node's nvml_facts.

    ``status``: ok, warning or critical; ``reasons``: why, each once; ``gpus``: ``[{index, status,
    reasons}]`` by the GPUs' own fields; ``judged``: false for a node with no NVIDIA GPU and nothing
    wrong (health.yml leaves it alone, the plan counts it ok). Raises HealthVerdictError for a recorded
    status that is not one of ok, warning, critical.
    """
    if not isinstance(facts, Mapping):
        raise HealthVerdictError("the node's nvml_facts must be a mapping, got %s" % (_SHOWN.repr(facts),))
    recorded = facts.get("health") or {}
    if not isinstance(recorded, Mapping):
        raise HealthVerdictError("health in the node's facts must be a mapping, got %s" % (_SHOWN.repr(recorded),))
    status = recorded.get("status", "ok")
    if status not in STATUSES:
        raise HealthVerdictError("unknown health status %s in its facts" % (_SHOWN.repr(status),))
    recorded_reasons = _texts(recorded.get("reasons"), "health.reasons")
    reasons = []

    def note(texts):
        reasons.extend(t for t in texts if t not in reasons)

    listed = facts.get("gpus") or []
    if not isinstance(listed, list) or not all(isinstance(gpu, Mapping) for gpu in listed):
        raise HealthVerdictError("gpus in the node's facts must be a list of mappings, got %s" % (_SHOWN.repr(listed),))
    gpus = []
    for gpu in listed:
        gstatus, greasons = nvml.gpu_health(gpu)
        gpus.append({"index": gpu.get("index"), "status": gstatus, "reasons": greasons})
        status = _worse(status, gstatus)
        note("GPU %s: %s" % (gpu.get("index"), r) for r in greasons)
    if facts.get("present") and facts.get("reboot_required"):
        status = _worse(status, "warning")
        note(_texts(facts.get("reboot_reasons"), "reboot_reasons"))
    # The recorded summary's own reasons, each that the fields did not already give (a repeat of its own stays).
    derived = set(reasons)
    reasons.extend(r for r in recorded_reasons if r not in derived)
    return {"status": status, "reasons": reasons, "gpus": gpus,
            "unhealthy_gpus": sum(1 for g in gpus if g["status"] != "ok"),
            "judged": bool(facts.get("present")) or status != "ok"}
