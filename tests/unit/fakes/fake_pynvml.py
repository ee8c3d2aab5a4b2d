"""A fake of the ``pynvml`` module (nvidia-ml-py 13.x) driven by a model of a node.

Why: NVML needs a GPU and a loaded driver. Tests and fixture generation describe the
hardware as data instead, and the fake answers every call the way NVML does, errors
included. It reuses the real module's constants, error classes (``NVMLError.__new__``
maps a code to ``NVMLError_NotSupported`` and friends) and ctypes result structures,
so code that works here works against the real binding.

Use::

    from fakes.fake_pynvml import FakeNvml, FakeNode, FakeGpu, FakeMig
    nvml = FakeNvml(FakeNode(gpus=[FakeGpu(index=0, ...)]))
    collect(nvml)                      # pass it wherever the pynvml module is expected
    nvml.calls["nvmlInit"]             # how often each function was called
    nvml.calls_by_gpu[("nvmlDeviceGetUUID", 0)]
    nvml.fail("nvmlDeviceGetPowerUsage", nvml.NVML_ERROR_NO_PERMISSION, gpu=3)

The model (plain classes with public attributes, safe to mutate from tests)
--------------------------------------------------------------------------
``FakeNode``     one host: ``driver_version`` ("570.172.08"), ``cuda_driver_version``
                 (int, 12080), ``nvml_version`` ("12.570.172.08"), ``gpus`` (list of
                 FakeGpu, NVML index order), ``init_error`` (an NVML_ERROR_* code that
                 every nvmlInit raises, e.g. DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND,
                 NO_PERMISSION, LIB_RM_VERSION_MISMATCH; None to succeed), and
                 ``kernel_module_version`` (not NVML: what /sys/module/nvidia/version
                 would say; None means no module loaded; fixture generation uses it).
``FakeGpu``      one physical GPU. Every query maps to one attribute; an attribute
                 set to ``None`` makes its query raise NVMLError_NotSupported, as
                 NVML does for a field the board does not have. ``lost=True`` makes
                 every call with this GPU's handles raise NVMLError_GpuIsLost.
                 ``unsupported`` is a set of function names that raise NotSupported
                 for this GPU whatever the attributes say. Units follow NVML: memory
                 in MiB in the model (returned as bytes), power in mW, clocks in MHz.
                 ``clocks_event_reasons``: the nvmlClocksEventReason* mask both
                 nvmlDeviceGetCurrentClocksEventReasons and the older ...ThrottleReasons
                 return; ``utilization``: (gpu %, memory %) of nvmlDeviceGetUtilizationRates,
                 NotSupported while MIG is enabled, as NVML documents.
``FakeNvLink``   one link: ``active``, ``remote_type`` (NVML_NVLINK_DEVICE_TYPE_*),
                 ``remote_bus_id`` (of the NVSwitch or peer GPU).
``FakeFabric``   GPU fabric probe result (nvmlDeviceGetGpuFabricInfoV): ``state``
                 (NVML_GPU_FABRIC_STATE_*), ``status`` (NVML return code),
                 ``clique_id``, ``cluster_uuid`` (str), ``health_mask``.
``FakeMig``      MIG state of a MIG-capable GPU (``FakeGpu.mig``; None = not capable):
                 ``current_mode``/``pending_mode`` (NVML_DEVICE_MIG_ENABLE/DISABLE),
                 ``profiles`` {NVML_GPU_INSTANCE_PROFILE_* index: FakeGpuInstanceProfile},
                 ``gpu_instances`` {GPU instance id: FakeGpuInstance},
                 ``max_mig_devices`` (nvmlDeviceGetMaxMigDeviceCount while enabled).
``FakeGpuInstanceProfile``  id (NVML profile id, e.g. 19), name ("MIG 1g.18gb"),
                 slice_count, instance_count, memory_mb, multiprocessor_count,
                 placements (valid start slices), copy_engine_count.
``FakeGpuInstance``  id, profile_id, start, size, compute_instances
                 {compute instance id: FakeComputeInstance}.
``FakeComputeInstance``  id, profile_id, start, size, slice_count,
                 multiprocessor_count, uuid ("MIG-..."). Every compute instance is a
                 MIG device; MIG device indexes run in (GPU instance id, compute
                 instance id) order.

Handles are opaque Python objects (``DeviceHandle``, ``MigDeviceHandle``,
``GpuInstanceHandle``, ``ComputeInstanceHandle``), not ctypes pointers; the
``device``/``gpuInstance`` pointer members of returned info structs stay NULL. The
list-filling calls (nvmlDeviceGetGpuInstances, nvmlGpuInstanceGetComputeInstances)
take a Python list for the handle array and a ``c_uint`` (or ``byref`` of one).

Extending (MIG mutation, another module): subclass ``FakeNvml`` and add methods
decorated with ``@nvml_api``; they get call counting, init checks, lost-GPU and
injected-failure handling for free. Change state through the model classes above
and the read side (this file) reports it. Helpers meant for such subclasses, kept
stable: ``_error(code)`` (the NVMLError subclass instance for a code),
``_deref(ref)`` (a c_uint given directly or through byref), and the handle checks
``FakeNvml._gpu``, ``_physical`` (refuses MIG handles), ``_mig`` (the FakeMig,
NotSupported when absent or disabled), ``_mig_handle`` and ``_gi_handle``.
``nvml_functions(cls)`` lists the NVML functions a fake class models.
"""

import ctypes
import functools
import types
from collections import Counter

import pynvml as _real

NVMLError = _real.NVMLError


def _error(code):
    """The exception NVML raises for ``code``: the real subclass, e.g. NVMLError_NotSupported."""
    return _real.NVMLError(code)


# ---------------------------------------------------------------------------
# The hardware model
# ---------------------------------------------------------------------------

class FakeNvLink(object):
    def __init__(self, active=True, remote_type=_real.NVML_NVLINK_DEVICE_TYPE_SWITCH, remote_bus_id=None):
        self.active = active
        self.remote_type = remote_type
        self.remote_bus_id = remote_bus_id


class FakeFabric(object):
    def __init__(self, state=_real.NVML_GPU_FABRIC_STATE_COMPLETED, status=_real.NVML_SUCCESS,
                 clique_id=0, cluster_uuid="00000000-0000-0000-0000-000000000000", health_mask=0):
        self.state = state
        self.status = status
        self.clique_id = clique_id
        self.cluster_uuid = cluster_uuid
        self.health_mask = health_mask


class FakeGpuInstanceProfile(object):
    def __init__(self, id, name, slice_count, instance_count, memory_mb, multiprocessor_count,
                 placements=None, copy_engine_count=1, decoder_count=1, encoder_count=0,
                 jpeg_count=1, ofa_count=0, is_p2p_supported=0):
        self.id = id
        self.name = name
        self.slice_count = slice_count
        self.instance_count = instance_count
        self.memory_mb = memory_mb
        self.multiprocessor_count = multiprocessor_count
        self.placements = list(placements) if placements is not None else []
        self.copy_engine_count = copy_engine_count
        self.decoder_count = decoder_count
        self.encoder_count = encoder_count
        self.jpeg_count = jpeg_count
        self.ofa_count = ofa_count
        self.is_p2p_supported = is_p2p_supported


class FakeComputeInstance(object):
    def __init__(self, id, profile_id, start, size, slice_count, multiprocessor_count, uuid):
        self.id = id
        self.profile_id = profile_id
        self.start = start
        self.size = size
        self.slice_count = slice_count
        self.multiprocessor_count = multiprocessor_count
        self.uuid = uuid


class FakeGpuInstance(object):
    def __init__(self, id, profile_id, start, size, compute_instances=None):
        self.id = id
        self.profile_id = profile_id
        self.start = start
        self.size = size
        self.compute_instances = dict(compute_instances or {})


class FakeMig(object):
    def __init__(self, current_mode=_real.NVML_DEVICE_MIG_DISABLE, pending_mode=None,
                 profiles=None, gpu_instances=None, max_mig_devices=7):
        self.current_mode = current_mode
        self.pending_mode = current_mode if pending_mode is None else pending_mode
        self.profiles = dict(profiles or {})
        self.gpu_instances = dict(gpu_instances or {})
        self.max_mig_devices = max_mig_devices

    @property
    def enabled(self):
        return self.current_mode == _real.NVML_DEVICE_MIG_ENABLE

    def profile_by_id(self, profile_id):
        for profile in self.profiles.values():
            if profile.id == profile_id:
                return profile
        return None

    def mig_devices(self):
        """(GPU instance, compute instance) pairs in MIG device index order."""
        return [(gi, gi.compute_instances[ci_id])
                for _gid, gi in sorted(self.gpu_instances.items())
                for ci_id in sorted(gi.compute_instances)]


# The first compute capability of each architecture (CUDA C Programming Guide, compute capabilities).
_ARCH_COMPUTE_CAPABILITY = {
    _real.NVML_DEVICE_ARCH_KEPLER: (3, 0), _real.NVML_DEVICE_ARCH_MAXWELL: (5, 0),
    _real.NVML_DEVICE_ARCH_PASCAL: (6, 0), _real.NVML_DEVICE_ARCH_VOLTA: (7, 0),
    _real.NVML_DEVICE_ARCH_TURING: (7, 5), _real.NVML_DEVICE_ARCH_AMPERE: (8, 0),
    _real.NVML_DEVICE_ARCH_ADA: (8, 9), _real.NVML_DEVICE_ARCH_HOPPER: (9, 0),
    _real.NVML_DEVICE_ARCH_BLACKWELL: (10, 0),
}


class FakeGpu(object):
    def __init__(self, index, uuid, name, pci_bus_id, pci_device_id, memory_total_mib,
                 serial=None, board_part_number=None, architecture=_real.NVML_DEVICE_ARCH_UNKNOWN,
                 pci_subsystem_id=0, memory_used_mib=0, minor_number=None,
                 persistence_mode=_real.NVML_FEATURE_ENABLED, compute_mode=_real.NVML_COMPUTEMODE_DEFAULT,
                 power_limit_mw=None, power_draw_mw=None, temperature_c=None, temperature_thresholds=None,
                 ecc_mode=None, ecc_errors=None, retired_pages=None, retired_pages_pending=None,
                 remapped_rows=None, clocks=None, max_clocks=None, nvlinks=None, processes=None,
                 fabric=None, mig=None, lost=False, unsupported=None, compute_capability=None,
                 clocks_event_reasons=None, utilization=None):
        self.index = index
        self.uuid = uuid
        self.name = name
        self.pci_bus_id = pci_bus_id            # "00000000:18:00.0"
        self.pci_device_id = pci_device_id      # 0x233010DE
        self.pci_subsystem_id = pci_subsystem_id
        self.memory_total_mib = memory_total_mib
        self.memory_used_mib = memory_used_mib
        self.serial = serial
        self.board_part_number = board_part_number
        self.architecture = architecture
        # (major, minor) as nvmlDeviceGetCudaComputeCapability answers; by default the
        # architecture's first one (every GPU NVML manages has one).
        self.compute_capability = (tuple(compute_capability) if compute_capability is not None
                                   else _ARCH_COMPUTE_CAPABILITY.get(architecture))
        self.minor_number = index if minor_number is None else minor_number
        self.persistence_mode = persistence_mode
        self.compute_mode = compute_mode
        self.power_limit_mw = power_limit_mw
        self.power_draw_mw = power_draw_mw
        self.temperature_c = temperature_c
        # {NVML_TEMPERATURE_THRESHOLD_*: degrees C}
        self.temperature_thresholds = dict(temperature_thresholds or {})
        self.ecc_mode = ecc_mode                # [current, pending] NVML_FEATURE_* or None
        # {(NVML_MEMORY_ERROR_TYPE_*, NVML_VOLATILE_ECC|NVML_AGGREGATE_ECC): count}
        self.ecc_errors = dict(ecc_errors or {}) if ecc_errors is not None else None
        # {NVML_PAGE_RETIREMENT_CAUSE_*: [addresses]} or None (row remapping GPUs)
        self.retired_pages = retired_pages
        self.retired_pages_pending = retired_pages_pending   # NVML_FEATURE_* or None
        self.remapped_rows = remapped_rows      # (corrected, uncorrected, pending, failure) or None
        self.clocks = dict(clocks or {})        # {NVML_CLOCK_*: MHz}
        self.max_clocks = dict(max_clocks or {})
        self.clocks_event_reasons = clocks_event_reasons   # nvmlClocksEventReason* mask or None
        self.utilization = utilization          # (gpu %, memory %) or None
        self.nvlinks = list(nvlinks) if nvlinks is not None else None   # None: no NVLink
        self.processes = list(processes or [])  # [(pid, used_bytes)]
        self.fabric = fabric                    # FakeFabric or None (not supported)
        self.mig = mig                          # FakeMig or None (not MIG capable)
        self.lost = lost
        self.unsupported = set(unsupported or ())


class FakeNode(object):
    def __init__(self, gpus=None, driver_version="570.172.08", cuda_driver_version=12080,
                 nvml_version=None, init_error=None, kernel_module_version="same", name="node"):
        self.name = name
        self.gpus = list(gpus or [])
        self.driver_version = driver_version
        self.cuda_driver_version = cuda_driver_version
        if nvml_version is None and driver_version and cuda_driver_version:
            nvml_version = "%d.%s" % (cuda_driver_version // 1000, driver_version)
        self.nvml_version = nvml_version
        self.init_error = init_error
        # "same": the loaded kernel module matches the user-space driver; None: none loaded.
        self.kernel_module_version = driver_version if kernel_module_version == "same" else kernel_module_version


# ---------------------------------------------------------------------------
# Handles
# ---------------------------------------------------------------------------

class DeviceHandle(object):
    """A physical GPU handle (nvmlDeviceGetHandleByIndex)."""

    def __init__(self, gpu):
        self.gpu = gpu

    def __repr__(self):
        return "<DeviceHandle gpu=%d>" % self.gpu.index


class MigDeviceHandle(DeviceHandle):
    """A MIG device handle (nvmlDeviceGetMigDeviceHandleByIndex)."""

    def __init__(self, gpu, gpu_instance, compute_instance):
        super(MigDeviceHandle, self).__init__(gpu)
        self.gpu_instance = gpu_instance
        self.compute_instance = compute_instance

    def __repr__(self):
        return "<MigDeviceHandle gpu=%d gi=%d ci=%d>" % (
            self.gpu.index, self.gpu_instance.id, self.compute_instance.id)


class GpuInstanceHandle(object):
    def __init__(self, gpu, gpu_instance):
        self.gpu = gpu
        self.gpu_instance = gpu_instance


class ComputeInstanceHandle(object):
    def __init__(self, gpu, gpu_instance, compute_instance):
        self.gpu = gpu
        self.gpu_instance = gpu_instance
        self.compute_instance = compute_instance


# ---------------------------------------------------------------------------
# The API
# ---------------------------------------------------------------------------

# Wrapped in pynvml by @throwOnVersionMismatch.
_THROW_ON_VERSION_MISMATCH = frozenset(["nvmlDeviceGetComputeRunningProcesses"])

# Calls that work without nvmlInit, as in NVML.
_NO_INIT_NEEDED = frozenset(["nvmlInit", "nvmlInitWithFlags", "nvmlErrorString"])


def nvml_api(func):
    """Make ``func`` an NVML entry point of the fake.

    Counts the call (overall and per GPU), raises Uninitialized before nvmlInit,
    raises injected failures, GpuIsLost for a lost GPU, and NotSupported for a
    function listed in the GPU's ``unsupported`` set.
    """
    name = func.__name__

    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        gpu = getattr(args[0], "gpu", None) if args else None
        if name == "nvmlDeviceGetHandleByIndex" and args and 0 <= args[0] < len(self.node.gpus):
            gpu = self.node.gpus[args[0]]   # NVML checks the GPU as it hands out the handle
        self.calls[name] += 1
        if gpu is not None:
            self.calls_by_gpu[(name, gpu.index)] += 1
        if name not in _NO_INIT_NEEDED and self.refcount == 0:
            raise _error(_real.NVML_ERROR_UNINITIALIZED)
        for key in ((name, None), (name, gpu.index if gpu is not None else None)):
            if key in self.failures:
                code = self.failures[key]
                if code == _real.NVML_ERROR_FUNCTION_NOT_FOUND and name in _THROW_ON_VERSION_MISMATCH:
                    # pynvml's @throwOnVersionMismatch turns this one into a non-NVMLError.
                    raise _real.NVMLLibraryMismatchError(
                        "Unversioned function called and the pyNVML version does not match the NVML lib version.")
                raise _error(code)
        if gpu is not None:
            if gpu.lost:
                raise _error(_real.NVML_ERROR_GPU_IS_LOST)
            if name in gpu.unsupported:
                raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
        return func(self, *args, **kwargs)

    wrapper.nvml_api = True
    return wrapper


def _supported(value):
    """NVML answers NOT_SUPPORTED for a field the model leaves out (None)."""
    if value is None:
        raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
    return value


def _deref(ref):
    """A c_uint passed directly or through byref()."""
    return getattr(ref, "_obj", ref)


class _Constants(object):
    pass


# Every constant, error class and structure of the real module, so the fake can
# stand in wherever ``pynvml`` is used (pynvml.NVML_ERROR_*, pynvml.NVMLError_*,
# pynvml.c_nvmlGpuFabricInfoV_t, ...). Real functions are not copied: calling one the
# fake does not model is an AttributeError, never a silent call into the library.
for _name in dir(_real):
    _value = getattr(_real, _name)
    if _name.startswith("__") or (callable(_value) and not isinstance(_value, type)):
        continue
    setattr(_Constants, _name, _value)
_Constants.nvmlExceptionClass = staticmethod(_real.nvmlExceptionClass)


class FakeNvml(_Constants):
    """The fake ``pynvml`` module for one node. See the module docstring."""

    def __init__(self, node):
        self.node = node
        self.refcount = 0
        self.calls = Counter()
        self.calls_by_gpu = Counter()
        self.failures = {}

    # -- test controls -------------------------------------------------------

    def fail(self, function, error, gpu=None):
        """Make ``function`` raise NVMLError(error), for GPU index ``gpu`` or for every call."""
        self.failures[(function, gpu)] = error

    def clear_failures(self):
        self.failures.clear()

    def reset_counts(self):
        self.calls.clear()
        self.calls_by_gpu.clear()

    @property
    def initialized(self):
        return self.refcount > 0

    # -- helpers -------------------------------------------------------------

    def _gpu(self, handle):
        if not isinstance(handle, DeviceHandle):
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        return handle.gpu

    def _physical(self, handle):
        """MIG device handles are refused where NVML wants the parent GPU."""
        if isinstance(handle, MigDeviceHandle) or not isinstance(handle, DeviceHandle):
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        return handle.gpu

    def _mig(self, handle, need_enabled=True):
        gpu = self._physical(handle)
        if gpu.mig is None or (need_enabled and not gpu.mig.enabled):
            raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
        return gpu.mig

    # -- init / shutdown: reference counted like libnvidia-ml ----------------

    @nvml_api
    def nvmlInitWithFlags(self, flags):
        return self._init(flags)

    @nvml_api
    def nvmlInit(self):
        return self._init(0)

    def _init(self, flags):
        if self.node.init_error is not None:
            raise _error(self.node.init_error)
        if not self.node.gpus and not flags & _real.NVML_INIT_FLAG_NO_GPUS:
            raise _error(_real.NVML_ERROR_GPU_NOT_FOUND)
        self.refcount += 1

    @nvml_api
    def nvmlShutdown(self):
        self.refcount -= 1

    @nvml_api
    def nvmlErrorString(self, result):
        return str(_error(result))

    # -- system --------------------------------------------------------------

    @nvml_api
    def nvmlSystemGetDriverVersion(self):
        return _supported(self.node.driver_version)

    @nvml_api
    def nvmlSystemGetNVMLVersion(self):
        return _supported(self.node.nvml_version)

    @nvml_api
    def nvmlSystemGetCudaDriverVersion(self):
        return _supported(self.node.cuda_driver_version)

    @nvml_api
    def nvmlSystemGetCudaDriverVersion_v2(self):
        return _supported(self.node.cuda_driver_version)

    @nvml_api
    def nvmlDeviceGetCount(self):
        return len(self.node.gpus)

    @nvml_api
    def nvmlDeviceGetHandleByIndex(self, index):
        if not 0 <= index < len(self.node.gpus):
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        return DeviceHandle(self.node.gpus[index])

    @nvml_api
    def nvmlDeviceGetHandleByUUID(self, uuid):
        for gpu in self.node.gpus:
            if gpu.uuid == uuid:
                return DeviceHandle(gpu)
            for gi, ci in (gpu.mig.mig_devices() if gpu.mig and gpu.mig.enabled else []):
                if ci.uuid == uuid:
                    return MigDeviceHandle(gpu, gi, ci)
        raise _error(_real.NVML_ERROR_NOT_FOUND)

    # -- identity ------------------------------------------------------------

    @nvml_api
    def nvmlDeviceGetName(self, handle):
        gpu = self._gpu(handle)
        if isinstance(handle, MigDeviceHandle):
            return "%s %s" % (gpu.name, self._mig_profile_name(gpu, handle))
        return gpu.name

    @nvml_api
    def nvmlDeviceGetUUID(self, handle):
        gpu = self._gpu(handle)
        if isinstance(handle, MigDeviceHandle):
            return handle.compute_instance.uuid
        return gpu.uuid

    @nvml_api
    def nvmlDeviceGetSerial(self, handle):
        return _supported(self._physical(handle).serial)

    @nvml_api
    def nvmlDeviceGetBoardPartNumber(self, handle):
        return _supported(self._physical(handle).board_part_number)

    @nvml_api
    def nvmlDeviceGetArchitecture(self, device):
        return self._gpu(device).architecture

    @nvml_api
    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return _supported(self._gpu(handle).compute_capability)

    @nvml_api
    def nvmlDeviceGetMinorNumber(self, handle):
        return self._physical(handle).minor_number

    @nvml_api
    def nvmlDeviceGetPciInfo_v3(self, handle):
        return self._pci_info(self._gpu(handle))

    @nvml_api
    def nvmlDeviceGetPciInfo(self, handle):
        return self._pci_info(self._gpu(handle))

    @staticmethod
    def _pci_info(gpu):
        domain, bus, devfn = gpu.pci_bus_id.split(":")
        info = _real.nvmlPciInfo_t()
        info.busIdLegacy = gpu.pci_bus_id[-12:].encode()
        info.busId = gpu.pci_bus_id.encode()
        info.domain = int(domain, 16)
        info.bus = int(bus, 16)
        info.device = int(devfn.split(".")[0], 16)
        info.pciDeviceId = gpu.pci_device_id
        info.pciSubSystemId = gpu.pci_subsystem_id
        return info

    # -- memory, state, power, temperature ------------------------------------

    @nvml_api
    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        gpu = self._gpu(handle)
        if isinstance(handle, MigDeviceHandle):
            profile = gpu.mig.profile_by_id(handle.gpu_instance.profile_id)
            total, used = profile.memory_mb, 0
        else:
            total, used = gpu.memory_total_mib, gpu.memory_used_mib
        mib = 1024 * 1024
        if version:
            mem = _real.c_nvmlMemory_v2_t()
            mem.version = version
            mem.reserved = 0
        else:
            mem = _real.c_nvmlMemory_t()
        mem.total = total * mib
        mem.used = used * mib
        mem.free = (total - used) * mib
        return mem

    @nvml_api
    def nvmlDeviceGetPersistenceMode(self, handle):
        return _supported(self._physical(handle).persistence_mode)

    @nvml_api
    def nvmlDeviceGetComputeMode(self, handle):
        return _supported(self._physical(handle).compute_mode)

    @nvml_api
    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return _supported(self._physical(handle).power_limit_mw)

    @nvml_api
    def nvmlDeviceGetPowerManagementLimit(self, handle):
        return _supported(self._physical(handle).power_limit_mw)

    @nvml_api
    def nvmlDeviceGetPowerUsage(self, handle):
        return _supported(self._physical(handle).power_draw_mw)

    @nvml_api
    def nvmlDeviceGetTemperature(self, handle, sensor):
        if sensor != _real.NVML_TEMPERATURE_GPU:
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        return _supported(self._physical(handle).temperature_c)

    @nvml_api
    def nvmlDeviceGetTemperatureV(self, handle, sensor, version=_real.nvmlTemperature_v1):
        if version != _real.nvmlTemperature_v1:
            raise _error(_real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        if sensor != _real.NVML_TEMPERATURE_GPU:
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        return _supported(self._physical(handle).temperature_c)

    @nvml_api
    def nvmlDeviceGetTemperatureThreshold(self, handle, threshold):
        return _supported(self._physical(handle).temperature_thresholds.get(threshold))

    @nvml_api
    def nvmlDeviceGetClockInfo(self, handle, type):
        return _supported(self._physical(handle).clocks.get(type))

    @nvml_api
    def nvmlDeviceGetMaxClockInfo(self, handle, type):
        return _supported(self._physical(handle).max_clocks.get(type))

    @nvml_api
    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return _supported(self._physical(handle).clocks_event_reasons)

    @nvml_api
    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return _supported(self._physical(handle).clocks_event_reasons)

    @nvml_api
    def nvmlDeviceGetUtilizationRates(self, handle):
        gpu = self._physical(handle)
        if gpu.mig is not None and gpu.mig.enabled:
            # "On MIG-enabled GPUs, querying device utilization rates is not currently supported."
            raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
        busy = _supported(gpu.utilization)
        rates = _real.c_nvmlUtilization_t()
        rates.gpu, rates.memory = busy
        return rates

    # -- ECC, retired pages, row remapping ------------------------------------

    @nvml_api
    def nvmlDeviceGetEccMode(self, handle):
        return list(_supported(self._physical(handle).ecc_mode))

    @nvml_api
    def nvmlDeviceGetTotalEccErrors(self, handle, errorType, counterType):
        gpu = self._physical(handle)
        errors = _supported(gpu.ecc_errors)
        if gpu.ecc_mode is not None and gpu.ecc_mode[0] != _real.NVML_FEATURE_ENABLED:
            # NVML has no counters while ECC is off.
            raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
        return errors.get((errorType, counterType), 0)

    @nvml_api
    def nvmlDeviceGetRetiredPages(self, device, sourceFilter):
        pages = _supported(self._physical(device).retired_pages)
        return list(pages.get(sourceFilter, []))

    @nvml_api
    def nvmlDeviceGetRetiredPagesPendingStatus(self, device):
        return int(_supported(self._physical(device).retired_pages_pending))

    @nvml_api
    def nvmlDeviceGetRemappedRows(self, device):
        return tuple(_supported(self._physical(device).remapped_rows))

    # -- NVLink, processes, fabric --------------------------------------------

    def _link(self, device, link):
        links = self._physical(device).nvlinks
        if links is None:
            raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < len(links):
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        return links[link]

    @nvml_api
    def nvmlDeviceGetNvLinkState(self, device, link):
        return _real.NVML_FEATURE_ENABLED if self._link(device, link).active else _real.NVML_FEATURE_DISABLED

    @nvml_api
    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle, link):
        return self._link(handle, link).remote_type

    @nvml_api
    def nvmlDeviceGetNvLinkRemotePciInfo(self, device, link):
        remote = _supported(self._link(device, link).remote_bus_id)
        info = _real.nvmlPciInfo_t()
        info.busId = remote.encode()
        domain, bus, devfn = remote.split(":")
        info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(devfn.split(".")[0], 16)
        return info

    @nvml_api
    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        gpu = self._gpu(handle)
        procs = []
        for pid, used in gpu.processes:
            procs.append(_real.nvmlFriendlyObject({
                "pid": pid, "usedGpuMemory": used,
                "gpuInstanceId": 0xFFFFFFFF, "computeInstanceId": 0xFFFFFFFF}))
        return procs

    @nvml_api
    def nvmlDeviceGetGpuFabricInfoV(self, device, gpuFabricInfo):
        fabric = self._physical(device).fabric
        if fabric is None:
            raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
        return self._fill_fabric(fabric, gpuFabricInfo)

    @nvml_api
    def nvmlDeviceGetGpuFabricInfo(self, device, gpuFabricInfo):
        fabric = self._physical(device).fabric
        if fabric is None:
            raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
        return self._fill_fabric(fabric, gpuFabricInfo)

    @staticmethod
    def _fill_fabric(fabric, info):
        # The binding hands the argument to C as is: a struct passed by value instead of
        # ctypes.byref(struct) is a caller bug that real NVML would not survive.
        if not hasattr(info, "_obj"):
            raise TypeError("nvmlDeviceGetGpuFabricInfo(V) needs ctypes.byref(<c_nvmlGpuFabricInfo*_t>)")
        info = _deref(info)
        raw = bytes(bytearray.fromhex(fabric.cluster_uuid.replace("-", "")))
        for i, byte in enumerate(raw[:_real.NVML_GPU_FABRIC_UUID_LEN]):
            info.clusterUuid[i] = byte
        info.status = fabric.status
        info.cliqueId = fabric.clique_id
        info.state = fabric.state
        if hasattr(info, "healthMask"):
            info.healthMask = fabric.health_mask
        return _real.NVML_SUCCESS

    # -- MIG (read side) -----------------------------------------------------

    @nvml_api
    def nvmlDeviceGetMigMode(self, device):
        mig = self._mig(device, need_enabled=False)
        return [mig.current_mode, mig.pending_mode]

    @nvml_api
    def nvmlDeviceGetMaxMigDeviceCount(self, device):
        gpu = self._physical(device)
        if gpu.mig is None or not gpu.mig.enabled:
            return 0
        return gpu.mig.max_mig_devices

    @nvml_api
    def nvmlDeviceGetMigDeviceHandleByIndex(self, device, index):
        mig = self._mig(device, need_enabled=False)
        if not mig.enabled or not 0 <= index < mig.max_mig_devices:
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        devices = mig.mig_devices()
        if index >= len(devices):
            raise _error(_real.NVML_ERROR_NOT_FOUND)
        gi, ci = devices[index]
        return MigDeviceHandle(device.gpu, gi, ci)

    @nvml_api
    def nvmlDeviceIsMigDeviceHandle(self, device):
        # The real binding returns the c_uint itself, not its value.
        return ctypes.c_uint(1 if isinstance(self._gpu_handle(device), MigDeviceHandle) else 0)

    def _gpu_handle(self, device):
        if not isinstance(device, DeviceHandle):
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        return device

    def _mig_handle(self, device):
        if not isinstance(device, MigDeviceHandle):
            # NVML: NOT_SUPPORTED for a physical GPU handle.
            raise _error(_real.NVML_ERROR_NOT_SUPPORTED if isinstance(device, DeviceHandle)
                         else _real.NVML_ERROR_INVALID_ARGUMENT)
        return device

    @nvml_api
    def nvmlDeviceGetGpuInstanceId(self, device):
        return self._mig_handle(device).gpu_instance.id

    @nvml_api
    def nvmlDeviceGetComputeInstanceId(self, device):
        return self._mig_handle(device).compute_instance.id

    @nvml_api
    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice):
        return DeviceHandle(self._mig_handle(migDevice).gpu)

    @nvml_api
    def nvmlDeviceGetAttributes(self, device):
        return self._attributes(device)

    @nvml_api
    def nvmlDeviceGetAttributes_v2(self, device):
        return self._attributes(device)

    def _attributes(self, device):
        gpu = self._gpu(device)
        attrs = _real.c_nvmlDeviceAttributes()
        if isinstance(device, MigDeviceHandle):
            profile = gpu.mig.profile_by_id(device.gpu_instance.profile_id)
            ci = device.compute_instance
            attrs.multiprocessorCount = ci.multiprocessor_count
            attrs.sharedCopyEngineCount = profile.copy_engine_count
            attrs.sharedDecoderCount = profile.decoder_count
            attrs.sharedEncoderCount = profile.encoder_count
            attrs.sharedJpegCount = profile.jpeg_count
            attrs.sharedOfaCount = profile.ofa_count
            attrs.gpuInstanceSliceCount = profile.slice_count
            attrs.computeInstanceSliceCount = ci.slice_count
            attrs.memorySizeMB = profile.memory_mb
        else:
            attrs.memorySizeMB = gpu.memory_total_mib
        return attrs

    def _profile_info(self, profile, version):
        info = _real.c_nvmlGpuInstanceProfileInfo_v2_t() if version == 2 else _real.c_nvmlGpuInstanceProfileInfo_t()
        info.id = profile.id
        info.isP2pSupported = profile.is_p2p_supported
        info.sliceCount = profile.slice_count
        info.instanceCount = profile.instance_count
        info.multiprocessorCount = profile.multiprocessor_count
        info.copyEngineCount = profile.copy_engine_count
        info.decoderCount = profile.decoder_count
        info.encoderCount = profile.encoder_count
        info.jpegCount = profile.jpeg_count
        info.ofaCount = profile.ofa_count
        info.memorySizeMB = profile.memory_mb
        if version == 2:
            info.name = profile.name.encode()
        return info

    @nvml_api
    def nvmlDeviceGetGpuInstanceProfileInfo(self, device, profile, version=2):
        if version not in (1, 2):
            raise _error(_real.NVML_ERROR_FUNCTION_NOT_FOUND)
        mig = self._mig(device)
        if not 0 <= profile < _real.NVML_GPU_INSTANCE_PROFILE_COUNT:
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        if profile not in mig.profiles:
            raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
        return self._profile_info(mig.profiles[profile], version)

    # pynvml exports the V name as an alias of the same function.
    nvmlDeviceGetGpuInstanceProfileInfoV = nvmlDeviceGetGpuInstanceProfileInfo

    @nvml_api
    def nvmlDeviceGetGpuInstanceProfileInfoById(self, device, profileId):
        mig = self._mig(device)
        profile = mig.profile_by_id(profileId)
        if profile is None:
            raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
        return self._profile_info(profile, 2)

    @nvml_api
    def nvmlDeviceGetGpuInstanceById(self, device, gpuInstanceId):
        mig = self._mig(device)
        gi = mig.gpu_instances.get(gpuInstanceId)
        if gi is None:
            raise _error(_real.NVML_ERROR_NOT_FOUND)
        return GpuInstanceHandle(device.gpu, gi)

    @nvml_api
    def nvmlDeviceGetGpuInstances(self, device, profileId, gpuInstancesRef, countRef):
        mig = self._mig(device)
        found = [gi for _id, gi in sorted(mig.gpu_instances.items()) if gi.profile_id == profileId]
        for i, gi in enumerate(found):
            gpuInstancesRef[i] = GpuInstanceHandle(device.gpu, gi)
        _deref(countRef).value = len(found)
        return _real.NVML_SUCCESS

    @nvml_api
    def nvmlGpuInstanceGetInfo(self, gpuInstance):
        gi = self._gi_handle(gpuInstance).gpu_instance
        info = _real.c_nvmlGpuInstanceInfo_t()
        info.id = gi.id
        info.profileId = gi.profile_id
        info.placement.start = gi.start
        info.placement.size = gi.size
        return info

    @nvml_api
    def nvmlGpuInstanceGetComputeInstanceById(self, gpuInstance, computeInstanceId):
        handle = self._gi_handle(gpuInstance)
        ci = handle.gpu_instance.compute_instances.get(computeInstanceId)
        if ci is None:
            raise _error(_real.NVML_ERROR_NOT_FOUND)
        return ComputeInstanceHandle(handle.gpu, handle.gpu_instance, ci)

    @nvml_api
    def nvmlGpuInstanceGetComputeInstances(self, gpuInstance, profileId, computeInstancesRef, countRef):
        handle = self._gi_handle(gpuInstance)
        found = [ci for _id, ci in sorted(handle.gpu_instance.compute_instances.items())
                 if ci.profile_id == profileId]
        for i, ci in enumerate(found):
            computeInstancesRef[i] = ComputeInstanceHandle(handle.gpu, handle.gpu_instance, ci)
        _deref(countRef).value = len(found)
        return _real.NVML_SUCCESS

    @nvml_api
    def nvmlComputeInstanceGetInfo(self, computeInstance):
        return self._ci_info(computeInstance)

    @nvml_api
    def nvmlComputeInstanceGetInfo_v2(self, computeInstance):
        return self._ci_info(computeInstance)

    def _ci_info(self, computeInstance):
        if not isinstance(computeInstance, ComputeInstanceHandle):
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        ci = computeInstance.compute_instance
        info = _real.c_nvmlComputeInstanceInfo_t()
        info.id = ci.id
        info.profileId = ci.profile_id
        info.placement.start = ci.start
        info.placement.size = ci.size
        return info

    @staticmethod
    def _gi_handle(handle):
        if not isinstance(handle, GpuInstanceHandle):
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        if handle.gpu_instance.id not in (handle.gpu.mig.gpu_instances if handle.gpu.mig else {}):
            # Destroyed since the handle was taken.
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        return handle

    @staticmethod
    def _mig_profile_name(gpu, handle):
        profile = gpu.mig.profile_by_id(handle.gpu_instance.profile_id)
        name = profile.name
        if handle.compute_instance.slice_count != profile.slice_count:
            name = name.replace("MIG ", "MIG %dc." % handle.compute_instance.slice_count)
        return name


def nvml_functions(fake_class=FakeNvml):
    """Names of the NVML entry points a fake class models (for docs and tests)."""
    # Look only at plain functions: getattr() on other class attributes (ctypes
    # library loaders) would try to load a library named after the attribute.
    return sorted({name for klass in fake_class.__mro__ for name, value in vars(klass).items()
                   if isinstance(value, types.FunctionType) and getattr(value, "nvml_api", False)})
