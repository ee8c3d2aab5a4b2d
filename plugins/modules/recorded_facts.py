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
module: recorded_facts
short_description: Load a host's recorded facts, or record them, on the controller
version_added: 0.1.0
description:
  - The one way every playbook of the collection and the fleet planner find a host's recorded facts. The host's
    variables choose the store, first match wins - C(gpuops_nvml_replay_file) (one file for this host),
    C(gpuops_fleet_facts_dir) (C(<dir>/<inventory_hostname>.json)), C(gpuops_fleet_facts_cache=true) (the
    C(ansible_facts.gpuops_recorded) fact in Ansible's fact cache, for example AWX's fact storage with
    C(use_fact_cache)). With none of them the host is read live and this returns RV(recorded=false).
  - When the host has recorded facts, they become C(ansible_facts.nvidia) (with C(source=replay)), exactly as
    M(gpuops.platform.nvml_facts) would have returned them, and the recorded node facts (OS, kernel, loaded
    driver, PCI) are returned in RV(node).
  - With O(record=true), records the facts given in O(nvidia) and O(node) instead - written to
    C(<gpuops_fleet_facts_dir>/<inventory_hostname>.json) atomically, and kept in the fact cache as
    C(ansible_facts.gpuops_recorded). A file whose facts did not change is not rewritten (readings that change
    all the time, such as temperatures, clocks, power draw and memory in use, and the recording time itself do
    not count as a change).
  - A record carries C(format) (this collection reads up to 1), C(recorded_at) (UTC) and C(collection_version).
author:
  - gpuops.platform maintainers (@gpuops)
options:
  record:
    description:
      - Record O(nvidia) and O(node) for the host instead of loading what was recorded.
    type: bool
    default: false
  nvidia:
    description:
      - The host's C(ansible_facts.nvidia) from M(gpuops.platform.nvml_facts). Required with O(record=true).
    type: dict
  node:
    description:
      - The result of M(gpuops.platform.gpu_node_preflight) on the host; its OS, kernel, driver and PCI findings
        are kept.
    type: dict
    default: {}
  refuse_changes:
    description:
      - Fail when the host has recorded facts and the run is not in check mode. Recorded facts plan a host; a change
        made from them would be made to a host as it was, not as it is.
    type: bool
    default: false
  plan_only:
    description:
      - The host's inventory is plan-only (C(gpuops_nodes_plan_only)). Fail outside check mode, before anything is
        read or recorded, so that a playbook run without C(--check) changes nothing. The node playbooks pass it, where
        an assertion task of its own per host did the same.
    type: bool
    default: false
  facts_dir:
    description:
      - Folder of the records on the controller. Default the host's C(gpuops_fleet_facts_dir).
      - A host whose inventory name is not one file name (it holds C(/), is C(..), or holds a NUL byte) is refused
        before anything is recorded, so that no record lands outside the folder.
      - Without a folder, O(record=true) records into the fact cache only, and fails when Ansible's fact cache
        is the in-memory one (nothing would be kept).
    type: path
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.controller]
attributes:
  check_mode:
    support: full
    details: With O(record=true), reports whether the record would change and writes nothing, not even the fact cache.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: C(changed) only when a record gets new facts.
  platform:
    details: Runs on the controller; no connection to the host is made.
notes:
  - Set C(fact_caching_timeout = 0) with the C(jsonfile) cache on the command line, or recorded facts expire
    after a day (Ansible's default).
seealso:
  - module: gpuops.platform.nvml_facts
  - module: gpuops.platform.fleet_plan
"""

EXAMPLES = r"""
- name: Load the recorded facts, when the host is planned from them
  gpuops.platform.recorded_facts:
  register: gpuops_recorded_facts

- name: Read the GPUs live otherwise
  gpuops.platform.nvml_facts:
  when: not gpuops_recorded_facts.recorded

- name: Record the facts gathered on the host
  gpuops.platform.recorded_facts:
    record: true
    nvidia: "{{ ansible_facts.nvidia }}"
    node: "{{ preflight }}"
    facts_dir: /srv/gpuops/facts
"""

RETURN = r"""
recorded:
  description: Whether the host has recorded facts (loaded into C(ansible_facts.nvidia)); false when it is read live.
  returned: when O(record=false)
  type: bool
  sample: true
source:
  description: Where the recorded facts came from; empty when the host is read live.
  returned: when O(record=false)
  type: str
  sample: /srv/gpuops/facts/gpu-01.json
node:
  description: The recorded node facts (OS, kernel, loaded driver, PCI devices); empty for a bare nvml_facts file.
  returned: when RV(recorded=true)
  type: dict
  sample: {"kernel": "6.8.0-45-generic", "distro": {"id": "ubuntu", "version": "24.04"}}
recorded_at:
  description: When the facts were recorded (UTC, ISO 8601); null for a bare nvml_facts file.
  returned: when RV(recorded=true) or O(record=true)
  type: str
  sample: "2026-11-25T17:20:00Z"
collection_version:
  description: The version of the collection that recorded them.
  returned: when RV(recorded=true)
  type: str
  sample: 0.1.0
state:
  description: C(written) or C(unchanged) (the record - the file, or without a folder the fact cache - holds the same facts and is left alone).
  returned: when O(record=true)
  type: str
  sample: unchanged
path:
  description: The record's file; null without a folder.
  returned: when O(record=true)
  type: str
  sample: /srv/gpuops/facts/gpu-01.json
ansible_facts:
  description: Facts set on the host.
  returned: when facts are loaded or recorded
  type: dict
  contains:
    nvidia:
      description: The recorded C(nvml_facts) facts (O(record=false)).
      returned: when RV(recorded=true)
      type: dict
    gpuops_recorded:
      description: The record, for Ansible's fact cache (O(record=true), not in check mode).
      returned: when the record changed
      type: dict
"""
