"""The MIG write side of the fake NVML behaves like NVML: placement rules, error codes, pending mode."""
import ctypes
import inspect

import pynvml
import pytest

from fakes import nvml_nodes
from fakes.fake_pynvml_mig import FakeMigNvml

ADDED = ["nvmlDeviceSetMigMode", "nvmlDeviceGetGpuInstancePossiblePlacements",
         "nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlGpuInstanceDestroy",
         "nvmlGpuInstanceGetComputeInstanceProfileInfo", "nvmlGpuInstanceCreateComputeInstance",
         "nvmlComputeInstanceDestroy"]


def _nvml(node, **kwargs):
    nvml = FakeMigNvml(node, **kwargs)
    nvml.nvmlInit()
    return nvml


def _enable(nvml, index=0):
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    nvml.nvmlDeviceSetMigMode(handle, pynvml.NVML_DEVICE_MIG_ENABLE)
    nvml.reset_gpu(index)
    return nvml.nvmlDeviceGetHandleByIndex(index)


def _create(nvml, handle, profile_index, start):
    info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, profile_index)
    placement = pynvml.c_nvmlGpuInstancePlacement_t()
    placement.start = start
    placement.size = {pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE: 4, pynvml.NVML_GPU_INSTANCE_PROFILE_7_SLICE: 8,
                      pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE: 2}.get(profile_index, 1)
    return nvml.nvmlDeviceCreateGpuInstanceWithPlacement(handle, info.id, ctypes.byref(placement))


@pytest.mark.parametrize("name", ADDED)
def test_added_functions_match_pynvml_signatures(name):
    real = inspect.signature(getattr(pynvml, name))
    fake = inspect.signature(getattr(FakeMigNvml, name))
    assert list(fake.parameters)[1:] == list(real.parameters), name


def test_mode_change_is_pending_until_reset():
    nvml = _nvml(nvml_nodes.dgx_a100())
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    status = nvml.nvmlDeviceSetMigMode(handle, pynvml.NVML_DEVICE_MIG_ENABLE)
    assert status == pynvml.NVML_ERROR_RESET_REQUIRED
    assert nvml.nvmlDeviceGetMigMode(handle) == [pynvml.NVML_DEVICE_MIG_DISABLE, pynvml.NVML_DEVICE_MIG_ENABLE]
    with pytest.raises(pynvml.NVMLError_NotSupported):   # no instances while MIG is not current
        _create(nvml, handle, pynvml.NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0)
    nvml.reset_gpu(0)
    assert nvml.nvmlDeviceGetMigMode(handle) == [pynvml.NVML_DEVICE_MIG_ENABLE] * 2


def test_reset_with_clients_is_in_use_and_mode_stays_pending():
    nvml = _nvml(nvml_nodes.dgx_a100())
    handle = nvml.nvmlDeviceGetHandleByIndex(1)
    nvml.clients[1] = ["nvidia-persistenced"]
    assert nvml.nvmlDeviceSetMigMode(handle, pynvml.NVML_DEVICE_MIG_ENABLE) == pynvml.NVML_ERROR_IN_USE
    with pytest.raises(pynvml.NVMLError_InUse):
        nvml.reset_gpu(1)
    assert nvml.nvmlDeviceGetMigMode(handle)[0] == pynvml.NVML_DEVICE_MIG_DISABLE
    nvml.clients[1] = []
    nvml.node.gpus[1].processes = [(4242, 1 << 30)]
    with pytest.raises(pynvml.NVMLError_InUse):
        nvml.reset_gpu(1)


def test_immediate_activation_when_nothing_holds_the_gpu():
    nvml = _nvml(nvml_nodes.hgx_h100(), immediate_mode_change=True)
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceSetMigMode(handle, pynvml.NVML_DEVICE_MIG_ENABLE) == pynvml.NVML_SUCCESS
    assert nvml.nvmlDeviceGetMigMode(handle)[0] == pynvml.NVML_DEVICE_MIG_ENABLE


def test_not_supported_without_mig():
    nvml = _nvml(nvml_nodes.l40s())
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceSetMigMode(handle, pynvml.NVML_DEVICE_MIG_ENABLE)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetMigMode(handle)


def test_placement_rules_and_insufficient_resources():
    nvml = _nvml(nvml_nodes.hgx_h100())
    handle = _enable(nvml)
    three = pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE
    one = pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE
    with pytest.raises(pynvml.NVMLError_InvalidArgument):       # 3g may start at 0 or 4 only
        _create(nvml, handle, three, 2)
    gi = _create(nvml, handle, one, 5)
    with pytest.raises(pynvml.NVMLError_InsufficientResources):  # overlaps the 1g at 5
        _create(nvml, handle, three, 4)
    with pytest.raises(pynvml.NVMLError_InsufficientResources):  # overlaps the 1g at 5
        _create(nvml, handle, one, 5)
    _create(nvml, handle, three, 0)
    with pytest.raises(pynvml.NVMLError_InsufficientResources):  # 7g needs all 8 memory slices
        _create(nvml, handle, pynvml.NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0)
    info = nvml.nvmlGpuInstanceGetInfo(gi)
    assert (info.placement.start, info.placement.size) == (5, 1)


def test_instance_count_and_media_engine_limits():
    nvml = _nvml(nvml_nodes.hgx_h100())
    handle = _enable(nvml)
    me = pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1
    _create(nvml, handle, me, 0)
    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        _create(nvml, handle, me, 1)
    for start in (0, 2):
        _create(nvml, handle, pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE, start + 2)
    with pytest.raises(pynvml.NVMLError_InsufficientResources):  # only 3 2g, and start 0 is taken
        _create(nvml, handle, pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE, 0)


def test_possible_placements_fill_a_ctypes_array():
    nvml = _nvml(nvml_nodes.hgx_h100())
    handle = _enable(nvml)
    info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE)
    array = (pynvml.c_nvmlGpuInstancePlacement_t * 8)()
    count = ctypes.c_uint(8)
    nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, info.id, array, ctypes.byref(count))
    assert [(array[i].start, array[i].size) for i in range(count.value)] == [(0, 4), (4, 4)]
    small = (pynvml.c_nvmlGpuInstancePlacement_t * 1)()
    count = ctypes.c_uint(1)
    with pytest.raises(pynvml.NVMLError_InsufficientSize):
        nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, info.id, small, ctypes.byref(count))
    assert count.value == 2


def test_destroy_order_and_in_use():
    nvml = _nvml(nvml_nodes.h200_mig())
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    gi = nvml.nvmlDeviceGetGpuInstanceById(handle, 7)
    with pytest.raises(pynvml.NVMLError_InUse):                  # compute instances first
        nvml.nvmlGpuInstanceDestroy(gi)
    ci = nvml.nvmlGpuInstanceGetComputeInstanceById(gi, 0)
    nvml.node.gpus[0].processes = [(99, 1 << 20)]
    with pytest.raises(pynvml.NVMLError_InUse):
        nvml.nvmlComputeInstanceDestroy(ci)
    nvml.node.gpus[0].processes = []
    nvml.nvmlComputeInstanceDestroy(ci)
    nvml.nvmlGpuInstanceDestroy(gi)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetGpuInstanceById(handle, 7)
    assert nvml.nvmlDeviceGetMaxMigDeviceCount(handle) == 7
    uuids = [nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)) for i in range(6)]
    assert len(set(uuids)) == 6
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, 6)


def test_compute_instance_creation_makes_a_mig_device():
    nvml = _nvml(nvml_nodes.hgx_h100())
    handle = _enable(nvml)
    gi = _create(nvml, handle, pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE, 4)
    info = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(
        gi, pynvml.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
    assert info.sliceCount == 3
    nvml.nvmlGpuInstanceCreateComputeInstance(gi, info.id)
    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        nvml.nvmlGpuInstanceCreateComputeInstance(gi, info.id)
    mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, 0)
    assert nvml.nvmlDeviceGetUUID(mig).startswith("MIG-")
    with pytest.raises(pynvml.NVMLError_InUse):        # MIG cannot be disabled with instances left
        nvml.nvmlDeviceSetMigMode(handle, pynvml.NVML_DEVICE_MIG_DISABLE)
