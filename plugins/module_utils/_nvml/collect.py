# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the NVML facts collector.
"""NVIDIA GPU facts through NVML: the collector behind gpuops.platform.nvml_facts.

Pure Python over the ``pynvml`` module object (nvidia-ml-py), passed in by the
caller, so tests hand it a fake. One nvmlInit per collection; every query runs
once per GPU (once per link or MIG device where NVML asks per link or device).
A query NVML answers with NotSupported becomes null, never an exception.

The output is ``ansible_facts.nvidia``; a saved copy of it is a replay file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import errno
import glob
import json
import os
import re
import uuid

from ansible_collections.gpuops.platform.plugins.module_utils._common.input_guard import unique_keys_hook
from ansible_collections.gpuops.platform.plugins.module_utils._driver import host as driver_host

KERNEL_MODULE_VERSION_PATHS = ("/sys/module/nvidia/version", "/proc/driver/nvidia/version")
# Where distributions put libnvidia-ml.so.<version>: the user-space driver version
# when NVML itself cannot start (the driver/library mismatch).
USERSPACE_LIBRARY_GLOBS = (
    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.*.*",
    "/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.*.*",
    "/usr/lib64/libnvidia-ml.so.*.*",
    "/usr/lib/libnvidia-ml.so.*.*",
)

HEALTH_ORDER = {"ok": 0, "warning": 1, "critical": 2}

_VERSION_RE = re.compile(r"([0-9]+\.[0-9]+(?:\.[0-9]+)?)")
_PROC_VERSION_RE = re.compile(r"Kernel Module(?: for \S+)?\s+([0-9]+\.[0-9]+(?:\.[0-9]+)?)")

_COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
_FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
_NVLINK_REMOTE = {0: "gpu", 1: "ibmnpu", 2: "switch"}
# nvmlClocksEventReason* bits (nvmlClocksThrottleReason* before NVML 12.535; board_limit and
# reliability only there), named as nvidia-smi -q names them under "Clocks Event Reasons".
CLOCKS_EVENT_REASONS = (
    (0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"), (0x8, "hw_slowdown"),
    (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"), (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"), (0x100, "display_clocks_setting"), (0x200, "board_limit"),
    (0x400, "reliability"),
)
_KNOWN_REASON_BITS = sum(bit for bit, _name in CLOCKS_EVENT_REASONS)
# Active, these slow the GPU down for a hardware cause (DCGM's health watches them): a health warning.
# SW power cap and SW thermal slowdown are the driver keeping a GPU under load within its limits.
THROTTLE_WARNINGS = {
    "hw_slowdown": "HW slowdown is active (clocks cut by the hardware: over temperature, a power brake "
                   "or a power supply problem): check cooling and power",
    "hw_thermal_slowdown": "HW thermal slowdown is active (the GPU or its memory is too hot): check cooling",
    "hw_power_brake_slowdown": "HW power brake slowdown is active (an external power brake signal, from the "
                               "power supply or the chassis): check power",
}


class NvmlCollectError(Exception):
    """NVML broke during collection in a way that leaves the facts meaningless."""


class ReplayError(Exception):
    """A replay file that is not a recorded nvml_facts result."""


class _GpuLost(Exception):
    pass


END = object()  # query() result when the call raised one of the caller's "end" errors


# ---------------------------------------------------------------------------
# Versions outside NVML
# ---------------------------------------------------------------------------

def read_kernel_module_version(paths=None):
    """The version of the loaded nvidia kernel module, or None when none is loaded.

    /sys/module/nvidia/version holds just the version; /proc/driver/nvidia/version
    holds "NVRM version: NVIDIA UNIX [Open ]Kernel Module [for x86_64]  570.172.08 ...".
    """
    for path in KERNEL_MODULE_VERSION_PATHS if paths is None else paths:
        try:
            with open(path) as handle:
                text = handle.read()
        except (IOError, OSError):
            continue
        match = _PROC_VERSION_RE.search(text) or _VERSION_RE.match(text.strip())
        if match:
            return match.group(1)
    return None


def read_userspace_library_version(globs=None):
    """The version in the installed libnvidia-ml.so.<version> file name, or None."""
    versions = set()
    for pattern in USERSPACE_LIBRARY_GLOBS if globs is None else globs:
        for path in glob.glob(pattern):
            match = re.search(r"libnvidia-ml\.so\.([0-9]+\.[0-9]+(?:\.[0-9]+)?)\Z", path)
            if match:
                versions.add(match.group(1))
    if len(versions) == 1:
        return versions.pop()
    return None


# ---------------------------------------------------------------------------
# Facts skeletons
# ---------------------------------------------------------------------------

def empty_facts(reason, source="nvml"):
    """Facts for a node where NVML gives no GPU: present false and why."""
    return {
        "present": False,
        "reason": reason,
        "source": source,
        "driver_version": None,
        "kernel_module_version": None,
        "cuda_driver_version": None,
        "nvml_version": None,
        "gpu_count": 0,
        "pci_gpu_count": None,
        "nvml_binding": None,
        "nvswitch_count": None,
        "reboot_required": False,
        "reboot_reasons": [],
        "health": {"status": "ok", "reasons": []},
        "gpus": [],
    }


def _blank_gpu(index):
    return {
        "index": index,
        "uuid": None,
        "name": None,
        "serial": None,
        "board_part_number": None,
        "architecture": None,
        "cuda_compute_capability": None,
        "pci": {"bus_id": None, "device_id": None},
        "memory": {"total_mib": None, "used_mib": None},
        "mig": {"supported": False, "current_mode": None, "pending_mode": None, "devices": []},
        "persistence_mode": None,
        "compute_mode": None,
        "power": {"limit_w": None, "draw_w": None},
        "temperature_c": None,
        "temperature_thresholds_c": {"slowdown": None, "shutdown": None},
        "ecc": {"mode": None, "pending_mode": None,
                "volatile_uncorrectable": None, "aggregate_uncorrectable": None},
        "retired_pages": None,
        "remapped_rows": None,
        "clocks": {"graphics_mhz": None, "sm_mhz": None, "memory_mhz": None,
                   "max_sm_mhz": None, "max_memory_mhz": None},
        "clocks_event_reasons": None,
        "utilization": None,
        "nvlink": [],
        "compute_processes": None,
        "fabric": None,
        "lost": False,
        "errors": [],
        "health": {"status": "ok", "reasons": []},
    }


# ---------------------------------------------------------------------------
# The collector
# ---------------------------------------------------------------------------

class _Collector(object):
    def __init__(self, nvml):
        self.nvml = nvml
        self.arch_names = dict(
            (getattr(nvml, name), name[len("NVML_DEVICE_ARCH_"):].lower())
            for name in dir(nvml)
            if name.startswith("NVML_DEVICE_ARCH_") and name != "NVML_DEVICE_ARCH_UNKNOWN")

    def query(self, errors, function, *args, **options):
        """Call one NVML function and map its errors.

        NotSupported is None; exceptions in ``options["end"]`` return END (the caller's
        "no more links / free slot" signal); GpuIsLost and Uninitialized stop the GPU or
        the run; any other NVML error is noted in ``errors`` and is None.
        """
        nvml = self.nvml
        try:
            return getattr(nvml, function)(*args)
        except options.get("end", ()):
            return END
        except (nvml.NVMLError_NotSupported, nvml.NVMLError_FunctionNotFound,
                getattr(nvml, "NVMLLibraryMismatchError", nvml.NVMLError_NotSupported)):
            # FunctionNotFound (NVMLLibraryMismatchError where pynvml wraps it): a driver
            # older than the query, so not supported.
            return None
        except nvml.NVMLError_GpuIsLost:
            raise _GpuLost()
        except nvml.NVMLError_Uninitialized:
            raise NvmlCollectError(
                "NVML reported Uninitialized during %s: the NVIDIA driver was unloaded or "
                "reset while facts were gathered; run the task again" % function)
        except nvml.NVMLError as err:
            label = function + ("(%s)" % ", ".join(str(a) for a in args[1:]) if options.get("args_in_label") else "")
            errors.append("%s: %s" % (label, err))
            return None

    def system(self, facts):
        errors = []
        facts["driver_version"] = nvml_text(self.query(errors, "nvmlSystemGetDriverVersion"))
        cuda = self.query(errors, "nvmlSystemGetCudaDriverVersion")
        if cuda:
            facts["cuda_driver_version"] = "%d.%d" % (cuda // 1000, (cuda % 1000) // 10)
        facts["nvml_version"] = nvml_text(self.query(errors, "nvmlSystemGetNVMLVersion"))
        return errors

    def gpu(self, index):
        gpu = _blank_gpu(index)
        try:
            # NoPermission (GPU hidden by cgroups), InsufficientPower...: nothing more to ask.
            handle = self.query(gpu["errors"], "nvmlDeviceGetHandleByIndex", index)
            if handle is not None:
                self._fill(gpu, handle)
        except _GpuLost:
            gpu["lost"] = True
        return gpu

    def _fill(self, gpu, h):
        q = self.query
        err = gpu["errors"]
        gpu["uuid"] = nvml_text(q(err, "nvmlDeviceGetUUID", h))
        gpu["name"] = nvml_text(q(err, "nvmlDeviceGetName", h))
        gpu["serial"] = nvml_text(q(err, "nvmlDeviceGetSerial", h))
        gpu["board_part_number"] = nvml_text(q(err, "nvmlDeviceGetBoardPartNumber", h))
        arch = q(err, "nvmlDeviceGetArchitecture", h)
        gpu["architecture"] = self.arch_names.get(arch) if arch is not None else None
        # "9.0": the device plugin's MPS daemon allows 48 clients from 7.5 on, 16 below.
        capability = q(err, "nvmlDeviceGetCudaComputeCapability", h)
        gpu["cuda_compute_capability"] = "%d.%d" % tuple(capability) if capability is not None else None

        pci = q(err, "nvmlDeviceGetPciInfo", h)
        if pci is not None:
            gpu["pci"] = {"bus_id": nvml_text(pci.busId), "device_id": "0x%08X" % pci.pciDeviceId}

        mem = q(err, "nvmlDeviceGetMemoryInfo", h)
        if mem is not None:
            gpu["memory"] = {"total_mib": mem.total // 1048576, "used_mib": mem.used // 1048576}

        gpu["persistence_mode"] = _feature(q(err, "nvmlDeviceGetPersistenceMode", h))
        mode = q(err, "nvmlDeviceGetComputeMode", h)
        gpu["compute_mode"] = _COMPUTE_MODES.get(mode) if mode is not None else None
        gpu["power"] = {"limit_w": _watts(q(err, "nvmlDeviceGetEnforcedPowerLimit", h)),
                        "draw_w": _watts(q(err, "nvmlDeviceGetPowerUsage", h))}
        gpu["temperature_c"] = self._temperature(err, h)
        gpu["temperature_thresholds_c"] = {
            "slowdown": q(err, "nvmlDeviceGetTemperatureThreshold", h,
                          self.nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
            "shutdown": q(err, "nvmlDeviceGetTemperatureThreshold", h,
                          self.nvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN)}
        gpu["clocks"] = self._clocks(err, h)
        gpu["clocks_event_reasons"] = self._clocks_event_reasons(err, h)
        rates = q(err, "nvmlDeviceGetUtilizationRates", h)
        if rates is not None:
            gpu["utilization"] = {"gpu_percent": rates.gpu, "memory_percent": rates.memory}
        gpu["ecc"] = self._ecc(err, h)
        gpu["retired_pages"] = self._retired_pages(err, h)
        rows = q(err, "nvmlDeviceGetRemappedRows", h)
        if rows is not None:
            gpu["remapped_rows"] = {"correctable": rows[0], "uncorrectable": rows[1],
                                    "pending": bool(rows[2]), "failure": bool(rows[3])}
        gpu["nvlink"] = self._nvlink(err, h)
        procs = q(err, "nvmlDeviceGetComputeRunningProcesses", h)
        gpu["compute_processes"] = len(procs) if procs is not None else None
        gpu["fabric"] = self._fabric(err, h)
        gpu["mig"] = self._mig(err, h)

    def _temperature(self, err, h):
        nvml = self.nvml
        if hasattr(nvml, "nvmlDeviceGetTemperatureV"):
            temp = self.query(err, "nvmlDeviceGetTemperatureV", h, nvml.NVML_TEMPERATURE_GPU,
                              end=(nvml.NVMLError_FunctionNotFound,))
            if temp is not END:
                return temp
        # A driver older than the binding has no nvmlDeviceGetTemperatureV.
        return self.query(err, "nvmlDeviceGetTemperature", h, nvml.NVML_TEMPERATURE_GPU)

    def _clocks(self, err, h):
        nvml, q = self.nvml, self.query
        return {
            "graphics_mhz": q(err, "nvmlDeviceGetClockInfo", h, nvml.NVML_CLOCK_GRAPHICS),
            "sm_mhz": q(err, "nvmlDeviceGetClockInfo", h, nvml.NVML_CLOCK_SM),
            "memory_mhz": q(err, "nvmlDeviceGetClockInfo", h, nvml.NVML_CLOCK_MEM),
            "max_sm_mhz": q(err, "nvmlDeviceGetMaxClockInfo", h, nvml.NVML_CLOCK_SM),
            "max_memory_mhz": q(err, "nvmlDeviceGetMaxClockInfo", h, nvml.NVML_CLOCK_MEM),
        }

    def _clocks_event_reasons(self, err, h):
        """The active clocks event (throttle) reasons, by name; None where NVML does not report them."""
        nvml = self.nvml
        mask = END
        if hasattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons"):
            # FunctionNotFound: a driver older than the event name; it still has the throttle one.
            mask = self.query(err, "nvmlDeviceGetCurrentClocksEventReasons", h,
                              end=(nvml.NVMLError_FunctionNotFound,))
        if mask is END:
            mask = self.query(err, "nvmlDeviceGetCurrentClocksThrottleReasons", h)
        return clocks_event_names(mask)

    def _ecc(self, err, h):
        nvml, q = self.nvml, self.query
        ecc = {"mode": None, "pending_mode": None, "volatile_uncorrectable": None,
               "aggregate_uncorrectable": None}
        mode = q(err, "nvmlDeviceGetEccMode", h)
        if mode is None:
            return ecc
        ecc["mode"], ecc["pending_mode"] = _feature(mode[0]), _feature(mode[1])
        if mode[0] == nvml.NVML_FEATURE_ENABLED:
            ecc["volatile_uncorrectable"] = q(err, "nvmlDeviceGetTotalEccErrors", h,
                                              nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC)
            ecc["aggregate_uncorrectable"] = q(err, "nvmlDeviceGetTotalEccErrors", h,
                                               nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_AGGREGATE_ECC)
        return ecc

    def _retired_pages(self, err, h):
        # Page retirement is the pre-Ampere mechanism; row remapping replaced it.
        nvml, q = self.nvml, self.query
        sbe = q(err, "nvmlDeviceGetRetiredPages", h, nvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
        if sbe is None:
            return None
        dbe = q(err, "nvmlDeviceGetRetiredPages", h, nvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        pending = q(err, "nvmlDeviceGetRetiredPagesPendingStatus", h)
        return {"single_bit": len(sbe), "double_bit": len(dbe) if dbe is not None else None,
                "pending": bool(pending) if pending is not None else None}

    def _nvlink(self, err, h):
        nvml = self.nvml
        links = []
        for link in range(nvml.NVML_NVLINK_MAX_LINKS):
            # NotSupported: no NVLink; InvalidArgument: past this GPU's last link.
            state = self.query(err, "nvmlDeviceGetNvLinkState", h, link, args_in_label=True,
                               end=(nvml.NVMLError_NotSupported, nvml.NVMLError_InvalidArgument))
            if state is END or state is None:
                break
            entry = {"link": link, "active": state == nvml.NVML_FEATURE_ENABLED,
                     "remote_type": None, "remote_bus_id": None}
            if entry["active"]:
                remote = self.query(err, "nvmlDeviceGetNvLinkRemoteDeviceType", h, link, args_in_label=True)
                entry["remote_type"] = _NVLINK_REMOTE.get(remote, "unknown") if remote is not None else None
                pci = self.query(err, "nvmlDeviceGetNvLinkRemotePciInfo", h, link, args_in_label=True)
                entry["remote_bus_id"] = nvml_text(pci.busId) if pci is not None else None
            links.append(entry)
        return links

    def _fabric(self, err, h):
        nvml = self.nvml
        info = nvml.c_nvmlGpuFabricInfoV_t()
        if self.query(err, "nvmlDeviceGetGpuFabricInfoV", h, ctypes.byref(info)) is None:
            return None
        if info.state == nvml.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED:
            return None
        degraded = (info.healthMask >> nvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW) \
            & nvml.NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW
        return {
            "state": _FABRIC_STATES.get(info.state, str(info.state)),
            "status": "success" if info.status == nvml.NVML_SUCCESS else str(nvml.NVMLError(info.status)),
            "clique_id": info.cliqueId,
            "cluster_uuid": str(uuid.UUID(bytes=bytes(bytearray(info.clusterUuid)))),
            "degraded_bandwidth": {1: True, 2: False}.get(degraded),
        }

    def _mig(self, err, h):
        nvml, q = self.nvml, self.query
        mig = {"supported": False, "current_mode": None, "pending_mode": None, "devices": []}
        mode = q(err, "nvmlDeviceGetMigMode", h)
        if mode is None:
            return mig
        mig["supported"] = True
        mig["current_mode"] = "enabled" if mode[0] == nvml.NVML_DEVICE_MIG_ENABLE else "disabled"
        mig["pending_mode"] = "enabled" if mode[1] == nvml.NVML_DEVICE_MIG_ENABLE else "disabled"
        if mode[0] != nvml.NVML_DEVICE_MIG_ENABLE:
            return mig
        profiles = _ProfileNames(self, err, h)
        instances = {}
        for index in range(q(err, "nvmlDeviceGetMaxMigDeviceCount", h) or 0):
            # NotFound: a free slot, NVML numbers MIG devices up to the maximum.
            mig_handle = q(err, "nvmlDeviceGetMigDeviceHandleByIndex", h, index, args_in_label=True,
                           end=(nvml.NVMLError_NotFound,))
            if mig_handle is END or mig_handle is None:
                continue
            gi_id = q(err, "nvmlDeviceGetGpuInstanceId", mig_handle)
            device = {"index": index, "gpu_instance_id": gi_id,
                      "compute_instance_id": q(err, "nvmlDeviceGetComputeInstanceId", mig_handle),
                      "profile": None, "placement": {"start": None, "size": None},
                      "uuid": nvml_text(q(err, "nvmlDeviceGetUUID", mig_handle)), "memory_total_mib": None}
            if gi_id is not None and gi_id not in instances:
                gi = q(err, "nvmlDeviceGetGpuInstanceById", h, gi_id)
                instances[gi_id] = q(err, "nvmlGpuInstanceGetInfo", gi) if gi is not None else None
            info = instances.get(gi_id)
            attrs = q(err, "nvmlDeviceGetAttributes", mig_handle)
            if attrs is not None:
                device["memory_total_mib"] = attrs.memorySizeMB
            if info is not None:
                device["placement"] = {"start": info.placement.start, "size": info.placement.size}
            device["profile"] = self._mig_profile(err, mig_handle, info, attrs, profiles)
            mig["devices"].append(device)
        return mig

    def _mig_profile(self, err, mig_handle, info, attrs, profiles):
        """The profile of a MIG device: 1g.18gb, or 1c.2g.35gb for a smaller compute instance.

        NVML names a MIG device "<GPU name> MIG <profile>", readable without privileges;
        the GPU instance profile table is the fallback for a name without it.
        """
        name = nvml_text(self.query(err, "nvmlDeviceGetName", mig_handle)) or ""
        if " MIG " in name:
            return name.split(" MIG ", 1)[1].strip()
        if info is None:
            return None
        profile = profiles.name(info.profileId)
        if profile and attrs is not None and attrs.computeInstanceSliceCount != attrs.gpuInstanceSliceCount:
            profile = "%dc.%s" % (attrs.computeInstanceSliceCount, profile)
        return profile


class _ProfileNames(object):
    """GPU instance profile id -> name ("1g.18gb"), asked of NVML only as far as needed."""

    def __init__(self, collector, errors, handle):
        self.collector, self.errors, self.handle = collector, errors, handle
        self.names = {}
        self.next_index = 0

    def name(self, profile_id):
        nvml = self.collector.nvml
        while profile_id not in self.names and self.next_index < nvml.NVML_GPU_INSTANCE_PROFILE_COUNT:
            index, self.next_index = self.next_index, self.next_index + 1
            # NotSupported / InvalidArgument: a profile this GPU does not offer.
            info = self.collector.query(self.errors, "nvmlDeviceGetGpuInstanceProfileInfo", self.handle, index,
                                        args_in_label=True,
                                        end=(nvml.NVMLError_NotSupported, nvml.NVMLError_InvalidArgument))
            if info is END or info is None:
                continue
            self.names.setdefault(info.id, nvml_text(info.name).replace("MIG ", "", 1))
        return self.names.get(profile_id)


def clocks_event_names(mask):
    """``["sw_power_cap", ...]`` for an NVML clocks event (throttle) reasons mask; None stays None."""
    if mask is None:
        return None
    names = [name for bit, name in CLOCKS_EVENT_REASONS if mask & bit]
    if mask & ~_KNOWN_REASON_BITS:
        names.append("unknown_0x%x" % (mask & ~_KNOWN_REASON_BITS))
    return names


def pci_gpus_unread(facts, pci_root="/"):
    """Where NVML gives no GPU, count the NVIDIA GPUs on the PCI bus (``pci_gpu_count``).

    A host whose PCI bus shows NVIDIA GPUs that NVML cannot read is not a host
    without GPUs: its reason says so and why (binding, library, driver), and its
    health is critical.
    """
    if facts["present"]:
        return facts
    count = len(driver_host.pci_scan(pci_root)["gpus"])
    facts["pci_gpu_count"] = count
    if count:
        cause = facts["reason"]
        facts["reason"] = "NVML cannot read the %d NVIDIA GPU(s) on the PCI bus: %s" % (count, cause)
        kept = [r for r in facts["health"]["reasons"] if r != cause]
        facts["health"] = {"status": "critical", "reasons": kept + [facts["reason"]]}
    return facts


def unreadable(reason, kernel_module_paths=None, pci_root="/"):
    """The facts of a node without a usable NVML binding: ``reason`` (binding.resolve's), the loaded module."""
    facts = empty_facts(reason)
    facts["kernel_module_version"] = read_kernel_module_version(kernel_module_paths)
    return finish(pci_gpus_unread(facts, pci_root))


def collect(nvml, kernel_module_paths=None, library_globs=None, temperature_warning_c=None, binding=None,
            pci_root="/"):
    """Gather ``ansible_facts.nvidia`` through ``nvml`` (the pynvml module or a fake).

    Raises NvmlCollectError when NVML breaks mid-way; every expected absence (no
    library, no driver, no GPU, a field not supported) is reported in the facts.
    ``binding``: where ``nvml`` comes from (``nvml_binding`` in the facts);
    ``pci_root``: the root under which sys/bus/pci/devices is read when NVML gives no GPU.
    """
    kernel_version = read_kernel_module_version(kernel_module_paths)
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        facts = _init_failure(nvml, err, kernel_version, library_globs)
        facts["kernel_module_version"] = kernel_version
        facts["nvml_binding"] = binding
        return finish(pci_gpus_unread(facts, pci_root), temperature_warning_c)
    try:
        facts = empty_facts(None)
        facts["kernel_module_version"] = kernel_version
        facts["nvml_binding"] = binding
        collector = _Collector(nvml)
        collector.system(facts)
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError_Uninitialized:
            raise NvmlCollectError("NVML reported Uninitialized right after nvmlInit")
        except nvml.NVMLError as err:
            facts["reason"] = "NVML could not count the GPUs: %s" % err
            return finish(pci_gpus_unread(facts, pci_root), temperature_warning_c)
        facts["gpus"] = [collector.gpu(index) for index in range(count)]
        facts["gpu_count"] = count
        facts["present"] = count > 0
        if not count:
            facts["reason"] = "NVML found no NVIDIA GPU on this host"
        _compare_versions(facts)
        return finish(pci_gpus_unread(facts, pci_root), temperature_warning_c)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass    # shutting down cannot make the facts wrong


def _init_failure(nvml, err, kernel_version, library_globs):
    value = getattr(err, "value", None)
    if value == nvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        user = read_userspace_library_version(library_globs)
        facts = empty_facts(
            "NVML cannot start: driver/library version mismatch (kernel module %s, user-space "
            "library %s)" % (kernel_version or "unknown", user or "unknown"))
        facts["driver_version"] = user
        facts["reboot_required"] = True
        facts["reboot_reasons"].append(
            "the loaded NVIDIA kernel module (%s) does not match the installed user-space driver "
            "(%s): an upgrade is waiting for a reboot" % (kernel_version or "unknown", user or "unknown"))
        facts["health"] = {"status": "critical", "reasons": [facts["reason"]]}
        return facts
    if value == nvml.NVML_ERROR_LIBRARY_NOT_FOUND:
        return empty_facts("libnvidia-ml.so.1 not found: the NVIDIA driver is not installed")
    if value == nvml.NVML_ERROR_DRIVER_NOT_LOADED:
        facts = empty_facts("the NVIDIA kernel module is not loaded (no GPU, or the driver was "
                            "installed without loading it: modprobe nvidia or reboot)")
        # Which user-space driver is installed still helps plan the next step.
        facts["driver_version"] = read_userspace_library_version(library_globs)
        return facts
    if value == nvml.NVML_ERROR_NO_PERMISSION:
        facts = empty_facts("no permission to use the NVIDIA devices (/dev/nvidia*): "
                            "run the task with become: true")
        facts["driver_version"] = read_userspace_library_version(library_globs)
        return facts
    if value == nvml.NVML_ERROR_GPU_NOT_FOUND:
        return empty_facts("NVML found no NVIDIA GPU on this host")
    return empty_facts("NVML initialisation failed: %s (NVML error %s)" % (err, value))


def version_key(version):
    """(570, 172, 8) for "570.172.08": every part compared, numerically; None if not a version."""
    match = re.match(r"^\s*([0-9]+(?:\.[0-9]+)*)\s*\Z", version or "")
    if not match:
        return None
    return tuple(int(part) for part in match.group(1).split("."))


def versions_differ(kernel, user):
    """Whether the loaded kernel module and the user-space driver are different builds.

    The whole version counts (branch, minor and patch: 570.148.08 and 570.172.08
    differ, as do 570.172.08 and 570.172.09); text that is not a version is
    compared as written.
    """
    kernel_key, user_key = version_key(kernel), version_key(user)
    if kernel_key is None or user_key is None:
        return (kernel or "").strip() != (user or "").strip()
    return kernel_key != user_key


def _compare_versions(facts):
    kernel, user = facts["kernel_module_version"], facts["driver_version"]
    if kernel and user and versions_differ(kernel, user):
        facts["reboot_required"] = True
        facts["reboot_reasons"].append(
            "the loaded NVIDIA kernel module is %s but the user-space driver is %s: reboot (or "
            "reload the nvidia modules) to finish the driver change" % (kernel, user))


# ---------------------------------------------------------------------------
# Health
# ---------------------------------------------------------------------------

def gpu_health(gpu, temperature_warning_c=None):
    """(status, reasons) of one GPU's facts."""
    reasons = []
    worst = ["ok"]

    def flag(status, reason):
        reasons.append(reason)
        if HEALTH_ORDER[status] > HEALTH_ORDER[worst[0]]:
            worst[0] = status

    if gpu.get("lost"):
        flag("critical", "GPU is lost (NVML: GPU is lost): it stopped responding or fell off "
                         "the bus; drain the node, then reset the GPU or reboot")
    ecc = gpu.get("ecc") or {}
    if ecc.get("volatile_uncorrectable"):
        flag("critical", "%d uncorrectable ECC errors since the driver loaded"
             % ecc["volatile_uncorrectable"])
    elif ecc.get("aggregate_uncorrectable"):
        flag("warning", "%d uncorrectable ECC errors over the GPU's lifetime"
             % ecc["aggregate_uncorrectable"])
    if ecc.get("mode") and ecc.get("pending_mode") and ecc["mode"] != ecc["pending_mode"]:
        flag("warning", "ECC mode %s is pending (current %s): reboot to apply"
             % (ecc["pending_mode"], ecc["mode"]))
    rows = gpu.get("remapped_rows") or {}
    if rows.get("failure"):
        flag("critical", "row remapping failed: the GPU has no spare rows left and needs replacing")
    if rows.get("pending"):
        flag("warning", "a row remap is pending: reset the GPU to apply it")
    pages = gpu.get("retired_pages") or {}
    if pages.get("pending"):
        flag("warning", "page retirement is pending: reset the GPU or reboot to apply it")
    temp = gpu.get("temperature_c")
    thresholds = gpu.get("temperature_thresholds_c") or {}
    limit = temperature_warning_c if temperature_warning_c is not None else thresholds.get("slowdown")
    if temp is not None:
        if thresholds.get("shutdown") and temp >= thresholds["shutdown"]:
            flag("critical", "over temperature: %d C reaches the %d C shutdown threshold"
                 % (temp, thresholds["shutdown"]))
        elif limit and temp >= limit:
            flag("warning", "over temperature: %d C at or above the %d C limit" % (temp, limit))
    for name in gpu.get("clocks_event_reasons") or []:
        if name in THROTTLE_WARNINGS:
            flag("warning", THROTTLE_WARNINGS[name])
    mig = gpu.get("mig") or {}
    if mig.get("current_mode") and mig.get("pending_mode") and mig["current_mode"] != mig["pending_mode"]:
        flag("warning", "MIG mode %s is pending (current %s): reset the GPU to apply"
             % (mig["pending_mode"], mig["current_mode"]))
    fabric = gpu.get("fabric")
    if fabric:
        if fabric.get("state") in ("not_started", "in_progress"):
            flag("warning", "GPU fabric registration is %s: check nvidia-fabricmanager"
                 % fabric["state"].replace("_", " "))
        elif fabric.get("status") not in (None, "success"):
            flag("critical", "GPU fabric registration failed: %s" % fabric["status"])
        if fabric.get("degraded_bandwidth"):
            flag("warning", "GPU fabric bandwidth is degraded")
    return worst[0], reasons


def finish(facts, temperature_warning_c=None):
    """Fill per-GPU and node health, and the NVSwitch count, from the gathered facts."""
    node_status = facts["health"]["status"]
    node_reasons = list(facts["health"]["reasons"])
    switches = set()
    saw_links = False
    for gpu in facts["gpus"]:
        status, reasons = gpu_health(gpu, temperature_warning_c)
        gpu["health"] = {"status": status, "reasons": reasons}
        if HEALTH_ORDER[status] > HEALTH_ORDER[node_status]:
            node_status = status
        node_reasons.extend("GPU %d: %s" % (gpu["index"], reason) for reason in reasons)
        for link in gpu.get("nvlink") or []:
            saw_links = True
            if link.get("remote_type") == "switch" and link.get("remote_bus_id"):
                switches.add(link["remote_bus_id"])
    if facts["present"] and facts["reboot_required"]:
        if HEALTH_ORDER["warning"] > HEALTH_ORDER[node_status]:
            node_status = "warning"
        node_reasons.extend(facts["reboot_reasons"])
    facts["nvswitch_count"] = len(switches) if saw_links else None
    facts["health"] = {"status": node_status, "reasons": node_reasons}
    return facts


# ---------------------------------------------------------------------------
# Replay
# ---------------------------------------------------------------------------

REQUIRED_KEYS = ("present", "gpu_count", "gpus")
REQUIRED_GPU_KEYS = ("index", "pci", "mig")
# A replay file is a few hundred KiB for a large node; anything far bigger is not one.
MAX_REPLAY_BYTES = 16 * 1024 * 1024
MIG_MODES = ("enabled", "disabled")
_DEVICE_ID = re.compile(r"^0x[0-9A-Fa-f]{8}\Z")
_COMPUTE_CAPABILITY = re.compile(r"^[0-9]{1,3}\.[0-9]{1,3}\Z")


def _type_name(value):
    return "null" if value is None else type(value).__name__


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


# kind: (test, what the message says it must be). Built once: a fleet of facts files is checked field by field.
_KINDS = {
    "int": (_is_int, "an integer"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "dict": (lambda v: isinstance(v, dict), "a mapping"),
    "list": (lambda v: isinstance(v, list), "a list"),
}


def _check(problems, where, value, kind, nullable=True):
    """Note in ``problems`` when ``value`` is not of ``kind`` (int, str, bool, dict, list)."""
    if value is None and nullable:
        return False
    test, expected = _KINDS[kind]
    if test(value):
        return True
    problems.append("%s must be %s%s, got %s" % (where, expected, " or null" if nullable else "", _type_name(value)))
    return False


def _check_key(problems, where, mapping, key, kind):
    """``mapping[key]`` is of ``kind`` or null; ``where.key`` is only spelt out for a problem."""
    value = mapping.get(key)
    if value is None or _KINDS[kind][0](value):
        return value is not None
    return _check(problems, "%s.%s" % (where, key), value, kind)


def _check_mig(problems, where, mig):
    if not _check(problems, where, mig, "dict", nullable=False):
        return
    _check(problems, where + ".supported", mig.get("supported"), "bool", nullable=False)
    for key in ("current_mode", "pending_mode"):
        value = mig.get(key)
        if value is not None and value not in MIG_MODES:
            problems.append("%s.%s must be enabled, disabled or null, got %r" % (where, key, value))
    devices = mig.get("devices", [])
    if not _check(problems, where + ".devices", devices, "list"):
        return
    for n, dev in enumerate(devices or []):
        at = "%s.devices[%d]" % (where, n)
        if not _check(problems, at, dev, "dict", nullable=False):
            continue
        for key in ("index", "gpu_instance_id", "compute_instance_id", "memory_total_mib"):
            _check_key(problems, at, dev, key, "int")
        for key in ("profile", "uuid"):
            _check_key(problems, at, dev, key, "str")
        placement = dev.get("placement")
        if _check(problems, at + ".placement", placement, "dict") and placement:
            for key in ("start", "size"):
                _check_key(problems, at + ".placement", placement, key, "int")


def _fields(kinds):
    """``{field: kind}`` as ``((field, kind), ...)`` in the order problems are reported."""
    return tuple(sorted(kinds.items()))


# The health and fabric fields of a GPU that health and the planners read: (key, fields).
_HEALTH_FIELDS = (
    ("ecc", _fields({"mode": "str", "pending_mode": "str", "volatile_uncorrectable": "int", "aggregate_uncorrectable": "int"})),
    ("remapped_rows", _fields({"correctable": "int", "uncorrectable": "int", "pending": "bool", "failure": "bool"})),
    ("retired_pages", _fields({"single_bit": "int", "double_bit": "int", "pending": "bool"})),
    ("temperature_thresholds_c", _fields({"shutdown": "int", "slowdown": "int"})),
    ("fabric", _fields({"state": "str", "status": "str", "clique_id": "int", "cluster_uuid": "str",
                        "degraded_bandwidth": "bool"})),
    ("utilization", _fields({"gpu_percent": "int", "memory_percent": "int"})),
)
_NVLINK_FIELDS = _fields({"link": "int", "active": "bool", "remote_type": "str", "remote_bus_id": "str"})


def _fields_ok(value, fields):
    """True when every one of ``fields`` of the mapping ``value`` is of its kind or null."""
    for key, kind in fields:
        field = value.get(key)
        if field is not None and not _KINDS[kind][0](field):
            return False
    return True


def _check_fields(problems, where, value, fields, nullable=True):
    """``value`` is a mapping (or null) whose ``fields`` are of their kind or null."""
    if _check(problems, where, value, "dict", nullable=nullable) and value and not _fields_ok(value, fields):
        for key, kind in fields:
            _check(problems, "%s.%s" % (where, key), value.get(key), kind)


def _check_gpu(problems, where, gpu):
    if not _check(problems, where, gpu, "dict", nullable=False):
        return None
    missing = [key for key in REQUIRED_GPU_KEYS if key not in gpu]
    if missing:
        problems.append("%s lacks %s (has: %s)" % (where, ", ".join(missing),
                                                   ", ".join(sorted(str(k) for k in gpu)) or "nothing"))
    index = gpu.get("index")
    if "index" in gpu and _check(problems, where + ".index", index, "int", nullable=False) and index < 0:
        problems.append("%s.index must be >= 0, got %d" % (where, index))
    for key in ("uuid", "name", "architecture"):
        _check_key(problems, where, gpu, key, "str")
    capability = gpu.get("cuda_compute_capability")
    if _check_key(problems, where, gpu, "cuda_compute_capability", "str") and not _COMPUTE_CAPABILITY.match(capability):
        problems.append("%s.cuda_compute_capability must be a compute capability such as 9.0, got %r"
                        % (where, capability))
    pci = gpu.get("pci")
    if "pci" in gpu and _check(problems, where + ".pci", pci, "dict", nullable=False):
        _check_key(problems, where + ".pci", pci, "bus_id", "str")
        device_id = pci.get("device_id")
        if _check_key(problems, where + ".pci", pci, "device_id", "str") and device_id \
                and not _DEVICE_ID.match(device_id):
            problems.append("%s.pci.device_id must be a PCI device id such as 0x233010DE, got %r"
                            % (where, device_id))
    memory = gpu.get("memory")
    if _check(problems, where + ".memory", memory, "dict") and memory:
        for key in ("total_mib", "used_mib"):
            _check_key(problems, where + ".memory", memory, key, "int")
    if "mig" in gpu:
        _check_mig(problems, where + ".mig", gpu.get("mig"))
    _check_key(problems, where, gpu, "temperature_c", "int")
    reasons = gpu.get("clocks_event_reasons")
    if _check(problems, where + ".clocks_event_reasons", reasons, "list") and reasons:
        for n, name in enumerate(reasons):
            _check(problems, "%s.clocks_event_reasons[%d]" % (where, n), name, "str", nullable=False)
    for key, fields in _HEALTH_FIELDS:
        value = gpu.get(key)
        if value is not None and not (isinstance(value, dict) and _fields_ok(value, fields)):
            _check_fields(problems, "%s.%s" % (where, key), value, fields)
    nvlink = gpu.get("nvlink")
    if _check(problems, where + ".nvlink", nvlink, "list") and nvlink:
        for n, link in enumerate(nvlink):
            # Most links are fine: their place in the message is only spelt out for one that is not.
            if not (isinstance(link, dict) and link and _fields_ok(link, _NVLINK_FIELDS)):
                _check_fields(problems, "%s.nvlink[%d]" % (where, n), link, _NVLINK_FIELDS, nullable=False)
    _check_key(problems, where, gpu, "compute_processes", "int")
    _check_key(problems, where, gpu, "lost", "bool")
    return index if _is_int(index) else None


def check_facts(facts, check_count=True):
    """Every problem with the shape of an ``ansible_facts.nvidia`` document, as strings.

    Checks what the MIG planner and the capacity filters read: the node keys and,
    per GPU, the types of index, uuid, name, pci, memory, mig (and its devices),
    compute_processes and lost. Keys it does not know are allowed (newer facts).
    ``check_count``: gpu_count must match the list (a replay; not a filtered copy).
    """
    if not isinstance(facts, dict):
        return ["the facts must be a mapping, got %s" % _type_name(facts)]
    problems = []
    missing = [key for key in REQUIRED_KEYS if key not in facts]
    if missing:
        problems.append("lacks %s (expected the nvml_facts output, with ansible_facts.nvidia, or the nvidia "
                        "facts)" % ", ".join(missing))
    _check(problems, "present", facts.get("present"), "bool", nullable="present" not in facts)
    _check(problems, "gpu_count", facts.get("gpu_count"), "int", nullable="gpu_count" not in facts)
    for key in ("driver_version", "kernel_module_version", "reason"):
        _check(problems, key, facts.get(key), "str")
    _check(problems, "reboot_required", facts.get("reboot_required"), "bool")
    _check(problems, "nvswitch_count", facts.get("nvswitch_count"), "int")
    _check(problems, "pci_gpu_count", facts.get("pci_gpu_count"), "int")
    reasons = facts.get("reboot_reasons")
    if _check(problems, "reboot_reasons", reasons, "list") and reasons:
        for n, reason in enumerate(reasons):
            _check(problems, "reboot_reasons[%d]" % n, reason, "str", nullable=False)
    gpus = facts.get("gpus")
    if "gpus" in facts and _check(problems, "gpus", gpus, "list", nullable=False):
        seen = set()
        for n, gpu in enumerate(gpus):
            index = _check_gpu(problems, "gpus[%d]" % n, gpu)
            if index is not None:
                if index in seen:
                    problems.append("gpus[%d].index %d is used by another GPU" % (n, index))
                seen.add(index)
        if check_count and _is_int(facts.get("gpu_count")) and facts["gpu_count"] != len(gpus):
            problems.append("gpu_count (%d) does not match the gpus list (%d)" % (facts["gpu_count"], len(gpus)))
    return problems


def unwrap_facts(data):
    """The nvidia facts from a module result, a saved ansible_facts mapping, or the facts themselves."""
    if isinstance(data, dict) and isinstance(data.get("ansible_facts"), dict):
        data = data["ansible_facts"]
    if isinstance(data, dict) and "present" not in data and isinstance(data.get("nvidia"), dict):
        data = data["nvidia"]
    return data


def _missing_why(path):
    """Why a path that does not exist reads so: a symlink loop, a symlink to a missing target, or nothing."""
    if not os.path.islink(path):
        return ""
    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ELOOP:
            return " (a symlink loop: it leads back to itself)"
    return " (a symlink to a missing target)"


def read_text_file(path, what, limit=MAX_REPLAY_BYTES):
    """The UTF-8 text of ``path``; raises ReplayError saying what is wrong (directory, size, encoding)."""
    if "\0" in path:
        raise ReplayError("%s %r is not a path: it holds a NUL byte" % (what, path))
    try:
        if os.path.isdir(path):
            raise ReplayError("%s %s is a directory, not a file" % (what, path))
        if not os.path.exists(path):
            raise ReplayError("cannot read %s %s: it does not exist%s" % (what, path, _missing_why(path)))
        if not os.path.isfile(path):
            raise ReplayError("%s %s is not a regular file" % (what, path))
        size = os.path.getsize(path)
        if size > limit:
            raise ReplayError("%s %s is %d bytes, more than the %d this module reads"
                              % (what, path, size, limit))
        with open(path, "rb") as handle:
            # As much as the file holds (not a buffer of the limit for every small file), and up to the
            # limit if it grew since it was measured.
            data = handle.read(min(size, limit) + 1)
            if len(data) > size:
                data += handle.read(limit + 1 - len(data))
    except (IOError, OSError) as err:
        raise ReplayError("cannot read %s %s: %s" % (what, path, getattr(err, "strerror", None) or err))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ReplayError("%s %s is not UTF-8 text (byte %d): save it as UTF-8 JSON" % (what, path, err.start))


def validate_replay(data, what):
    """The nvidia facts in ``data`` (a loaded document), checked; raises ReplayError listing every problem."""
    facts = unwrap_facts(data)
    problems = check_facts(facts)
    if problems:
        raise ReplayError("%s is not a recorded nvml_facts result (%d problem(s)): %s"
                          % (what, len(problems), "; ".join(problems)))
    facts = dict(facts)
    facts["source"] = "replay"
    return facts


def load_replay(path, option="replay_file"):
    """The ``nvidia`` facts recorded in ``path``: the whole module result, or the nvidia dict.

    ``option`` names the module option in messages. Raises ReplayError listing every problem.
    """
    text = read_text_file(path, option)
    try:
        data = json.loads(text, object_pairs_hook=unique_keys_hook("%s %s" % (option, path), ReplayError))
    except ReplayError:
        raise
    except ValueError as err:
        raise ReplayError("%s %s is not JSON: %s" % (option, path, err))
    except RecursionError:
        raise ReplayError("%s %s is nested too deeply to be a recorded facts file" % (option, path))
    return validate_replay(data, "%s %s" % (option, path))


# ---------------------------------------------------------------------------
# Small conversions
# ---------------------------------------------------------------------------

def nvml_text(value):
    """A string NVML returned: bytes from older pynvml releases, str from newer ones."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _feature(value):
    if value is None:
        return None
    return "enabled" if value else "disabled"


def _watts(milliwatts):
    if milliwatts is None:
        return None
    return round(milliwatts / 1000.0, 1)
