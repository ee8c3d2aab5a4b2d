# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): MIG changes through NVML.
"""Read and change MIG state through NVML (the ``pynvml`` module, passed in).

Order of work on one GPU, so that nothing is lost that could have stayed:
destroy the compute instances, then the GPU instances that must go; set the
mode; reset the GPU when the mode change is pending (and a reset is allowed);
create GPU instances at the planned placements and one full compute instance in
each. Afterwards the layout is read back: MIG devices must exist, not only a
successful return code.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes

from ansible_collections.gpuops.platform.plugins.module_utils._mig import plan as mig_plan
from ansible_collections.gpuops.platform.plugins.module_utils._mig import profiles as mig_profiles
from ansible_collections.gpuops.platform.plugins.module_utils._mig.model import ENABLED, GpuMigPlan, MigError
from ansible_collections.gpuops.platform.plugins.module_utils._nvml.collect import nvml_text

# GPU instance ids are small (the driver hands out 1-14 on 7-slice GPUs) and compute
# instance ids are 0-7; looking them up by id avoids ctypes handle arrays.
MAX_GPU_INSTANCE_ID = 32
MAX_COMPUTE_INSTANCE_ID = 8
MAX_PLACEMENTS = 16


class MigApplyError(MigError):
    """A change could not be made; ``actions`` lists what was done before it failed."""

    def __init__(self, message, actions=None):
        self.actions = list(actions or [])
        super(MigApplyError, self).__init__(message, actions=self.actions)


class ResetBlocked(MigError):
    """The GPU reset was refused (clients still hold the GPU, or reset is not possible).

    apply_gpu turns it into a reboot reason: it never ends the module by itself.
    """


# nvmlErrorString texts of the codes MIG changes meet, for when the library cannot be asked
# (pynvml then prints only "NVML Error with code N").
_ERROR_TEXT = {
    16: "GPU requires restart", 19: "In use by another client", 23: "Insufficient Resources",
}


def error_text(exc):
    text = str(exc)
    code = getattr(exc, "value", None)
    if text.startswith("NVML Error with code") and code in _ERROR_TEXT:
        return _ERROR_TEXT[code]
    return text


class NvmlMig(object):
    """MIG reads and writes on the node's GPUs through a pynvml-compatible module."""

    def __init__(self, nvml):
        self.nvml = nvml

    def _code(self, exc):
        return getattr(exc, "value", None)

    # -- reading -------------------------------------------------------------

    def handles(self):
        return [self.nvml.nvmlDeviceGetHandleByIndex(i) for i in range(self.nvml.nvmlDeviceGetCount())]

    def mig_mode(self, handle):
        """(current, pending) as "enabled"/"disabled", or (None, None) without MIG."""
        nvml = self.nvml
        try:
            current, pending = nvml.nvmlDeviceGetMigMode(handle)
        except nvml.NVMLError as exc:
            if self._code(exc) in (nvml.NVML_ERROR_NOT_SUPPORTED, nvml.NVML_ERROR_FUNCTION_NOT_FOUND):
                return None, None
            raise
        return tuple("enabled" if m == nvml.NVML_DEVICE_MIG_ENABLE else "disabled" for m in (current, pending))

    def profiles_by_id(self, handle):
        """{NVML profile id: (profile index, name)} of the GPU instance profiles."""
        nvml = self.nvml
        found = {}
        for index in mig_profiles.GI_PROFILE_IDS:
            try:
                info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, index)
            except nvml.NVMLError:
                continue
            found[int(info.id)] = (index, mig_profiles._nvml_profile_name(info))
        return found

    def _by_id(self, lookup, parent, count):
        """``(id, handle)`` of every instance ``lookup(parent, id)`` finds for ids below ``count``.

        NVML answers NOT_FOUND (or INVALID_ARGUMENT past the GPU's own limit) for a free id.
        """
        nvml = self.nvml
        for item_id in range(count):
            try:
                found = lookup(parent, item_id)
            except nvml.NVMLError as exc:
                if self._code(exc) in (nvml.NVML_ERROR_NOT_FOUND, nvml.NVML_ERROR_INVALID_ARGUMENT):
                    continue
                raise
            yield item_id, found

    def gpu_instances(self, handle):
        """Current GPU instances with their compute instances, by GPU instance id."""
        nvml = self.nvml
        names = self.profiles_by_id(handle)
        found = {}
        for _gi_id, gi in self._by_id(nvml.nvmlDeviceGetGpuInstanceById, handle, MAX_GPU_INSTANCE_ID):
            info = nvml.nvmlGpuInstanceGetInfo(gi)
            cis = [{"id": ci_id, "handle": ci} for ci_id, ci in
                   self._by_id(nvml.nvmlGpuInstanceGetComputeInstanceById, gi, MAX_COMPUTE_INSTANCE_ID)]
            found[int(info.id)] = {
                "id": int(info.id), "handle": gi, "profile_id": int(info.profileId),
                "profile": names.get(int(info.profileId), (None, "unknown"))[1],
                "start": int(info.placement.start), "size": int(info.placement.size), "cis": cis,
            }
        return found

    def mig_devices(self, handle):
        """MIG devices as CUDA and the device plugin see them (nvmlDeviceGetMigDeviceHandleByIndex)."""
        nvml = self.nvml
        devices = []
        for index in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
            try:
                dev = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
            except nvml.NVMLError as exc:
                if self._code(exc) == nvml.NVML_ERROR_NOT_FOUND:
                    continue
                raise
            devices.append({"index": index, "uuid": nvml_text(nvml.nvmlDeviceGetUUID(dev)),
                            "gpu_instance_id": int(nvml.nvmlDeviceGetGpuInstanceId(dev)),
                            "compute_instance_id": int(nvml.nvmlDeviceGetComputeInstanceId(dev))})
        return devices

    def processes(self, handle):
        return [int(p.pid) for p in self.nvml.nvmlDeviceGetComputeRunningProcesses(handle)]

    def possible_placements(self, handle, profile_index, info):
        """[(start, size)] NVML allows for a profile (nvmlDeviceGetGpuInstancePossiblePlacements)."""
        nvml = self.nvml
        array = (nvml.c_nvmlGpuInstancePlacement_t * MAX_PLACEMENTS)()
        count = ctypes.c_uint(MAX_PLACEMENTS)
        try:
            nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, int(info.id), array, ctypes.byref(count))
        except nvml.NVMLError:
            return []
        return [(int(array[i].start), int(array[i].size)) for i in range(count.value)]

    def rules(self, handle, label):
        """The GPU's own MIG rules from NVML (None when it reports no profile)."""
        return mig_profiles.family_from_nvml(self.nvml, handle, label, self.possible_placements)

    def gpu_facts(self, index, handle):
        """The part of the nvml_facts schema that planning needs, read live."""
        nvml = self.nvml
        pci = nvml.nvmlDeviceGetPciInfo(handle)
        current, pending = self.mig_mode(handle)
        gpu = {
            "index": index, "uuid": nvml_text(nvml.nvmlDeviceGetUUID(handle)), "name": nvml_text(nvml.nvmlDeviceGetName(handle)),
            "pci": {"bus_id": nvml_text(pci.busId), "device_id": "0x%08X" % pci.pciDeviceId},
            "mig": {"supported": current is not None, "current_mode": current, "pending_mode": pending,
                    "devices": []},
            "compute_processes": len(self.processes(handle)),
        }
        if current == "enabled":
            by_gi = self.gpu_instances(handle)
            uuids = dict(((d["gpu_instance_id"], d["compute_instance_id"]), d) for d in self.mig_devices(handle))
            for gi in sorted(by_gi.values(), key=lambda g: g["start"]):
                for ci in gi["cis"] or [{"id": None}]:
                    dev = uuids.get((gi["id"], ci["id"]), {})
                    gpu["mig"]["devices"].append({
                        "index": dev.get("index"), "gpu_instance_id": gi["id"], "compute_instance_id": ci["id"],
                        "profile": gi["profile"],
                        "placement": {"start": gi["start"], "size": gi["size"]}, "uuid": dev.get("uuid"),
                    })
        return gpu

    def facts(self):
        gpus = [self.gpu_facts(i, h) for i, h in enumerate(self.handles())]
        return {"present": bool(gpus), "reason": None if gpus else "NVML reports no GPU", "source": "nvml",
                "gpu_count": len(gpus), "gpus": gpus}

    # -- changing ------------------------------------------------------------

    def _destroy(self, handle, gi_id, instances, actions, index):
        nvml = self.nvml
        gi = instances.get(gi_id)
        if gi is None:
            raise MigApplyError("GPU %s: GPU instance %s is gone since planning; run again to re-plan"
                                % (index, gi_id), actions)
        try:
            for ci in gi["cis"]:
                nvml.nvmlComputeInstanceDestroy(ci["handle"])
            nvml.nvmlGpuInstanceDestroy(gi["handle"])
        except nvml.NVMLError as exc:
            raise MigApplyError("GPU %s: destroying GPU instance %s (%s at %s) failed: %s; stop the processes "
                                "using it" % (index, gi_id, gi["profile"], gi["start"], error_text(exc)), actions)
        actions.append("GPU %s: destroyed %s at %d (GPU instance %d)" % (index, gi["profile"], gi["start"], gi_id))

    def _create(self, handle, item, family, actions, index):
        nvml = self.nvml
        profile = family.profiles[item["profile"]]
        placement = nvml.c_nvmlGpuInstancePlacement_t()
        placement.start, placement.size = item["start"], item["size"]
        try:
            gi = nvml.nvmlDeviceCreateGpuInstanceWithPlacement(handle, profile.nvml_id, ctypes.byref(placement))
            ci_info = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                gi, profile.ci_profile_id, nvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
            nvml.nvmlGpuInstanceCreateComputeInstance(gi, int(ci_info.id))
        except nvml.NVMLError as exc:
            raise MigApplyError("GPU %s: creating %s at %d failed: %s"
                                % (index, item["profile"], item["start"], error_text(exc)), actions)
        actions.append("GPU %s: created %s at %d" % (index, item["profile"], item["start"]))

    def apply_gpu(self, index, gpu_plan, family, allow_reset, clients_stopped, reset):
        """Apply one GPU's plan (a GpuMigPlan or its dict form). Returns (actions, reboot reason or None).

        ``reset(index, plan dict)`` resets the GPU, or raises ResetBlocked.
        """
        nvml = self.nvml
        gpu_plan = GpuMigPlan.of(gpu_plan)
        actions = []
        if not gpu_plan.changed:
            return actions, None
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        pids = self.processes(handle)
        if pids and not clients_stopped:
            raise MigApplyError(
                "GPU %s runs %d compute process(es) (pid %s); MIG changes would break them. Drain the node and "
                "stop the GPU clients, then run with clients_stopped=true"
                % (index, len(pids), ", ".join(str(p) for p in pids)))
        wanted = gpu_plan.wanted_mode
        if gpu_plan.destroy:
            instances = self.gpu_instances(handle)
            for item in gpu_plan.destroy:
                self._destroy(handle, item["gpu_instance_id"], instances, actions, index)
        if gpu_plan.set_mode:
            mode = nvml.NVML_DEVICE_MIG_ENABLE if wanted == ENABLED else nvml.NVML_DEVICE_MIG_DISABLE
            try:
                nvml.nvmlDeviceSetMigMode(handle, mode)
            except nvml.NVMLError as exc:
                raise MigApplyError("GPU %s: setting MIG mode %s failed: %s" % (index, wanted, error_text(exc)), actions)
            actions.append("GPU %s: MIG mode set to %s" % (index, wanted))
        current, _pending = self.mig_mode(handle)
        if current != wanted:
            why = "MIG mode %s is pending on GPU %s until a GPU reset" % (wanted, index)
            if not allow_reset:
                return actions, why + " (allow_reset is false); reboot the node"
            try:
                reset(index, gpu_plan.to_dict())
            except ResetBlocked as exc:
                return actions, "%s, and the reset was refused: %s; reboot the node" % (why, exc)
            actions.append("GPU %s: reset to activate MIG mode %s" % (index, wanted))
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            current, _pending = self.mig_mode(handle)
            if current != wanted:
                return actions, "%s; it is still %s after the reset; reboot the node" % (why, current)
        if wanted == ENABLED:
            create = gpu_plan.create
            if family is None or family.source != "nvml":
                # planned from the table while MIG was off: NVML lists profiles only now
                family, create = self._live_creates(handle, gpu_plan, family, actions, index)
            for item in create:
                self._create(handle, item, family, actions, index)
        return actions, None

    def _live_creates(self, handle, gpu_plan, family, actions, index):
        """Re-check a table-based plan against the GPU's own rules and place it with them."""
        live = self.rules(handle, family.name if family is not None else "GPU %s" % index)
        if live is None:
            raise MigApplyError("GPU %s: NVML lists no MIG profiles although MIG mode is enabled" % index, actions)
        layout = dict(gpu_plan.after.layout)
        problems = mig_profiles.check_layout(live, layout)
        if problems:
            raise MigApplyError("GPU %s: the driver's MIG rules reject the layout: %s" % (index, "; ".join(problems)),
                                actions)
        kept = [(i["profile"], i["start"]) for i in gpu_plan.keep]
        for name, _start in kept:
            layout[name] -= 1
        placed = mig_profiles.find_placements(live, dict((k, v) for k, v in layout.items() if v > 0), kept)
        if placed is None:
            raise MigApplyError("GPU %s: the driver's placements do not fit the layout around the kept instances"
                                % index, actions)
        return live, [{"profile": n, "start": s, "size": live.profiles[n].memory_slices} for n, s in placed]


def verify(facts, entries, config_name, rules_for, mig):
    """Problems left after applying: the layout differs, or MIG devices are missing. Returns (problems, NodeMigPlan)."""
    problems = []
    result = mig_plan.plan_node(facts, entries, config_name, rules_for=rules_for, offline=False)
    problems.extend(result.errors)
    for gp in result.gpus:
        if gp.changed:
            problems.append("GPU %s: expected %s, found %s" % (gp.index, gp.describe("after"), gp.describe("before")))
    for gpu in facts["gpus"]:
        missing = [d for d in gpu["mig"]["devices"] if not d.get("uuid")]
        if missing:
            problems.append("GPU %s: %d GPU instance(s) have no MIG device (no compute instance or not visible "
                            "to CUDA)" % (gpu["index"], len(missing)))
    return problems, result
