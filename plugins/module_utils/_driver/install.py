# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the node_packages module's core.
"""Install pinned OS packages through the driver's apt-get/dnf plumbing.

The nvidia_driver converger already drives apt-get, dnf, dpkg-query and rpm
itself (``converge.Converger``): no Python apt or dnf binding is needed on the
node. This reuses that plumbing (its command runner, installed-package query,
``apt-get update`` and apt-get options) for other package sets, such as the
container toolkit's, and adds a real simulation for check mode: ``apt-get -s
install`` (or ``dnf --assumeno install``) resolves the same request against
the node's package cache, so a plan that apt or dnf would refuse fails in
check mode too, and the plan lists what the package manager would do.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import sys

from ansible_collections.gpuops.platform.plugins.module_utils._driver import converge as dc
from ansible_collections.gpuops.platform.plugins.module_utils._driver import packages as pk

# Debian (epoch:upstream-revision) and RPM (epoch:version-release) version characters.
_VERSION = re.compile(r"(?:[0-9]+:)?[0-9A-Za-z][0-9A-Za-z.+~_^-]*")
# "Inst name [old] (new origin [arch])", "Remv name [old]" (apt-get -s, apt-private-output.cc).
_APT_SIM = re.compile(r"^(Inst|Remv) (\S+)(?: \[([^\]]+)\])?(?: \((\S+))?", re.MULTILINE)
_APT_ACTIONS = {"Inst": "install", "Remv": "remove"}


class PackageError(Exception):
    """A failure with a message for the operator; nothing after it was changed."""


def parse_names(names):
    """[(name, version or None)] from ``name`` or ``name=version`` items; a bad item is refused by index."""
    if not names:
        raise PackageError("name is empty: give at least one package")
    wanted, seen = [], set()
    for index, item in enumerate(names):
        label = "name[%d]" % index
        try:
            pk.check_text(label, item, "the package manager command line")
        except pk.DriverSpecError as exc:
            raise PackageError(str(exc))
        name, sep, version = item.partition("=")
        if not pk._PACKAGE_NAME.fullmatch(name):
            raise PackageError("%s %r is not a package name (letters, digits, . _ + -, not starting with -), "
                               "optionally followed by =VERSION" % (label, item))
        if sep and not _VERSION.fullmatch(version):
            raise PackageError("%s %r: %r is not a package version (such as 1.17.8-1): give the exact version, "
                               "no wildcards or comparisons" % (label, item, version))
        if name in seen:
            raise PackageError("%s: %s is named twice: name each package once" % (label, name))
        seen.add(name)
        wanted.append((name, version or None))
    return wanted


def satisfied(installed, version, family):
    """Whether an installed package (its dpkg version, or rpm's (epoch, version, release)) is the wanted one."""
    if installed is None:
        return False
    if version is None:
        return True
    if family == "deb":
        return version in (installed, installed.split(":", 1)[-1])
    epoch, ver, rel = installed
    return version in (ver, "%s-%s" % (ver, rel), "%s:%s-%s" % (epoch or "0", ver, rel))


def shown(installed, family):
    if installed is None or family == "deb":
        return installed
    epoch, ver, rel = installed
    return "%s%s-%s" % ("" if epoch in (None, "", "0") else epoch + ":", ver, rel)


def apt_transaction(output):
    """What ``apt-get -s install`` would do: [{action, name, from, to}], in apt's order."""
    return [{"action": _APT_ACTIONS[m.group(1)], "name": m.group(2), "from": m.group(3), "to": m.group(4)}
            for m in _APT_SIM.finditer(output or "")]


class PackageInstaller(object):
    """One run of node_packages: query, simulate, install (unless check mode), verify, report."""

    def __init__(self, module, params, root="/"):
        self.module = module
        self.params = params
        # The driver's command runner and package queries; no host probe is needed here.
        self.tool = dc.Converger(module, params, root=root, host={})

    def family(self):
        if self.tool.have("apt-get") and self.tool.have("dpkg-query"):
            return "deb"
        if self.tool.have("dnf") and self.tool.have("rpm"):
            return "rpm"
        raise PackageError(
            "neither apt-get (with dpkg-query) nor dnf (with rpm) is on this node's PATH: node_packages installs "
            "packages on Debian, Ubuntu and the RHEL family only. It drives those tools itself, so the module's "
            "interpreter (%s) needs no apt or dnf Python binding; on another system, install %s with its own "
            "package manager" % (sys.executable or "unknown", ", ".join(self.params["name"])))

    def execute(self):
        try:
            return self._execute()
        except dc.DriverError as exc:  # a failed apt-get/dnf run, from the driver's command runner
            raise PackageError(str(exc))

    def _execute(self):
        wanted = parse_names(self.params["name"])
        family = self.family()
        tool = self.tool
        if self.params.get("update_cache") and family == "deb":
            tool.apt_update()  # check mode: planned only, like the driver's
        installed, dummy = tool.installed_packages(family)
        before = dict((name, shown(installed.get(name), family)) for name, dummy in wanted)
        missing = [(name, version) for name, version in wanted if not satisfied(installed.get(name), version, family)]
        transaction = []
        if missing:
            if family == "deb":
                transaction = self._apt(missing)
            else:
                transaction = self._dnf(missing, before)
        after = before
        if tool.changed and not tool.check:
            installed, dummy = tool.installed_packages(family)
            after = dict((name, shown(installed.get(name), family)) for name, dummy in wanted)
            wrong = ["%s is at %s, not %s" % (name, after[name] or "(not installed)", version or "installed")
                     for name, version in wanted if not satisfied(installed.get(name), version, family)]
            if wrong:
                raise PackageError("after %s, %s" % ("apt-get install" if family == "deb" else "dnf install",
                                                     "; ".join(wrong)))
        elif tool.changed:  # check mode: the versions the simulation resolved
            resolved = dict((step["name"], step["to"]) for step in transaction if step["action"] == "install")
            after = dict(before)
            for name, version in missing:
                after[name] = resolved.get(name) or version
        result = {
            "changed": tool.changed,
            "check_mode": tool.check,
            "manager": "apt" if family == "deb" else "dnf",
            "actions": tool.actions,
            "plan": tool.actions if tool.check else [],
            "transaction": transaction,
            "versions": after,
            "previous_versions": before,
        }
        if self.module._diff:
            result["diff"] = {"before": _lines(before), "after": _lines(after),
                              "before_header": "installed packages", "after_header": "installed packages"}
        return result

    def _apt(self, missing):
        specs = ["%s=%s" % (name, version) if version else name for name, version in missing]
        # apt-get -y refuses a downgrade unless told: only with the operator's consent.
        argv = dc.APT_INSTALL + (dc.APT_DOWNGRADE if self.params.get("allow_downgrade") else []) + specs
        # The real simulation, in check mode as before a change: apt resolves the request from its cache.
        rc, out, err = self.tool.run(argv[:1] + ["-s"] + argv[1:], mutating=False, env=dc.APT_ENV, check_rc=False)
        if rc != 0:
            hint = ""
            if "--allow-downgrades" in (err or "") and not self.params.get("allow_downgrade"):
                hint = "; set allow_downgrade to install an older version on purpose"
            elif self.tool.check and self.params.get("update_cache"):
                hint = "; check mode does not refresh the package lists (apt-get update)"
            raise PackageError("apt-get cannot install %s (rc=%s, simulated with apt-get -s): %s%s" % (
                " ".join(specs), rc, (err or out).strip(), hint))
        transaction = apt_transaction(out)
        if transaction:
            self.tool.run(argv, mutating=True, env=dc.APT_ENV, what="install %s" % " ".join(specs))
        return transaction

    def _dnf(self, missing, before):
        # dnf install NAME-VERSION installs that version whichever is installed (dnf(8), install command).
        specs = ["%s-%s" % (name, version) if version else name for name, version in missing]
        rc, out, err = self.tool.run(["dnf", "-q", "--assumeno", "install"] + specs, mutating=False, check_rc=False)
        text = "%s\n%s" % (out or "", err or "")
        # --assumeno: rc 0 and "Nothing to do." when there is nothing to do; after a resolved transaction
        # dnf 4 says "Error: Operation aborted." (CliError), dnf 5 "Operation aborted by the user.", rc 1.
        # Any other error line (no match, a conflict) is why the real run would fail.
        errors = [line.strip() for line in text.splitlines()
                  if line.strip().startswith("Error") and "Operation aborted" not in line]
        if rc != 0 and (errors or "Operation aborted" not in text):
            raise PackageError("dnf cannot install %s (rc=%s, simulated with dnf --assumeno): %s"
                               % (" ".join(specs), rc, text.strip()))
        if rc != 0:
            self.tool.run(["dnf", "-y", "install"] + specs, mutating=True, what="install %s" % " ".join(specs))
            return [{"action": "install", "name": name, "from": before.get(name), "to": version}
                    for name, version in missing]
        return []


def _lines(versions):
    return "".join("%s %s\n" % (name, versions[name] or "(not installed)") for name in sorted(versions))
