# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): reads that overlap.
"""Independent reads of the API server, side by side: each one's round trip overlaps the others' instead of
adding to them. Only reads go here (a write keeps its order)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from concurrent.futures import ThreadPoolExecutor

# As many calls in flight as kubernetes' client keeps connections for on a small machine; the API server's own
# limit (max-requests-inflight, 400 by default) is far above.
WORKERS = 8


def in_order(read, items, workers=WORKERS):
    """``[read(item) for item in items]``, the calls side by side in up to ``workers`` threads. The results come in
    the items' order; when calls raise, the first one's exception in that order is raised, once every call ended."""
    items = list(items)
    if len(items) < 2:
        return [read(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        futures = [pool.submit(read, item) for item in items]
    return [future.result() for future in futures]
