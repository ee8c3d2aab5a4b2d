# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the one guarded PyYAML import.
"""PyYAML where the node has it; callers check ``HAS_YAML`` and report ``YAML_IMPORT_ERROR``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:
    import yaml
    HAS_YAML = True
    YAML_IMPORT_ERROR = None
except ImportError as _err:  # pragma: no cover - depends on the target
    yaml = None
    HAS_YAML = False
    YAML_IMPORT_ERROR = _err
