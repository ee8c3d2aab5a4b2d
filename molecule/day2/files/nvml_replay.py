"""Write the nvml_facts replay for this GPU-less container from the installed driver.

Run by apt after every dpkg call (DPkg::Post-Invoke): one L40S GPU whose driver and
loaded kernel module are the version in /usr/lib/nvidia/version (shipped by libcuda1),
as NVML reads it on a node after the new module is loaded; no driver, no GPU.
"""
import json
import os
import sys

template, out = sys.argv[1], sys.argv[2]
try:
    with open("/usr/lib/nvidia/version") as f:
        version = f.read().strip()
except FileNotFoundError:
    version = None
with open(template) as f:
    facts = json.load(f)
if version:
    facts.update(driver_version=version, kernel_module_version=version, reboot_required=False, reboot_reasons=[])
else:
    facts.update(driver_version=None, kernel_module_version=None, cuda_driver_version=None, nvml_version=None,
                 present=False, gpu_count=0, gpus=[], nvswitch_count=None, reboot_required=False,
                 reboot_reasons=[], health={"status": "ok", "reasons": []},
                 reason="libnvidia-ml.so.1 not found: the NVIDIA driver is not installed")
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(facts, f, indent=1, sort_keys=True)
os.replace(tmp, out)
