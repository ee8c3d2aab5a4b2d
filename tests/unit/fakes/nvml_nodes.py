"""Hardware models of the reference nodes, as data for ``fakes.fake_pynvml``.

Each function returns a fresh ``FakeNode`` (mutate it freely in a test). The values
follow what NVML reports on these boards: PCI device ids, memory totals in MiB,
power limits, temperature thresholds, NVLink counts and MIG profiles (ids, names,
memory, SM counts and placements as ``nvidia-smi mig -lgip`` lists them). UUIDs
and serials are made up but keep NVML's formats; they are derived from the node
name so a regenerated fixture does not change.

``NODES`` maps each fixture name (tests/fixtures/nvml/<name>.json) to its model.
"""

import uuid

import pynvml as _nv

from fakes.fake_pynvml import (
    FakeComputeInstance,
    FakeFabric,
    FakeGpu,
    FakeGpuInstance,
    FakeGpuInstanceProfile,
    FakeMig,
    FakeNode,
    FakeNvLink,
)

DRIVER = "570.172.08"
CUDA = 12080
_NS = uuid.UUID("6f1c2b1e-9c3d-4a55-8f0e-2f5b3c1d7a90")


def gpu_uuid(seed):
    return "GPU-%s" % uuid.uuid5(_NS, seed)


def mig_uuid(seed):
    return "MIG-%s" % uuid.uuid5(_NS, "mig/" + seed)


def _thresholds(shutdown, slowdown, gpu_max):
    return {
        _nv.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: shutdown,
        _nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: slowdown,
        _nv.NVML_TEMPERATURE_THRESHOLD_GPU_MAX: gpu_max,
    }


def _clocks(graphics, sm, mem):
    return {_nv.NVML_CLOCK_GRAPHICS: graphics, _nv.NVML_CLOCK_SM: sm, _nv.NVML_CLOCK_MEM: mem}


def _no_ecc_errors():
    return {
        (_nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, _nv.NVML_VOLATILE_ECC): 0,
        (_nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, _nv.NVML_AGGREGATE_ECC): 0,
        (_nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, _nv.NVML_VOLATILE_ECC): 0,
        (_nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, _nv.NVML_AGGREGATE_ECC): 0,
    }


# Valid placement starts by slice count, as `nvidia-smi mig -lgipp` lists them.
_PLACEMENTS = {1: list(range(7)), 2: [0, 2, 4], 3: [0, 4], 4: [0], 7: [0]}


def _profiles(rows):
    """rows: (profile index constant, id, name, slices, instances, memory MiB, SMs)."""
    profiles = {}
    for index, pid, name, slices, count, mem, sms in rows:
        placements = [0, 2, 4, 6] if count == 4 else _PLACEMENTS[slices]
        profiles[index] = FakeGpuInstanceProfile(
            id=pid, name=name, slice_count=slices, instance_count=count, memory_mb=mem,
            multiprocessor_count=sms, placements=placements, copy_engine_count=slices,
            decoder_count=slices, jpeg_count=slices, ofa_count=1 if slices == 7 or name.endswith("+me") else 0)
    return profiles


P = _nv
A100_80GB_PROFILES = [
    (P.NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "MIG 1g.10gb", 1, 7, 9728, 14),
    (P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "MIG 1g.10gb+me", 1, 1, 9728, 14),
    (P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "MIG 1g.20gb", 1, 4, 19968, 14),
    (P.NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "MIG 2g.20gb", 2, 3, 19968, 28),
    (P.NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "MIG 3g.40gb", 3, 2, 40192, 42),
    (P.NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "MIG 4g.40gb", 4, 1, 40192, 56),
    (P.NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "MIG 7g.80gb", 7, 1, 81152, 98),
]
H100_80GB_PROFILES = [
    (P.NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "MIG 1g.10gb", 1, 7, 9984, 16),
    (P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "MIG 1g.10gb+me", 1, 1, 9984, 16),
    (P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "MIG 1g.20gb", 1, 4, 20096, 26),
    (P.NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "MIG 2g.20gb", 2, 3, 20096, 32),
    (P.NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "MIG 3g.40gb", 3, 2, 40320, 60),
    (P.NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "MIG 4g.40gb", 4, 1, 40320, 64),
    (P.NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "MIG 7g.80gb", 7, 1, 80896, 132),
]
H200_PROFILES = [
    (P.NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "MIG 1g.18gb", 1, 7, 16384, 16),
    (P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "MIG 1g.18gb+me", 1, 1, 16384, 16),
    (P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "MIG 1g.35gb", 1, 4, 32768, 26),
    (P.NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "MIG 2g.35gb", 2, 3, 32768, 32),
    (P.NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "MIG 3g.71gb", 3, 2, 70912, 60),
    (P.NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "MIG 4g.71gb", 4, 1, 70912, 64),
    (P.NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "MIG 7g.141gb", 7, 1, 142336, 132),
]


def _mig(rows, enabled=False, gpu_instances=None):
    mode = _nv.NVML_DEVICE_MIG_ENABLE if enabled else _nv.NVML_DEVICE_MIG_DISABLE
    return FakeMig(current_mode=mode, pending_mode=mode, profiles=_profiles(rows),
                   gpu_instances=gpu_instances, max_mig_devices=7)


def dgx_a100():
    """DGX A100: 8x A100-SXM4-80GB, 12 NVLinks each to 6 NVSwitches (2 links per switch)."""
    switches = ["00000000:%02X:00.0" % bus for bus in (0xC4, 0xC5, 0xC6, 0xC7, 0xC8, 0xC9)]
    buses = [0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD]
    gpus = []
    for i, bus in enumerate(buses):
        serial = "13230210%05d" % (12345 + i * 7)
        gpus.append(FakeGpu(
            index=i, uuid=gpu_uuid("dgx-a100/%d" % i), name="NVIDIA A100-SXM4-80GB",
            pci_bus_id="00000000:%02X:00.0" % bus, pci_device_id=0x20B210DE, pci_subsystem_id=0x147F10DE,
            memory_total_mib=81920, memory_used_mib=4, serial=serial,
            board_part_number="692-2G506-0210-002", architecture=_nv.NVML_DEVICE_ARCH_AMPERE,
            power_limit_mw=400000, power_draw_mw=61000 + i * 850, temperature_c=31 + i % 4,
            temperature_thresholds=_thresholds(92, 89, 85),
            ecc_mode=[_nv.NVML_FEATURE_ENABLED, _nv.NVML_FEATURE_ENABLED], ecc_errors=_no_ecc_errors(),
            retired_pages=None, retired_pages_pending=None, remapped_rows=(0, 0, 0, 0),
            clocks=_clocks(210, 210, 1593), max_clocks=_clocks(1410, 1410, 1593),
            clocks_event_reasons=_nv.nvmlClocksEventReasonGpuIdle, utilization=(0, 0),
            nvlinks=[FakeNvLink(True, _nv.NVML_NVLINK_DEVICE_TYPE_SWITCH, switches[link // 2])
                     for link in range(12)],
            fabric=None, mig=_mig(A100_80GB_PROFILES)))
    return FakeNode(name="dgx-a100", gpus=gpus, driver_version=DRIVER, cuda_driver_version=CUDA)


def hgx_h100():
    """HGX H100: 8x H100 80GB HBM3, 18 NVLinks each to 4 NVSwitches (5/4/4/5), fabric probed."""
    switches = ["00000000:%02X:00.0" % bus for bus in (0x05, 0x06, 0x07, 0x08)]
    per_switch = [0] * 5 + [1] * 4 + [2] * 4 + [3] * 5
    buses = [0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB]
    healthy = (_nv.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE << _nv.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW
               | _nv.NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_FALSE << _nv.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY
               | _nv.NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE << _nv.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY
               | _nv.NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE
               << _nv.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY)
    gpus = []
    for i, bus in enumerate(buses):
        gpus.append(FakeGpu(
            index=i, uuid=gpu_uuid("hgx-h100/%d" % i), name="NVIDIA H100 80GB HBM3",
            pci_bus_id="00000000:%02X:00.0" % bus, pci_device_id=0x233010DE, pci_subsystem_id=0x16C110DE,
            memory_total_mib=81559, memory_used_mib=0, serial="16522210%05d" % (30512 + i * 11),
            board_part_number="692-2G520-0200-000", architecture=_nv.NVML_DEVICE_ARCH_HOPPER,
            power_limit_mw=700000, power_draw_mw=71500 + i * 620, temperature_c=29 + i % 5,
            temperature_thresholds=_thresholds(92, 90, 87),
            ecc_mode=[_nv.NVML_FEATURE_ENABLED, _nv.NVML_FEATURE_ENABLED], ecc_errors=_no_ecc_errors(),
            retired_pages=None, retired_pages_pending=None, remapped_rows=(0, 0, 0, 0),
            clocks=_clocks(345, 345, 2619), max_clocks=_clocks(1980, 1980, 2619),
            clocks_event_reasons=_nv.nvmlClocksEventReasonGpuIdle, utilization=(0, 0),
            nvlinks=[FakeNvLink(True, _nv.NVML_NVLINK_DEVICE_TYPE_SWITCH, switches[per_switch[link]])
                     for link in range(18)],
            fabric=FakeFabric(state=_nv.NVML_GPU_FABRIC_STATE_COMPLETED, status=_nv.NVML_SUCCESS,
                              clique_id=32766, cluster_uuid="f0d3a1c2-5b64-4e7a-9c18-3b2e6d4f8a01",
                              health_mask=healthy),
            mig=_mig(H100_80GB_PROFILES)))
    return FakeNode(name="hgx-h100", gpus=gpus, driver_version=DRIVER, cuda_driver_version=CUDA)


def h200_mig():
    """One H200 141GB with MIG enabled: 7x 1g.18gb GPU instances at placements 0..6."""
    instances = {}
    for slot in range(7):
        gi_id = 7 + slot   # NVML numbers the 1-slice instances of a full split 7..13
        instances[gi_id] = FakeGpuInstance(
            id=gi_id, profile_id=19, start=slot, size=1,
            compute_instances={0: FakeComputeInstance(
                id=0, profile_id=_nv.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, start=0, size=1,
                slice_count=1, multiprocessor_count=16, uuid=mig_uuid("h200-mig/0/%d" % gi_id))})
    gpu = FakeGpu(
        index=0, uuid=gpu_uuid("h200-mig/0"), name="NVIDIA H200",
        pci_bus_id="00000000:1B:00.0", pci_device_id=0x233510DE, pci_subsystem_id=0x18B010DE,
        memory_total_mib=143771, memory_used_mib=0, serial="16542240%05d" % 17044,
        board_part_number="692-2G520-0280-000", architecture=_nv.NVML_DEVICE_ARCH_HOPPER,
        power_limit_mw=700000, power_draw_mw=88400, temperature_c=33,
        temperature_thresholds=_thresholds(92, 90, 87),
        ecc_mode=[_nv.NVML_FEATURE_ENABLED, _nv.NVML_FEATURE_ENABLED], ecc_errors=_no_ecc_errors(),
        retired_pages=None, retired_pages_pending=None, remapped_rows=(0, 0, 0, 0),
        clocks=_clocks(1980, 1980, 3201), max_clocks=_clocks(1980, 1980, 3201),
        clocks_event_reasons=_nv.nvmlClocksEventReasonGpuIdle, utilization=(0, 0),
        nvlinks=[FakeNvLink(False, _nv.NVML_NVLINK_DEVICE_TYPE_UNKNOWN, None) for _link in range(18)],
        fabric=FakeFabric(state=_nv.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, status=_nv.NVML_ERROR_NOT_SUPPORTED),
        mig=_mig(H200_PROFILES, enabled=True, gpu_instances=instances))
    return FakeNode(name="h200-mig", gpus=[gpu], driver_version=DRIVER, cuda_driver_version=CUDA)


def l40s():
    """One L40S (Ada, PCIe): no MIG, no NVLink, row remapping, no fabric."""
    gpu = FakeGpu(
        index=0, uuid=gpu_uuid("l40s/0"), name="NVIDIA L40S",
        pci_bus_id="00000000:41:00.0", pci_device_id=0x26B910DE, pci_subsystem_id=0x185110DE,
        memory_total_mib=46068, memory_used_mib=1, serial="13242230%05d" % 48121,
        board_part_number="900-2G133-0080-000", architecture=_nv.NVML_DEVICE_ARCH_ADA,
        power_limit_mw=350000, power_draw_mw=36200, temperature_c=38,
        temperature_thresholds=_thresholds(98, 95, 89),
        ecc_mode=[_nv.NVML_FEATURE_ENABLED, _nv.NVML_FEATURE_ENABLED], ecc_errors=_no_ecc_errors(),
        retired_pages=None, retired_pages_pending=None, remapped_rows=(0, 0, 0, 0),
        clocks=_clocks(210, 210, 405), max_clocks=_clocks(2520, 2520, 9001),
        clocks_event_reasons=_nv.nvmlClocksEventReasonGpuIdle, utilization=(0, 0),
        nvlinks=None, fabric=None, mig=None)
    return FakeNode(name="l40s", gpus=[gpu], driver_version=DRIVER, cuda_driver_version=CUDA)


def no_gpu():
    """A CPU node: no NVIDIA driver installed, so libnvidia-ml.so.1 is not there."""
    return FakeNode(name="no-gpu", gpus=[], init_error=_nv.NVML_ERROR_LIBRARY_NOT_FOUND,
                    driver_version=None, cuda_driver_version=None, kernel_module_version=None)


RTX_PRO_6000_PROFILES = [
    # (profile index, id, name, slices, instances, memory MiB, SMs, placements)
    (P.NVML_GPU_INSTANCE_PROFILE_1_SLICE, 14, "MIG 1g.24gb", 1, 4, 24064, 46, (0, 1, 2, 3)),
    (P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX, 47, "MIG 1g.24gb+gfx", 1, 4, 24064, 46, (0, 1, 2, 3)),
    (P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, 48, "MIG 1g.24gb-me", 1, 4, 24064, 46, (0, 1, 2, 3)),
    (P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, 49, "MIG 1g.24gb+me.all", 1, 1, 24064, 46, (0, 1, 2, 3)),
    (P.NVML_GPU_INSTANCE_PROFILE_2_SLICE, 5, "MIG 2g.48gb", 2, 2, 48384, 94, (0, 2)),
    (P.NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX, 35, "MIG 2g.48gb+gfx", 2, 2, 48384, 94, (0, 2)),
    (P.NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME, 36, "MIG 2g.48gb-me", 2, 2, 48384, 94, (0, 2)),
    (P.NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME, 37, "MIG 2g.48gb+me.all", 2, 1, 48384, 94, (0, 2)),
    (P.NVML_GPU_INSTANCE_PROFILE_4_SLICE, 0, "MIG 4g.96gb", 4, 1, 97024, 188, (0,)),
    (P.NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX, 32, "MIG 4g.96gb+gfx", 4, 1, 97024, 188, (0,)),
]


def rtx_pro_6000_mig():
    """One RTX PRO 6000 Blackwell Server Edition, MIG enabled and empty: 4 slices, +gfx/-me/+me.all variants.

    Not a recorded fixture; the live path's model of a GPU whose profile names carry attributes.
    """
    profiles = dict((index, FakeGpuInstanceProfile(
        id=pid, name=name, slice_count=slices, instance_count=count, memory_mb=mem, multiprocessor_count=sms,
        placements=placements, copy_engine_count=slices, decoder_count=0 if name.endswith("-me") else slices,
        jpeg_count=slices, ofa_count=1 if name.endswith("+me.all") else 0))
        for index, pid, name, slices, count, mem, sms, placements in RTX_PRO_6000_PROFILES)
    mode = _nv.NVML_DEVICE_MIG_ENABLE
    gpu = FakeGpu(
        index=0, uuid=gpu_uuid("rtx-pro-6000/0"), name="NVIDIA RTX PRO 6000 Blackwell Server Edition",
        pci_bus_id="00000000:3B:00.0", pci_device_id=0x2BB510DE, pci_subsystem_id=0x204E10DE,
        memory_total_mib=97887, memory_used_mib=0, serial="1794125%06d" % 4711,
        board_part_number="900-2G153-0000-000", architecture=_nv.NVML_DEVICE_ARCH_BLACKWELL,
        power_limit_mw=600000, power_draw_mw=75000, temperature_c=34,
        temperature_thresholds=_thresholds(98, 95, 90),
        ecc_mode=[_nv.NVML_FEATURE_ENABLED, _nv.NVML_FEATURE_ENABLED], ecc_errors=_no_ecc_errors(),
        retired_pages=None, retired_pages_pending=None, remapped_rows=(0, 0, 0, 0),
        clocks=_clocks(180, 180, 405), max_clocks=_clocks(2617, 2617, 14001),
        clocks_event_reasons=_nv.nvmlClocksEventReasonGpuIdle, utilization=(0, 0),
        nvlinks=None, fabric=None,
        mig=FakeMig(current_mode=mode, pending_mode=mode, profiles=profiles, gpu_instances={}, max_mig_devices=4))
    return FakeNode(name="rtx-pro-6000", gpus=[gpu], driver_version=DRIVER, cuda_driver_version=CUDA)


NODES = {
    "dgx-a100": dgx_a100,
    "hgx-h100": hgx_h100,
    "h200-mig": h200_mig,
    "l40s": l40s,
    "no-gpu": no_gpu,
}
