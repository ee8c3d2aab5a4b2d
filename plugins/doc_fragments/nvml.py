# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """What every module that talks to NVML on the node has in common."""

    DOCUMENTATION = r"""
options: {}
requirements:
  - nvidia-ml-py (the C(pynvml) module) on the managed node for live NVML access; replayed
    facts need neither it nor a GPU.
notes:
  - NVML needs access to C(/dev/nvidiactl) and C(/dev/nvidia*); run with privileges (C(become))
    where they are restricted, or NVML reports no permission.
  - Replayed facts are C(gpuops.platform.nvml_facts) output saved as JSON, either the whole
    module result or its C(nvidia) facts, for example collected from a fleet with
    C(ansible -m gpuops.platform.nvml_facts) and C(--tree).
"""
