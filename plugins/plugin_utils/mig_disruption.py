# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The MIG decision: what applying a node's MIG plan does to it.

The fleet planner (plugin_utils/fleet_views.disruption, plan.json's per-host
disruption) and roles/mig (the mig_disruption filter over the nvidia_mig
module's plan, which drains the node when it says so) both call
:func:`mig_disruption`, so the drains and GPU resets the plan shows are the
ones mig.yml makes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping


def mig_disruption(changed, valid, gpus):
    """``{drain, gpu_reset}`` of applying a MIG plan.

    ``changed``/``valid``: the plan's; ``gpus``: its per-GPU plans (``reset_required``). A valid change stops
    the GPU clients, so the node is drained; a change of MIG mode resets the GPU (and drains the node too).
    An invalid plan changes nothing.
    """
    gpus = [g for g in gpus or [] if isinstance(g, Mapping)]
    reset = bool(changed and valid) and any(g.get("reset_required") for g in gpus)
    return {"drain": bool(changed and valid), "gpu_reset": reset}
