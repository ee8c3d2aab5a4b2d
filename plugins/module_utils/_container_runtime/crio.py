# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the CRI-O drop-in.
"""CRI-O: the NVIDIA runtime as a drop-in, like ``nvidia-ctk runtime configure --runtime=crio``.

CRI-O reads ``crio.conf`` and then every file of ``crio.conf.d`` in lexical
order, key by key, so ``99-nvidia.toml`` only holds the NVIDIA runtime (and the
default runtime when asked). The main config is read, never written.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import (
    DEFAULT_NVIDIA_RUNTIME_PATH,
    DROP_IN_NAME,
    NVIDIA_RUNTIME_NAME,
    ConfigError,
    FileEdit,
    check_tables,
    Plan,
    deep_merge,
    dump_toml,
    ensure_path,
    load_plain,
    lookup,
    parse_toml,
    plain,
    read_text,
    set_value,
    settled,
)

DROP_IN_HEADER = "# The NVIDIA runtime for CRI-O, written by gpuops.platform.nvidia_container_runtime.\n"
# Runtimes whose settings (runtime_root, monitor_path, ...) the NVIDIA runtime inherits.
LOW_LEVEL_RUNTIMES = ("runc", "crun")
OWN_KEYS = ("runtime_path", "runtime_type")


def plan_crio(config_path="/etc/crio/crio.conf", runtime_name=NVIDIA_RUNTIME_NAME,
              runtime_path=DEFAULT_NVIDIA_RUNTIME_PATH, set_as_default=False, drop_in_path=None,
              reader=read_text, globber=glob.glob):
    """The edit of ``crio.conf.d/99-nvidia.toml`` that gives CRI-O the NVIDIA runtime."""
    if not os.path.isabs(runtime_path):
        raise ConfigError("the NVIDIA runtime path %r is not an absolute path" % (runtime_path,))
    drop_in_path = drop_in_path or os.path.join(os.path.dirname(config_path), "crio.conf.d", DROP_IN_NAME)
    drop_in_text = reader(drop_in_path)
    doc = parse_toml(drop_in_text if (drop_in_text or "").strip() else DROP_IN_HEADER, drop_in_path)

    check_tables(plain(doc), ["crio", "runtime", "runtimes", runtime_name], drop_in_path)
    # What CRI-O sees before our file: the main config, then the drop-ins that sort first.
    effective = load_plain(reader(config_path), config_path)
    check_tables(effective, ["crio", "runtime", "runtimes"], config_path)
    warnings = []
    for path in sorted(globber(os.path.join(os.path.dirname(drop_in_path), "*"))):
        if path == drop_in_path or os.path.isdir(path):
            continue
        data = load_plain(reader(path), path)
        check_tables(data, ["crio", "runtime", "runtimes"], path)
        if os.path.basename(path) < os.path.basename(drop_in_path):
            effective = deep_merge(effective, data)
        elif set_as_default and lookup(data, ["crio", "runtime", "default_runtime"]) not in (None, runtime_name):
            warnings.append("%s sorts after %s and sets another default runtime." % (path, drop_in_path))

    runtimes = lookup(effective, ["crio", "runtime", "runtimes"]) or {}
    default_name = lookup(effective, ["crio", "runtime", "default_runtime"])
    candidates = ([default_name] if default_name and default_name != runtime_name else []) + list(LOW_LEVEL_RUNTIMES)
    source = {}
    for name in candidates:
        if isinstance(runtimes.get(name), dict):
            source = runtimes[name]
            break

    table = ensure_path(doc, ["crio", "runtime", "runtimes", runtime_name])
    if not isinstance(table, dict):
        raise ConfigError("%s: crio.runtime.runtimes.%s is not a table" % (drop_in_path, runtime_name))
    set_value(table, "runtime_path", runtime_path)
    set_value(table, "runtime_type", "oci")
    for key, value in source.items():
        if key not in OWN_KEYS and key not in table:
            set_value(table, key, value)
    if set_as_default:
        set_value(ensure_path(doc, ["crio", "runtime"]), "default_runtime", runtime_name)
    elif lookup(doc, ["crio", "runtime", "default_runtime"]) == runtime_name:
        del doc["crio"]["runtime"]["default_runtime"]  # like nvidia-ctk: back to CRI-O's own default
    after = settled(drop_in_path, drop_in_text, dump_toml(doc))
    return Plan("crio", [FileEdit(drop_in_path, drop_in_text, after)], warnings=warnings)
