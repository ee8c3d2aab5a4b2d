# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the docker daemon.json edit.
"""docker: ``runtimes.nvidia`` (and optionally ``default-runtime``, ``features.cdi``) in daemon.json.

Every other key is kept in its order. A file that needs no change is left
byte for byte as it is; a changed one keeps its indentation.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import re
from collections import OrderedDict

from ansible_collections.gpuops.platform.plugins.module_utils._common.input_guard import (
    check_document,
    check_type,
    unique_keys_hook,
)
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import (
    DEFAULT_NVIDIA_RUNTIME_PATH,
    MAX_CONFIG_BYTES,
    NVIDIA_RUNTIME_NAME,
    ConfigError,
    FileEdit,
    Plan,
    check_written,
    read_text,
)

DEFAULT_INDENT = 4  # what dockerd's own docs and nvidia-ctk write


def _indent_of(text):
    match = re.search(r'^([ \t]+)"', text or "", re.MULTILINE)
    return match.group(1) if match else DEFAULT_INDENT


def _object(data, key, path):
    value = data.setdefault(key, OrderedDict())
    if not isinstance(value, dict):
        raise ConfigError("%s: %r must be a JSON object, found %s. Nothing was changed."
                          % (path, key, json.dumps(value)))
    return value


def _ordered_unique(path):
    """The object hook for daemon.json: keys in their order, a key given twice refused (rewriting it would drop one)."""
    unique = unique_keys_hook(path, ConfigError)

    def hook(pairs):
        unique(pairs)
        return OrderedDict(pairs)
    return hook


def load_daemon_json(text, path):
    if text is None or not text.strip():
        return OrderedDict()
    # The JSON parser (and the copy of what it read) recurse once per level: the depth is checked first.
    check_document(text, path, "json", MAX_CONFIG_BYTES, error=ConfigError)
    try:
        data = json.loads(text, object_pairs_hook=_ordered_unique(path))
    except RecursionError:
        raise ConfigError("%s nests too deep for the JSON parser (nesting limit). Nothing was changed; fix the file "
                          "and run again." % path)
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError("%s is not valid JSON: %s. Nothing was changed; fix the file and run again." % (path, exc))
    if not isinstance(data, dict):
        raise ConfigError("%s must hold a JSON object, found a %s. Nothing was changed; fix the file and run again."
                          % (path, type(data).__name__ if data is not None else "null"))
    if "default-runtime" in data:  # read to decide whether the default moves; dockerd takes a name only
        check_type(data["default-runtime"], str, ["default-runtime"], path, error=ConfigError)
    return data


def plan_docker(config_path="/etc/docker/daemon.json", runtime_name=NVIDIA_RUNTIME_NAME,
                runtime_path=DEFAULT_NVIDIA_RUNTIME_PATH, set_as_default=False, enable_cdi=False,
                reader=read_text):
    text = reader(config_path)
    current = load_daemon_json(text, config_path)
    wanted = copy.deepcopy(current)
    runtimes = _object(wanted, "runtimes", config_path)
    # The entry nvidia-ctk writes, whole: a file that it (the toolkit's installer, the
    # GPU Operator) and this module both manage never flips between two versions.
    # dockerd reads runtime arguments from "runtimeArgs" and ignores "args"; the NVIDIA
    # runtime takes its settings from /etc/nvidia-container-runtime/config.toml.
    runtimes[runtime_name] = OrderedDict([("path", runtime_path), ("args", [])])
    if set_as_default:
        wanted["default-runtime"] = runtime_name
    elif wanted.get("default-runtime") == runtime_name:
        del wanted["default-runtime"]  # like nvidia-ctk: the default moves back to dockerd's runc
    if enable_cdi:
        _object(wanted, "features", config_path)["cdi"] = True
    if wanted == current and text is not None:
        after = text
    else:
        after = check_written(config_path, json.dumps(wanted, indent=_indent_of(text), ensure_ascii=False) + "\n",
                              wanted, load_daemon_json)
    return Plan("docker", [FileEdit(config_path, text, after)])
