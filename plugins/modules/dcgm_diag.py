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
module: dcgm_diag
short_description: Run a DCGM diagnostic and return its results per test and GPU
version_added: 0.1.0
description:
  - Runs C(dcgmi diag -r LEVEL -j) (as an argument list, never through a shell) against the node's DCGM host engine
    and parses its JSON output into one result per test and GPU.
  - Reads the output of DCGM 2.x and 3.x (C(DCGM GPU Diagnostic), results by C(gpu_ids)) and of DCGM 4.x
    (C(DCGM Diagnostic), results by C(entity_group) and C(entity_id)). Result values are normalised to
    C(pass), C(fail), C(warn), C(skip) and C(not run); any other value fails the module, so that an output it cannot
    read never passes a node.
  - Returns RV(health), the C(dcgm_diag_health) host fact that the C(gpuops.platform.gpu_health) role adds to a
    node's NVML health.
author:
  - gpuops.platform maintainers (@gpuops)
requirements:
  - DCGM (C(dcgmi)) on the managed node and a running host engine (C(nv-hostengine), or one reached with O(hostengine)).
options:
  level:
    description:
      - The diagnostic level, C(1) (quick, seconds), C(2) (medium, about two minutes), C(3) (long, about half an hour)
        or C(4) (extended, an hour or more).
    type: int
    required: true
  gpu_ids:
    description:
      - DCGM GPU ids to test (C(dcgmi diag -i)); all GPUs when empty.
    type: list
    elements: int
    default: []
  hostengine:
    description:
      - Address of the DCGM host engine (C(dcgmi --host)), C(HOST) or C(HOST:PORT); the local one when empty.
      - Letters, digits, dots, dashes and an optional port only.
    type: str
  dcgmi_path:
    description:
      - Path of C(dcgmi); searched on the C(PATH) when not given.
    type: path
  fail_on_failure:
    description:
      - Fail when a test failed (or DCGM reported a runtime error), with one line per failed test and GPU naming the
        test, the GPU and DCGM's message. The results are returned either way.
    type: bool
    default: true
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.node, gpuops.platform.attributes.read_only]
attributes:
  check_mode:
    details: In check mode the diagnostic is not run (it loads the GPUs); the command that would run is returned.
notes:
  - A diagnostic changes nothing on the node; the module never reports C(changed).
  - Level 3 and 4 load the GPUs for a long time; run them on drained nodes.
seealso:
  - name: DCGM diagnostics
    description: What each level runs.
    link: https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html
"""

EXAMPLES = r"""
- name: Quick diagnostic of every GPU
  gpuops.platform.dcgm_diag:
    level: 1

- name: Long diagnostic of two GPUs through the host engine of the GPU Operator, results only
  gpuops.platform.dcgm_diag:
    level: 3
    gpu_ids: [0, 1]
    hostengine: nvidia-dcgm.gpu-operator.svc:5555
    fail_on_failure: false
  register: diag

- name: Feed the gpu_health role
  ansible.builtin.set_fact:
    dcgm_diag_health: "{{ diag.health }}"
"""

RETURN = r"""
command:
  description: The command that ran (or, in check mode, would run).
  returned: always
  type: list
  elements: str
  sample: [/usr/bin/dcgmi, diag, -r, "1", -j]
dcgmi_rc:
  description:
    - The exit status of C(dcgmi). Not named C(rc) because dcgmi exits non-zero when a test fails, which is a result,
      not a module failure (O(fail_on_failure) decides that).
  returned: when ran
  type: int
  sample: 226
ran:
  description: Whether the diagnostic ran (false in check mode).
  returned: always
  type: bool
  sample: true
status:
  description: The run's worst result, C(pass), C(warn), C(fail), or C(skip) / C(not run) when no test ran; V(null) in
    check mode.
  returned: always
  type: str
  sample: fail
version:
  description: The DCGM version from the output.
  returned: when ran
  type: str
  sample: "4.2.3"
results:
  description: One entry per test and GPU (or other DCGM entity).
  returned: when ran
  type: list
  elements: dict
  sample:
    - {category: Deployment, test: software, entity_group: GPU, entity_id: 0, gpu: 0, status: fail,
       messages: [{text: "Persistence Mode: Persistence mode for GPU 0 is disabled.", error_id: 29}], info: []}
gpus:
  description: Per GPU id, each test's result.
  returned: when ran
  type: dict
  sample: {"0": {software: fail, memory: skip, pcie: skip}}
tests:
  description: One entry per test with its worst result over the GPUs.
  returned: when ran
  type: list
  elements: dict
  sample: [{category: Deployment, test: software, status: fail}]
counts:
  description: Number of results per status.
  returned: when ran
  type: dict
  sample: {pass: 0, fail: 1, warn: 0, skip: 2, "not run": 0}
failures:
  description: One line per failed test and GPU, naming the test, the GPU and DCGM's message.
  returned: when ran
  type: list
  elements: str
  sample: ["GPU 0: test 'software' (Deployment) failed: Persistence Mode: Persistence mode for GPU 0 is disabled."]
health:
  description: The C(dcgm_diag_health) fact for the gpu_health role, C(status) C(critical) on a failure, C(warning)
    on a warning, else C(ok), with the reasons.
  returned: when ran
  type: dict
  sample: {status: critical, reasons: ["DCGM diag level 1: GPU 0: test 'software' (Deployment) failed: ..."],
           source: dcgm_diag}
"""

import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.platform.plugins.module_utils._node import dcgm_diag

HOSTENGINE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,252}(:[0-9]{1,5})?\Z")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            level=dict(type="int", required=True),
            gpu_ids=dict(type="list", elements="int", default=[]),
            hostengine=dict(type="str"),
            dcgmi_path=dict(type="path"),
            fail_on_failure=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    hostengine = params["hostengine"] or None
    if hostengine and not HOSTENGINE.match(hostengine):
        module.fail_json(msg="hostengine must be HOST or HOST:PORT (letters, digits, dots, dashes), got %r"
                         % hostengine, ran=False, command=[])
    try:
        level = dcgm_diag.validate_level(params["level"])
        dcgmi = params["dcgmi_path"] or "dcgmi"
        argv = dcgm_diag.command(level, dcgmi, params["gpu_ids"], hostengine)
    except dcgm_diag.DcgmDiagError as exc:
        module.fail_json(msg=str(exc), ran=False, command=[])

    if module.check_mode:
        module.exit_json(changed=False, ran=False, status=None, command=argv,
                         msg="check mode: the DCGM diagnostic was not run (it loads the GPUs)")

    if not params["dcgmi_path"]:
        argv[0] = module.get_bin_path("dcgmi", required=False) or ""
        if not argv[0]:
            module.fail_json(msg="dcgmi was not found on the PATH: install DCGM (datacenter-gpu-manager) on the node, "
                                 "or set dcgmi_path", ran=False, command=["dcgmi"] + argv[1:])
    rc, out, err = module.run_command(argv)
    try:
        parsed = dcgm_diag.parse(out)
    except dcgm_diag.DcgmDiagError as exc:
        module.fail_json(msg="dcgmi diag (rc %s) gave no usable result: %s%s" % (
            rc, exc, ("; stderr: %s" % err.strip()[:500]) if err and err.strip() else ""),
            ran=True, command=argv, dcgmi_rc=rc, stderr=err)

    failures = dcgm_diag.failures(parsed)
    result = dict(changed=False, ran=True, command=argv, dcgmi_rc=rc, status=parsed["status"],
                  version=parsed["version"], driver_version=parsed["driver_version"],
                  runtime_error=parsed["runtime_error"], results=parsed["results"], gpus=parsed["gpus"],
                  tests=parsed["tests"], counts=parsed["counts"], failures=failures,
                  health=dcgm_diag.health(parsed, level))
    if failures and params["fail_on_failure"]:
        module.fail_json(msg="DCGM diagnostic level %d failed: %s" % (level, " | ".join(failures)), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
