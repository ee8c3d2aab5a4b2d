"""MIG mutation for the fake pynvml: mode changes, GPU reset, instance create and destroy.

Builds on ``fakes.fake_pynvml.FakeNvml`` (the read side and the hardware model) and
changes state only through that model, so every read call reports it. Behaviour and
error codes follow the NVML reference (nvml.h) and NVIDIA's MIG user guide:

- nvmlDeviceSetMigMode: NOT_SUPPORTED without MIG; IN_USE when disabling while GPU
  instances exist; otherwise the new mode is *pending* and becomes current only at a
  GPU reset, unless ``immediate_mode_change`` is set (drivers that reset the GPU
  themselves) and nothing holds the GPU. activationStatus says why it is pending.
- nvmlDeviceCreateGpuInstanceWithPlacement: NOT_SUPPORTED unless MIG is enabled;
  INVALID_ARGUMENT for an unknown profile id or a placement the profile does not
  allow; INSUFFICIENT_RESOURCES when it overlaps an instance, exceeds the profile's
  instance count, the compute slices, or the single set of media engines (+me).
- nvmlGpuInstanceDestroy: IN_USE while it has compute instances or the GPU runs
  processes. nvmlComputeInstanceDestroy: IN_USE while the GPU runs processes.
- ``reset_gpu(index)`` is what ``nvidia-smi --gpu-reset`` does (NVML has no public
  reset): IN_USE while processes run or clients (``clients[index]``, e.g. the
  persistence daemon or DCGM) hold the GPU; otherwise the pending mode becomes current
  and all instances are gone.

Use::

    nvml = FakeMigNvml(nvml_nodes.hgx_h100())
    nvml.clients[0] = ["nvidia-persistenced"]
"""

import uuid

import pynvml as _real

from fakes.fake_pynvml import (
    ComputeInstanceHandle,
    FakeComputeInstance,
    FakeGpuInstance,
    FakeNvml,
    GpuInstanceHandle,
    _deref,
    _error,
    nvml_api,
)

_NS = uuid.UUID("0b6f3c2e-4a1d-4c8e-9f3b-5d2a7e1c9b40")

# Memory slices of each GPU instance profile, by NVML_GPU_INSTANCE_PROFILE_* index
# (MIG user guide, "Supported profiles": 1g = 1, 1g with 2 memory slices = 2, 2g = 2,
# 3g and 4g = 4, 7g = 8); the +gfx, -me and +me.all variants take their base size.
MEMORY_SLICES = {
    _real.NVML_GPU_INSTANCE_PROFILE_1_SLICE: 1,
    _real.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1: 1,
    _real.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2: 2,
    _real.NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX: 1,
    _real.NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME: 1,
    _real.NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME: 1,
    _real.NVML_GPU_INSTANCE_PROFILE_2_SLICE: 2,
    _real.NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1: 2,
    _real.NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX: 2,
    _real.NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME: 2,
    _real.NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME: 2,
    _real.NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX: 4,
    _real.NVML_GPU_INSTANCE_PROFILE_3_SLICE: 4,
    _real.NVML_GPU_INSTANCE_PROFILE_4_SLICE: 4,
    _real.NVML_GPU_INSTANCE_PROFILE_7_SLICE: 8,
}


def _takes_media(profile):
    """+me and +me.all instances hold the GPU's one set of media engines."""
    return profile.name.endswith("+me") or profile.name.endswith("+me.all")


# Compute instance profiles: id == index, slice count as in nvml.h.
CI_SLICES = {
    _real.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE: 1,
    _real.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE: 2,
    _real.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE: 3,
    _real.NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE: 4,
    _real.NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE: 7,
}


class FakeMigNvml(FakeNvml):
    """FakeNvml plus the MIG write side and a GPU reset."""

    def __init__(self, node, immediate_mode_change=False):
        super(FakeMigNvml, self).__init__(node)
        self.immediate_mode_change = immediate_mode_change
        self.clients = {}   # GPU index -> names of non-CUDA clients holding the device
        self.resets = []    # GPU indices reset, in order
        self.log = []       # mutations, in order: ("destroy_ci", gpu, gi, ci), ...

    # -- model helpers -------------------------------------------------------

    @staticmethod
    def _index_of(mig, profile_id):
        for index, profile in mig.profiles.items():
            if profile.id == profile_id:
                return index, profile
        return None, None

    def _held(self, gpu):
        return bool(gpu.processes) or bool(self.clients.get(gpu.index))

    def _geometry(self, mig):
        """(memory slices, compute slices) of the GPU, from its profiles."""
        memory = compute = 0
        for index, profile in mig.profiles.items():
            size = MEMORY_SLICES.get(index, 1)
            memory = max([memory] + [start + size for start in profile.placements])
            compute = max(compute, profile.slice_count)
        return memory, compute

    # -- mode and reset ------------------------------------------------------

    @nvml_api
    def nvmlDeviceSetMigMode(self, device, mode):
        mig = self._mig(device, need_enabled=False)
        gpu = device.gpu
        if mode not in (_real.NVML_DEVICE_MIG_ENABLE, _real.NVML_DEVICE_MIG_DISABLE):
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        if mode == _real.NVML_DEVICE_MIG_DISABLE and mig.gpu_instances:
            raise _error(_real.NVML_ERROR_IN_USE)
        mig.pending_mode = mode
        self.log.append(("set_mode", gpu.index, mode))
        if mig.current_mode == mode:
            return _real.NVML_SUCCESS
        if self.immediate_mode_change and not self._held(gpu):
            mig.current_mode = mode
            return _real.NVML_SUCCESS
        return _real.NVML_ERROR_IN_USE if self._held(gpu) else _real.NVML_ERROR_RESET_REQUIRED

    def reset_gpu(self, index):
        """``nvidia-smi --gpu-reset -i <index>``: raises NVMLError(IN_USE) while the GPU is held."""
        gpu = self.node.gpus[index]
        if self._held(gpu):
            raise _error(_real.NVML_ERROR_IN_USE)
        self.resets.append(index)
        self.log.append(("reset", index))
        if gpu.mig is not None:
            gpu.mig.current_mode = gpu.mig.pending_mode
            gpu.mig.gpu_instances.clear()

    def reset_callable(self):
        """The ``reset(index, gpu_plan)`` that mig_apply takes, run against this fake:
        a refused reset becomes ResetBlocked, as nvidia-smi's failure does on a node."""
        from ansible_collections.gpuops.platform.plugins.module_utils._mig import apply as mig_apply

        def reset(index, _gpu_plan):
            try:
                self.reset_gpu(index)
            except _real.NVMLError as exc:
                raise mig_apply.ResetBlocked(mig_apply.error_text(exc))
        return reset

    # -- GPU instances -------------------------------------------------------

    @nvml_api
    def nvmlDeviceGetGpuInstancePossiblePlacements(self, device, profileId, placementsRef, countRef):
        mig = self._mig(device)
        index, profile = self._index_of(mig, profileId)
        if profile is None:
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        count = _deref(countRef)
        if placementsRef is not None:
            if count.value < len(profile.placements):
                count.value = len(profile.placements)
                raise _error(_real.NVML_ERROR_INSUFFICIENT_SIZE)
            for i, start in enumerate(profile.placements):
                placementsRef[i].start = start
                placementsRef[i].size = MEMORY_SLICES[index]
        count.value = len(profile.placements)
        return _real.NVML_SUCCESS

    @nvml_api
    def nvmlDeviceCreateGpuInstanceWithPlacement(self, device, profileId, placement):
        mig = self._mig(device)
        gpu = device.gpu
        placement = _deref(placement)
        index, profile = self._index_of(mig, profileId)
        if profile is None:
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        size = MEMORY_SLICES[index]
        if placement.start not in profile.placements or placement.size != size:
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        existing = list(mig.gpu_instances.values())
        memory, compute = self._geometry(mig)
        wanted = set(range(placement.start, placement.start + size))
        used = set()
        for gi in existing:
            used.update(range(gi.start, gi.start + gi.size))
        same = [gi for gi in existing if gi.profile_id == profileId]
        slices = sum(self._index_of(mig, gi.profile_id)[1].slice_count for gi in existing)
        media = [gi for gi in existing if _takes_media(self._index_of(mig, gi.profile_id)[1])]
        if (wanted & used or max(wanted) >= memory or len(same) >= profile.instance_count
                or slices + profile.slice_count > compute or (_takes_media(profile) and media)):
            raise _error(_real.NVML_ERROR_INSUFFICIENT_RESOURCES)
        gi_id = min(i for i in range(1, 64) if i not in mig.gpu_instances)
        gi = FakeGpuInstance(gi_id, profileId, placement.start, size)
        mig.gpu_instances[gi_id] = gi
        self.log.append(("create_gi", gpu.index, gi_id, profile.name, placement.start))
        return GpuInstanceHandle(gpu, gi)

    @nvml_api
    def nvmlGpuInstanceDestroy(self, gpuInstance):
        handle = self._gi_handle(gpuInstance)
        if handle.gpu_instance.compute_instances or handle.gpu.processes:
            raise _error(_real.NVML_ERROR_IN_USE)
        del handle.gpu.mig.gpu_instances[handle.gpu_instance.id]
        self.log.append(("destroy_gi", handle.gpu.index, handle.gpu_instance.id))
        return _real.NVML_SUCCESS

    # -- compute instances ---------------------------------------------------

    @nvml_api
    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, device, profile, engProfile, version=2):
        # pynvml names the GPU instance handle "device" here
        handle = self._gi_handle(device)
        gi_profile = self._index_of(handle.gpu.mig, handle.gpu_instance.profile_id)[1]
        if profile not in CI_SLICES or engProfile != _real.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED:
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        if CI_SLICES[profile] > gi_profile.slice_count:
            raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
        info = (_real.c_nvmlComputeInstanceProfileInfo_v2_t() if version == 2
                else _real.c_nvmlComputeInstanceProfileInfo_t())
        info.id = profile
        info.sliceCount = CI_SLICES[profile]
        info.instanceCount = gi_profile.slice_count // CI_SLICES[profile]
        info.multiprocessorCount = gi_profile.multiprocessor_count * CI_SLICES[profile] // gi_profile.slice_count
        return info

    @nvml_api
    def nvmlGpuInstanceCreateComputeInstance(self, gpuInstance, profileId):
        handle = self._gi_handle(gpuInstance)
        gi = handle.gpu_instance
        gi_profile = self._index_of(handle.gpu.mig, gi.profile_id)[1]
        if profileId not in CI_SLICES or CI_SLICES[profileId] > gi_profile.slice_count:
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        used = sum(ci.slice_count for ci in gi.compute_instances.values())
        slices = CI_SLICES[profileId]
        if used + slices > gi_profile.slice_count:
            raise _error(_real.NVML_ERROR_INSUFFICIENT_RESOURCES)
        ci_id = min(i for i in range(8) if i not in gi.compute_instances)
        ci = FakeComputeInstance(
            ci_id, profileId, used, slices, slices,
            gi_profile.multiprocessor_count * slices // gi_profile.slice_count,
            "MIG-%s" % uuid.uuid5(_NS, "%s/%d/%d/%d" % (handle.gpu.uuid, gi.id, ci_id, len(self.log))))
        gi.compute_instances[ci_id] = ci
        self.log.append(("create_ci", handle.gpu.index, gi.id, ci_id))
        return ComputeInstanceHandle(handle.gpu, gi, ci)

    @nvml_api
    def nvmlComputeInstanceDestroy(self, computeInstance):
        if not isinstance(computeInstance, ComputeInstanceHandle):
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        gi = computeInstance.gpu_instance
        if computeInstance.compute_instance.id not in gi.compute_instances:
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        if computeInstance.gpu.processes:
            raise _error(_real.NVML_ERROR_IN_USE)
        del gi.compute_instances[computeInstance.compute_instance.id]
        self.log.append(("destroy_ci", computeInstance.gpu.index, gi.id, computeInstance.compute_instance.id))
        return _real.NVML_SUCCESS
