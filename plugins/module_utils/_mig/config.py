# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): parsing mig-parted configs.
"""The mig-parted configuration format (version v1), parsed strictly.

Existing mig-parted files work unchanged::

    version: v1
    mig-configs:
      all-1g.10gb:
        - devices: all
          device-filter: ["0x233010DE"]
          mig-enabled: true
          mig-devices: {"1g.10gb": 7}

Every problem is collected, so one run reports all of them. Each named config is
parsed on its own, as the config being applied is what matters: a broken entry in
one config does not stop another config of the same file from being used. The
rules follow mig-parted (api/spec/v1): ``devices`` is ``all`` or a list of GPU
indices, ``device-filter`` one PCI device id or a list of them, and
``mig-enabled: false`` may carry an empty ``mig-devices``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuops.platform.plugins.module_utils._mig.model import MigError, parse_profile

TOP_KEYS = ("version", "mig-configs")
ENTRY_KEYS = ("devices", "device-filter", "mig-enabled", "mig-devices")
DEVICE_ID = re.compile(r"^0x[0-9a-fA-F]{8}\Z")


class MigConfigError(MigError):
    """The configuration is not valid; ``problems`` lists every finding."""

    def __init__(self, problems):
        self.problems = list(problems)
        super(MigConfigError, self).__init__("; ".join(self.problems), errors=self.problems)


class ParsedConfigs(dict):
    """{name: [Entry]} of the configs that parsed; ``invalid`` holds {name: problems} of the rest."""

    def __init__(self, valid=None, invalid=None):
        super(ParsedConfigs, self).__init__(valid or {})
        self.invalid = dict(invalid or {})


class Entry(object):
    """One entry of a named config: which GPUs, and the layout they get."""

    def __init__(self, position, devices, device_filter, mig_enabled, mig_devices):
        self.position = position          # 1-based, for messages
        self.devices = devices            # "all" or a list of indices
        self.device_filter = device_filter  # list of "0xDDDDVVVV" (upper case), empty = any
        self.mig_enabled = mig_enabled
        self.mig_devices = mig_devices    # {profile: count}, counts > 0 only

    def selects(self, gpu_index, device_id):
        if self.devices != "all" and gpu_index not in self.devices:
            return False
        if not self.device_filter:
            return True
        return _canonical(device_id) in self.device_filter


def _canonical(device_id):
    if device_id is None:
        return None
    try:
        return "0x%08X" % (int(device_id, 16) if not isinstance(device_id, int) else device_id)
    except (TypeError, ValueError):
        return None


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _quoted(key):
    """A key for a message: 'name' for a string, as YAML wrote it otherwise (null, 1, true)."""
    if isinstance(key, str):
        return "'%s'" % key
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    return repr(key)


def _parse_entry(config_name, position, raw, problems):
    where = "config '%s' entry %d" % (config_name, position)
    if not isinstance(raw, dict):
        problems.append("%s: must be a mapping, got %s" % (where, type(raw).__name__))
        return None
    # YAML keys need not be strings (null, 1, true): sorted as text, named as written
    for key in sorted(set(raw) - set(ENTRY_KEYS), key=repr):
        problems.append("%s: unknown key %s (allowed: %s)" % (where, _quoted(key), ", ".join(ENTRY_KEYS)))
    start = len(problems)

    devices = raw.get("devices")
    if devices is None:
        problems.append("%s: 'devices' is required ('all' or a list of GPU indices)" % where)
    elif devices != "all":
        if not isinstance(devices, list) or not all(_is_int(d) and d >= 0 for d in devices):
            problems.append("%s: 'devices' must be 'all' or a list of GPU indices, got %r" % (where, devices))
        else:
            devices = sorted(set(devices))

    device_filter = raw.get("device-filter", [])
    if isinstance(device_filter, str):
        device_filter = [device_filter]
    if not isinstance(device_filter, list):
        problems.append("%s: 'device-filter' must be a PCI device id or a list of them, got %r" % (where, device_filter))
        device_filter = []
    for item in device_filter:
        if not isinstance(item, str) or not DEVICE_ID.match(item):
            problems.append("%s: device-filter %r is not a PCI device id such as 0x233010DE" % (where, item))
    device_filter = [_canonical(d) for d in device_filter if isinstance(d, str) and DEVICE_ID.match(d)]

    enabled = raw.get("mig-enabled")
    if not isinstance(enabled, bool):
        problems.append("%s: 'mig-enabled' is required and must be true or false, got %r" % (where, enabled))

    mig_devices = {}
    raw_devices = raw.get("mig-devices")
    if enabled is True and not isinstance(raw_devices, dict):
        problems.append("%s: 'mig-devices' (profile: count) is required when mig-enabled is true" % where)
    elif enabled is False and raw_devices not in (None, {}):
        # mig-parted accepts an empty mapping here, and nothing else
        problems.append("%s: 'mig-devices' must be empty or left out when mig-enabled is false, got %r"
                        % (where, raw_devices))
    elif isinstance(raw_devices, dict):
        for profile, count in raw_devices.items():
            try:
                parse_profile(profile, gpu_instance=True)
            except MigError as exc:
                problems.append("%s: %s" % (where, exc))
                continue
            if not _is_int(count) or count < 0:
                problems.append("%s: %s count must be a whole number >= 0, got %r" % (where, profile, count))
            elif count:
                mig_devices[profile] = count

    if len(problems) > start:
        return None
    return Entry(position, devices, device_filter, enabled, mig_devices)


def parse_config(name, entries):
    """The entries of one named config; raises MigConfigError with every problem in it."""
    problems = []
    if not isinstance(entries, list) or not entries:
        raise MigConfigError(["config '%s': must be a non-empty list of entries" % name])
    parsed = [_parse_entry(name, i, raw, problems) for i, raw in enumerate(entries, 1)]
    if problems:
        raise MigConfigError(problems)
    return parsed


def parse(document):
    """Parse a whole mig-parted document into ParsedConfigs ({name: [Entry]}).

    Raises MigConfigError only for problems of the document itself (version, keys,
    mig-configs); a config with a bad entry is kept in ``invalid`` and reported by
    :func:`select` when it is the one applied.
    """
    problems = []
    if not isinstance(document, dict):
        raise MigConfigError(["the MIG config must be a mapping with 'version' and 'mig-configs', got %s"
                              % type(document).__name__])
    for key in sorted(set(document) - set(TOP_KEYS), key=repr):
        problems.append("unknown top-level key %s (allowed: %s)" % (_quoted(key), ", ".join(TOP_KEYS)))
    if document.get("version") != "v1":
        problems.append("'version' must be v1, got %r" % (document.get("version"),))
    configs = document.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        problems.append("'mig-configs' must map config names to lists of entries")
        configs = {}
    if problems:
        raise MigConfigError(problems)
    parsed = ParsedConfigs()
    for name, entries in configs.items():
        if not isinstance(name, str):
            parsed.invalid[str(name)] = ["config name %r is not a string: YAML reads off, on, yes and no as "
                                         "booleans; quote the name" % (name,)]
            continue
        try:
            parsed[str(name)] = parse_config(name, entries)
        except MigConfigError as exc:
            parsed.invalid[str(name)] = exc.problems
    return parsed


def select(configs, name):
    """The entries of config ``name``; raises MigConfigError with its problems, or naming the ones there are."""
    invalid = getattr(configs, "invalid", {})
    if name in invalid:
        raise MigConfigError(invalid[name])
    if name not in configs:
        # a name YAML read as a boolean or number is why a config seems to be missing
        hints = [p for problems in invalid.values() for p in problems if "is not a string" in p]
        raise MigConfigError(["config '%s' is not in mig-configs (available: %s)"
                              % (name, ", ".join(sorted(set(configs) | set(invalid))) or "none")] + hints)
    return configs[name]
