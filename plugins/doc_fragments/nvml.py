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
options:
  controller_binding:
    description:
      - Filled in by the module's action plugin, never by hand (a task that sets it is refused).
      - The controller's nvidia-ml-py (its single file C(pynvml.py)) as C(version), C(sha256) and C(source)
        (zlib-compressed, base64), used in memory where the node's Python cannot import C(pynvml).
        Nothing is installed or written on the node.
    type: dict
requirements:
  - The NVIDIA driver (C(libnvidia-ml.so.1)) on the managed node for live NVML access; replayed
    facts need neither it nor a GPU.
  - nvidia-ml-py on the controller (requirements/collection.txt); the action plugin sends its
    C(pynvml.py) with the task, so the node needs nothing installed. A node whose Python has
    nvidia-ml-py uses its own.
notes:
  - NVML needs access to C(/dev/nvidiactl) and C(/dev/nvidia*); run with privileges (C(become))
    where they are restricted, or NVML reports no permission.
  - Replayed facts are C(gpuops.platform.nvml_facts) output saved as JSON, either the whole
    module result or its C(nvidia) facts, for example collected from a fleet with
    C(ansible -m gpuops.platform.nvml_facts) and C(--tree).
"""
