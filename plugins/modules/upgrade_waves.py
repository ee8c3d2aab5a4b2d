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
module: upgrade_waves
short_description: The waves of a rolling change, as the fleet plan shows them, or those of an approved plan
version_added: 0.1.0
description:
  - Cuts O(hosts) into waves from their own C(gpuops_upgrade_serial) (a number of hosts or a percentage),
    C(gpuops_upgrade_canary) and C(gpuops_upgrade_max_fail_percentage), read from each host's inventory
    variables, group_vars and extra vars exactly as M(gpuops.platform.fleet_plan) reads them, with the same
    function - so a run follows the waves plan.json shows. A value that no wave can be cut from, or hosts that
    disagree on one, fail the task naming the variable.
  - With O(approved_plan) (a C(plan.json) of schema version 3), the waves are that plan's, of its hosts only.
    Before anything changes, each host's inputs are compared with those the plan records (a digest of the
    recorded facts and of each plan-relevant variable); a host whose inputs changed, or that left O(group),
    fails the task naming the hosts and what changed.
  - Sets the fact named O(fact) - C(hosts) (in the order they run), C(serial) (the size of each wave, for a
    play's C(serial)), C(max_fail_percentage), C(waves) and C(approved_plan). Returns RV(lines), one
    C(wave N/M) line per wave, naming its hosts.
author:
  - gpuops.platform maintainers (@gpuops)
options:
  hosts:
    description:
      - The hosts to cut into waves, in the order they run (the play's hosts, after C(--limit)).
    type: list
    elements: str
    required: true
  group:
    description:
      - The inventory group of the fleet; with O(approved_plan), each of the plan's hosts must still be in it.
    type: str
    default: gpu_nodes
  approved_plan:
    description:
      - A C(plan.json) written by M(gpuops.platform.fleet_plan) (C(gpuops_approved_plan)). Only its hosts, in its
        waves, are returned; hosts of O(hosts) it does not have are left out and named in RV(lines).
      - Refused, before anything changes, when it is not whole (no hosts, a host twice or missing in its C(order),
        waves other than the ones its own serial, canary and max_fail_percentage cut with the planner's function),
        when it names none of O(hosts) (unless the run is an AWX job slice that holds none of them, one whose
        inventory lacks the plan's hosts and holds only hosts the planner's inventory held), or when it is stale.
    type: path
  approved_plan_sha256:
    description:
      - The SHA-256 of O(approved_plan) when it was approved (C(gpuops_approved_plan_sha256), which Plan fleet
        publishes with it); a file of another digest is refused before anything changes.
    type: str
  facts_dir:
    description:
      - The folder of recorded facts the plan was made from (the controller's C(gpuops_fleet_facts_dir), as
        C(playbooks/plan_fleet.yml) gives it to the planner).
    type: path
  fact:
    description:
      - The name of the fact to set.
    type: str
    default: gpuops_upgrade_rollout
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.controller]
attributes:
  check_mode:
    support: full
    details: Decides the waves only; it never changes anything.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Never changed.
  platform:
    details: Runs on the controller; no connection to the hosts is made.
seealso:
  - module: gpuops.platform.fleet_plan
"""

EXAMPLES = r"""
- name: Decide the waves once, for the play that follows
  gpuops.platform.upgrade_waves:
    hosts: "{{ ansible_play_hosts_all }}"
    approved_plan: "{{ gpuops_approved_plan | default(omit, true) }}"
  run_once: true
  delegate_to: localhost
  delegate_facts: true
"""

RETURN = r"""
lines:
  description: One C(wave N/M) line per wave, naming its hosts (and, with O(approved_plan), what was checked and left out).
  returned: success
  type: list
  elements: str
  sample: ["wave 1/3: gpu-01", "wave 2/3: gpu-02, gpu-03"]
ansible_facts:
  description: The fact named O(fact).
  returned: success
  type: dict
  sample: {"gpuops_upgrade_rollout": {"hosts": ["gpu-01", "gpu-02", "gpu-03"], "serial": [1, 2],
           "max_fail_percentage": 0, "waves": [["gpu-01"], ["gpu-02", "gpu-03"]], "approved_plan": ""}}
"""
