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
module: nvidia_mig
short_description: Validate, plan and apply NVIDIA MIG layouts declared in the mig-parted format
version_added: "0.1.0"
description:
  - Declares the Multi-Instance GPU layout of a node's GPUs with a configuration in NVIDIA mig-parted's
    format (C(version) v1), so existing mig-parted files work unchanged.
  - Every entry is validated against each selected GPU's profile, limit and placement rules before anything
    is touched, and all problems are reported together, each naming the config, GPU index and model,
    profile and reason. Nothing is changed when anything is invalid.
  - On a live node the rules come from NVML (profile info and possible placements of each GPU); with
    replayed O(facts) or O(facts_file) they come from a table of NVIDIA's MIG user guide, so a fleet can
    be validated and planned offline. The table holds every GPU that NVIDIA's shipped mig-parted configs
    name (the collection's C(docs/mig-gpus.md) lists them). A GPU whose PCI device id is not in the table
    cannot be validated offline, and the module says so.
  - Each named config is parsed on its own, as mig-parted's configs are written to be used; a broken entry
    in one config of a file is reported only when that config is applied.
  - The plan gives, per GPU, the mode change (and whether it needs a GPU reset), the instances to destroy
    and the instances to create with their placements, and the Kubernetes resources the layout exposes
    under the device plugin's C(single) and C(mixed) MIG strategies.
  - Layouts are compared by profile and count, not by instance ids. A partial change keeps every
    instance that can stay at its placement and destroys and creates only the rest.
  - Apply order per GPU is destroy (compute instances, then GPU instances), set the mode, reset the GPU
    when the mode change is pending and O(allow_reset) permits, create GPU instances at the planned
    placements with one full compute instance each, then read the GPUs back and fail unless the layout
    matches and every instance is a visible MIG device.
author:
  - gpuops.platform maintainers (@gpuops)
requirements:
  - C(nvidia-smi) on the node, to reset a GPU when a MIG mode change is pending.
options:
  config:
    description:
      - The mig-parted document (with C(version) and C(mig-configs)) as a mapping.
      - Mutually exclusive with O(config_file).
    type: dict
  config_file:
    description:
      - Path on the node to a mig-parted document in YAML or JSON, UTF-8, at most 16 MiB.
      - A symlink is read through; a directory, a missing file or a file that is not UTF-8 fails with a
        message naming this option.
      - Mutually exclusive with O(config).
    type: path
  config_name:
    description:
      - The name under C(mig-configs) to apply.
      - A name with a control character is refused. Quote names that YAML reads as booleans (C(off), C(on)).
    type: str
    required: true
  facts:
    description:
      - Replayed C(gpuops.platform.nvml_facts) output (the C(nvidia) facts, or a result that holds
        C(ansible_facts.nvidia)) to validate and plan against instead of the live GPUs.
      - Its shape is checked first (per GPU the types of C(index), C(pci), C(mig) and its devices,
        C(name), C(memory), ...); one message lists every problem.
      - With replayed facts the module only plans; a run that would change something must be in check mode.
      - Mutually exclusive with O(facts_file).
    type: dict
  facts_file:
    description:
      - Path on the node to a JSON file with replayed C(nvml_facts) output, as O(facts), UTF-8, at most 16 MiB.
      - Mutually exclusive with O(facts).
    type: path
  allow_reset:
    description:
      - Reset a GPU (C(nvidia-smi --gpu-reset)) when its MIG mode change stays pending.
      - When false, or when the reset is refused, the module returns RV(reboot_required) with the reason
        and creates that GPU's instances on a later run.
    type: bool
    default: true
  clients_stopped:
    description:
      - The caller has drained the node and stopped the GPU clients (device plugin, DCGM, persistence
        daemon). Without it the module refuses to change a GPU that runs compute processes.
    type: bool
    default: false
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.node, gpuops.platform.attributes.node_action,
  gpuops.platform.attributes.converge, gpuops.platform.nvml]
attributes:
  check_mode:
    details: Returns the full plan, RV(k8s_resources) and C(changed) without touching a GPU.
  diff_mode:
    details: Shows each GPU's MIG mode and instances at their placements before and after.
  idempotent:
    details: Layouts are compared by profile and count, so a GPU already in the wanted layout is left alone.
  platform:
    details: Runs on Linux GPU nodes with the NVIDIA driver; plans anywhere with replayed facts.
notes:
  - Entries may select GPUs by index (C(devices)) and by PCI device id (C(device-filter)); a GPU selected
    by no entry is left as it is, and a GPU selected by two entries is an error.
  - As mig-parted does, a GPU without MIG is skipped (with a note in RV(plan.notes)) when C(devices) is
    C(all) or the entry disables MIG; an entry that enables MIG on it by index is an error. An entry that
    selects no GPU is noted in RV(plan.notes); a config that selects no GPU at all is also a warning.
  - A config that enables MIG on a node where no GPU supports MIG (an L40S-only node, say) is valid, as for
    mig-parted, but is a warning and sets RV(plan.mig_unsupported), since the node keeps its whole GPUs.
  - Profile names follow mig-parted, with the attributes C(+me), C(+me.all), C(-me) and C(+gfx)
    (for example C(1g.24gb+gfx)); at most one C(+me) or C(+me.all) instance fits on a GPU.
  - Compute instance sub-profiles (for example C(1c.3g.40gb)) are not managed; every GPU instance gets one
    compute instance of its full size, as mig-parted does.
seealso:
  - name: NVIDIA MIG user guide
    description: Profiles, placements and the rules this module enforces.
    link: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
  - name: NVIDIA mig-parted
    description: The configuration format this module reads.
    link: https://github.com/NVIDIA/mig-parted
  - module: gpuops.platform.nvml_facts
"""

EXAMPLES = r"""
- name: Plan a layout for a whole fleet from recorded facts (no GPU needed)
  gpuops.platform.nvidia_mig:
    config_file: /etc/nvidia-mig/config.yaml
    config_name: all-1g.10gb
    facts_file: /var/tmp/nvml-facts/gpu-node-01.json
  check_mode: true
  register: mig_plan

- name: Apply an inline layout after the role drained the node and stopped the GPU clients
  gpuops.platform.nvidia_mig:
    config:
      version: v1
      mig-configs:
        inference:
          - devices: [0, 1, 2, 3]
            device-filter: ["0x233010DE", "0x233110DE"]
            mig-enabled: true
            mig-devices:
              "3g.40gb": 1
              "1g.10gb": 4
          - devices: [4, 5, 6, 7]
            mig-enabled: false
    config_name: inference
    clients_stopped: true
  register: mig_result

- name: Reboot when a mode change could not be activated by a GPU reset
  ansible.builtin.reboot:
  when: mig_result.reboot_required
"""

RETURN = r"""
plan:
  description: The validated plan.
  returned: always
  type: dict
  contains:
    config:
      description: The applied config name.
      type: str
    valid:
      description: Whether the config is valid for every GPU of the node.
      type: bool
    errors:
      description: Every validation problem, each naming the config, entry, GPU index and model, profile and reason.
      type: list
      elements: str
    warnings:
      description: Findings that do not stop the run, for example an entry selecting a GPU index the node lacks.
      type: list
      elements: str
    notes:
      description:
        - What was passed over, as mig-parted passes over it, for example a GPU without MIG selected by
          C(devices) C(all), or an entry whose C(device-filter) matches no GPU on the node.
      type: list
      elements: str
    mig_unsupported:
      description:
        - Whether the config enables MIG on a node where no GPU supports MIG; RV(plan.warnings) then says so.
      type: bool
    gpus:
      description:
        - Per GPU, C(index), C(name), C(device_id), C(family) (the MIG rules used), C(rules) (C(nvml) or C(table)),
          C(entry) (the selecting entry, or null), C(mode) (C(current), C(pending), C(wanted)), C(set_mode),
          C(reset_required), C(before) and C(after) (C(mig), C(layout) profile counts and C(instances) with
          placements), C(keep), C(destroy), C(create) (C(profile), C(start), C(size)) and C(changed).
      type: list
      elements: dict
  sample:
    config: inference
    valid: true
    errors: []
    gpus:
      - index: 0
        family: H100 80GB
        mode: {current: enabled, pending: enabled, wanted: enabled}
        destroy: [{gpu_instance_id: 11, profile: 1g.10gb, start: 4, size: 1}]
        create: [{profile: 3g.40gb, start: 4, size: 4}]
k8s_resources:
  description:
    - Extended resources the node exposes with this layout under each MIG strategy of the NVIDIA device plugin.
    - C(single) is valid only when every GPU is in MIG mode with one profile on the whole node; C(reason) says why not.
  returned: always
  type: dict
  sample:
    single: {valid: true, reason: null, profile: 1g.10gb, resources: {nvidia.com/gpu: 56}}
    mixed: {valid: true, reason: null, resources: {nvidia.com/mig-1g.10gb: 56}}
reboot_required:
  description: A MIG mode change is pending and could not be activated by a GPU reset.
  returned: always
  type: bool
reboot_reasons:
  description: Why a reboot is required, one line per GPU.
  returned: always
  type: list
  elements: str
actions:
  description: What was done, in order (empty in check mode and when nothing changed).
  returned: always
  type: list
  elements: str
  sample: ["GPU 0: destroyed 1g.10gb at 4 (GPU instance 11)", "GPU 0: created 3g.40gb at 4"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.platform.plugins.module_utils._mig import apply as mig_apply
from ansible_collections.gpuops.platform.plugins.module_utils._mig import module as mig_module
from ansible_collections.gpuops.platform.plugins.module_utils._mig.model import MigError
from ansible_collections.gpuops.platform.plugins.module_utils._nvml import binding as nvml_binding

try:
    import pynvml
    HAS_PYNVML = True
except ImportError:  # pragma: no cover - depends on the node
    pynvml = None
    HAS_PYNVML = False


def nvidia_smi_reset(module):
    """A GPU reset through nvidia-smi (NVML has no public reset call)."""
    def reset(index, gpu_plan):
        binary = module.get_bin_path("nvidia-smi")
        if not binary:
            raise mig_apply.ResetBlocked("nvidia-smi is not installed")
        target = (gpu_plan.get("uuid") or str(index))
        rc, out, err = module.run_command([binary, "--gpu-reset", "-i", target])
        if rc != 0:
            raise mig_apply.ResetBlocked((err or out).strip() or "nvidia-smi exited with %d" % rc)
    return reset


def main():
    module = AnsibleModule(
        argument_spec=dict(
            config=dict(type="dict"),
            config_file=dict(type="path"),
            config_name=dict(type="str", required=True),
            facts=dict(type="dict"),
            facts_file=dict(type="path"),
            allow_reset=dict(type="bool", default=True),
            clients_stopped=dict(type="bool", default=False),
            controller_binding=dict(type="dict", no_log=False),
        ),
        mutually_exclusive=[("config", "config_file"), ("facts", "facts_file")],
        required_one_of=[("config", "config_file")],
        supports_check_mode=True,
    )
    nvml, reason = None, None
    if module.params["facts"] is None and not module.params["facts_file"]:
        # Live: the node's nvidia-ml-py, else the copy the action plugin sent from the controller.
        nvml, _binding, reason = nvml_binding.resolve(pynvml if HAS_PYNVML else None, module.params["controller_binding"])
    try:
        result = mig_module.run(module, nvml, nvidia_smi_reset(module), reason)
    except MigError as exc:
        module.fail_json(**exc.result())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
