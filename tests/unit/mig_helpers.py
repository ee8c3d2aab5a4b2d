"""Small builders of nvml_facts dicts for MIG tests (the schema of nvml_facts)."""

DEVICE_IDS = {
    "A100 40GB": "0x20B010DE", "A100 80GB": "0x20B210DE", "H100 80GB": "0x233010DE",
    "H100 NVL 94GB": "0x232110DE", "H100 96GB / GH200": "0x234210DE", "H200 141GB": "0x233510DE",
    "B200": "0x290110DE", "GB200": "0x294110DE", "A30 24GB": "0x20B710DE",
}


def mig_device(gi, profile, start, size, ci=0):
    return {"index": gi, "gpu_instance_id": gi, "compute_instance_id": ci, "profile": profile,
            "placement": {"start": start, "size": size}, "uuid": "MIG-%08d" % gi, "memory_total_mib": 0}


def gpu(index=0, device_id="0x233010DE", name="NVIDIA H100 80GB HBM3", supported=True,
        current="disabled", pending=None, devices=()):
    return {
        "index": index, "uuid": "GPU-%08d-0000-0000-0000-000000000000" % index, "name": name,
        "pci": {"bus_id": "00000000:%02X:00.0" % (0x18 + index), "device_id": device_id},
        "mig": {"supported": supported, "current_mode": current if supported else None,
                "pending_mode": (pending or current) if supported else None,
                "devices": list(devices)},
        "compute_processes": 0,
    }


def facts(*gpus):
    return {"present": bool(gpus), "reason": None if gpus else "no GPU", "source": "replay",
            "gpu_count": len(gpus), "gpus": list(gpus)}


def config(name="test", **entry):
    body = {"devices": "all"}
    body.update(dict((k.replace("_", "-"), v) for k, v in entry.items()))
    return {"version": "v1", "mig-configs": {name: [body]}}
