# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The driver decision: what a node's driver settings ask for, and what that does to the node.

The one place where the wanted driver (an exact version, a branch to follow, or
none at all) is read from a host's settings and compared with the driver its
facts show installed and loaded. The fleet planner (plugin_utils/fleet_plan.py),
the replayed plan of the nvidia_driver role (the nvidia_driver_replay_plan
filter) and the rolling upgrade (the gpu_upgrade_plan filter of
roles/gpu_upgrade) all call :func:`driver_action`, so the plan an operator
approves is the change the playbooks make.

Versions are exact strings: a number (``570.190`` unquoted is the YAML float
570.19) or a string with surrounding whitespace or a line break (a YAML block
scalar, an untrimmed lookup) is refused by :func:`driver_setting_errors`, naming
the variable and saying to quote it, before anything is planned or changed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpuops.platform.plugins.module_utils._common.shown import shown, shown_name, type_words
from ansible_collections.gpuops.platform.plugins.module_utils._common.typed_args import number_problem
from ansible_collections.gpuops.platform.plugins.module_utils._driver import decision as rules
# The version rules the nvidia_driver module applies on the node too (module_utils/_driver/decision.py).
from ansible_collections.gpuops.platform.plugins.module_utils._driver.decision import VERSION_RE, branch_of, same_version
from ansible_collections.gpuops.platform.plugins.plugin_utils.variable_sources import hosts_phrase, variable_sources

BRANCH_RE = re.compile(r"[0-9]{3,4}")
DRIVER_STATES = ("present", "latest", "absent")
# Every action driver_action gives; "none" leaves the driver as it is (a reboot may still be due).
ACTIONS = ("install", "upgrade", "downgrade", "remove", "none", "invalid")
# The settings driver_action reads, with the nvidia_driver role's defaults.
DRIVER_DEFAULTS = {"nvidia_driver_state": "present", "nvidia_driver_branch": "580", "nvidia_driver_version": "",
                   "nvidia_driver_allow_downgrade": False}
EXAMPLE_VERSION = "570.172.08"


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def value_problem(variable, value, kind="version"):
    """Why ``value`` of ``variable`` is not a driver ``kind`` (``version`` or ``branch``), or None when it is one.

    Empty (``""`` or None) is no value: the role's default applies. A branch may be
    a whole number (``570`` reads the same either way); a version never is one.
    """
    if value is None or value == "":
        return None
    example = EXAMPLE_VERSION if kind == "version" else EXAMPLE_VERSION.split(".", maxsplit=1)[0]
    problem = number_problem(variable, value, kind, example)
    if problem:
        return problem
    text = value if isinstance(value, str) else str(value)
    if text != text.strip():
        return ("%s %s has whitespace or a line break around the %s (a YAML block scalar or an untrimmed lookup): "
                "set the %s alone, quoted, such as %s: \"%s\"" % (variable, shown(text), kind, kind, variable, example))
    if kind == "version" and not VERSION_RE.fullmatch(text):
        return ("%s %s is not a driver version: set the full version, quoted, such as \"%s\""
                % (variable, shown(text), example))
    if kind == "branch" and not BRANCH_RE.fullmatch(text):
        return ("%s %s is not a driver branch: set the major version only, such as \"%s\"" % (variable, shown(text), example))
    return None


def driver_setting_errors(settings, version_variable="nvidia_driver_version"):
    """``[(variable, message)]`` for the driver settings of one host that no plan can use.

    ``settings``: ``nvidia_driver_state``, ``nvidia_driver_version`` and
    ``nvidia_driver_branch`` as the inventory gives them (not converted to
    text: a float is refused, not read as "570.19"). The branch is checked
    whether or not a version is pinned: a bad one is a mistake either way.
    ``version_variable``: the variable the version came from, as messages name it
    (gpu_upgrade_driver_version, when the rollout is given its own).
    """
    errors = []
    state = settings.get("nvidia_driver_state")
    if state is not None and state != "" and (not isinstance(state, str) or state not in DRIVER_STATES):
        errors.append(("nvidia_driver_state", "nvidia_driver_state %r is not one of %s"
                       % (state, ", ".join(DRIVER_STATES))))
    version = settings.get("nvidia_driver_version")
    problem = value_problem(version_variable, version)
    if problem:
        errors.append((version_variable, problem))
    branch = settings.get("nvidia_driver_branch")
    problem = value_problem("nvidia_driver_branch", branch, "branch")
    if problem:
        errors.append(("nvidia_driver_branch", problem))
    elif branch is None or branch == "":
        errors.append(("nvidia_driver_branch", "nvidia_driver_branch is empty: set the driver branch to follow, "
                       "such as \"570\""))
    if allowed_downgrade(settings) is None:
        errors.append(("nvidia_driver_allow_downgrade", "nvidia_driver_allow_downgrade %r is not true or false"
                       % (settings.get("nvidia_driver_allow_downgrade"),)))
    return errors


def allowed_downgrade(settings):
    """nvidia_driver_allow_downgrade as a boolean (unset: False); None when it is no boolean."""
    value = settings.get("nvidia_driver_allow_downgrade")
    if value is None or value == "":
        return False
    try:
        return boolean(value, strict=True)
    except TypeError:
        return None


def wanted_driver(settings):
    """``{state, version, branch}`` as text, the defaults filled in; the settings must have no errors."""
    state = settings.get("nvidia_driver_state") or DRIVER_DEFAULTS["nvidia_driver_state"]
    version = settings.get("nvidia_driver_version") or ""
    branch = settings.get("nvidia_driver_branch")
    branch = DRIVER_DEFAULTS["nvidia_driver_branch"] if branch is None else str(branch)
    return {"state": state, "version": version, "branch": branch, "allow_downgrade": bool(allowed_downgrade(settings))}


def _shown(settings):
    """The wanted driver as the settings give it, for a plan that cannot use them."""
    version, branch = settings.get("nvidia_driver_version"), settings.get("nvidia_driver_branch")
    value, what = (version, "%s") if version not in (None, "") else (branch, "branch %s")
    return what % (shown_name(value) if isinstance(value, str) else "%s (%s)" % (shown(value), type_words(value)))


def driver_action(settings, facts, version_variable="nvidia_driver_version"):
    """``(decision, errors)``: what the driver settings of one host do to it, given its nvml_facts.

    ``decision``: ``{state, version, branch, wanted, installed, loaded, action, reboot_required, reasons}``
    (and ``foreign``, the provenance kind, when a driver from outside the packages is kept).
    ``action`` is one of ``install`` (no driver installed), ``upgrade``, ``downgrade`` (to the exact version,
    or onto the branch followed, compared part by part as numbers; only with nvidia_driver_allow_downgrade,
    else ``invalid`` with the refusal), ``remove`` (state absent and a driver is
    installed), ``none`` (the driver is as wanted, or state latest on the right branch: the newest in the
    repository is only known on the node; or a driver from outside the packages, recorded in the facts'
    ``driver_provenance``, that is the wanted one: kept) or ``invalid`` (``errors`` says why; nothing is
    planned: bad settings, a downgrade without consent, a foreign driver that is not the wanted one).
    ``reboot_required``: the node reboots to load the wanted driver: a loaded module that is not the driver
    the node ends on (or any loaded module, when that is a branch's newest, known only on the node), or any
    reboot reason in the facts. A node with no module loaded loads the new one without a reboot.

    The same answer for the fleet planner, the nvidia_driver role's replayed plan and the rolling upgrade:
    recompute a plan's per-host action from the same facts and settings with this function.
    ``version_variable``: the variable messages name for the version (driver_setting_errors).
    """
    errors = [message for _variable, message in driver_setting_errors(settings, version_variable)]
    facts = facts or {}
    # nvml_facts records the user-space driver and the loaded module even when NVML cannot start with them
    # (a version mismatch waiting for a reboot, a module not loaded): both count, GPUs seen or not.
    installed = facts.get("driver_version") or None
    loaded = facts.get("kernel_module_version") or None
    out = {"state": None, "version": None, "branch": None, "wanted": _shown(settings), "installed": installed,
           "loaded": loaded, "action": "invalid", "reboot_required": False, "reasons": []}
    if errors:
        return out, errors
    wanted = wanted_driver(settings)
    state, version, branch = wanted["state"], wanted["version"], wanted["branch"]
    out.update(state=state, version=version, branch=branch, wanted=version or ("branch %s" % branch), action="none")
    reasons = out["reasons"]
    if state == "absent":
        if installed:
            out["action"] = "remove"
            reasons.append("driver %s is installed and nvidia_driver_state is absent" % installed)
            out["reboot_required"] = bool(loaded)
        return out, []
    # A driver that packages did not install: kept when it is the wanted one, else refused (decision.py, the
    # nvidia_driver module's rule on the node).
    provenance = facts.get("driver_provenance") or None
    if isinstance(provenance, dict) and not provenance.get("version"):
        provenance = dict(provenance, version=installed or loaded)
    verdict, text = rules.foreign_decision(provenance, version, branch)
    if verdict == "keep":
        out["foreign"] = provenance["kind"]
        reasons.append(text)
        return out, []
    if verdict == "refuse":
        out["action"] = "invalid"
        return out, [text]
    if not installed:
        out["action"] = "install"
        reasons.append("no NVIDIA driver is installed")
    elif version and not same_version(installed, version):
        out["action"] = "downgrade" if rules.is_older(version, installed) else "upgrade"
        reasons.append("installed %s, wanted %s" % (installed, version))
    elif not version and branch_of(installed) != branch:
        out["action"] = "downgrade" if rules.is_older(branch, installed) else "upgrade"
        reasons.append("installed %s is not on branch %s" % (installed, branch))
    elif state == "latest":
        reasons.append("state latest: the newest %s in the repository is only known on the node" % out["wanted"])
    if out["action"] == "downgrade" and not wanted["allow_downgrade"]:
        out["action"] = "invalid"
        return out, [rules.downgrade_refusal(installed, out["wanted"])]
    # The driver loaded once the action is done: the exact version, the one kept, or unknown (a branch's newest).
    target = version or (installed if out["action"] == "none" else None)
    if loaded and (not same_version(loaded, target) if target else out["action"] != "none"):
        out["reboot_required"] = True
        reasons.append("the loaded kernel module is %s" % loaded)
    for reason in facts.get("reboot_reasons") or []:
        out["reboot_required"] = True
        if reason not in reasons:
            reasons.append(reason)
    return out, []


def driver_is_current(decision, facts):
    """Whether ``facts`` show the driver ``decision`` wanted installed and loaded (after an install or upgrade).

    An exact version must be installed and loaded; a branch followed needs a driver of that branch, loaded.
    """
    installed = facts.get("driver_version") if facts else None
    loaded = facts.get("kernel_module_version") if facts else None
    if decision.get("version"):
        same = installed is not None and same_version(installed, decision["version"])
    else:
        same = installed is not None and branch_of(installed) == decision.get("branch")
    return bool(same and (loaded is None or same_version(loaded, installed)))


# ---------------------------------------------------------------------------
# Every host's settings, before anything runs
# ---------------------------------------------------------------------------

def driver_settings_of(variables, version_variable="nvidia_driver_version"):
    """The driver settings of one host from its variables (a mapping), the role's defaults for those unset.

    ``version_variable``: a variable that, when the host has it, gives the version instead of
    nvidia_driver_version (the rollout's gpu_upgrade_driver_version).
    """
    settings = dict((key, variables.get(key, default)) for key, default in DRIVER_DEFAULTS.items())
    if version_variable != "nvidia_driver_version" and version_variable in variables:
        settings["nvidia_driver_version"] = variables.get(version_variable)
    else:
        version_variable = "nvidia_driver_version"
    return settings, version_variable


def check_driver_settings(hosts, version_variable="nvidia_driver_version"):
    """``[(variable, message, [host, ...])]``: the driver settings problems of ``hosts`` (``[(name, variables)]``),
    one entry per distinct problem with its hosts in inventory order."""
    grouped = {}
    for name, variables in hosts:
        settings, shown = driver_settings_of(variables, version_variable)
        for variable, message in driver_setting_errors(settings, shown):
            grouped.setdefault((variable, message), []).append(name)
    return [(variable, message, names) for (variable, message), names in grouped.items()]


def refusal_lines(problems, variables_of):
    """One line per problem of check_driver_settings (or the planner's check_settings): the message, its hosts
    and the inventory files that set the variable. ``variables_of(host)``: the host's variables."""
    lines = []
    for variable, message, bad in problems:
        files = variable_sources([variable], [variables_of(n) for n in bad]).get(variable)
        lines.append("%s (%s%s)" % (message, hosts_phrase(bad), "; set in %s" % ", ".join(files) if files else ""))
    return lines
