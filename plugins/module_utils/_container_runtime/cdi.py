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

import os
import re
import tempfile

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import ConfigError, read_text
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.files import write_target

DEFAULT_CDI_SPEC = "/var/run/cdi/nvidia.yaml"
DRIVER_VERSION_FILES = ("/sys/module/nvidia/version", "/proc/driver/nvidia/version")
CDI_REFRESH_UNITS = ("nvidia-cdi-refresh.path", "nvidia-cdi-refresh.service")
SYSTEMD_UNIT_DIRS = ("/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")

_SPEC_VERSION = re.compile(r"lib(?:cuda|nvidia-ml)\.so\.([0-9]+\.[0-9]+(?:\.[0-9]+)?)")
_VERSION = re.compile(r"(?<![0-9.])([0-9]{3,}\.[0-9]+(?:\.[0-9]+)?)(?![0-9.])")


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


def _installed_driver_version(given):
    if given:
        return given
    for path in DRIVER_VERSION_FILES:
        try:
            found = driver_version_from(read_text(path))
        except ConfigError:
            found = None
        if found:
            return found
    return None


def handle_cdi(module, unit_dirs=SYSTEMD_UNIT_DIRS):
    """Generate the CDI spec with nvidia-ctk when it is missing or stale; the module's ``cdi`` result."""
    options = module.params["cdi"]
    output = options["output"]
    units = [unit for unit in CDI_REFRESH_UNITS
             if any(os.path.exists(os.path.join(d, unit)) for d in unit_dirs)]
    result = dict(state="disabled", changed=False, reason="cdi.generate is false", output=output,
                  driver_version=None, command=[], refresh_units=units)
    if not options["generate"]:
        return result
    driver_version = _installed_driver_version(options["driver_version"])
    result["driver_version"] = driver_version
    try:
        spec_text = read_text(output)
    except ConfigError:
        spec_text = ""  # unreadable: regenerate
    generate, reason = cdi_decision(spec_text, driver_version, options["force"])
    result["reason"] = reason
    if not generate:
        result["state"] = "current" if spec_text is not None else "skipped"
        return result
    nvidia_ctk = options["nvidia_ctk_path"] or module.get_bin_path("nvidia-ctk")
    result["command"] = [nvidia_ctk or "nvidia-ctk", "cdi", "generate", "--output=%s" % output]
    if not nvidia_ctk or not os.path.exists(nvidia_ctk):
        result.update(state="skipped", reason="%s, but nvidia-ctk is not installed" % reason)
        return result
    if module.check_mode:
        result.update(state="would_generate", changed=True)
        return result
    target = write_target(output)
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".nvidia-cdi.", suffix=os.path.splitext(output)[1])
    os.close(fd)
    try:
        command = [nvidia_ctk, "cdi", "generate", "--output=%s" % tmp]
        rc, out, err = module.run_command(command)
        if rc != 0:
            module.fail_json(msg="`%s` failed (rc=%d): %s" % (" ".join(command), rc, (err or out).strip()),
                             cdi=result)
        with open(tmp, "rb") as handle:
            new = handle.read().decode("utf-8", "replace")
        if new == spec_text:
            result.update(state="current", reason="%s; the generated spec is identical" % reason)
            return result
        os.chmod(tmp, 0o644)
        module.atomic_move(tmp, target)
        result.update(state="generated", changed=True)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return result
