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
module: kubelet_config
short_description: Set the kubelet's CPU, memory and topology managers in its KubeletConfiguration
version_added: 0.1.0
description:
  - Sets C(cpuManagerPolicy), C(reservedSystemCPUs), C(topologyManagerPolicy), C(topologyManagerScope),
    C(memoryManagerPolicy) and C(reservedMemory) of the kubelet. Options left unset are not managed.
  - With O(config_dir) (the kubelet's C(--config-dir), Kubernetes 1.28 and newer) the settings go to the drop-in
    O(drop_in_name) there and the kubeadm-owned O(config_path) is not edited. Without it they are merged into
    O(config_path), keeping every other key (comments in that file are not kept).
  - The effective configuration is the config file overlaid with the C(*.conf) drop-ins in name order, as the kubelet
    reads it; a drop-in that would override these settings fails the module with its name.
  - Validates the policy names (from the Kubernetes documentation), that the reserved CPUs exist on the node and leave
    some for pods, that the static CPU policy has reserved CPUs and the Static memory policy reserved memory.
  - Never restarts the kubelet and never removes its checkpoints; it returns RV(reset_cpu_manager_state) and
    RV(reset_memory_manager_state) when the policy (or the reservation under the static policy) really changes, so
    that a role drains the node, stops the kubelet, removes the checkpoint and starts it again, in that order.
author:
  - gpuops.platform maintainers (@gpuops)
requirements:
  - PyYAML (Debian and Ubuntu package C(python3-yaml))
options:
  config_path:
    description: The kubelet's config file (C(--config)).
    type: path
    default: /var/lib/kubelet/config.yaml
  config_dir:
    description:
      - The kubelet's drop-in directory (C(--config-dir)). When set, the settings are written to a drop-in there.
      - It must exist; a kubelet started without C(--config-dir) never reads it.
    type: path
  drop_in_name:
    description: File name of the drop-in in O(config_dir); must end in C(.conf).
    type: str
    default: 90-gpuops-tuning.conf
  cpu_manager_policy:
    description: C(cpuManagerPolicy).
    type: str
    choices: [none, static]
  reserved_system_cpus:
    description: C(reservedSystemCPUs), a CPU list such as C(0-1,64-65); every CPU must be online on the node.
    type: str
  topology_manager_policy:
    description: C(topologyManagerPolicy).
    type: str
    choices: [none, best-effort, restricted, single-numa-node]
  topology_manager_scope:
    description: C(topologyManagerScope).
    type: str
    choices: [container, pod]
  memory_manager_policy:
    description: C(memoryManagerPolicy).
    type: str
    choices: [None, Static]
  reserved_memory:
    description: C(reservedMemory), a list of C({numaNode, limits}) (needed by the Static memory policy).
    type: list
    elements: dict
  online_cpus:
    description:
      - The CPUs online on the node, a CPU list such as C(0-63), instead of reading C(/sys/devices/system/cpu/online)
        of the machine the module runs on; for a plan made on another machine from a recorded kubelet config.
        An empty string means unknown, and O(reserved_system_cpus) is then not checked against the node's CPUs.
    type: str
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.node, gpuops.platform.attributes.converge]
attributes:
  check_mode:
    details: Reports the file that would change, its diff, and whether the manager checkpoints would need a reset.
  diff_mode:
    details: Real before and after text of the config file or drop-in.
notes:
  - Files are written atomically; an existing file keeps its owner and mode.
"""

EXAMPLES = r"""
- name: Pin GPU pods to one NUMA node with exclusive CPUs
  gpuops.platform.kubelet_config:
    config_dir: /etc/kubernetes/kubelet.conf.d
    cpu_manager_policy: static
    reserved_system_cpus: "0-1"
    topology_manager_policy: single-numa-node
  register: kubelet_tuning
"""

RETURN = r"""
path:
  description: The file written (or that would be written).
  type: str
  returned: always
  sample: /etc/kubernetes/kubelet.conf.d/90-gpuops-tuning.conf
effective:
  description: The managed keys as the kubelet will run with them (defaults filled in).
  type: dict
  returned: always
  sample: {cpuManagerPolicy: static, reservedSystemCPUs: "0-1", topologyManagerPolicy: single-numa-node}
restart_required:
  description: The kubelet must restart to use the new configuration.
  type: bool
  returned: always
reset_cpu_manager_state:
  description: The CPU manager policy or its reserved CPUs change, so C(cpu_manager_state) must be removed before
    the kubelet starts again (with the node drained).
  type: bool
  returned: always
reset_memory_manager_state:
  description: The same for the memory manager and C(memory_manager_state).
  type: bool
  returned: always
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.text.converters import to_bytes, to_text

from ansible_collections.gpuops.platform.plugins.module_utils._node import kubelet_config as core

CPU_ONLINE = "/sys/devices/system/cpu/online"


def _read(path):
    try:
        with open(path, "rb") as handle:
            return to_text(handle.read())
    except (IOError, OSError):
        return None


def _drop_ins(config_dir):
    if not config_dir or not os.path.isdir(config_dir):
        return None
    found = {}
    for name in sorted(os.listdir(config_dir)):
        path = os.path.join(config_dir, name)
        if name.endswith(".conf") and os.path.isfile(path):
            found[name] = _read(path) or ""
    return found


def _write(module, path, text):
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".%s." % os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(to_bytes(text))
        if not os.path.exists(path):
            os.chmod(tmp, 0o644)
        module.atomic_move(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            config_path=dict(type="path", default="/var/lib/kubelet/config.yaml"),
            config_dir=dict(type="path"),
            drop_in_name=dict(type="str", default="90-gpuops-tuning.conf"),
            cpu_manager_policy=dict(type="str", choices=list(core.CPU_POLICIES)),
            reserved_system_cpus=dict(type="str"),
            topology_manager_policy=dict(type="str", choices=list(core.TOPOLOGY_POLICIES)),
            topology_manager_scope=dict(type="str", choices=list(core.TOPOLOGY_SCOPES)),
            memory_manager_policy=dict(type="str", choices=list(core.MEMORY_POLICIES)),
            reserved_memory=dict(type="list", elements="dict"),
            online_cpus=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    if not core.HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML (python3-yaml)"), exception=str(core.YAML_IMPORT_ERROR))
    params = module.params
    config_path = params["config_path"]
    config_text = _read(config_path)
    if config_text is None and not params["config_dir"]:
        module.fail_json(msg="cannot read the kubelet config %s: is this a Kubernetes node (kubeadm join writes it)? "
                             "Set config_path (kubelet_tuning_config_path in the kubelet_tuning role) to the file "
                             "the kubelet's --config names" % config_path)
    online = _read(CPU_ONLINE) if params["online_cpus"] is None else params["online_cpus"].strip()
    try:
        online_cpus = core.parse_cpuset(online, CPU_ONLINE if params["online_cpus"] is None else "online_cpus") if online else None
        drop_in_name = os.path.basename(params["drop_in_name"]) if params["config_dir"] else None
        result = core.plan(config_text or "", _drop_ins(params["config_dir"]), params,
                           drop_in_name=drop_in_name, online_cpus=online_cpus, config_path=config_path)
    except core.KubeletConfigError as err:
        module.fail_json(msg="kubelet config not changed: %s" % err)
    path = os.path.join(params["config_dir"], result["target"]) if result["target"] else config_path
    if result["changed"] and not module.check_mode:
        if result["target"] and not os.path.isdir(params["config_dir"]):
            module.fail_json(msg="kubelet config dir %s does not exist" % params["config_dir"])
        _write(module, path, result["after"])
    module.exit_json(
        changed=result["changed"],
        path=path,
        effective=result["effective_after"],
        restart_required=result["changed"],
        reset_cpu_manager_state=result["changed"] and result["reset_cpu_state"],
        reset_memory_manager_state=result["changed"] and result["reset_memory_state"],
        diff={"before": result["before"], "after": result["after"],
              "before_header": path, "after_header": path},
    )


if __name__ == "__main__":
    main()
