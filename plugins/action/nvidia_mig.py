# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Controller side of gpuops.platform.nvidia_mig: send the controller's nvidia-ml-py with the module, as nvml_facts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.platform.plugins.action.nvml_facts import ActionModule as NvmlFactsAction


class ActionModule(NvmlFactsAction):
    OFFLINE = ("facts", "facts_file")
