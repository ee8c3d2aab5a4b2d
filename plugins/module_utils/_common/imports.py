# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): guarded imports of node libraries.
"""Libraries a node may lack (PyYAML, nvidia-ml-py): imported once, the failure kept for missing_required_lib."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib


def optional_import(name):
    """``(module, None)``, or ``(None, ImportError)`` where the node does not have ``name``."""
    try:
        return importlib.import_module(name), None
    except ImportError as exc:
        return None, exc
