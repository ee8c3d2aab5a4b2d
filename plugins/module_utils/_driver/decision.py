# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the driver rules shared by the
# nvidia_driver module and the controller's planner (plugins/plugin_utils/driver_action.py).
"""What the module and the planner decide alike about the driver a node already has (pure, Python 3.9).

* versions compared part by part as numbers (570.86.10 is older than 570.172.08);
* a downgrade only with consent (nvidia_driver_allow_downgrade, the module's allow_downgrade);
* a driver that packages did not install (a runfile, a driver container, one of unknown origin) is
  kept when it is the wanted one and refused otherwise: packages never go over it.

The provenance record these rules read is module_utils/_driver/provenance.py's, made by
gpu_node_preflight (and recorded by playbooks/record_facts.yml) and by the nvidia_driver module itself.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# ASCII digits only, and the whole value: no trailing newline slips past a fullmatch.
VERSION_RE = re.compile(r"[0-9]{3,4}\.[0-9]{1,3}(?:\.[0-9]{1,3})?")
# Where a driver came from: packages (distro or CUDA), or from outside them.
PACKAGED = "packages"
FOREIGN_KINDS = ("runfile", "container", "unknown")
KINDS = ("none", PACKAGED) + FOREIGN_KINDS
KIND_WORDS = {
    "runfile": "installed by NVIDIA's runfile installer",
    "container": "provided by a driver container or mount",
    "unknown": "of unknown origin (no package owns it)",
}
# The way to remove each foreign driver before packages can go on.
REMOVE_HINTS = {
    "runfile": "run nvidia-uninstall",
    "container": "stop the driver container and unmount /run/nvidia/driver",
    "unknown": "remove it the way it was installed",
}


def version_key(version):
    """``(570, 172, 8)`` for ``"570.172.08"``, compared part by part as numbers; None if not a driver version."""
    if not isinstance(version, str) or not VERSION_RE.fullmatch(version):
        return None
    return tuple(int(part) for part in version.split("."))


def same_version(one, other):
    """Whether two driver versions are the same build (570.172.8 is 570.172.08); text that is no version as written."""
    one_key, other_key = version_key(one), version_key(other)
    if one_key is None or other_key is None:
        return one == other
    return one_key == other_key


def branch_of(version):
    """The branch (major version) of a driver version, or None."""
    key = version_key(version)
    return str(key[0]) if key else None


def is_older(wanted, installed):
    """Whether ``wanted`` (a version, or a branch such as ``"570"``) is older than the ``installed`` version.

    Compared on as many parts as ``wanted`` has: branch 580 is not older than 580.159.04. An installed
    version that cannot be read is never newer.
    """
    have = version_key(installed)
    if have is None or not wanted:
        return False
    want = version_key(wanted) if "." in str(wanted) else ((int(wanted),) if str(wanted).isdigit() else None)
    return want is not None and want < have[:len(want)]


def downgrade_refusal(installed, wanted):
    """The refusal of a downgrade without consent, naming both versions and the ways forward."""
    return ("driver %s is installed and the wanted %s is older: nothing is downgraded without consent. Set "
            "nvidia_driver_allow_downgrade: true (the nvidia_driver module's allow_downgrade) to downgrade, or want "
            "%s (nvidia_driver_version: \"%s\")" % (installed, wanted, installed, installed))


def wanted_text(version, branch):
    return version or "branch %s" % branch


def foreign_decision(provenance, version, branch):
    """``(verdict, text)`` for a driver that packages did not install, or ``(None, None)``.

    ``provenance``: the record (provenance.py); ``version``/``branch``: the wanted driver (version empty
    follows the branch). ``verdict`` ``keep``: the foreign driver is the wanted one: no packages, no reboot,
    ``text`` says it was kept. ``refuse``: it is not, and nothing may change: ``text`` names what was found
    and the two ways forward. ``(None, None)``: packages or nothing installed, the usual decision applies.
    """
    kind = (provenance or {}).get("kind")
    if kind not in FOREIGN_KINDS:
        return None, None
    found = provenance.get("version")
    where = ", ".join(provenance.get("evidence") or []) or "no package"
    what = "driver %s %s (%s)" % (found or "of unknown version", KIND_WORDS[kind], where)
    matches = found is not None and (same_version(found, version) if version else branch_of(found) == str(branch))
    if matches:
        return "keep", "%s is the wanted %s: kept, no package installed" % (what, wanted_text(version, branch))
    pin = ("pin the driver it has (nvidia_driver_version: \"%s\")" % found) if found else "pin the driver it has"
    return "refuse", ("%s is not the wanted %s, and packages are never installed over it: nothing was changed. "
                      "Either %s, or remove that driver first (%s, or leave the driver to the GPU Operator: "
                      "gpuops_driver_source: operator)"
                      % (what, wanted_text(version, branch), pin, REMOVE_HINTS[kind]))
