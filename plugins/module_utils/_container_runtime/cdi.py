# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): deciding when the CDI spec must be (re)generated.
"""When the CDI spec that ``nvidia-ctk cdi generate`` writes needs (re)generating.

A spec names the driver libraries with their version (``libcuda.so.570.172.08``);
after a driver change it points at files that are gone, so it is stale.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

DEFAULT_CDI_SPEC = "/var/run/cdi/nvidia.yaml"
DRIVER_VERSION_FILES = ("/sys/module/nvidia/version", "/proc/driver/nvidia/version")
CDI_REFRESH_UNITS = ("nvidia-cdi-refresh.path", "nvidia-cdi-refresh.service")
SYSTEMD_UNIT_DIRS = ("/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")

_SPEC_VERSION = re.compile(r"lib(?:cuda|nvidia-ml)\.so\.(\d+\.\d+(?:\.\d+)?)")
_VERSION = re.compile(r"(?<![\d.])(\d{3,}\.\d+(?:\.\d+)?)(?![\d.])")


def spec_driver_version(spec_text):
    """The driver version a CDI spec was generated for, or None."""
    match = _SPEC_VERSION.search(spec_text or "")
    return match.group(1) if match else None


def driver_version_from(text):
    """The driver version in /sys/module/nvidia/version or /proc/driver/nvidia/version text."""
    match = _VERSION.search(text or "")
    return match.group(1) if match else None


def cdi_decision(spec_text, driver_version, force=False):
    """(generate, reason): whether the spec needs generating, and why (or why not)."""
    if force:
        return True, "forced"
    if spec_text is None:
        if driver_version is None:
            return False, "no NVIDIA driver is loaded, so there is nothing to describe yet"
        return True, "the CDI spec is missing"
    found = spec_driver_version(spec_text)
    if driver_version is None:
        return False, "no NVIDIA driver is loaded; the existing spec is kept"
    if found != driver_version:
        return True, "the CDI spec was generated for driver %s, the installed driver is %s" % (found, driver_version)
    return False, "the CDI spec matches driver %s" % driver_version
