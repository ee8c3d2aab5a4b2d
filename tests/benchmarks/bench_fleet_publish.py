#!/usr/bin/env python
"""Benchmark: what gpuops_fleet_publish_facts costs plan_fleet.yml, in time and peak memory.

Not a test: run it by hand, on an idle machine, from the repository root, after
scripts/bootstrap.sh (the playbook runs the installed collection):

    .venv/bin/python tests/benchmarks/bench_fleet_publish.py [--sizes 500 5000] [--runs 1]

The fleets are bench_fleet_plan.py's (the demo's proportions, every facts file
different). For each size, plan_fleet.yml runs with gpuops_fleet_publish_facts
false, then true; each figure is the whole ansible-playbook run and the peak
resident memory of its processes (ru_maxrss of the run's process tree, measured
in a fresh process per run). Target: publishing costs at most 1.5 times the plan,
in at most 300 MB.
"""
import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_fleet_plan as fleet  # noqa: E402  (also puts the collection on sys.path)

# Runs one command in a fresh process and prints its wall time and its tree's peak RSS (KiB on Linux).
MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(proc.returncode, time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.stderr.write(proc.stdout[-3000:])
"""


def run(facts_dir, inventory, folder, publish):
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    proc = subprocess.run([sys.executable, "-c", MEASURE, playbook, "-i", inventory, "playbooks/plan_fleet.yml",
                           "-e", "gpuops_fleet_facts_dir=%s" % facts_dir,
                           "-e", "gpuops_fleet_report_dir=%s" % os.path.join(folder, "report"),
                           "-e", "gpuops_fleet_publish_facts=%s" % ("true" if publish else "false")],
                          cwd=str(fleet.conftest.ROOT), capture_output=True, text=True, check=False)
    code, seconds, rss_kib = proc.stdout.split()
    if code != "0":
        sys.exit("plan_fleet.yml failed:\n%s" % proc.stderr)
    return float(seconds), int(rss_kib) / 1024.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--runs", type=int, default=1, help="best of N for each figure")
    args = parser.parse_args()
    print("%s, Python %s, %d CPU(s)" % (platform.platform(), platform.python_version(), os.cpu_count()))
    print("| hosts | plan | plan + publish | ratio | peak memory (plan / + publish) |")
    print("|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        folder = tempfile.mkdtemp(prefix="bench-publish-")
        try:
            facts_dir, inventory, _hosts = fleet.generate(size, folder)
            plain = min(run(facts_dir, inventory, folder, False) for _run in range(args.runs))
            published = min(run(facts_dir, inventory, folder, True) for _run in range(args.runs))
            print("| %d | %.1f s | %.1f s | %.2fx | %.0f MB / %.0f MB |" % (
                size, plain[0], published[0], published[0] / plain[0], plain[1], published[1]))
            sys.stdout.flush()
        finally:
            shutil.rmtree(folder)


if __name__ == "__main__":
    main()
