#!/usr/bin/env python
"""Benchmark: the fleet planner on generated fleets of 50, 500 and 5000 hosts.

Not a test: run it by hand, on an idle machine, from the repository root, after
scripts/bootstrap.sh (the playbook runs the installed collection):

    .venv/bin/python tests/benchmarks/bench_fleet_plan.py [--sizes 50 500 5000] [--runs 3]

Each fleet is made from the recorded fixtures in tests/fixtures/nvml, in the
demo's proportions (per 10 hosts: 1 DGX A100 with all-balanced MIG, 4 HGX H100
moving to another driver, 1 H200 with 7x 1g.18gb, 4 time-sliced L40S); every
25th host gets an uncorrectable ECC error and every host its own serial and
temperature, so no two facts files are the same. Two figures per size:
  * function: plugins/plugin_utils/fleet_plan.plan_fleet() plus the page, in process;
  * playbook: ansible-playbook playbooks/plan_fleet.yml, the whole run (inventory
    parsing, variables of every host, the plan, both files).
Target: 500 hosts under 10 s and 5000 under 60 s on 2 cores, growing linearly.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import conftest  # noqa: E402  (collection on sys.path)

from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan, fleet_report  # noqa: E402

NVML = conftest.FIXTURES / "nvml"
POOLS = [("dgx", "dgx-a100", 1), ("hgx", "hgx-h100", 4), ("h200", "h200-mig", 1), ("l40s", "l40s", 4)]
MIG = {"version": "v1", "mig-configs": {
    "all-balanced": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}],
    "all-1g.18gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}}]}}
POOL_VARS = {
    "dgx": {"mig_config": MIG, "mig_config_name": "all-balanced"},
    "hgx": {"nvidia_driver_version": "570.195.03"},
    "h200": {"mig_config": MIG, "mig_config_name": "all-1g.18gb"},
    "l40s": {"gpu_nodes_device_plugin_config": "ts4"},
}
SHARING = [{"name": "default", "mode": "none"}, {"name": "ts4", "mode": "time-slicing", "replicas": 4}]


def generate(size, folder):
    """Facts files and an inventory for ``size`` hosts; returns (facts_dir, inventory, [(host, vars)])."""
    facts_dir = os.path.join(folder, "facts")
    os.makedirs(facts_dir)
    fixtures = dict((f, json.load(open(str(NVML / ("%s.json" % f))))) for _p, f, _n in POOLS)
    groups, hosts = dict((p, []) for p, _f, _n in POOLS), []
    order = [(p, f) for p, f, n in POOLS for _copy in range(n)]
    for i in range(size):
        pool, fixture = order[i % len(order)]
        name = "%s-%05d" % (pool, i)
        facts = json.loads(json.dumps(fixtures[fixture]))
        for gpu in facts["gpus"]:
            gpu["serial"] = "%013d" % (i * 10 + gpu["index"])
            gpu["temperature_c"] = 30 + (i + gpu["index"]) % 20
        if i % 25 == 7:
            facts["gpus"][0]["ecc"]["volatile_uncorrectable"] = 1
        with open(os.path.join(facts_dir, name + ".json"), "w") as handle:
            json.dump(facts, handle)
        groups[pool].append(name)
        hosts.append((name, POOL_VARS[pool]))
    inventory = {"all": {"children": {
        "k8s_control": {"hosts": {"localhost": {"ansible_connection": "local", "gpu_sharing_configs": SHARING,
                                                "gpu_sharing_default_config": "default"}}},
        "gpu_nodes": {"children": dict((p, {"hosts": dict((h, None) for h in groups[p]), "vars": POOL_VARS[p]})
                                       for p in groups)}},
        "vars": {"gpuops_k8s_mig_strategy": "mixed"}}}
    path = os.path.join(folder, "hosts.json")
    with open(path, "w") as handle:
        json.dump(inventory, handle)
    return facts_dir, path, hosts


def time_function(facts_dir, hosts):
    start = time.perf_counter()
    plan = fleet_plan.plan_fleet(hosts, facts_dir, "mixed", SHARING, "default")
    fleet_report.render(plan)
    return time.perf_counter() - start, plan


def time_playbook(facts_dir, inventory, folder):
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    start = time.perf_counter()
    proc = subprocess.run([playbook, "-i", inventory, "playbooks/plan_fleet.yml",
                           "-e", "gpuops_fleet_facts_dir=%s" % facts_dir,
                           "-e", "gpuops_fleet_report_dir=%s" % os.path.join(folder, "report")],
                          cwd=str(conftest.ROOT), capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit("plan_fleet.yml failed:\n%s" % proc.stdout[-3000:])
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 500, 5000])
    parser.add_argument("--runs", type=int, default=3, help="best of N for each figure")
    args = parser.parse_args()
    print("%s, Python %s, %d CPU(s)" % (platform.platform(), platform.python_version(), os.cpu_count()))
    print("| hosts | GPUs | function (best of %d) | playbook (best of %d) | playbook per host |" % (args.runs, args.runs))
    print("|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        folder = tempfile.mkdtemp(prefix="bench-fleet-")
        try:
            facts_dir, inventory, hosts = generate(size, folder)
            func = min(time_function(facts_dir, hosts)[0] for _run in range(args.runs))
            _t, plan = time_function(facts_dir, hosts)
            assert plan["valid"], plan["errors"][:3]
            book = min(time_playbook(facts_dir, inventory, folder) for _run in range(args.runs))
            row = (size, plan["summary"]["gpus"], func, book, 1000.0 * book / size)
            print("| %d | %d | %.2f s | %.2f s | %.1f ms |" % row)
            sys.stdout.flush()
        finally:
            shutil.rmtree(folder)


if __name__ == "__main__":
    main()
