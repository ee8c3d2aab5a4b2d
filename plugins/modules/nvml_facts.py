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
module: nvml_facts
short_description: Gather NVIDIA GPU facts through NVML
version_added: 0.1.0
description:
  - Gathers driver, CUDA and NVML versions and per-GPU facts (identity, PCI, memory, MIG
    devices, power, temperature, ECC, retired pages and remapped rows, clocks, clocks event (throttle)
    reasons, utilisation, NVLink, compute processes, fabric state) through NVML with the C(pynvml)
    binding, into C(ansible_facts.nvidia).
  - Uses the node's nvidia-ml-py where its Python has one, else the controller's, which the action
    plugin sends with the task (O(controller_binding)); a stock C(python3) on the node is enough.
  - Makes one C(nvmlInit) per run and asks each question once per GPU.
  - A field NVML does not support on a GPU comes back as V(null).
  - Never fails because there is no GPU; on a host without the Python binding, the
    NVIDIA library, the kernel driver or a GPU, it returns RV(ansible_facts.nvidia.present=false)
    and the reason. Where NVML gives no GPU but the PCI bus shows NVIDIA GPUs, the reason says that
    NVML cannot read them and why, RV(ansible_facts.nvidia.pci_gpu_count) counts them and the health
    is C(critical), so such a host is not treated as one without GPUs.
  - Compares the loaded kernel module version (C(/sys/module/nvidia/version) or
    C(/proc/driver/nvidia/version)) with the user-space driver and reports
    RV(ansible_facts.nvidia.reboot_required) when they differ.
  - Summarises health per GPU and per node (uncorrectable ECC errors, row remapping pending or
    failed, retired pages pending, over temperature, a hardware clocks slowdown (HW slowdown, HW
    thermal slowdown, HW power brake), MIG or ECC mode pending a reset, lost GPU, fabric registration).
  - With O(replay_file), returns recorded facts instead of asking NVML, so plans can be made
    offline from a fleet's recorded facts.
author:
  - gpuops.platform maintainers (@gpuops)
options:
  replay_file:
    description:
      - Path on the managed node of a recorded facts file to return instead of asking NVML.
      - The module's own output saved as JSON, either the whole result (with C(ansible_facts.nvidia))
        or just the C(nvidia) dictionary.
      - The returned facts have RV(ansible_facts.nvidia.source=replay).
      - The file must be UTF-8 JSON of at most 16 MiB. Its shape is checked (node keys, and per GPU the types
        of C(index), C(pci), C(mig), C(memory), ...) and one message lists every problem; a directory, a
        missing file or a symlink to one fails with a message naming this option.
    type: path
  temperature_warning_c:
    description:
      - GPU temperature in degrees Celsius at or above which the GPU health is C(warning).
      - By default each GPU's own slowdown threshold as NVML reports it.
      - A GPU at its shutdown threshold is always C(critical).
    type: int
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.node, gpuops.platform.attributes.node_action,
  gpuops.platform.attributes.read_only, gpuops.platform.attributes.facts, gpuops.platform.nvml]
notes:
  - O(temperature_warning_c) applies to facts gathered from NVML; replayed facts keep the
    health they were recorded with.
seealso:
  - name: NVML API reference
    description: The NVIDIA Management Library queried by this module.
    link: https://docs.nvidia.com/deploy/nvml-api/
"""

EXAMPLES = r"""
- name: Gather NVIDIA GPU facts
  gpuops.platform.nvml_facts:

- name: Stop when a GPU node is unhealthy or waits for a reboot
  ansible.builtin.assert:
    that:
      - ansible_facts.nvidia.health.status != 'critical'
      - not ansible_facts.nvidia.reboot_required
    fail_msg: "{{ ansible_facts.nvidia.health.reasons + ansible_facts.nvidia.reboot_reasons }}"
  when: ansible_facts.nvidia.present

- name: List the MIG devices of every GPU
  ansible.builtin.debug:
    msg: "{{ ansible_facts.nvidia.gpus | map(attribute='mig.devices') | flatten | map(attribute='profile') }}"

- name: Plan offline from facts recorded on a fleet node
  gpuops.platform.nvml_facts:
    replay_file: "{{ playbook_dir }}/recorded/{{ inventory_hostname }}.json"
  delegate_to: localhost

- name: Record a node's facts for later replay
  ansible.builtin.copy:
    content: "{{ {'nvidia': ansible_facts.nvidia} | to_nice_json }}"
    dest: "recorded/{{ inventory_hostname }}.json"
    mode: "0644"
  delegate_to: localhost
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: complex
  contains:
    nvidia:
      description: The NVIDIA GPU facts of the host.
      returned: always
      type: complex
      contains:
        present:
          description: Whether NVML found at least one GPU.
          type: bool
          returned: always
          sample: true
        reason:
          description: Why RV(ansible_facts.nvidia.present) is false; V(null) when it is true.
          type: str
          returned: always
          sample: "libnvidia-ml.so.1 not found: the NVIDIA driver is not installed"
        source:
          description: Where the facts come from, C(nvml) or C(replay).
          type: str
          returned: always
          sample: nvml
        driver_version:
          description: The user-space driver version NVML reports.
          type: str
          returned: always
          sample: "570.172.08"
        kernel_module_version:
          description: The version of the loaded nvidia kernel module, V(null) when none is loaded.
          type: str
          returned: always
          sample: "570.172.08"
        cuda_driver_version:
          description: The CUDA version the driver supports, C(major.minor).
          type: str
          returned: always
          sample: "12.8"
        nvml_version:
          description: The NVML library version.
          type: str
          returned: always
          sample: "12.570.172.08"
        gpu_count:
          description: Number of GPUs NVML enumerates.
          type: int
          returned: always
          sample: 8
        pci_gpu_count:
          description:
            - NVIDIA GPUs (PCI vendor 0x10de, display class) under C(/sys/bus/pci/devices), counted where NVML
              gives no GPU.
            - V(null) where NVML counted the GPUs itself.
          type: int
          returned: always
          sample: null
        nvml_binding:
          description:
            - The nvidia-ml-py the facts were read with, C(source) (C(node) or C(controller)) and C(version).
            - V(null) where there was none, or in facts recorded before this key existed.
          type: dict
          returned: always
          sample: {"source": "controller", "version": "13.615.71"}
        nvswitch_count:
          description:
            - Number of distinct NVSwitches the GPUs' active NVLinks reach.
            - V(null) when no GPU has NVLink.
          type: int
          returned: always
          sample: 6
        reboot_required:
          description: Whether the loaded kernel module differs from the installed user-space driver.
          type: bool
          returned: always
          sample: false
        reboot_reasons:
          description: Why a reboot is required.
          type: list
          elements: str
          returned: always
          sample: []
        health:
          description: Node health, the worst of the GPUs plus node-level findings.
          type: dict
          returned: always
          sample: {"status": "ok", "reasons": []}
          contains:
            status:
              description: C(ok), C(warning) or C(critical).
              type: str
            reasons:
              description: What made the status, prefixed with the GPU index.
              type: list
              elements: str
        gpus:
          description:
            - One entry per GPU in NVML index order.
            - Every key is always there; a value NVML does not support on the GPU is V(null).
          type: list
          elements: dict
          returned: always
          contains:
            index:
              description: NVML index.
              type: int
            uuid:
              description: GPU UUID, C(GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx).
              type: str
            name:
              description: Product name.
              type: str
              sample: NVIDIA H100 80GB HBM3
            serial:
              description: Board serial number.
              type: str
            board_part_number:
              description: Board part number.
              type: str
            architecture:
              description: C(ampere), C(ada), C(hopper), C(blackwell), ...
              type: str
            cuda_compute_capability:
              description:
                - The CUDA compute capability, C(major.minor) (C(9.0) for Hopper).
                - The device plugin's MPS daemon allows 48 clients per GPU from 7.5 on and 16 below,
                  so the capacity plan checks MPS replicas against it.
              type: str
              sample: "9.0"
            pci:
              description: C(bus_id) and C(device_id) as NVML reports them (C(0x233010DE)).
              type: dict
            memory:
              description: C(total_mib) and C(used_mib).
              type: dict
            mig:
              description:
                - C(supported), C(current_mode) and C(pending_mode) (C(enabled) or C(disabled)), and
                  C(devices), the MIG devices while MIG is enabled.
                - Each device has C(index), C(gpu_instance_id), C(compute_instance_id), C(profile)
                  (C(1g.18gb), or C(1c.2g.20gb) for a smaller compute instance), C(placement)
                  (C(start), C(size)), C(uuid) (C(MIG-...)) and C(memory_total_mib).
              type: dict
            persistence_mode:
              description: C(enabled) or C(disabled).
              type: str
            compute_mode:
              description: C(default), C(exclusive_process) or C(prohibited).
              type: str
            power:
              description: C(limit_w) (enforced limit) and C(draw_w), in watts.
              type: dict
            temperature_c:
              description: GPU core temperature.
              type: int
            temperature_thresholds_c:
              description: C(slowdown) and C(shutdown) thresholds.
              type: dict
            ecc:
              description: C(mode), C(pending_mode), C(volatile_uncorrectable) and C(aggregate_uncorrectable).
              type: dict
            retired_pages:
              description:
                - C(single_bit), C(double_bit) (retired page counts) and C(pending).
                - V(null) on GPUs that remap rows instead (Ampere and newer).
              type: dict
            remapped_rows:
              description: C(correctable), C(uncorrectable), C(pending) and C(failure); V(null) where unsupported.
              type: dict
            clocks:
              description: C(graphics_mhz), C(sm_mhz), C(memory_mhz), C(max_sm_mhz), C(max_memory_mhz).
              type: dict
            clocks_event_reasons:
              description:
                - The active clocks event (throttle) reasons, named as C(nvidia-smi -q -x) names them
                  (C(gpu_idle), C(applications_clocks_setting), C(sw_power_cap), C(hw_slowdown), C(sync_boost),
                  C(sw_thermal_slowdown), C(hw_thermal_slowdown), C(hw_power_brake_slowdown),
                  C(display_clocks_setting); C(board_limit) and C(reliability) from older drivers).
                - C(hw_slowdown), C(hw_thermal_slowdown) or C(hw_power_brake_slowdown) make the GPU health C(warning).
                - V(null) where NVML does not report them.
              type: list
              elements: str
              sample: ["sw_power_cap"]
            utilization:
              description:
                - C(gpu_percent) and C(memory_percent) over NVML's last sample period.
                - V(null) where NVML does not report it (a GPU in MIG mode).
              type: dict
            nvlink:
              description: One entry per NVLink with C(link), C(active), C(remote_type) and C(remote_bus_id).
              type: list
              elements: dict
            compute_processes:
              description: Number of compute processes running on the GPU.
              type: int
            fabric:
              description:
                - GPU fabric registration (NVSwitch systems from Hopper on) with C(state), C(status),
                  C(clique_id), C(cluster_uuid) and C(degraded_bandwidth).
                - V(null) where NVML does not report it.
              type: dict
            lost:
              description: Whether NVML reported the GPU lost.
              type: bool
            errors:
              description: NVML errors other than "not supported" met while asking about this GPU.
              type: list
              elements: str
            health:
              description: C(status) and C(reasons) of this GPU.
              type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.platform.plugins.module_utils._nvml import binding as nvml_binding
from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as nvml_utils

try:
    import pynvml
    HAS_PYNVML = True
except ImportError:
    pynvml = None
    HAS_PYNVML = False


def gather(module):
    params = module.params
    if params["replay_file"]:
        try:
            return nvml_utils.load_replay(params["replay_file"])
        except nvml_utils.ReplayError as err:
            module.fail_json(msg=str(err))
    nvml, binding, reason = nvml_binding.resolve(pynvml if HAS_PYNVML else None, params["controller_binding"])
    try:
        if nvml is None:
            return nvml_utils.unreadable(reason)
        return nvml_utils.collect(nvml, temperature_warning_c=params["temperature_warning_c"], binding=binding)
    except nvml_utils.NvmlCollectError as err:
        module.fail_json(msg=str(err))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            replay_file=dict(type="path"),
            temperature_warning_c=dict(type="int"),
            controller_binding=dict(type="dict", no_log=False),
        ),
        supports_check_mode=True,
    )
    module.exit_json(changed=False, ansible_facts={"nvidia": gather(module)})


if __name__ == "__main__":
    main()
