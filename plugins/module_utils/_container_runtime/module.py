# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the nvidia_container_runtime module's checks and planning.
"""The nvidia_container_runtime module's parameter checks, and its plan built from them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import DEFAULT_CONFIG_PATHS, guard_tomlkit, read_text
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.containerd import (
    builtin_runtimes_from_default,
    config_version_for,
    plan_containerd,
)
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.crio import plan_crio
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.docker import plan_docker

# A runtime name becomes a TOML table key, a docker runtime name and a Kubernetes
# RuntimeClass handler (a DNS label): letters, digits, '-' and '_' only.
RUNTIME_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?")
# What may be in a path written into a config: no whitespace, quotes, backslashes or control characters.
SAFE_PATH = re.compile(r'/[^\s"\'\\\x00-\x1f\x7f]*')
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
DRIVER_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+){1,3}")


def check_values(params):
    """Values that would reach a config, a table key or a command line: an error before anything is read."""
    name = params["runtime_name"]
    if not RUNTIME_NAME.fullmatch(name or ""):
        return ("runtime_name %r is not valid: use 1 to 63 letters, digits, '-' or '_', starting and ending with a "
                "letter or digit (it becomes a config table key, a docker runtime name and a Kubernetes "
                "RuntimeClass handler). Nothing was changed." % (name,))
    path = params["nvidia_runtime_path"]
    if not SAFE_PATH.fullmatch(path or ""):
        return ("nvidia_runtime_path %r is not valid: give the absolute path of the NVIDIA Container Runtime, "
                "without whitespace, quotes, backslashes or control characters. Nothing was changed." % (path,))
    for option, value in (("config_path", params["config_path"]), ("drop_in_path", params["drop_in_path"]),
                          ("cdi.output", params["cdi"]["output"]),
                          ("cdi.nvidia_ctk_path", params["cdi"]["nvidia_ctk_path"])):
        if value and CONTROL.search(value):
            return "%s %r contains a control character; give a plain path. Nothing was changed." % (option, value)
    version = params["cdi"]["driver_version"]
    if version and not DRIVER_VERSION.fullmatch(version):
        return ("cdi.driver_version %r is not a driver version such as 570.172.08. Nothing was changed."
                % (version,))
    return None


def check_options(params):
    """Options that contradict each other: an error before anything is read."""
    runtime = params["runtime"]
    if runtime == "docker" and (params["mode"] or params["drop_in_path"]):
        return "conflicting options: docker has a single daemon.json; mode and drop_in_path do not apply"
    if runtime == "crio" and params["mode"] == "in_place":
        return "conflicting options: CRI-O is configured with a drop-in only; use mode=drop_in or leave mode unset"
    if runtime != "containerd" and params["containerd_config_version"] != "auto":
        return "conflicting options: containerd_config_version applies to runtime=containerd only"
    if runtime != "containerd" and params["systemd_cgroup"] is not None:
        return "conflicting options: systemd_cgroup applies to runtime=containerd only"
    if runtime == "containerd" and params["mode"] != "drop_in" and params["drop_in_path"]:
        return "conflicting options: drop_in_path needs mode=drop_in"
    return None


def check_params(params):
    """The first problem with the parameters (values, conflicts, a directory given as a file), or None."""
    conflict = check_values(params) or check_options(params)
    for option in ("config_path", "drop_in_path"):
        if not conflict and params[option] and os.path.isdir(params[option]):
            conflict = ("%s %s is a directory; give the path of the file. Nothing was changed."
                        % (option, params[option]))
    return conflict


def _containerd_version(module, config_path):
    """The requested config version, or the one containerd writes when there is no config to read it from."""
    wanted = module.params["containerd_config_version"]
    if wanted != "auto":
        return int(wanted)
    text = read_text(config_path)
    if text and re.search(r"^\s*version\s*=", text, re.MULTILINE):
        return None  # the config's own version key decides
    binary = module.get_bin_path("containerd")
    if not binary:
        return None
    rc, out, err = module.run_command([binary, "--version"])
    if rc != 0:
        module.warn("`%s --version` failed (rc=%d): %s" % (binary, rc, err.strip()))
        return None
    return config_version_for(out)


def _builtin_runtimes(module):
    """containerd's built-in runtimes (from ``containerd config default``), read only when a config names none."""
    def load(_version):
        binary = module.get_bin_path("containerd")
        if not binary:
            return None
        rc, out, _err = module.run_command([binary, "config", "default"])
        return builtin_runtimes_from_default(out) if rc == 0 else None
    return load


def build_plan(module):
    """The runtime's Plan from the module's parameters (reads the configs, writes nothing)."""
    params = module.params
    runtime = params["runtime"]
    config_path = params["config_path"] or DEFAULT_CONFIG_PATHS[runtime]
    common = dict(runtime_name=params["runtime_name"], runtime_path=params["nvidia_runtime_path"],
                  set_as_default=params["set_as_default"])
    if runtime == "containerd":
        return plan_containerd(config_path, mode=params["mode"] or "in_place",
                               config_version=_containerd_version(module, config_path),
                               enable_cdi=params["enable_cdi"],
                               cdi_spec_dir=os.path.dirname(params["cdi"]["output"]),
                               systemd_cgroup=params["systemd_cgroup"], drop_in_path=params["drop_in_path"],
                               builtin_runtimes=_builtin_runtimes(module), **common)
    if runtime == "crio":
        if params["enable_cdi"]:
            module.warn("CRI-O always enables CDI; enable_cdi has no effect on it")
        return guard_tomlkit(plan_crio, (config_path, params["drop_in_path"]), config_path,
                             drop_in_path=params["drop_in_path"], **common)
    return plan_docker(config_path, enable_cdi=params["enable_cdi"], **common)
