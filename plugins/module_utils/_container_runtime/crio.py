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

from ansible_collections.gpuops.platform.plugins.module_utils._common.input_guard import check_type
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime import base

DROP_IN_HEADER = base.WRITTEN_BY % "CRI-O"
OWN_KEYS = ("runtime_path", "runtime_type")
RUNTIMES = ["crio", "runtime", "runtimes"]


def check_shapes(data, source):
    """The tables on the way to the runtimes are tables, and the values read have the type CRI-O reads."""
    base.check_tables(data, RUNTIMES, source)
    runtime = base.lookup(data, RUNTIMES[:-1])
    if isinstance(runtime, dict) and "default_runtime" in runtime:
        check_type(runtime["default_runtime"], str, RUNTIMES[:-1] + ["default_runtime"], source, error=base.ConfigError)
    for name, table in (base.lookup(data, RUNTIMES) or {}).items():
        check_type(table, dict, RUNTIMES + [name], source, error=base.ConfigError, expected="a table")
        for key in OWN_KEYS:
            if key in table:
                check_type(table[key], str, RUNTIMES + [name, key], source, error=base.ConfigError)


def plan_crio(config_path="/etc/crio/crio.conf", runtime_name=base.NVIDIA_RUNTIME_NAME,
              runtime_path=base.DEFAULT_NVIDIA_RUNTIME_PATH, set_as_default=False, drop_in_path=None,
              reader=base.read_text, globber=glob.glob):
    """The edit of ``crio.conf.d/99-nvidia.toml`` that gives CRI-O the NVIDIA runtime."""
    if not os.path.isabs(runtime_path):
        raise base.ConfigError("the NVIDIA runtime path %r is not an absolute path" % (runtime_path,))
    drop_in_path = drop_in_path or os.path.join(os.path.dirname(config_path), "crio.conf.d", base.DROP_IN_NAME)
    drop_in_text = reader(drop_in_path)
    doc = base.parse_toml(drop_in_text if (drop_in_text or "").strip() else DROP_IN_HEADER, drop_in_path)

    base.check_tables(base.plain(doc), RUNTIMES + [runtime_name], drop_in_path)
    check_shapes(base.plain(doc), drop_in_path)
    # What CRI-O sees before our file: the main config, then the drop-ins that sort first.
    effective = base.load_plain(reader(config_path), config_path)
    check_shapes(effective, config_path)
    warnings = []
    for path in sorted(globber(os.path.join(os.path.dirname(drop_in_path), "*"))):
        if path == drop_in_path or os.path.isdir(path):
            continue
        data = base.load_plain(reader(path), path)
        check_shapes(data, path)
        if os.path.basename(path) < os.path.basename(drop_in_path):
            effective = base.deep_merge(effective, data)
        elif set_as_default and base.lookup(data, ["crio", "runtime", "default_runtime"]) not in (None, runtime_name):
            warnings.append("%s sorts after %s and sets another default runtime." % (path, drop_in_path))

    runtimes = base.lookup(effective, ["crio", "runtime", "runtimes"]) or {}
    default_name = base.lookup(effective, ["crio", "runtime", "default_runtime"])
    # Its settings (runtime_root, monitor_path, ...) are the NVIDIA runtime's defaults.
    source_name = base.inherited_runtime(runtimes, default_name, runtime_name)
    source = runtimes[source_name] if source_name else {}

    base.canonical_path(doc, ["crio", "runtime", "runtimes", runtime_name])
    table = base.ensure_path(doc, ["crio", "runtime", "runtimes", runtime_name])
    if not isinstance(table, dict):
        raise base.ConfigError("%s: crio.runtime.runtimes.%s is not a table" % (drop_in_path, runtime_name))
    base.set_value(table, "runtime_path", runtime_path)
    base.set_value(table, "runtime_type", "oci")
    for key, value in source.items():
        if key not in OWN_KEYS and key not in table:
            base.set_value(table, key, value)
    if set_as_default:
        base.set_value(base.ensure_path(doc, ["crio", "runtime"]), "default_runtime", runtime_name)
    elif base.lookup(doc, ["crio", "runtime", "default_runtime"]) == runtime_name:
        del doc["crio"]["runtime"]["default_runtime"]  # like nvidia-ctk: back to CRI-O's own default
    after = base.settled(drop_in_path, drop_in_text, base.dump_checked(doc, drop_in_path))
    return base.Plan("crio", [base.FileEdit(drop_in_path, drop_in_text, after)], warnings=warnings)
