"""The NVML collector against the fake pynvml: every NVML error path, health, replay."""
import importlib.util
import json
import re

import pynvml
import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as collector
from fakes import gpu_node
from fakes.fake_pynvml import FakeComputeInstance, FakeFabric, FakeGpuInstance, FakeNode, FakeNvml
from fakes.nvml_nodes import NODES, dgx_a100, h200_mig, hgx_h100, l40s

FIXTURES = ("dgx-a100", "hgx-h100", "h200-mig", "l40s", "no-gpu")

# Queries the collector asks exactly once per physical GPU.
ONCE_PER_GPU = (
    "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlDeviceGetSerial",
    "nvmlDeviceGetBoardPartNumber", "nvmlDeviceGetArchitecture", "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetComputeMode",
    "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetTemperatureV",
    "nvmlDeviceGetEccMode", "nvmlDeviceGetRemappedRows", "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetMigMode", "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetUtilizationRates",
)
# Per-GPU functions whose failure must never escape the collector.
PER_GPU_QUERIES = ONCE_PER_GPU[1:] + (
    "nvmlDeviceGetTemperatureThreshold", "nvmlDeviceGetClockInfo", "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRetiredPages", "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkRemoteDeviceType", "nvmlDeviceGetNvLinkRemotePciInfo",
)
MIG_QUERIES = (
    "nvmlDeviceGetMaxMigDeviceCount", "nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId", "nvmlDeviceGetGpuInstanceById", "nvmlGpuInstanceGetInfo",
    "nvmlDeviceGetAttributes", "nvmlDeviceGetGpuInstanceProfileInfo",
)


NO_ROOT = "/nonexistent/gpuops-test-root"


def gather(node, kernel=None, tmp_path=None, **kwargs):
    """Collect from ``node``; ``kernel`` is the text of a stand-in /sys/module/nvidia/version."""
    paths = ()
    if kernel is not None:
        path = tmp_path / "nvidia-version"
        path.write_text(kernel)
        paths = (str(path),)
    nvml = FakeNvml(node)
    # No PCI bus unless a test gives one: the facts do not depend on the GPUs of the machine running the tests.
    kwargs.setdefault("pci_root", NO_ROOT)
    facts = collector.collect(nvml, kernel_module_paths=paths, library_globs=kwargs.pop("library_globs", ()),
                              **kwargs)
    return nvml, facts


def _generator():
    spec = importlib.util.spec_from_file_location(
        "nvml_fixture_generator", str(collector_root() / "tests" / "fixtures" / "nvml" / "generate.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def collector_root():
    from pathlib import Path
    return Path(__file__).resolve().parents[4]


# ---------------------------------------------------------------------------
# nvmlInit failures: present false, a reason, success, no further calls
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("code,expect", [
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "kernel module is not loaded"),
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "libnvidia-ml.so.1 not found"),
    (pynvml.NVML_ERROR_NO_PERMISSION, "become: true"),
    (pynvml.NVML_ERROR_GPU_NOT_FOUND, "no NVIDIA GPU"),
    (pynvml.NVML_ERROR_UNKNOWN, "NVML initialisation failed: Unknown Error (NVML error 999)"),
])
def test_init_failure_is_reported_not_raised(code, expect):
    nvml, facts = gather(FakeNode(gpus=hgx_h100().gpus, init_error=code))
    assert facts["present"] is False
    assert expect in facts["reason"]
    assert facts["gpus"] == [] and facts["gpu_count"] == 0
    assert facts["reboot_required"] is False
    # Nothing is asked after a failed init, and nothing is shut down that did not start.
    assert set(nvml.calls) == {"nvmlInit"}


def test_no_gpu_node_without_flags_is_present_false():
    nvml, facts = gather(FakeNode(gpus=[]))
    assert facts["present"] is False
    assert facts["reason"] == "NVML found no NVIDIA GPU on this host"


def test_driver_library_mismatch_requires_reboot(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libnvidia-ml.so.570.172.08").write_text("")
    proc = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.127.05  Release Build  "
            "(dvs-builder@U16-I3-B03-4-3)  Tue Oct  1 18:52:33 UTC 2024\nGCC version:  gcc version 12.2.0\n")
    node = FakeNode(gpus=hgx_h100().gpus, init_error=pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    nvml, facts = gather(node, kernel=proc, tmp_path=tmp_path,
                         library_globs=(str(tmp_path / "lib" / "libnvidia-ml.so.*.*"),))
    assert facts["present"] is False
    assert facts["reboot_required"] is True
    assert facts["kernel_module_version"] == "550.127.05"
    assert facts["driver_version"] == "570.172.08"
    assert "550.127.05" in facts["reboot_reasons"][0] and "570.172.08" in facts["reboot_reasons"][0]
    assert "mismatch" in facts["reason"]
    assert facts["health"]["status"] == "critical"


def test_kernel_module_differs_from_userspace_driver(tmp_path):
    _nvml, facts = gather(l40s(), kernel="550.127.05\n", tmp_path=tmp_path)
    assert facts["present"] is True
    assert facts["kernel_module_version"] == "550.127.05"
    assert facts["driver_version"] == "570.172.08"
    assert facts["reboot_required"] is True
    assert "550.127.05" in facts["reboot_reasons"][0] and "570.172.08" in facts["reboot_reasons"][0]
    assert facts["health"]["status"] == "warning"
    assert facts["reboot_reasons"][0] in facts["health"]["reasons"]


def test_matching_kernel_module_needs_no_reboot(tmp_path):
    _nvml, facts = gather(l40s(), kernel="570.172.08\n", tmp_path=tmp_path)
    assert facts["reboot_required"] is False and facts["reboot_reasons"] == []


# ---------------------------------------------------------------------------
# Kernel module version files
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("text,version", [
    ("570.172.08\n", "570.172.08"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.172.08  Tue Jul  8 17:45:39 UTC 2025\n", "570.172.08"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build  (dvs-builder@U22)\n",
     "575.57.08"),
    ("NVRM version: NVIDIA UNIX aarch64 Kernel Module  535.230.02  Fri Dec 20 2024\n", "535.230.02"),
    ("garbage\n", None),
])
def test_read_kernel_module_version(tmp_path, text, version):
    path = tmp_path / "version"
    path.write_text(text)
    assert collector.read_kernel_module_version((str(path),)) == version


def test_read_kernel_module_version_falls_back_to_proc(tmp_path):
    proc = tmp_path / "proc-version"
    proc.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.172.08  Tue Jul  8 2025\n")
    assert collector.read_kernel_module_version((str(tmp_path / "missing"), str(proc))) == "570.172.08"
    assert collector.read_kernel_module_version((str(tmp_path / "missing"),)) is None


def test_userspace_library_version_needs_one_version(tmp_path):
    (tmp_path / "libnvidia-ml.so.570.172.08").write_text("")
    pattern = (str(tmp_path / "libnvidia-ml.so.*.*"),)
    assert collector.read_userspace_library_version(pattern) == "570.172.08"
    (tmp_path / "libnvidia-ml.so.550.127.05").write_text("")
    assert collector.read_userspace_library_version(pattern) is None


# ---------------------------------------------------------------------------
# Per-GPU errors: NotSupported is null, others are noted, never raised
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("function", PER_GPU_QUERIES)
def test_not_supported_anywhere_becomes_null_without_errors(function):
    nvml = FakeNvml(hgx_h100())
    nvml.fail(function, pynvml.NVML_ERROR_NOT_SUPPORTED)
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    assert facts["present"] is True and facts["gpu_count"] == 8
    for gpu in facts["gpus"]:
        assert gpu["errors"] == []
        assert gpu["health"]["status"] == "ok"
    assert nvml.refcount == 0


@pytest.mark.parametrize("function", PER_GPU_QUERIES)
def test_no_permission_is_noted_on_that_gpu_only(function):
    nvml = FakeNvml(dgx_a100())
    nvml.fail(function, pynvml.NVML_ERROR_NO_PERMISSION, gpu=5)
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    assert any(function in e and "Insufficient Permissions" in e for e in facts["gpus"][5]["errors"])
    assert all(gpu["errors"] == [] for gpu in facts["gpus"] if gpu["index"] != 5)
    assert nvml.refcount == 0


def test_unsupported_fields_of_the_model_are_null():
    node = l40s()
    gpu = node.gpus[0]
    gpu.serial = gpu.board_part_number = gpu.power_draw_mw = gpu.temperature_c = None
    gpu.ecc_mode = gpu.remapped_rows = None
    gpu.clocks = {}
    _nvml, facts = gather(node)
    got = facts["gpus"][0]
    assert got["serial"] is None and got["board_part_number"] is None
    assert got["power"] == {"limit_w": 350.0, "draw_w": None}
    assert got["temperature_c"] is None
    assert got["ecc"] == {"mode": None, "pending_mode": None, "volatile_uncorrectable": None,
                          "aggregate_uncorrectable": None}
    assert got["remapped_rows"] is None and got["retired_pages"] is None
    assert got["clocks"]["sm_mhz"] is None and got["clocks"]["max_sm_mhz"] == 2520
    assert got["mig"] == {"supported": False, "current_mode": None, "pending_mode": None, "devices": []}
    assert got["nvlink"] == [] and got["fabric"] is None
    assert got["errors"] == []


def test_ecc_counters_are_not_asked_while_ecc_is_off():
    node = l40s()
    node.gpus[0].ecc_mode = [pynvml.NVML_FEATURE_DISABLED, pynvml.NVML_FEATURE_DISABLED]
    nvml, facts = gather(node)
    assert facts["gpus"][0]["ecc"]["mode"] == "disabled"
    assert facts["gpus"][0]["ecc"]["volatile_uncorrectable"] is None
    assert nvml.calls["nvmlDeviceGetTotalEccErrors"] == 0


def test_gpu_lost_when_opened_marks_that_gpu_and_the_node():
    node = hgx_h100()
    node.gpus[3].lost = True
    nvml, facts = gather(node)
    lost = facts["gpus"][3]
    assert lost["lost"] is True and lost["uuid"] is None
    assert lost["health"]["status"] == "critical"
    assert "GPU is lost" in lost["health"]["reasons"][0]
    assert facts["health"]["status"] == "critical"
    assert facts["health"]["reasons"][0].startswith("GPU 3: GPU is lost")
    assert all(g["uuid"] for g in facts["gpus"] if g["index"] != 3)
    assert nvml.refcount == 0


def test_gpu_lost_mid_query_keeps_what_was_gathered():
    nvml = FakeNvml(dgx_a100())
    nvml.fail("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_GPU_IS_LOST, gpu=2)
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    gpu = facts["gpus"][2]
    assert gpu["lost"] is True
    assert gpu["uuid"].startswith("GPU-") and gpu["memory"]["total_mib"] == 81920
    assert gpu["temperature_c"] is None          # asked after the loss: never reached
    assert nvml.calls_by_gpu[("nvmlDeviceGetTemperatureV", 2)] == 0
    assert facts["health"]["status"] == "critical"


def test_gpu_lost_during_mig_enumeration():
    nvml = FakeNvml(h200_mig())
    nvml.fail("nvmlDeviceGetAttributes", pynvml.NVML_ERROR_GPU_IS_LOST, gpu=0)
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    assert facts["gpus"][0]["lost"] is True
    assert facts["health"]["status"] == "critical"


def test_handle_no_permission_skips_only_that_gpu():
    nvml = FakeNvml(dgx_a100())
    nvml.fail("nvmlDeviceGetHandleByIndex", pynvml.NVML_ERROR_NO_PERMISSION, gpu=1)
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    assert facts["gpus"][1]["uuid"] is None
    assert facts["gpus"][1]["errors"] == ["nvmlDeviceGetHandleByIndex: Insufficient Permissions"]
    assert facts["gpus"][0]["uuid"] and facts["gpus"][2]["uuid"]


@pytest.mark.parametrize("function", ["nvmlDeviceGetName", "nvmlDeviceGetNvLinkState", "nvmlDeviceGetCount",
                                      "nvmlDeviceGetTemperatureV", "nvmlDeviceGetHandleByIndex",
                                      "nvmlDeviceGetMigDeviceHandleByIndex", "nvmlGpuInstanceGetInfo"])
def test_uninitialized_mid_run_fails_clearly_and_shuts_down(function):
    nvml = FakeNvml(h200_mig())
    nvml.fail(function, pynvml.NVML_ERROR_UNINITIALIZED)
    with pytest.raises(collector.NvmlCollectError, match="Uninitialized"):
        collector.collect(nvml, kernel_module_paths=(), library_globs=())
    assert nvml.calls["nvmlShutdown"] == 1 and nvml.refcount == 0


def test_device_count_failure_is_reported():
    nvml = FakeNvml(l40s())
    nvml.fail("nvmlDeviceGetCount", pynvml.NVML_ERROR_UNKNOWN)
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    assert facts["present"] is False and "could not count" in facts["reason"]
    assert nvml.refcount == 0


def test_system_query_errors_leave_null_versions():
    nvml = FakeNvml(l40s())
    nvml.fail("nvmlSystemGetCudaDriverVersion", pynvml.NVML_ERROR_NOT_SUPPORTED)
    nvml.fail("nvmlSystemGetNVMLVersion", pynvml.NVML_ERROR_NO_PERMISSION)
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    assert facts["cuda_driver_version"] is None and facts["nvml_version"] is None
    assert facts["driver_version"] == "570.172.08" and facts["present"] is True


def test_shutdown_failure_does_not_lose_the_facts():
    nvml = FakeNvml(l40s())
    nvml.fail("nvmlShutdown", pynvml.NVML_ERROR_UNKNOWN)
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    assert facts["present"] is True and nvml.calls["nvmlShutdown"] == 1


def test_old_driver_without_temperature_v_falls_back():
    nvml = FakeNvml(l40s())
    nvml.fail("nvmlDeviceGetTemperatureV", pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    assert facts["gpus"][0]["temperature_c"] == 38
    assert nvml.calls["nvmlDeviceGetTemperature"] == 1


def test_insufficient_resources_and_in_use_are_noted():
    nvml = FakeNvml(l40s())
    nvml.fail("nvmlDeviceGetComputeRunningProcesses", pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
    nvml.fail("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_IN_USE)
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    gpu = facts["gpus"][0]
    assert gpu["compute_processes"] is None and gpu["power"]["draw_w"] is None
    assert len(gpu["errors"]) == 2


# ---------------------------------------------------------------------------
# Speed: one nvmlInit per run, each query once per GPU
# ---------------------------------------------------------------------------

def test_one_init_and_each_query_once_per_gpu():
    nvml, facts = gather(dgx_a100())
    assert nvml.calls["nvmlInit"] == 1 and nvml.calls["nvmlShutdown"] == 1
    assert nvml.calls["nvmlDeviceGetCount"] == 1 and nvml.calls["nvmlSystemGetDriverVersion"] == 1
    for index in range(8):
        for function in ONCE_PER_GPU:
            assert nvml.calls_by_gpu[(function, index)] == 1, (function, index)
        assert nvml.calls_by_gpu[("nvmlDeviceGetTemperatureThreshold", index)] == 2   # slowdown, shutdown
        assert nvml.calls_by_gpu[("nvmlDeviceGetClockInfo", index)] == 3              # graphics, SM, memory
        assert nvml.calls_by_gpu[("nvmlDeviceGetMaxClockInfo", index)] == 2
        assert nvml.calls_by_gpu[("nvmlDeviceGetTotalEccErrors", index)] == 2         # volatile, aggregate
        assert nvml.calls_by_gpu[("nvmlDeviceGetRetiredPages", index)] == 1           # unsupported: stop
        # 12 links, plus the call that finds the end; remote info once per active link
        assert nvml.calls_by_gpu[("nvmlDeviceGetNvLinkState", index)] == 13
        assert nvml.calls_by_gpu[("nvmlDeviceGetNvLinkRemotePciInfo", index)] == 12
    assert facts["nvswitch_count"] == 6


def test_mig_queries_once_per_mig_device():
    nvml, facts = gather(h200_mig())
    assert nvml.calls["nvmlInit"] == 1
    assert len(facts["gpus"][0]["mig"]["devices"]) == 7
    for function in ("nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetComputeInstanceId", "nvmlDeviceGetAttributes",
                     "nvmlDeviceGetGpuInstanceById", "nvmlGpuInstanceGetInfo", "nvmlDeviceGetMigDeviceHandleByIndex"):
        assert nvml.calls[function] == 7, function
    assert nvml.calls["nvmlDeviceGetMaxMigDeviceCount"] == 1
    # The MIG device name carries the profile: no profile table look-up.
    assert nvml.calls["nvmlDeviceGetGpuInstanceProfileInfo"] == 0
    assert nvml.calls["nvmlDeviceGetName"] == 1 + 7


def test_mig_profile_from_the_profile_table_when_the_name_lacks_it():
    node = h200_mig()
    nvml = FakeNvml(node)
    nvml.fail("nvmlDeviceGetName", pynvml.NVML_ERROR_NOT_SUPPORTED)
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    assert {d["profile"] for d in facts["gpus"][0]["mig"]["devices"]} == {"1g.18gb"}
    # 1g.18gb is the first NVML profile: one look-up names all seven devices.
    assert nvml.calls["nvmlDeviceGetGpuInstanceProfileInfo"] == 1


def test_mig_without_gpu_instance_access_keeps_the_devices():
    nvml = FakeNvml(h200_mig())
    nvml.fail("nvmlDeviceGetGpuInstanceById", pynvml.NVML_ERROR_NO_PERMISSION)
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    gpu = facts["gpus"][0]
    assert len(gpu["mig"]["devices"]) == 7
    assert all(d["profile"] == "1g.18gb" and d["placement"] == {"start": None, "size": None}
               for d in gpu["mig"]["devices"])
    assert len(gpu["errors"]) == 7 and "Insufficient Permissions" in gpu["errors"][0]


def test_old_driver_without_fabric_query_is_null_not_an_error():
    nvml = FakeNvml(hgx_h100())
    nvml.fail("nvmlDeviceGetGpuFabricInfoV", pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    assert all(g["fabric"] is None and g["errors"] == [] for g in facts["gpus"])


# ---------------------------------------------------------------------------
# MIG facts
# ---------------------------------------------------------------------------

def test_h200_mig_devices():
    _nvml, facts = gather(h200_mig())
    mig = facts["gpus"][0]["mig"]
    assert mig["current_mode"] == mig["pending_mode"] == "enabled"
    assert [d["placement"] for d in mig["devices"]] == [{"start": s, "size": 1} for s in range(7)]
    assert {d["profile"] for d in mig["devices"]} == {"1g.18gb"}
    assert [d["gpu_instance_id"] for d in mig["devices"]] == list(range(7, 14))
    assert all(re.match(r"^MIG-[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$", d["uuid"]) for d in mig["devices"])
    assert all(d["memory_total_mib"] == 16384 and d["compute_instance_id"] == 0 for d in mig["devices"])


def test_mig_free_slots_are_skipped_and_smaller_compute_instances_named():
    node = h200_mig()
    mig = node.gpus[0].mig
    mig.gpu_instances = {
        3: FakeGpuInstance(id=3, profile_id=14, start=0, size=2, compute_instances={
            0: FakeComputeInstance(0, 0, 0, 1, slice_count=1, multiprocessor_count=16, uuid="MIG-" + "a" * 8 + "-0000-0000-0000-" + "0" * 12),
            1: FakeComputeInstance(1, 0, 1, 1, slice_count=1, multiprocessor_count=16, uuid="MIG-" + "b" * 8 + "-0000-0000-0000-" + "0" * 12)}),
        2: FakeGpuInstance(id=2, profile_id=9, start=4, size=4, compute_instances={
            0: FakeComputeInstance(0, 2, 0, 3, slice_count=3, multiprocessor_count=60, uuid="MIG-" + "c" * 8 + "-0000-0000-0000-" + "0" * 12)}),
    }
    nvml, facts = gather(node)
    devices = facts["gpus"][0]["mig"]["devices"]
    assert [(d["gpu_instance_id"], d["compute_instance_id"], d["profile"]) for d in devices] == [
        (2, 0, "3g.71gb"), (3, 0, "1c.2g.35gb"), (3, 1, "1c.2g.35gb")]
    assert devices[0]["placement"] == {"start": 4, "size": 4}
    assert nvml.calls["nvmlGpuInstanceGetInfo"] == 2        # once per GPU instance
    assert nvml.calls["nvmlDeviceGetMigDeviceHandleByIndex"] == 7   # the other 4 slots are free
    nvml.fail("nvmlDeviceGetName", pynvml.NVML_ERROR_NOT_SUPPORTED)   # the profile table names them too
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    assert [d["profile"] for d in facts["gpus"][0]["mig"]["devices"]] == ["3g.71gb", "1c.2g.35gb", "1c.2g.35gb"]


def test_mig_disabled_asks_nothing_more():
    nvml, facts = gather(hgx_h100())
    assert facts["gpus"][0]["mig"] == {"supported": True, "current_mode": "disabled",
                                       "pending_mode": "disabled", "devices": []}
    assert all(nvml.calls[f] == 0 for f in MIG_QUERIES)


# ---------------------------------------------------------------------------
# Health rules
# ---------------------------------------------------------------------------

def _health_of(mutate, **kwargs):
    node = hgx_h100()
    mutate(node.gpus[4])
    _nvml, facts = gather(node, **kwargs)
    return facts["gpus"][4]["health"], facts["health"]


def test_healthy_node_is_ok():
    _nvml, facts = gather(hgx_h100())
    assert facts["health"] == {"status": "ok", "reasons": []}


@pytest.mark.parametrize("mutate,status,text", [
    (lambda g: g.ecc_errors.update({(pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC): 2,
                                    (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_AGGREGATE_ECC): 2}),
     "critical", "2 uncorrectable ECC errors since the driver loaded"),
    (lambda g: g.ecc_errors.update({(pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_AGGREGATE_ECC): 5}),
     "warning", "5 uncorrectable ECC errors over the GPU's lifetime"),
    (lambda g: setattr(g, "remapped_rows", (0, 1, 1, 0)), "warning", "row remap is pending"),
    (lambda g: setattr(g, "remapped_rows", (0, 64, 0, 1)), "critical", "row remapping failed"),
    (lambda g: setattr(g, "temperature_c", 90), "warning", "over temperature: 90 C at or above the 90 C limit"),
    (lambda g: setattr(g, "temperature_c", 93), "critical", "92 C shutdown threshold"),
    (lambda g: setattr(g.mig, "pending_mode", pynvml.NVML_DEVICE_MIG_ENABLE), "warning",
     "MIG mode enabled is pending (current disabled): reset the GPU"),
    (lambda g: setattr(g, "ecc_mode", [pynvml.NVML_FEATURE_ENABLED, pynvml.NVML_FEATURE_DISABLED]), "warning",
     "ECC mode disabled is pending"),
    (lambda g: setattr(g.fabric, "state", pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS), "warning",
     "fabric registration is in progress"),
    (lambda g: setattr(g.fabric, "status", pynvml.NVML_ERROR_TIMEOUT), "critical",
     "fabric registration failed: Timeout"),
    (lambda g: setattr(g.fabric, "health_mask", pynvml.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE), "warning",
     "bandwidth is degraded"),
])
def test_health_rules(mutate, status, text):
    gpu_health, node_health = _health_of(mutate)
    assert gpu_health["status"] == status
    assert any(text in reason for reason in gpu_health["reasons"]), gpu_health
    assert node_health["status"] == status
    assert any(reason.startswith("GPU 4: ") and text in reason for reason in node_health["reasons"])


def test_retired_pages_pending_on_a_page_retirement_gpu():
    def volta_like(gpu):
        gpu.remapped_rows = None
        gpu.retired_pages = {pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS: [0x1000, 0x2000],
                             pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR: [0x3000]}
        gpu.retired_pages_pending = pynvml.NVML_FEATURE_ENABLED
    node = hgx_h100()
    volta_like(node.gpus[4])
    _nvml, facts = gather(node)
    gpu = facts["gpus"][4]
    assert gpu["retired_pages"] == {"single_bit": 2, "double_bit": 1, "pending": True}
    assert gpu["health"]["status"] == "warning"
    assert "page retirement is pending" in gpu["health"]["reasons"][0]


def test_temperature_warning_option_overrides_the_slowdown_threshold():
    gpu_health, _node = _health_of(lambda g: setattr(g, "temperature_c", 80), temperature_warning_c=75)
    assert gpu_health["status"] == "warning"
    assert "80 C at or above the 75 C limit" in gpu_health["reasons"][0]
    gpu_health, _node = _health_of(lambda g: setattr(g, "temperature_c", 80))
    assert gpu_health["status"] == "ok"


def test_worst_gpu_sets_the_node_status():
    node = hgx_h100()
    node.gpus[1].temperature_c = 91
    node.gpus[6].remapped_rows = (0, 9, 0, 1)
    _nvml, facts = gather(node)
    assert facts["health"]["status"] == "critical"
    assert [r.split(":")[0] for r in facts["health"]["reasons"]] == ["GPU 1", "GPU 6"]


# ---------------------------------------------------------------------------
# Fixtures and replay
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_matches_the_collector_output(name):
    """The committed fixture is what the collector returns for the node model today."""
    generator = _generator()
    expected = json.loads(generator.render(generator.gather(NODES[name]())))
    assert json.loads((collector_root() / "tests" / "fixtures" / "nvml" / (name + ".json")).read_text()) == expected


@pytest.mark.parametrize("name", FIXTURES)
def test_replay_of_every_fixture_returns_its_facts(fixtures_dir, name):
    path = fixtures_dir / "nvml" / (name + ".json")
    recorded = json.loads(path.read_text())
    facts = collector.load_replay(str(path))
    assert facts.pop("source") == "replay"
    recorded.pop("source")
    assert facts == recorded


def test_replay_accepts_the_whole_module_result(tmp_path, fixtures_dir):
    recorded = json.loads((fixtures_dir / "nvml" / "h200-mig.json").read_text())
    for wrapped in ({"changed": False, "ansible_facts": {"nvidia": recorded}}, {"nvidia": recorded}):
        path = tmp_path / "result.json"
        path.write_text(json.dumps(wrapped))
        facts = collector.load_replay(str(path))
        assert facts["gpus"] == recorded["gpus"] and facts["source"] == "replay"


@pytest.mark.parametrize("content,message", [
    ("{not json", "is not JSON"),
    ('{"ansible_facts": {"other": 1}}', "not a recorded nvml_facts result"),
    ('[1, 2]', "not a recorded nvml_facts result"),
    ('{"present": true, "gpu_count": 2, "gpus": []}', r"gpu_count \(2\) does not match the gpus list \(0\)"),
])
def test_bad_replay_file_fails_clearly(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(collector.ReplayError, match=message):
        collector.load_replay(str(path))


def test_missing_replay_file_fails_clearly(tmp_path):
    with pytest.raises(collector.ReplayError, match="cannot read replay_file"):
        collector.load_replay(str(tmp_path / "nope.json"))


def test_fixtures_are_realistic(fixtures_dir):
    def load(name):
        return json.loads((fixtures_dir / "nvml" / (name + ".json")).read_text())
    uuid_re = re.compile(r"^GPU-[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$")
    expected = {"dgx-a100": (8, "0x20B210DE", 81920, "NVIDIA A100-SXM4-80GB"),
                "hgx-h100": (8, "0x233010DE", 81559, "NVIDIA H100 80GB HBM3"),
                "h200-mig": (1, "0x233510DE", 143771, "NVIDIA H200"),
                "l40s": (1, "0x26B910DE", 46068, "NVIDIA L40S")}
    for name, (count, device_id, memory, product) in expected.items():
        facts = load(name)
        assert facts["present"] and facts["gpu_count"] == count
        assert facts["driver_version"] == "570.172.08" and facts["cuda_driver_version"] == "12.8"
        for gpu in facts["gpus"]:
            assert gpu["pci"]["device_id"] == device_id and gpu["memory"]["total_mib"] == memory
            assert gpu["name"] == product and uuid_re.match(gpu["uuid"])
            assert re.match(r"^00000000:[0-9A-F]{2}:00\.0$", gpu["pci"]["bus_id"])
        assert len({gpu["uuid"] for gpu in facts["gpus"]}) == count
    assert load("dgx-a100")["nvswitch_count"] == 6
    assert all(len([l for l in g["nvlink"] if l["active"]]) == 12 for g in load("dgx-a100")["gpus"])
    assert load("hgx-h100")["gpus"][0]["fabric"]["state"] == "completed"
    assert len(load("h200-mig")["gpus"][0]["mig"]["devices"]) == 7
    assert load("l40s")["gpus"][0]["mig"]["supported"] is False
    assert load("no-gpu")["present"] is False and load("no-gpu")["reason"]


def test_missing_fabric_struct_state_not_supported_is_null():
    node = l40s()
    node.gpus[0].fabric = FakeFabric(state=pynvml.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED)
    _nvml, facts = gather(node)
    assert facts["gpus"][0]["fabric"] is None


def test_uninitialized_in_the_profile_table_fails_clearly():
    nvml = FakeNvml(h200_mig())
    nvml.fail("nvmlDeviceGetName", pynvml.NVML_ERROR_NOT_SUPPORTED)
    nvml.fail("nvmlDeviceGetGpuInstanceProfileInfo", pynvml.NVML_ERROR_UNINITIALIZED)
    with pytest.raises(collector.NvmlCollectError, match="Uninitialized"):
        collector.collect(nvml, kernel_module_paths=(), library_globs=())
    assert nvml.refcount == 0


def test_old_driver_without_versioned_process_query_is_null():
    # pynvml raises NVMLLibraryMismatchError (not an NVMLError) for this one.
    nvml = FakeNvml(l40s())
    nvml.fail("nvmlDeviceGetComputeRunningProcesses", pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    with pytest.raises(pynvml.NVMLLibraryMismatchError):
        nvml.nvmlInit()
        nvml.nvmlDeviceGetComputeRunningProcesses(nvml.nvmlDeviceGetHandleByIndex(0))
    nvml.nvmlShutdown()
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=())
    assert facts["gpus"][0]["compute_processes"] is None and facts["gpus"][0]["errors"] == []


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_DRIVER_NOT_LOADED, pynvml.NVML_ERROR_NO_PERMISSION])
def test_init_failure_still_reports_the_installed_userspace_driver(tmp_path, code):
    (tmp_path / "libnvidia-ml.so.570.172.08").write_text("")
    nvml = FakeNvml(FakeNode(gpus=l40s().gpus, init_error=code))
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=(str(tmp_path / "libnvidia-ml.so.*.*"),))
    assert facts["present"] is False and facts["driver_version"] == "570.172.08"
    assert facts["reboot_required"] is False


# ---------------------------------------------------------------------------
# reboot_required compares the whole version, not the branch
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("kernel,user,differ", [
    ("570.148.08", "570.172.08", True),    # minor
    ("570.172.08", "570.172.09", True),    # patch
    ("570.172", "570.172.08", True),       # a part missing
    ("570.172.08", "570.172.08", False),
    ("570.172.8", "570.172.08", False),    # the same build, written with a leading zero
    ("550.127.05", "570.172.08", True),
])
def test_versions_differ_on_every_part(kernel, user, differ):
    assert collector.versions_differ(kernel, user) is differ


@pytest.mark.parametrize("kernel", ["570.148.08", "570.172.09"])
def test_reboot_required_when_only_minor_or_patch_differs(tmp_path, kernel):
    _nvml, facts = gather(l40s(), kernel=kernel + "\n", tmp_path=tmp_path)
    assert facts["driver_version"] == "570.172.08"
    assert facts["reboot_required"] is True
    assert facts["reboot_reasons"] == [
        "the loaded NVIDIA kernel module is %s but the user-space driver is 570.172.08: reboot (or reload the "
        "nvidia modules) to finish the driver change" % kernel]


# ---------------------------------------------------------------------------
# GPUs on the PCI bus that NVML cannot read are not a node without GPUs
# ---------------------------------------------------------------------------

def _bus(tmp_path, *device_ids):
    """A root whose /sys/bus/pci/devices holds an NVIDIA GPU per device id, and a network card."""
    host = gpu_node.FakeNode(str(tmp_path))
    for n, device in enumerate(device_ids):
        host.pci("0000:%02x:00.0" % (6 + n), "0x10de", device, "0x030200")
    host.pci("0000:01:00.0", "0x15b3", "0x101d", "0x020000")
    return str(tmp_path)


@pytest.mark.parametrize("code,cause", [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "libnvidia-ml.so.1 not found: the NVIDIA driver is not installed"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "the NVIDIA kernel module is not loaded"),
    (pynvml.NVML_ERROR_GPU_NOT_FOUND, "NVML found no NVIDIA GPU on this host"),
])
def test_gpus_on_the_pci_bus_that_nvml_cannot_read_name_the_cause(tmp_path, code, cause):
    _nvml, facts = gather(FakeNode(gpus=[], init_error=code), pci_root=_bus(tmp_path, "0x2335"))
    assert facts["present"] is False and facts["pci_gpu_count"] == 1
    assert facts["reason"].startswith("NVML cannot read the 1 NVIDIA GPU(s) on the PCI bus: " + cause)
    assert facts["health"] == {"status": "critical", "reasons": [facts["reason"]]}


def test_a_driver_library_mismatch_with_gpus_on_the_bus_keeps_one_reason(tmp_path):
    node = FakeNode(gpus=[], init_error=pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    _nvml, facts = gather(node, pci_root=_bus(tmp_path, "0x2335", "0x2335"))
    assert facts["pci_gpu_count"] == 2 and facts["reboot_required"] is True
    assert facts["health"]["status"] == "critical"
    assert facts["health"]["reasons"] == [facts["reason"]]
    assert "NVML cannot read the 2 NVIDIA GPU(s) on the PCI bus: NVML cannot start: driver/library version " \
           "mismatch" in facts["reason"]


def test_no_nvidia_gpu_on_the_bus_is_a_node_without_gpu(tmp_path):
    _nvml, facts = gather(FakeNode(gpus=[], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND), pci_root=_bus(tmp_path))
    assert facts["pci_gpu_count"] == 0
    assert facts["reason"] == "libnvidia-ml.so.1 not found: the NVIDIA driver is not installed"
    assert facts["health"] == {"status": "ok", "reasons": []}


def test_the_bus_is_not_read_when_nvml_counts_the_gpus(tmp_path):
    _nvml, facts = gather(l40s(), pci_root=_bus(tmp_path, "0x26b9", "0x26b9"))
    assert facts["present"] is True and facts["pci_gpu_count"] is None and facts["reason"] is None


def test_without_any_binding_the_bus_still_tells_a_gpu_node(tmp_path):
    facts = collector.unreadable("the node's Python cannot import pynvml", kernel_module_paths=(),
                                 pci_root=_bus(tmp_path, "0x2335"))
    assert facts["present"] is False and facts["pci_gpu_count"] == 1
    assert facts["reason"] == "NVML cannot read the 1 NVIDIA GPU(s) on the PCI bus: the node's Python cannot import pynvml"
    assert facts["health"]["status"] == "critical" and facts["nvml_binding"] is None


def test_the_binding_used_is_in_the_facts():
    binding = {"source": "controller", "version": "13.615.71"}
    for node in (l40s(), FakeNode(gpus=[], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)):
        _nvml, facts = gather(node, binding=binding)
        assert facts["nvml_binding"] == binding


# ---------------------------------------------------------------------------
# Clocks event (throttle) reasons and utilisation
# ---------------------------------------------------------------------------

def _one_gpu(mask=pynvml.nvmlClocksEventReasonGpuIdle, utilization=(0, 0)):
    node = l40s()
    node.gpus[0].clocks_event_reasons, node.gpus[0].utilization = mask, utilization
    return node


def test_clocks_event_reasons_and_utilization_are_read():
    mask = pynvml.nvmlClocksEventReasonSwPowerCap | pynvml.nvmlClocksEventReasonSyncBoost
    _nvml, facts = gather(_one_gpu(mask, (97, 24)))
    gpu = facts["gpus"][0]
    assert gpu["clocks_event_reasons"] == ["sw_power_cap", "sync_boost"]
    assert gpu["utilization"] == {"gpu_percent": 97, "memory_percent": 24}
    assert gpu["health"] == {"status": "ok", "reasons": []}


def test_no_reason_active_is_an_empty_list_and_unknown_bits_are_kept():
    assert gather(_one_gpu(0))[1]["gpus"][0]["clocks_event_reasons"] == []
    assert collector.clocks_event_names(0x4 | 0x10000) == ["sw_power_cap", "unknown_0x10000"]
    assert collector.clocks_event_names(None) is None


def test_not_supported_is_null_without_errors():
    _nvml, facts = gather(_one_gpu(None, None))
    gpu = facts["gpus"][0]
    assert gpu["clocks_event_reasons"] is None and gpu["utilization"] is None and gpu["errors"] == []


def test_utilization_is_null_in_mig_mode_as_nvml_answers():
    _nvml, facts = gather(h200_mig())
    assert facts["gpus"][0]["utilization"] is None and facts["gpus"][0]["clocks_event_reasons"] == ["gpu_idle"]


def test_a_driver_without_the_event_call_gives_the_throttle_reasons():
    node = _one_gpu(pynvml.nvmlClocksThrottleReasonHwSlowdown)
    nvml = FakeNvml(node)
    nvml.fail("nvmlDeviceGetCurrentClocksEventReasons", pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    facts = collector.collect(nvml, kernel_module_paths=(), library_globs=(), pci_root=NO_ROOT)
    assert facts["gpus"][0]["clocks_event_reasons"] == ["hw_slowdown"] and facts["gpus"][0]["errors"] == []
    assert nvml.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 1


def test_a_binding_without_the_event_call_gives_the_throttle_reasons(monkeypatch):
    monkeypatch.delattr(FakeNvml, "nvmlDeviceGetCurrentClocksEventReasons")
    nvml, facts = gather(_one_gpu(pynvml.nvmlClocksThrottleReasonSwPowerCap))
    assert facts["gpus"][0]["clocks_event_reasons"] == ["sw_power_cap"]
    assert nvml.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 1


def test_the_event_call_is_asked_once_and_the_throttle_call_not_at_all():
    nvml, _facts = gather(hgx_h100())
    assert nvml.calls["nvmlDeviceGetCurrentClocksEventReasons"] == 8
    assert nvml.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 0


@pytest.mark.parametrize("bit,text", [
    (pynvml.nvmlClocksEventReasonHwSlowdown, "HW slowdown is active"),
    (pynvml.nvmlClocksEventReasonHwThermalSlowdown, "HW thermal slowdown is active"),
    (pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown, "HW power brake slowdown is active"),
])
def test_hardware_slowdown_is_a_warning_naming_the_reason(bit, text):
    _gpu_health, node_health = _health_of(lambda g: setattr(g, "clocks_event_reasons",
                                                            bit | pynvml.nvmlClocksEventReasonSwPowerCap))
    assert node_health["status"] == "warning"
    assert [r for r in node_health["reasons"] if text in r] and all(r.startswith("GPU 4: ") for r in node_health["reasons"])


@pytest.mark.parametrize("bit", [pynvml.nvmlClocksEventReasonSwPowerCap, pynvml.nvmlClocksEventReasonSwThermalSlowdown,
                                 pynvml.nvmlClocksEventReasonGpuIdle, pynvml.nvmlClocksEventReasonSyncBoost])
def test_the_drivers_own_limits_are_not_a_warning(bit):
    assert _health_of(lambda g: setattr(g, "clocks_event_reasons", bit))[1]["status"] == "ok"


@pytest.mark.parametrize("value,message", [
    ("sw_power_cap", "gpus[0].clocks_event_reasons must be a list or null, got str"),
    ([4], "gpus[0].clocks_event_reasons[0] must be a string, got int"),
    ({"gpu_percent": "97"}, "gpus[0].utilization.gpu_percent must be an integer or null, got str"),
])
def test_replayed_throttle_fields_of_the_wrong_type_are_refused(fixtures_dir, value, message):
    facts = json.loads((fixtures_dir / "nvml" / "l40s.json").read_text())
    key = "utilization" if isinstance(value, dict) else "clocks_event_reasons"
    facts["gpus"][0][key] = value
    assert message in collector.check_facts(facts)
