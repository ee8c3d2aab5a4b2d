# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The gpu_smoke_test plan and verdicts: the GPU nodes, one CUDA pod per node and resource, the results.

The nodes come from the capacity plan (render mode) or from the Nodes the API
server lists (apply mode); the results from what the role read back after the
run: the pods' phases and logs, the Volcano job, the Kueue workloads and the
RayJob.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

MIG_RESOURCE = re.compile(r"nvidia\.com/mig-")
NVIDIA_RESOURCE = re.compile(r"nvidia\.com/")
# The label by which gpu_nodes keeps the device plugin off a node.
DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
POD_NAME_MAX = 63


def _mig_resources(names):
    return sorted((n for n in names if MIG_RESOURCE.match(n)), key=lambda n: n.lower())


def plan_nodes(capacity, node_plan):
    """The GPU nodes of the capacity plan that expose a GPU resource, without those where gpu_nodes turned the device plugin off.

    Each ``{"name", "mig_resources"}``, sorted by name (case-insensitive).
    """
    off = set(node["name"] for node in (node_plan or {}).get("nodes", [])
              if (node.get("labels") or {}).get(DEVICE_PLUGIN_LABEL) == "false")
    out = []
    for name, node in sorted(((capacity or {}).get("nodes") or {}).items(), key=lambda item: item[0].lower()):
        resources = node.get("resources") or {}
        if name in off or not [value for value in resources.values() if value > 0]:
            continue
        out.append({"name": name, "mig_resources": _mig_resources(resources)})
    return out


def api_nodes(nodes):
    """The Nodes the API server lists that advertise an NVIDIA resource, each ``{"name", "mig_resources"}``."""
    out = []
    for node in nodes or []:
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        gpus = [key for key, value in allocatable.items() if NVIDIA_RESOURCE.match(key) and value not in ("0", 0)]
        if gpus:
            out.append({"name": node["metadata"]["name"], "mig_resources": _mig_resources(gpus)})
    return out


def cuda_pod_name(node, resource):
    """A pod name (at most 63 characters, no trailing dash) from the node's name and the resource."""
    suffix = re.sub(r"[^a-z0-9]+", "-", re.sub(r"^nvidia\.com/", "", resource))
    name = "cuda-%s-%s" % (re.sub(r"[^a-z0-9-]+", "-", node.lower()), suffix)
    return re.sub(r"-+\Z", "", name[:POD_NAME_MAX])


def cuda_pods(nodes, mig_strategy, gpu_resource):
    """One CUDA pod per node, and per MIG resource of the node under the mixed strategy."""
    out = []
    for node in nodes:
        mig = node.get("mig_resources") or []
        for resource in mig if mig_strategy == "mixed" and mig else [gpu_resource]:
            out.append({"name": cuda_pod_name(node["name"], resource), "node": node["name"], "resource": resource})
    return out


def _phase(pods, name):
    for pod in pods:
        if pod.get("metadata", {}).get("name") == name:
            return (pod.get("status") or {}).get("phase") or "Missing"
    return "Missing"


def _log(logs, name):
    for result in logs:
        if (result.get("item") or {}).get("name") == name:
            return result.get("log") or ""
    return ""


def _cuda(read, settings):
    tests = []
    for pod in read["cuda_pods"]:
        log, phase = _log(read["logs"], pod["name"]), _phase(read["pods"], pod["name"])
        ok = phase == "Succeeded" and settings["smi_header"] in log and settings["cuda_header"] in log
        tests.append({"test": "cuda", "name": pod["name"], "node": pod["node"], "resource": pod["resource"], "passed": ok,
                      "detail": "nvidia-smi table printed" if ok else "pod %s; nvidia-smi table missing from the log" % phase})
    return tests


def _volcano(by_kind, settings):
    job = next((j for j in by_kind.get("Job", []) if j.get("metadata", {}).get("name") == "volcano-gang"), {})
    state = (((job.get("status") or {}).get("state") or {}).get("phase") or "Missing") if job else "Missing"
    return {"test": "volcano-gang", "name": "volcano-gang", "passed": state == "Completed",
            "detail": "job %s (minAvailable %d)" % (state, int(settings["gang_size"]))}


def _kueue(by_kind, pods, settings):
    admitted = []
    for workload in by_kind.get("Workload", []):
        if any(ref.get("name") == "kueue-admitted" for ref in workload.get("metadata", {}).get("ownerReferences") or []):
            admitted += [c for c in (workload.get("status") or {}).get("conditions") or []
                         if c.get("type") == "Admitted" and c.get("status") == "True"]
    phase = next(((p.get("status") or {}).get("phase") or "Missing" for p in pods
                  if ((p.get("metadata") or {}).get("labels") or {}).get("job-name") == "kueue-admitted"), "Missing")
    detail = "admitted by ClusterQueue %s" % settings["kueue_cluster_queue"] if admitted else "not admitted"
    return {"test": "kueue-admission", "name": "kueue-admitted", "passed": bool(admitted) and phase == "Succeeded",
            "detail": detail + ", pod " + phase}


def _rdma(read, settings):
    if not settings["rdma_pods"]:
        detail = "needs two GPU nodes, found %d; set gpu_smoke_test_rdma=false on a single-node cluster" % int(settings["gpu_node_count"])
        return {"test": "rdma-nccl", "name": "nccl-rdma-launcher", "passed": False, "detail": detail}
    nccl, phase = read["nccl"], _phase(read["pods"], "nccl-rdma-launcher")
    return {"test": "rdma-nccl", "name": "nccl-rdma-launcher", "passed": nccl["passed"] and phase == "Succeeded",
            "transport": nccl["transport"], "gdrdma": nccl["gdrdma"], "peak_busbw": nccl["peak_busbw"],
            "avg_busbw": nccl["avg_busbw"],
            "detail": nccl["detail"] if phase == "Succeeded" else "launcher pod %s; %s" % (phase, nccl["detail"])}


def _rayjob(by_kind):
    job = next(iter(by_kind.get("RayJob", [])), {})
    status = ((job.get("status") or {}).get("jobStatus") or "Missing") if job else "Missing"
    return {"test": "rayjob", "name": "ray-gpu", "passed": status == "SUCCEEDED", "detail": "RayJob " + status}


def results(read, settings):
    """The verdict of every smoke test that ran, and the totals.

    ``read``: ``cuda_pods`` (as cuda_pods gives them), ``pods`` (the test pods the API
    server lists), ``logs`` (k8s_log's loop results), ``status`` (k8s_info's loop
    results, one per kind) and ``nccl`` (nccl_test_result of the RDMA launcher's log).
    ``settings``: ``smi_header``, ``cuda_header``, ``volcano``, ``gang_size``, ``kueue``,
    ``kueue_cluster_queue``, ``rdma``, ``rdma_pods``, ``gpu_node_count`` and ``rayjob``.
    A run without any test fails.
    """
    by_kind = dict(((r.get("item") or {}).get("kind"), r.get("resources") or []) for r in read["status"])
    tests = _cuda(read, settings)
    if settings["volcano"]:
        tests.append(_volcano(by_kind, settings))
    if settings["kueue"]:
        tests.append(_kueue(by_kind, read["pods"], settings))
    if settings["rdma"]:
        tests.append(_rdma(read, settings))
    if settings["rayjob"]:
        tests.append(_rayjob(by_kind))
    failed = len([t for t in tests if not t["passed"]])
    return {"passed": failed == 0 and len(tests) > 0, "total": len(tests), "failed": failed, "tests": tests}


def summary(verdict):
    """One line for the totals, then one per test."""
    lines = ["%d/%d smoke tests passed" % (verdict["total"] - verdict["failed"], verdict["total"])]
    for test in verdict["tests"]:
        lines.append("%s %s: %s (%s)" % (test["test"], test["name"], "ok" if test["passed"] else "FAILED", test["detail"]))
    return lines
