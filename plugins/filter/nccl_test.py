# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Judge the log of an nccl-tests run (all_reduce_perf) between nodes.

With NCCL_DEBUG=INFO, NCCL logs the transport of every channel
(``Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA``); nccl-tests
prints a table per message size (the last eight columns: out-of-place time,
algbw, busbw, #wrong, then the same in place) and ``# Avg bus bandwidth``.
A run passes only when every network channel uses the IB verbs transport
(InfiniBand or RoCE; ``NET/IB``), with GPUDirect RDMA when asked, no result
is wrong, and the peak bus bandwidth reaches the floor.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module

_CHANNEL = re.compile(r"\bvia NET/([A-Za-z][\w ]*?)/([0-9]+)(/GDRDMA)?")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)", re.M)
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*([0-9]+)\s+(\w+)", re.M)
_ROW = re.compile(r"^\s*([0-9]+)\s+([0-9]+)\s+\w+\s+.*\Z")


def _number(token):
    """A finite float, or None for anything else (a garbled column, nan, inf)."""
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _count(token):
    """The #wrong column: a whole number, or None (N/A, a garbled column)."""
    return int(token) if token.isascii() and token.isdigit() else None


def nccl_test_result(log, min_busbw_gbps=0, require_gdrdma=True):
    """{passed, transport, gdrdma, peak_busbw, avg_busbw, sizes, detail} of one log."""
    if log is None:
        log = ""
    if not isinstance(log, str):
        raise AnsibleFilterError("nccl_test_result: the log must be a string, got %s" % type(log).__name__)
    try:
        floor = float(min_busbw_gbps)
    except (TypeError, ValueError):
        raise AnsibleFilterError("nccl_test_result: min_busbw_gbps must be a number, got %r" % (min_busbw_gbps,))
    log = to_text(log)
    transports = set()
    gdr = {"yes": 0, "no": 0}
    for match in _CHANNEL.finditer(log):
        transports.add(match.group(1).strip())
        gdr["yes" if match.group(3) else "no"] += 1
    peak, sizes, wrong = 0.0, 0, 0
    for line in log.splitlines():
        if line.lstrip().startswith("#") or not _ROW.match(line):
            continue
        tokens = line.split()
        if len(tokens) < 11:
            continue
        busbw = [_number(tokens[-6]), _number(tokens[-2])]
        if None in busbw:
            continue
        sizes += 1
        peak = max([peak] + busbw)
        wrong += sum(_count(t) or 0 for t in (tokens[-5], tokens[-1]))
    averages = [_number(a) for a in _AVG.findall(log)]
    avg = averages[-1] if averages else None
    bounds = _OUT_OF_BOUNDS.findall(log)

    problems = []
    if not transports:
        problems.append("no network channel in the log (was NCCL_DEBUG=INFO set, and did the ranks run on two nodes?)")
    elif transports != {"IB"}:
        problems.append("NCCL used %s, not only the IB/RoCE transport (NET/IB)" % ", ".join("NET/" + t for t in sorted(transports)))
    if require_gdrdma and transports == {"IB"} and gdr["no"]:
        problems.append("%d of %d network channels without GPUDirect RDMA (GDRDMA)" % (gdr["no"], gdr["no"] + gdr["yes"]))
    if avg is None or not sizes:
        problems.append("all_reduce_perf printed no results (no bandwidth table or average)")
    if wrong or any(status != "OK" for dummy, status in bounds):
        problems.append("all_reduce_perf reported wrong results")
    if sizes and peak < floor:
        problems.append("peak bus bandwidth %.2f GB/s is under the floor of %.2f GB/s" % (peak, floor))
    transport = "IB" if transports == {"IB"} else ",".join(sorted(transports)) or "none"
    return {
        "passed": not problems,
        "transport": transport,
        "gdrdma": bool(gdr["yes"]) and not gdr["no"],
        "peak_busbw": round(peak, 2),
        "avg_busbw": avg,
        "sizes": sizes,
        "detail": "; ".join(problems) if problems else "NET/IB%s, peak bus bandwidth %.2f GB/s (floor %.2f)" % (
            "/GDRDMA" if gdr["yes"] else "", peak, floor),
    }


FilterModule = filter_module(
    nccl_test_result,
)
