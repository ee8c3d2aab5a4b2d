#!/usr/bin/env python
"""Benchmark: planning the NVIDIA runtime edit of large containerd configs.

Not a test: run it by hand, on an idle machine, from the repository root:

    .venv/bin/python tests/benchmarks/bench_container_runtime.py [--sizes 1 10] [--whole-up-to 1]
        [--no-cri-sizes 1] [--write docs/benchmarks/container_runtime.md]

Each config is tests/fixtures/container_runtime/containerd-1.7-kubeadm.toml (a
kubeadm node's `containerd config default`) followed by generated tables of other
plugins (proxy plugins, plugins with options, multi-line strings, arrays of tables)
up to the size asked, in MB. (A version 2 drop-in copies the whole CRI section, so
there the size of that section, not of the file, decides the time.) The planner is what check mode runs:
read, parse, edit, render; nothing is written. "cut" is the default (only the CRI
runtime tables go through tomlkit), "whole" the whole file through tomlkit (what
Pythons without tomllib/tomli do); it is slow, so only run up to --whole-up-to MB.

"no CRI" configs are the same generated tables after a bare ``version = 2``: other
plugins define ``plugins``, the CRI section is missing (a node whose containerd
runs with its built-in CRI defaults). Such a config must be cut too: through
tomlkit whole, 1 MB took 31 s. Seconds are CPU time of the planning process.
"""
import argparse
import os
import platform
import re
import sys
import resource
import subprocess
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import conftest  # noqa: E402  (collection and tests/unit on sys.path)

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.containerd import (  # noqa: E402
    plan_containerd,
)

BASE = conftest.FIXTURES / "container_runtime" / "containerd-1.7-kubeadm.toml"


def generate(size_mb, cri=True):
    parts = [BASE.read_text() if cri else "version = 2\n"]
    total, index = len(parts[0]), 0
    while total < size_mb * 1024 * 1024:
        part = (
            '\n[proxy_plugins."example%d"]\n  type = "snapshot"\n  address = "/run/example/%d.sock"\n'
            '\n[plugins."io.example.v1.plugin%d"]\n  enabled = true\n  labels = ["a", "b", "c"]  # why\n'
            "  notes = '''\nline [one]\n'''\n"
            '\n  [plugins."io.example.v1.plugin%d".options]\n    level = %d\n    ratio = 0.5\n'
            '\n[[plugins."io.example.v1.plugin%d".rules]]\n  match = ["x"]\n'
            % (index, index, index, index, index, index))
        parts.append(part)
        total += len(part)
        index += 1
    return "".join(parts)


def measure(path, mode, scoped):
    """CPU seconds and peak resident memory (MB) of one plan, in a fresh process so the peaks do not mix."""
    out = subprocess.check_output([sys.executable, os.path.abspath(__file__), "--one", path, mode, str(scoped)])
    seconds, peak = out.decode().split()
    return float(seconds), float(peak)


def one(path, mode, scoped):
    scoped = {"None": None, "False": False}[scoped]
    start = time.process_time()  # CPU time: a machine busy with other work is no slow planner
    plan = plan_containerd(path, mode=mode, scoped=scoped, set_as_default=True,
                           drop_in_path=os.path.join(os.path.dirname(path), "conf.d", "99-nvidia.toml"))
    seconds = time.process_time() - start
    assert plan.changed and 'BinaryName = "/usr/bin/nvidia-container-runtime"' in plan.edits[-1].after
    print("%.3f %.1f" % (seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1, 10])
    parser.add_argument("--whole-up-to", type=float, default=1)
    parser.add_argument("--no-cri-sizes", type=float, nargs="*", default=[1])
    parser.add_argument("--write", help="replace the results block of this markdown file")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return one(*args.one)
    rows = ["| config | mode | parse | CPU seconds | peak RSS MB |", "|---|---|---|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        for size, cri in [(s, True) for s in args.sizes] + [(s, False) for s in args.no_cri_sizes]:
            path = os.path.join(tmp, "config-%gmb%s.toml" % (size, "" if cri else "-no-cri"))
            with open(path, "w") as handle:
                handle.write(generate(size, cri))
            label = "%.1f MB%s" % (os.path.getsize(path) / 1024 / 1024, "" if cri else ", no CRI")
            for mode in ("in_place", "drop_in"):
                for scoped, name in ((None, "cut"), (False, "whole")):
                    if scoped is False and size > args.whole_up_to:
                        continue
                    seconds, peak = measure(path, mode, scoped)
                    rows.append("| %s | %s | %s | %.2f | %.0f |" % (label, mode, name, seconds, peak))
                    print(rows[-1], flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows.append("")
    rows.append("Measured on: Python %s, %s, %s, %d CPUs, load average %.1f."
                % (platform.python_version(), platform.system(), platform.machine(), os.cpu_count() or 0, load))
    block = "\n".join(rows)
    if args.write:
        with open(args.write) as handle:
            text = handle.read()
        text = re.sub(r"(<!-- results:start -->\n).*?(<!-- results:end -->)",
                      lambda m: m.group(1) + block + "\n" + m.group(2), text, flags=re.S)
        with open(args.write, "w") as handle:
            handle.write(text)
    print(block)


if __name__ == "__main__":
    main()
