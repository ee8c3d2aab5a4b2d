#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

# The work is done by the action plugin of the same name on the controller;
# this file holds its documentation.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_plan
short_description: Plan a whole GPU fleet from recorded NVML facts, on the controller
version_added: 0.1.0
description:
  - Plans every host in O(hosts) from its recorded C(nvml_facts) output and its own inventory
    variables, in one task and one process on the controller; no host is contacted.
  - "Per host: the driver wanted (C(nvidia_driver_version) or C(nvidia_driver_branch),
    C(nvidia_driver_state)) against the installed and the loaded one, and whether the node reboots;
    the MIG layout (C(mig_config_name) with C(mig_config) or C(mig_config_file), in mig-parted's format)
    validated and planned per GPU by the same code as M(gpuops.platform.nvidia_mig); health per GPU by
    the rules of M(gpuops.platform.nvml_facts) (ECC, remapped rows, retired pages, temperature, pending
    MIG or ECC mode, fabric); NVSwitches and whether fabric manager is needed
    (C(nvidia_driver_fabricmanager)); and the Kubernetes resources the node advertises under the MIG
    strategy and its device-plugin sharing config (C(gpu_nodes_device_plugin_config)), computed by the
    C(gpuops.platform.gpu_capacity) filter."
  - Before anything is planned or written, refuses a run where a host in O(hosts) has a variable with a role's
    prefix or C(gpuops_) that nothing defines (a typo, which would never be read), as
    M(gpuops.platform.check_variables) with O(gpuops.platform.check_variables#module:host_globals=true) does, and
    a run where a host's driver settings cannot be used; each host's variables are read once for the checks
    and the plan.
  - A host's problems (no facts file, a file that is not C(nvml_facts) output, an unknown GPU, an invalid
    MIG layout or driver setting, a capacity the strategy cannot give) are recorded on that host; the
    other hosts are still planned.
  - Writes C(plan.json) (per host and fleet totals, and the views; a versioned format with a JSON Schema,
    see docs/fleet_plan_schema.md; version 3 records per host a digest of its recorded facts and
    plan-relevant variables, so that C(playbooks/upgrade.yml -e gpuops_approved_plan=plan.json) can refuse a
    stale plan) and C(index.html) (one self-contained page, built from C(plan.json) alone -
    per-pool rollups, the reboot waves of C(upgrade.yml), each node's disruption, tenant and queue quotas
    against capacity, the age of each host's facts, what changed since the previous plan, and a filtered,
    sorted, virtualized table of the nodes) into O(report_dir), each atomically. Both are written in check
    mode too, since they are the output of a plan.
  - Compares the plan with O(previous_plan), or else with the C(plan.json) already in O(report_dir), which
    is kept as C(plan.previous.json) when the new plan differs from it.
  - Fails after writing both files when any host cannot be planned, naming each host and its reasons
    (unless O(fail_on_invalid=false)).
author:
  - gpuops.platform maintainers (@gpuops)
options:
  facts_dir:
    description:
      - Folder of recorded facts, one C(<inventory_hostname>.json) per host, each the output of
        M(gpuops.platform.nvml_facts) (the whole result or the C(nvidia) dictionary).
      - A host with C(gpuops_nvml_replay_file) set uses that file instead.
      - Required unless every host sets C(gpuops_nvml_replay_file).
    type: path
  report_dir:
    description:
      - Folder on the controller for C(plan.json) and C(index.html); created when missing.
    type: path
    required: true
  hosts:
    description:
      - Inventory hosts to plan, in this order.
      - By default the hosts of O(group).
    type: list
    elements: str
  mig_strategy:
    description:
      - The device plugin's MIG strategy the capacity is computed for.
    type: str
    choices: [none, single, mixed]
    default: single
  sharing_configs:
    description:
      - The device-plugin sharing configs (the C(gpu_sharing_configs) variable of the C(gpu_sharing) role).
    type: list
    elements: dict
    default: []
  default_config:
    description:
      - The sharing config of a node that selects none (C(gpu_sharing_default_config)).
    type: str
    default: ""
  labels:
    description:
      - Labels of every GPU node (C(gpu_nodes_labels)); a node's own are in C(gpu_nodes_host_labels).
    type: dict
    default: {}
  fail_on_invalid:
    description:
      - Fail the task, after writing both files, when any host cannot be planned, or a tenant's or
        ClusterQueue's GPU quota cannot be read (RV(quota_errors)).
    type: bool
    default: true
  title:
    description:
      - Title of the page.
    type: str
    default: GPU fleet plan
  group:
    description:
      - The inventory group of the fleet; its hosts are planned unless O(hosts) is given, and the groups
        below it are the pools of the rollups (each host in its smallest group).
    type: str
    default: gpu_nodes
  previous_plan:
    description:
      - A C(plan.json) (schema version 1, 2 or 3) to compare with, instead of the one in O(report_dir).
      - A file that does not follow its schema fails the task before anything is written.
    type: path
  serial:
    description:
      - Overrides the hosts' C(gpuops_upgrade_serial) (a number of hosts or a percentage) for the reboot waves.
      - Unset (as C(playbooks/plan_fleet.yml) leaves it), the waves follow the hosts' own C(gpuops_upgrade_serial),
        C(gpuops_upgrade_canary) and C(gpuops_upgrade_max_fail_percentage), read as C(playbooks/upgrade.yml) reads
        them, so plan.json shows the waves C(upgrade.yml) runs. Hosts that disagree on one of them are refused.
    type: raw
  canary:
    description:
      - Overrides the hosts' C(gpuops_upgrade_canary) - a first wave of one host.
    type: raw
  tenants:
    description:
      - The tenants and Kueue queues whose quotas are set against the capacity, as keyword arguments -
        C(tenants) (C(gpu_tenants_list)), C(default_share), C(default_quota), C(cluster_queues)
        (C(kueue_cluster_queues)), C(default_cluster_queue) and C(tenant_cluster_queues).
    type: dict
    default: {}
  stale_after_hours:
    description:
      - Facts recorded longer ago than this are stale.
    type: float
    default: 168
  return_facts:
    description:
      - Also return each planned host's MIG resources in RV(nodes), for the Kubernetes layer of the same run
        (C(playbooks/cluster.yml) takes them; the facts themselves it reads again from where they are recorded,
        through M(gpuops.platform.recorded_facts)).
    type: bool
    default: false
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.controller]
attributes:
  check_mode:
    support: full
    details: Plans only in both modes; the report files are written in check mode too.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: C(changed) only when C(plan.json) or C(index.html) gets new content.
  platform:
    details: Runs on the controller; plans hosts of any platform from their recorded facts (O(hosts)).
notes:
  - Hosts with the same GPUs, MIG state and MIG config share one MIG plan, so a fleet of a few node types
    plans in time proportional to the number of hosts, not to the search.
  - Everything taken from the facts files (host names, GPU names, reasons) is HTML-escaped in the page,
    and the page forbids any network request through its Content-Security-Policy.
seealso:
  - module: gpuops.platform.nvml_facts
  - module: gpuops.platform.nvidia_mig
"""

EXAMPLES = r"""
- name: Plan the fleet from recorded facts
  gpuops.platform.fleet_plan:
    facts_dir: /srv/gpuops/facts
    report_dir: /srv/gpuops/report
    mig_strategy: mixed
  run_once: true
  delegate_to: localhost

- name: Report every problem of the H100 nodes without failing the play
  gpuops.platform.fleet_plan:
    facts_dir: /srv/gpuops/facts
    report_dir: /srv/gpuops/report-h100
    hosts: "{{ groups['gpu_nodes'] | select('search', 'h100') | list }}"
    fail_on_invalid: false
  register: fleet
  run_once: true
  delegate_to: localhost

- name: Show the hosts that cannot be planned
  ansible.builtin.debug:
    var: fleet.errors
  run_once: true
"""

RETURN = r"""
valid:
  description: Whether every host could be planned and every GPU quota read.
  returned: always
  type: bool
  sample: false
quota_errors:
  description:
    - One line per tenant or ClusterQueue GPU quota (or tenant C(gpu_share)) that cannot be read, naming the
      variable, the tenant or queue and the value. Such a quota is never left out of the plan silently.
  returned: always
  type: list
  elements: str
  sample: ["gpu_tenants_list: tenant inference: quota requests.nvidia.com/gpu 'eight' is not a whole number of devices: write a number, such as 8"]
errors:
  description: One line per host that cannot be planned, naming the host and its reasons.
  returned: always
  type: list
  elements: str
  sample: ["gpu-07: no facts file for this host (/srv/gpuops/facts/gpu-07.json): record its nvml_facts output there"]
summary:
  description: Fleet totals, as in C(plan.json).
  returned: always
  type: dict
  sample:
    hosts: 8
    gpus: 34
    gpus_by_model: {"NVIDIA H100 80GB HBM3": 16}
    reboot: ["dgx-a100-01"]
    capacity: {"nvidia.com/gpu": 24}
overview:
  description:
    - Lines for the play's summary - nodes to reboot (a count and the first few), upgrade waves, what changed
      since the previous plan, stale facts and quotas against capacity.
  returned: always
  type: list
  elements: str
  sample:
    - "reboots: 1250 (hgx-00001, hgx-00002, hgx-00003, hgx-00004, hgx-00011 and 1245 more: plan.json summary.reboot,
      or the page's node table with the filter disruption:reboot)"
previews:
  description:
    - The lists of RV(summary) (C(reboot), C(invalid_mig), C(unhealthy_nodes), C(mig_unsupported), C(hosts_invalid))
      as a count, the first few names and where the rest are.
  returned: always
  type: dict
  sample: {"reboot": "none", "unhealthy_nodes": "2 (gpu-07, gpu-19)"}
plan_file:
  description: Path of C(plan.json).
  returned: always
  type: str
  sample: /srv/gpuops/report/plan.json
report_file:
  description: Path of C(index.html).
  returned: always
  type: str
  sample: /srv/gpuops/report/index.html
nodes:
  description: Per planned host, the MIG plan's Kubernetes resources (C(mig_k8s_resources)).
  returned: when O(return_facts=true)
  type: dict
  sample: {"l40s-01": {"mig_k8s_resources": null}, "dgx-a100-01": {"mig_k8s_resources": {"mixed": {"mig-1g.10gb": 16}}}}
"""
