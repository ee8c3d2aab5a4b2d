"""The fake pynvml must behave like the real binding, or tests built on it prove nothing."""
import inspect

import pynvml
import pytest

from fakes.fake_pynvml import FakeNvml, FakeNode, nvml_functions
from fakes.nvml_nodes import NODES, h200_mig, hgx_h100


def test_constants_and_error_classes_are_the_real_ones():
    nvml = FakeNvml(FakeNode())
    assert nvml.NVML_ERROR_NOT_SUPPORTED == pynvml.NVML_ERROR_NOT_SUPPORTED == 3
    assert nvml.NVMLError_NotSupported is pynvml.NVMLError_NotSupported
    assert isinstance(pynvml.NVMLError(nvml.NVML_ERROR_GPU_IS_LOST), nvml.NVMLError_GpuIsLost)


def test_every_modelled_function_exists_in_pynvml_with_the_same_signature():
    for name in nvml_functions():
        real = getattr(pynvml, name)
        fake = getattr(FakeNvml, name)
        real_params = list(inspect.signature(real).parameters)
        fake_params = list(inspect.signature(fake).parameters)[1:]
        assert fake_params == real_params, name


def test_calls_before_init_raise_uninitialized_and_refcount_holds():
    nvml = FakeNvml(hgx_h100())
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()
    nvml.nvmlInit()
    nvml.nvmlInit()
    nvml.nvmlShutdown()
    assert nvml.nvmlDeviceGetCount() == 8   # still one reference left
    nvml.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlShutdown()


@pytest.mark.parametrize("code,cls", [
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, pynvml.NVMLError_DriverNotLoaded),
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVMLError_LibraryNotFound),
    (pynvml.NVML_ERROR_NO_PERMISSION, pynvml.NVMLError_NoPermission),
])
def test_init_failures(code, cls):
    nvml = FakeNvml(FakeNode(init_error=code))
    with pytest.raises(cls):
        nvml.nvmlInit()
    assert not nvml.initialized


def test_mig_handles_and_placements():
    nvml = FakeNvml(h200_mig())
    nvml.nvmlInit()
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetMigMode(gpu) == [nvml.NVML_DEVICE_MIG_ENABLE] * 2
    assert nvml.nvmlDeviceGetMaxMigDeviceCount(gpu) == 7
    starts = []
    for i in range(7):
        mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i)
        assert nvml.nvmlDeviceIsMigDeviceHandle(mig)
        assert nvml.nvmlDeviceGetUUID(mig).startswith("MIG-")
        info = nvml.nvmlGpuInstanceGetInfo(
            nvml.nvmlDeviceGetGpuInstanceById(gpu, nvml.nvmlDeviceGetGpuInstanceId(mig)))
        starts.append((info.placement.start, info.placement.size))
        parent = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)
        assert nvml.nvmlDeviceGetUUID(parent) == nvml.nvmlDeviceGetUUID(gpu)
    assert starts == [(s, 1) for s in range(7)]
    assert not nvml.nvmlDeviceIsMigDeviceHandle(gpu)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetGpuInstanceId(gpu)
    assert nvml.nvmlDeviceGetGpuInstanceProfileInfo(gpu, nvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE).name == "MIG 1g.18gb"


def test_unsupported_field_lost_gpu_and_injected_failure():
    node = hgx_h100()
    node.gpus[1].serial = None
    node.gpus[2].lost = True
    nvml = FakeNvml(node)
    nvml.nvmlInit()
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetSerial(nvml.nvmlDeviceGetHandleByIndex(1))
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetHandleByIndex(2)
    nvml.fail("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_NO_PERMISSION, gpu=3)
    with pytest.raises(pynvml.NVMLError_NoPermission):
        nvml.nvmlDeviceGetPowerUsage(nvml.nvmlDeviceGetHandleByIndex(3))
    assert nvml.nvmlDeviceGetPowerUsage(nvml.nvmlDeviceGetHandleByIndex(4)) > 0
    assert nvml.calls["nvmlDeviceGetPowerUsage"] == 2
    assert nvml.calls_by_gpu[("nvmlDeviceGetPowerUsage", 3)] == 1


def test_no_gpu_node_and_every_catalogue_node_builds():
    assert set(NODES) == {"dgx-a100", "hgx-h100", "h200-mig", "l40s", "no-gpu"}
    nvml = FakeNvml(NODES["no-gpu"]())
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        nvml.nvmlInit()


def test_fabric_info_must_be_passed_by_reference():
    import ctypes
    nvml = FakeNvml(hgx_h100())
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    info = pynvml.c_nvmlGpuFabricInfoV_t()
    with pytest.raises(TypeError, match="byref"):
        nvml.nvmlDeviceGetGpuFabricInfoV(handle, info)
    assert nvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info)) == pynvml.NVML_SUCCESS
    assert info.state == pynvml.NVML_GPU_FABRIC_STATE_COMPLETED and info.cliqueId == 32766
