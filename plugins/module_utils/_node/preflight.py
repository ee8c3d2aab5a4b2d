# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the GPU node readiness evaluation.
"""GPU node readiness: everything a node must have before the driver goes on.

A pure evaluation over driver_host.probe(): it lists every problem at once so
the operator fixes a node in one go, not one failed run per finding.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuops.platform.plugins.module_utils._driver import decision
from ansible_collections.gpuops.platform.plugins.module_utils._driver import host as driver_host
from ansible_collections.gpuops.platform.plugins.module_utils._driver import packages as pk
from ansible_collections.gpuops.platform.plugins.module_utils._driver import provenance

_DRIVER = re.compile(r"^[0-9]{3}(\.[0-9]{1,3}(\.[0-9]{1,3})?)?\Z")


class PreflightParamError(ValueError):
    """A parameter the preflight cannot use; the message names it."""


def validate(params):
    """Refuse parameters that make no sense, before anything is probed."""
    for index, path in enumerate(params.get("disk_paths") or []):
        name = "disk_paths[%d]" % index
        try:
            pk.check_text(name, path, "the free space check")
        except pk.DriverSpecError as exc:
            raise PreflightParamError(str(exc))
        if not path.startswith("/"):
            raise PreflightParamError("%s %r is not an absolute path" % (name, path))
    for name in ("min_free_mib", "expected_nvswitches"):
        if params.get(name) is not None and params[name] < 0:
            raise PreflightParamError("%s is %d: it cannot be negative" % (name, params[name]))
    wanted = params.get("expected_driver")
    if wanted is not None and not _DRIVER.match(wanted):
        raise PreflightParamError("expected_driver %r is not a driver branch or version: use '570' or '570.172.08'"
                                  % wanted[:100])


def os_supported(distro):
    versions = pk.SUPPORTED.get(distro.get("id"))
    if not versions:
        return False
    key = distro.get("version") if distro.get("id") == "ubuntu" else distro.get("major")
    return key in versions


def evaluate(facts, params):
    """(problems, warnings) for the probed ``facts`` against the requirements in ``params``."""
    problems, warnings = [], []
    distro = facts["distro"]
    if not os_supported(distro):
        msg = ("%s is not supported: use Ubuntu 22.04/24.04, Debian 12 or RHEL/Rocky/AlmaLinux 8 or 9"
               % (distro.get("pretty_name") or distro.get("id") or "this OS"))
        (problems if params["require_supported_os"] else warnings).append(msg)
    if facts["arch"] not in pk.REPO_ARCH:
        problems.append("architecture %s is not supported: use x86_64 or aarch64" % facts["arch"])
    if not facts["gpus"]:
        msg = "no NVIDIA GPU (PCI vendor 0x10de, display class) found under /sys/bus/pci/devices"
        (problems if params["require_gpu"] else warnings).append(msg)
    expected = params.get("expected_nvswitches")
    if expected is not None and len(facts["nvswitches"]) != expected:
        problems.append("found %d NVSwitches, expected %d: check the baseboard before installing fabric manager"
                        % (len(facts["nvswitches"]), expected))
    if not facts["kernel_headers_present"]:
        msg = ("kernel headers for the running kernel %s are missing (/lib/modules/%s/build): DKMS cannot build "
               "the module" % (facts["kernel"], facts["kernel"]))
        (problems if params["require_kernel_headers"] else warnings).append(msg)
    if facts["secure_boot"] and not params["allow_secure_boot"]:
        problems.append("Secure Boot is enabled: set a MOK key for the driver (nvidia_driver_mok_signing_key) "
                        "and allow it here, or turn Secure Boot off")
    elif facts["secure_boot"]:
        warnings.append("Secure Boot is enabled: the driver module must be signed with an enrolled MOK key")
    for path in facts.get("missing_paths", []):
        problems.append("disk_paths entry %s does not exist on the node: fix disk_paths" % path)
    for item in facts["free_space"]:
        if item["free_mib"] < params["min_free_mib"]:
            problems.append("only %d MiB free on %s, %d MiB needed for the driver and DKMS builds"
                            % (item["free_mib"], item["path"], params["min_free_mib"]))
    if facts["nouveau_loaded"]:
        msg = "nouveau is loaded: the driver role blacklists it and reboots"
        (problems if params["fail_on_nouveau"] else warnings).append(msg)
    loaded, wanted = facts["loaded_version"], params.get("expected_driver")
    if loaded and wanted and not (loaded == wanted or loaded.split(".")[0] == wanted):
        msg = "nvidia kernel module %s is loaded, the wanted driver is %s" % (loaded, wanted)
        (problems if params["fail_on_other_driver"] else warnings).append(msg)
    found = facts.get("driver_provenance") or {}
    if found.get("kind") in decision.FOREIGN_KINDS:
        warnings.append("driver %s is %s (%s): the nvidia_driver role keeps it when it is the wanted one and never "
                        "installs packages over it" % (found.get("version") or "of unknown version",
                                                       decision.KIND_WORDS[found["kind"]], ", ".join(found["evidence"])))
    return problems, warnings


def run(params, root="/", installed=None):
    """The probed facts, findings and driver provenance. ``installed``: ``{name: upstream version}`` of the
    installed packages where dpkg's status file does not say (rpm), as provenance.probe takes them."""
    facts = driver_host.probe(root)
    family = "rpm" if facts["distro"].get("id") in pk.RPM_FAMILY else "deb"
    facts["driver_provenance"] = provenance.probe(root, installed, family, facts["loaded_version"])
    facts["free_space"] = driver_host.free_space_mib(params["disk_paths"], root)
    facts["missing_paths"] = [path for path in params["disk_paths"]
                              if not os.path.exists(os.path.join(root, path.lstrip("/")))]
    problems, warnings = evaluate(facts, params)
    facts["problems"] = problems
    facts["warnings_list"] = warnings
    facts["ok"] = not problems
    facts["os_supported"] = os_supported(facts["distro"])
    facts.pop("missing_paths")
    return facts
