# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The waves of the rolling driver upgrade: the one place that decides them.

``rollout`` reads ``gpuops_upgrade_serial`` (a number of hosts or a
percentage), ``gpuops_upgrade_canary`` and
``gpuops_upgrade_max_fail_percentage`` from the GPU hosts' own variables
(inventory, group_vars, extra vars: what ``hostvars`` gives), checks them and
cuts the hosts, in the given order, into waves with Ansible's own batching
rule. The fleet planner (``gpuops.platform.fleet_plan``) writes these waves
into plan.json, and ``playbooks/upgrade.yml`` (``gpuops.platform.upgrade_waves``)
runs exactly these waves: its play takes the hosts in this order and the wave
sizes as its ``serial`` list, so neither depends on the play-level templating
of ``serial`` (which never sees inventory variables).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.utils.helpers import pct_to_int

from ansible_collections.gpuops.platform.plugins.module_utils._common.shown import shown
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_schema
from ansible_collections.gpuops.platform.plugins.plugin_utils.variable_sources import hosts_phrase, variable_sources

SERIAL = "gpuops_upgrade_serial"
CANARY = "gpuops_upgrade_canary"
MAX_FAIL = "gpuops_upgrade_max_fail_percentage"
SETTINGS = (SERIAL, CANARY, MAX_FAIL)
_SERIAL_RE = re.compile(r"^-?[0-9]+%?\Z")


class WavesError(fleet_schema.FleetPlanDataError):
    """Rollout settings that no wave can be cut from, naming the variable."""


def check_serial(serial, variable=SERIAL):
    """``serial`` as text (a number of hosts or a percentage, above 0); WavesError naming ``variable`` otherwise.

    0 or less would put every host in one wave (Ansible's batching reads it as "all"): "100%" says that."""
    serial = str(serial if serial not in (None, "") else 1).strip()
    if not _SERIAL_RE.match(serial):
        raise WavesError("%s %s is neither a number of hosts nor a percentage such as 10%%" % (variable, shown(serial)))
    if int(serial.rstrip("%")) <= 0:
        raise WavesError("%s %s is not above 0: set a number of hosts per wave, or \"100%%\" for every host at once"
                         % (variable, shown(serial)))
    return serial


def check_canary(canary):
    try:
        return boolean(False if canary in (None, "") else canary, strict=True)
    except TypeError:
        raise WavesError("%s %s is not true or false" % (CANARY, shown(canary)))


def check_max_fail(value):
    """The failed share of a wave that stops the rollout, 0 to 100."""
    if value in (None, ""):
        return 0
    try:
        number = float(str(value).strip().rstrip("%")) if not isinstance(value, bool) else None
    except ValueError:
        number = None
    if number is None or not 0 <= number <= 100:
        raise WavesError("%s %s is not a percentage from 0 to 100" % (MAX_FAIL, shown(value)))
    return int(number) if number == int(number) else number


def serial_list(serial, canary):
    """The ``serial`` steps for these settings: a canary batch of one first, then ``serial``."""
    serial = check_serial(serial)
    return ["1" if check_canary(canary) else serial, serial]


def batches(names, serial, canary):
    """Ansible's batches for ``serial_list`` (PlaybookExecutor._get_serialized_batches): lists of host names."""
    steps = serial_list(serial, canary)
    left, total, out, step = list(names), len(names), [], 0
    while left:
        size = pct_to_int(steps[step], total)
        if size <= 0:
            out.append(left)
            break
        out.append(left[:size])
        left = left[size:]
        step = min(step + 1, len(steps) - 1)
    return out


_CHECKS = {SERIAL: check_serial, CANARY: check_canary, MAX_FAIL: check_max_fail}


def settings(hosts):
    """``{variable: value}`` of the rollout, the same for every host of ``hosts`` (``[(name, variables)]``).

    Raises WavesError naming the variable, its value, the hosts and the files that set it when a value is
    unusable, or when hosts disagree (one rollout cannot follow two serials).
    """
    out = {}
    for variable in SETTINGS:
        values = {}
        for name, variables in hosts:
            raw = variables.get(variable) if variable in variables else None
            try:
                value = _CHECKS[variable](raw)
            except WavesError as exc:
                bad = [n for n, v in hosts if (v.get(variable) if variable in v else None) == raw]
                raise WavesError("%s (%s%s)" % (exc, hosts_phrase(bad), _files(variable, hosts, bad)))
            values.setdefault(value, []).append(name)
        if len(values) > 1:
            raise WavesError("%s is not the same for every host, and upgrade.yml runs one rollout: %s; set it once "
                             "for the fleet (group_vars/all or group_vars/gpu_nodes, or -e)" % (variable, "; ".join(
                                 "%s for %s" % (shown(value), hosts_phrase(names)) for value, names in values.items())))
        out[variable] = next(iter(values)) if values else _CHECKS[variable](None)
    return out


def _files(variable, hosts, bad):
    chosen = dict(hosts)
    files = variable_sources([variable], [chosen[n] for n in bad if hasattr(chosen[n], "get")]).get(variable)
    return "; set in %s" % ", ".join(files) if files else ""


def rollout(hosts):
    """The waves of ``hosts`` (``[(name, variables)]``, in the order they run) from their rollout variables.

    ``{"serial": the steps (a canary of one, then serial), "canary", "max_fail_percentage",
    "waves": [[host, ...], ...]}``; raises WavesError (see ``settings``).
    """
    given = settings(hosts)
    names = [name for name, _variables in hosts]
    return {"serial": serial_list(given[SERIAL], given[CANARY]), "canary": given[CANARY],
            "max_fail_percentage": given[MAX_FAIL], "waves": batches(names, given[SERIAL], given[CANARY])}


def wave_lines(waves):
    """``wave N/M: a, b, c``, one line per wave, as upgrade.yml prints them."""
    return ["wave %d/%d: %s" % (number, len(waves), ", ".join(wave)) for number, wave in enumerate(waves, 1)]
