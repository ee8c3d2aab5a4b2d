#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nvidia_container_runtime
short_description: Configure containerd, CRI-O or docker to offer the NVIDIA container runtime
version_added: 0.1.0
description:
  - Adds the C(nvidia) runtime to a container engine the way C(nvidia-ctk runtime configure) does, natively in
    Python, so it works before the NVIDIA Container Toolkit is installed and shows a real diff in check mode.
  - B(containerd) config version 2 (containerd 1.6/1.7, plugin C(io.containerd.grpc.v1.cri)) and version 3
    (containerd 2.x, plugin C(io.containerd.cri.v1.runtime)). Like C(nvidia-ctk), the runtime copies the
    default runtime (or C(runc), then C(crun); a default whose name starts with C(nvidia) is skipped), with
    its C(runtime_type) (C(io.containerd.runc.v2) only where that is empty), its settings and its options,
    C(SystemdCgroup) above all, with C(BinaryName) set to O(nvidia_runtime_path). Every other runtime, setting
    and comment is kept. A config that another tool rewrote gets the runtime back on the next run.
  - A containerd config that names no runtime at all (Debian's packaged one) runs containerd's built-in C(runc);
    naming only C(nvidia) would replace it, so the built-in runtimes (from C(containerd config default)) are
    written out first.
  - In O(mode=drop_in) the runtime goes to C(conf.d/99-nvidia.toml) next to the main config, which gets an
    C(imports) entry unless an existing glob already covers the file. containerd 1.x replaces whole plugin
    sections on import, so a version 2 drop-in carries the complete CRI section of the config it overrides and
    follows it on every run; a version 3 drop-in (containerd 2.x merges imports key by key) holds only the
    NVIDIA keys.
  - B(CRI-O) gets a drop-in, C(/etc/crio/crio.conf.d/99-nvidia.toml) by default; the main config is only read.
  - B(docker) gets C(runtimes.nvidia) in C(daemon.json), optionally C(default-runtime) and C(features.cdi);
    every other key is kept in its order.
  - Optionally generates the CDI spec with C(nvidia-ctk cdi generate) when it is missing or was generated for
    another driver version.
  - The module never restarts the container engine; it returns RV(restart_required) so a handler restarts it
    only when its configuration really changed.
author:
  - gpuops.platform maintainers (@gpuops)
requirements:
  - tomlkit (Python library, for O(runtime=containerd) and O(runtime=crio); Debian and Ubuntu package
    C(python3-tomlkit))
options:
  runtime:
    description: The container engine to configure.
    type: str
    required: true
    choices: [containerd, crio, docker]
  config_path:
    description:
      - The engine's main config.
      - Defaults to C(/etc/containerd/config.toml), C(/etc/crio/crio.conf) or C(/etc/docker/daemon.json).
    type: path
  mode:
    description:
      - How the containerd config is changed. C(in_place) edits O(config_path); C(drop_in) writes O(drop_in_path)
        and imports it from O(config_path).
      - CRI-O is always configured with a drop-in; docker has a single file.
      - Defaults to C(in_place) for containerd and C(drop_in) for CRI-O.
    type: str
    choices: [in_place, drop_in]
  drop_in_path:
    description:
      - The drop-in file. Defaults to C(conf.d/99-nvidia.toml) next to a containerd config and
        C(crio.conf.d/99-nvidia.toml) next to a CRI-O config.
    type: path
  containerd_config_version:
    description:
      - The containerd config version. C(auto) takes it from the config's C(version) key, or from
        C(containerd --version) when there is no config yet (containerd 2.x writes version 3).
      - An explicit version that contradicts the existing config is an error, nothing is changed.
    type: str
    choices: [auto, '2', '3']
    default: auto
  runtime_name:
    description:
      - The name of the runtime in the engine's config.
      - 1 to 63 letters, digits, C(-) or C(_), starting and ending with a letter or digit; it becomes a config
        table key, a docker runtime name and a Kubernetes RuntimeClass handler. Anything else fails, changing
        nothing.
    type: str
    default: nvidia
  nvidia_runtime_path:
    description:
      - The NVIDIA Container Runtime executable.
      - An absolute path without whitespace, quotes, backslashes or control characters; anything else fails,
        changing nothing.
    type: path
    default: /usr/bin/nvidia-container-runtime
  set_as_default:
    description:
      - Make the NVIDIA runtime the engine's default runtime.
      - V(false) removes a default that names the NVIDIA runtime, like C(nvidia-ctk) does, so the default moves
        back; containerd then uses its built-in default C(runc) (a version 3 drop-in, which cannot remove what the
        main config sets, names C(runc)); docker and CRI-O use their own default (C(runc), C(crun)).
        Any other default runtime is left as it is.
    type: bool
    default: false
  enable_cdi:
    description:
      - Enable the Container Device Interface in the engine (containerd C(enable_cdi), docker C(features.cdi)).
      - CRI-O always has CDI enabled; the option has no effect there.
      - V(false) leaves the engine's CDI setting as it is.
    type: bool
    default: false
  systemd_cgroup:
    description:
      - Force C(SystemdCgroup) in the containerd NVIDIA runtime's options.
      - By default it is copied from the runc runtime, which is what the kubelet's cgroup driver agrees with.
    type: bool
  cdi:
    description: Generation of the CDI spec with C(nvidia-ctk cdi generate).
    type: dict
    default: {}
    suboptions:
      generate:
        description:
          - Generate the spec when it is missing or was generated for another driver version.
          - Skipped, with the reason in RV(cdi), when C(nvidia-ctk) is not installed or no driver is loaded.
        type: bool
        default: false
      output:
        description: Where the spec is written.
        type: path
        default: /var/run/cdi/nvidia.yaml
      force:
        description: Generate even when the spec looks current.
        type: bool
        default: false
      driver_version:
        description:
          - The installed driver version, for example from C(ansible_facts.nvidia.driver_version) of
            M(gpuops.platform.nvml_facts). Read from C(/sys/module/nvidia/version) when not given.
          - A string, quoted in YAML; a number (V(570.190) unquoted is the number 570.19) is refused.
        type: raw
      nvidia_ctk_path:
        description: The C(nvidia-ctk) executable. Looked up on C(PATH) when not given.
        type: path
  backup:
    description: Keep a timestamped copy of every file before it is changed.
    type: bool
    default: false
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.node, gpuops.platform.attributes.converge]
attributes:
  check_mode:
    details: Reports the files that would change, with a diff, and whether the CDI spec would be generated.
  diff_mode:
    details: Real before and after text of every config file changed (not of the generated CDI spec).
  idempotent:
    details: The CDI spec is generated again only when it is missing or stale.
notes:
  - "Deliberate differences from C(nvidia-ctk runtime configure): a containerd config that names no runtime gets
    the built-in runtimes (from C(containerd config default), whose own C(version) tells the CRI plugin to read)
    written out next to C(nvidia), because a version 2 config that names only C(nvidia) has no C(runc) and
    containerd 1.7 then refuses it; C(nvidia-ctk) writes C(nvidia) alone. The runtime gets no
    C(runtime_engine)/C(runtime_root) keys of its own, which C(nvidia-ctk) adds empty when there is nothing to
    copy."
  - "This is the one reason the nvidia-ctk comparison cases C(ctd-pkg-addruntime-01) and C(ctd-pkg-addruntime-02)
    (in place and drop-in) and C(inst-containerd-05) (drop-in) differ: where the config has no C(runc) entry, the
    module writes C(runc.runtime_type = \"io.containerd.runc.v2\") and leaves out NVIDIA's zero values
    (C(privileged_without_host_devices = false), C(runtime_engine = \"\"), C(runtime_root = \"\")). Proved with the
    real binaries (tests/integration/test_container_runtime_nvidia_ctk_real.py): C(containerd config dump) of
    NVIDIA's expected file shows containerd 1.7 with C(nvidia) as its only runtime and C(default_runtime_name =
    \"runc\"), and containerd 1.7 does not load its CRI plugin (C(invalid plugin config: no corresponding runtime
    configured in containerd.runtimes for default_runtime_name = \"runc\")); it loads the module's file. The zero
    values are containerd's defaults: 1.7 and 2.1 dump the same runtimes with or without them."
  - "docker: C(runtimes.nvidia) is written whole as C({\"path\": ..., \"args\": []}), as C(nvidia-ctk) writes it,
    so a host where both manage C(daemon.json) (the toolkit's installer, the GPU Operator) does not flip between
    two versions; other keys of that entry are dropped. dockerd ignores C(args) (its key is C(runtimeArgs)),
    and the NVIDIA runtime reads its settings from C(/etc/nvidia-container-runtime/config.toml), not arguments."
  - A symlinked config file is written through to the link's target (like M(ansible.builtin.copy) with
    C(follow=yes)); the target keeps its mode, owner and SELinux context.
  - Large containerd configs are read once with the standard library's C(tomllib) (or C(tomli)), and only the
    CRI runtime tables go through tomlkit; without either parser the whole file goes through tomlkit, which
    takes about half a minute per MB.
  - Restart the container engine after a change (see RV(restart_required)); the gpuops.platform.container_toolkit
    role does it with a handler.
  - C(enable_cdi) needs containerd 1.7 or later; containerd 2.x enables CDI by default.
seealso:
  - name: NVIDIA Container Toolkit, configuring containerd
    description: What C(nvidia-ctk runtime configure) writes.
    link: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html
  - name: containerd config imports
    description: How containerd 1.x and 2.x merge imported files.
    link: https://github.com/containerd/containerd/blob/main/docs/man/containerd-config.toml.5.md
"""

EXAMPLES = r"""
- name: Add the NVIDIA runtime to containerd, keeping runc's SystemdCgroup
  gpuops.platform.nvidia_container_runtime:
    runtime: containerd
  register: nvidia_runtime

- name: Restart containerd only when its configuration changed
  ansible.builtin.systemd_service:
    name: containerd
    state: restarted
  when: nvidia_runtime.restart_required

- name: containerd 2.x, as a drop-in, NVIDIA as the default runtime, CDI spec kept fresh
  gpuops.platform.nvidia_container_runtime:
    runtime: containerd
    mode: drop_in
    set_as_default: true
    enable_cdi: true
    cdi:
      generate: true
      driver_version: "{{ ansible_facts.nvidia.driver_version | default(omit) }}"

- name: CRI-O drop-in
  gpuops.platform.nvidia_container_runtime:
    runtime: crio
    set_as_default: true

- name: docker with CDI
  gpuops.platform.nvidia_container_runtime:
    runtime: docker
    enable_cdi: true
    backup: true
"""

RETURN = r"""
restart_required:
  description: Whether the engine's configuration changed, so the engine must be restarted to use it.
  returned: always
  type: bool
  sample: true
runtime:
  description: The engine configured.
  returned: always
  type: str
  sample: containerd
config_version:
  description: The containerd config version used; null for other engines.
  returned: always
  type: int
  sample: 2
cri_plugin:
  description: The containerd CRI runtime plugin the runtime was added to; null for other engines.
  returned: always
  type: str
  sample: io.containerd.grpc.v1.cri
files:
  description: The files that changed (would change in check mode).
  returned: always
  type: list
  elements: str
  sample: [/etc/containerd/conf.d/99-nvidia.toml, /etc/containerd/config.toml]
backup_files:
  description: Backup copies made, by file.
  returned: when O(backup=true) and a file changed
  type: dict
  sample: {/etc/containerd/config.toml: /etc/containerd/config.toml.12345.2026-11-21@05:40:01~}
cdi:
  description: What happened to the CDI spec.
  returned: always
  type: dict
  contains:
    state:
      description: C(generated), C(current), C(skipped), C(disabled) or, in check mode, C(would_generate).
      type: str
      sample: generated
    changed:
      description: Whether the spec file changed (would change in check mode).
      type: bool
    reason:
      description: Why it was (or was not) generated.
      type: str
      sample: the CDI spec was generated for driver 550.163.01, the installed driver is 570.172.08
    output:
      description: The spec file.
      type: str
      sample: /var/run/cdi/nvidia.yaml
    driver_version:
      description: The installed driver version compared with the spec.
      type: str
      sample: 570.172.08
    command:
      description: The C(nvidia-ctk) command run (or that would run).
      type: list
      elements: str
    refresh_units:
      description: The C(nvidia-cdi-refresh) systemd units installed on the host (NVIDIA Container Toolkit 1.18+).
      type: list
      elements: str
      sample: [nvidia-cdi-refresh.path, nvidia-cdi-refresh.service]
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpuops.platform.plugins.module_utils._common.typed_args import version_arguments
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import HAS_TOMLKIT, TOMLKIT_IMPORT_ERROR, ConfigError
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.cdi import DEFAULT_CDI_SPEC, SYSTEMD_UNIT_DIRS, handle_cdi
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.files import write_edits
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.module import build_plan, check_params

ARGUMENT_SPEC = dict(
    runtime=dict(type="str", required=True, choices=["containerd", "crio", "docker"]),
    config_path=dict(type="path"),
    mode=dict(type="str", choices=["in_place", "drop_in"]),
    drop_in_path=dict(type="path"),
    containerd_config_version=dict(type="str", default="auto", choices=["auto", "2", "3"]),
    runtime_name=dict(type="str", default="nvidia"),
    nvidia_runtime_path=dict(type="path", default="/usr/bin/nvidia-container-runtime"),
    set_as_default=dict(type="bool", default=False),
    enable_cdi=dict(type="bool", default=False),
    systemd_cgroup=dict(type="bool"),
    cdi=dict(type="dict", default={}, options=dict(
        generate=dict(type="bool", default=False),
        output=dict(type="path", default=DEFAULT_CDI_SPEC),
        force=dict(type="bool", default=False),
        # raw: a version given as a number is refused (version_arguments), never read as "570.19".
        driver_version=dict(type="raw"),
        nvidia_ctk_path=dict(type="path"),
    )),
    backup=dict(type="bool", default=False),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    version_arguments(module, params["cdi"], versions=("driver_version",), prefix="cdi.")
    conflict = check_params(params)
    if conflict:
        module.fail_json(msg=conflict)
    if params["runtime"] in ("containerd", "crio") and not HAS_TOMLKIT:
        if module.check_mode:
            # A play that installs the library first (like the container_toolkit role)
            # can still be checked: the config cannot be planned before it is there.
            module.exit_json(changed=False, skipped=True, restart_required=False, runtime=params["runtime"],
                             msg="check mode: %s" % missing_required_lib("tomlkit"))
        module.fail_json(msg=missing_required_lib("tomlkit"), exception=to_native(TOMLKIT_IMPORT_ERROR))

    try:
        plan = build_plan(module)
    except ConfigError as exc:
        module.fail_json(msg=to_native(exc), runtime=params["runtime"])
    for warning in plan.warnings:
        module.warn(warning)

    edits = plan.changed_edits
    result = dict(changed=bool(edits), restart_required=bool(edits), runtime=plan.runtime,
                  config_version=plan.config_version, cri_plugin=plan.plugin,
                  files=[edit.path for edit in edits])
    if module._diff:
        result["diff"] = [dict(before=edit.before or "", after=edit.after, before_header=edit.path,
                               after_header=edit.path) for edit in edits]
    if edits and not module.check_mode:
        backups = write_edits(module, edits, params["backup"], result)
        if backups:
            result["backup_files"] = backups

    result["cdi"] = handle_cdi(module, SYSTEMD_UNIT_DIRS)
    result["changed"] = result["changed"] or result["cdi"]["changed"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
