#!/usr/bin/env python
"""Benchmark: the nvml_facts collector against parsing `nvidia-smi -q -x`, for one node.

Not a test: run it by hand, on an idle machine, from the repository root:

    .venv/bin/python tests/benchmarks/bench_nvml_facts.py [--runs 300] [--write docs/benchmarks/nvml_facts.md]

Both sides describe the HGX H100 node (8x H100 80GB HBM3):
  * nvml:  plugins/module_utils/_nvml/collect.py collect() over the fake pynvml built from
           tests/unit/fakes/nvml_nodes.py:hgx_h100() (no GPU needed);
  * smi:   tests/fixtures/nvidia-smi/hgx-h100.xml (the same node as nvidia-smi -q -x
           prints it) through the minimal parser below, in process, and again behind a
           process spawn (`cat` of the file) as the floor of running nvidia-smi itself.
On a GPU host the NVML side pays one driver round trip per call (counted below) and
the nvidia-smi side pays nvidia-smi's own NVML start-up and every query it makes;
neither can be measured without a GPU.
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import conftest  # noqa: E402  (collection and tests/unit on sys.path)

from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as collector  # noqa: E402
from fakes.fake_pynvml import FakeNvml  # noqa: E402
from fakes.nvml_nodes import hgx_h100  # noqa: E402

XML = str(conftest.FIXTURES / "nvidia-smi" / "hgx-h100.xml")


# -- the minimal nvidia-smi -q -x parser (benchmark only) ----------------------

def _num(text, suffix=""):
    if text is None or text.strip() in ("N/A", "None", "[N/A]"):
        return None
    value = text.strip()
    if suffix and value.endswith(suffix):
        value = value[:-len(suffix)].strip()
    try:
        return float(value) if "." in value else int(value)
    except ValueError:
        return None


def parse_smi(xml_text):
    root = ET.fromstring(xml_text)
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        def t(path):
            node = gpu.find(path)
            return node.text if node is not None else None
        gpus.append({
            "index": index, "uuid": t("uuid"), "name": t("product_name"), "serial": t("serial"),
            "board_part_number": t("board_part_number"),
            "architecture": (t("product_architecture") or "").lower() or None,
            "pci": {"bus_id": t("pci/pci_bus_id"), "device_id": "0x" + (t("pci/pci_device_id") or "")},
            "memory": {"total_mib": _num(t("fb_memory_usage/total"), "MiB"),
                       "used_mib": _num(t("fb_memory_usage/used"), "MiB")},
            "mig": {"current_mode": (t("mig_mode/current_mig") or "").lower() or None,
                    "pending_mode": (t("mig_mode/pending_mig") or "").lower() or None},
            "persistence_mode": (t("persistence_mode") or "").lower() or None,
            "compute_mode": (t("compute_mode") or "").lower() or None,
            "power": {"limit_w": _num(t("gpu_power_readings/current_power_limit"), "W"),
                      "draw_w": _num(t("gpu_power_readings/instant_power_draw"), "W")},
            "temperature_c": _num(t("temperature/gpu_temp"), "C"),
            "ecc": {"mode": (t("ecc_mode/current_ecc") or "").lower() or None,
                    "volatile_uncorrectable": _num(t("ecc_errors/volatile/dram_uncorrectable")),
                    "aggregate_uncorrectable": _num(t("ecc_errors/aggregate/dram_uncorrectable"))},
            "remapped_rows": {"correctable": _num(t("remapped_rows/remapped_row_corr")),
                              "uncorrectable": _num(t("remapped_rows/remapped_row_unc")),
                              "pending": t("remapped_rows/remapped_row_pending") == "Yes",
                              "failure": t("remapped_rows/remapped_row_failure") == "Yes"},
            "clocks": {"graphics_mhz": _num(t("clocks/graphics_clock"), "MHz"),
                       "sm_mhz": _num(t("clocks/sm_clock"), "MHz"),
                       "memory_mhz": _num(t("clocks/mem_clock"), "MHz"),
                       "max_sm_mhz": _num(t("max_clocks/sm_clock"), "MHz"),
                       "max_memory_mhz": _num(t("max_clocks/mem_clock"), "MHz")},
            "fabric": {"state": (t("fabric/state") or "").lower() or None, "status": t("fabric/status")},
        })
    return {"driver_version": root.findtext("driver_version"), "cuda_driver_version": root.findtext("cuda_version"),
            "gpu_count": len(gpus), "gpus": gpus}


# -- timing ------------------------------------------------------------------

def timed(func, runs):
    func()  # warm-up
    samples = []
    for _run in range(runs):
        start = time.perf_counter()
        func()
        samples.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(samples), min(samples), max(samples)


def main():
    parser = argparse.ArgumentParser(description="nvml_facts collector vs nvidia-smi -q -x parsing")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--write", help="write the results as Markdown to this file")
    args = parser.parse_args()

    with open(XML) as handle:
        xml_text = handle.read()

    def nvml_run():
        return collector.collect(FakeNvml(hgx_h100()), kernel_module_paths=(), library_globs=())

    def smi_parse():
        return parse_smi(xml_text)

    def smi_spawn():
        out = subprocess.run(["cat", XML], stdout=subprocess.PIPE, check=True, universal_newlines=True).stdout
        return parse_smi(out)

    counted = FakeNvml(hgx_h100())
    facts = collector.collect(counted, kernel_module_paths=(), library_globs=())
    smi = parse_smi(xml_text)
    # Both sides must describe the same node, or the comparison means nothing.
    assert [g["uuid"] for g in facts["gpus"]] == [g["uuid"] for g in smi["gpus"]]
    assert [g["memory"]["total_mib"] for g in facts["gpus"]] == [g["memory"]["total_mib"] for g in smi["gpus"]]
    assert [g["power"]["limit_w"] for g in facts["gpus"]] == [g["power"]["limit_w"] for g in smi["gpus"]]

    rows = [
        ("nvml_facts collector, fake NVML (8 GPUs)", timed(nvml_run, args.runs)),
        ("nvidia-smi -q -x XML parse only (%d KiB)" % (len(xml_text) // 1024), timed(smi_parse, args.runs)),
        ("process spawn (cat) + XML parse", timed(smi_spawn, max(args.runs // 3, 20))),
    ]
    calls = sum(counted.calls.values())
    lines = [
        "| path | median ms | min ms | max ms |",
        "|---|---:|---:|---:|",
    ] + ["| %s | %.3f | %.3f | %.3f |" % (name, med, low, high) for name, (med, low, high) in rows]
    lines += [
        "",
        "NVML calls per collection: %d in total, %d nvmlInit, %d distinct functions "
        "(%.1f calls per GPU, NVLink: %d of them)." % (
            calls, counted.calls["nvmlInit"], len(counted.calls), calls / 8.0,
            counted.calls["nvmlDeviceGetNvLinkState"] + counted.calls["nvmlDeviceGetNvLinkRemoteDeviceType"]
            + counted.calls["nvmlDeviceGetNvLinkRemotePciInfo"]),
        "",
        "Measured on: Python %s, %s, %s, %d CPUs, %d runs." % (
            platform.python_version(), platform.system(), platform.machine(), os.cpu_count() or 0, args.runs),
    ]
    print("\n".join(lines))
    if args.write:
        with open(args.write) as handle:
            text = handle.read()
        start, end = "<!-- results:start -->", "<!-- results:end -->"
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1]
        with open(args.write, "w") as handle:
            handle.write(before + start + "\n" + "\n".join(lines) + "\n" + end + after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
