#!/usr/bin/env python
"""Benchmark: the node playbooks' --check on the demo's pattern of GPU nodes, scaled, per host.

Not a test: run it by hand, on an idle machine, from the repository root:

    .venv/bin/python tests/benchmarks/bench_node_playbooks.py [--hosts 50] [--playbook nodes.yml ...]
        [--collection-tree DIR]

inventories/demo's pools (a DGX A100, four HGX H100, an H200 with MIG, four
L40S), each scaled by the same factor to ``--hosts`` GPU nodes, every one
planned from its pool's recorded facts as the demo plans them. Each playbook
runs once with --check; printed per GPU host: the host-tasks (ok, changed,
failed, skipped and ignored of its PLAY RECAP line: a skipped task costs a fork
too), and the CPU seconds of the run (ansible-playbook and every process it
waited for) divided by the hosts. `--collection-tree` builds the collection
from another checkout (for example `git archive <rev> | tar -x -C /tmp/rev`) to
compare before and after; the playbooks come from the same checkout.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "integration" / "k8s"))

from bench_k8s_noop import build  # noqa: E402
from k8s_support import children_cpu  # noqa: E402

RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)\s+skipped=(\d+)\s+"
                   r"rescued=\d+\s+ignored=(\d+)", re.M)


def scaled_demo(work, count):
    """A copy of inventories/demo with its pools scaled to ``count`` GPU nodes (its group_vars find the fixtures
    through ``{{ inventory_dir }}/../../tests``, a link to this checkout's tests)."""
    folder = work / "inventories" / "demo"
    shutil.copytree(str(ROOT / "inventories" / "demo"), str(folder))
    os.symlink(str(ROOT / "tests"), str(work / "tests"))
    hosts = yaml.safe_load((folder / "hosts.yml").read_text())
    pools = hosts["all"]["children"]["gpu_nodes"]["children"]
    demo = dict((name, pool["hosts"]) for name, pool in pools.items())
    factor = max(1, int(round(count / 10.0)))
    for name, pool in pools.items():
        base = [h.split("[")[0].rstrip("-") for h in demo[name]]
        size = sum(int(h.split(":")[1].rstrip("]")) if "[" in h else 1 for h in demo[name])
        pool["hosts"] = dict(("%s-%03d" % (base[0], i), None) for i in range(1, size * factor + 1))
    (folder / "hosts.yml").write_text(yaml.safe_dump(hosts))
    return folder / "hosts.yml", [h for pool in pools.values() for h in pool["hosts"]]


def run(inventory, playbook, tree, collections, gpu_hosts):
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(collections), str(ROOT / "collections")]),
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    start, cpu = time.monotonic(), children_cpu()
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                           str(tree / "playbooks" / playbook), "--check"], cwd=str(tree), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    wall, cpu = time.monotonic() - start, children_cpu() - cpu
    if proc.returncode:
        raise SystemExit("%s --check failed:\n%s" % (playbook, proc.stdout[-4000:]))
    per_host = dict((m.group(1), sum(int(g) for g in m.groups()[1:])) for m in RECAP.finditer(proc.stdout))
    counts = [per_host.get(h, 0) for h in gpu_hosts]
    print("%s --check, %d GPU hosts: host-tasks per GPU host median %s (min %d, max %d), %.1f s, %.2f CPU s per host "
          "(%.1f CPU s in all)" % (playbook, len(gpu_hosts), statistics.median(counts), min(counts), max(counts), wall,
                                   cpu / len(gpu_hosts), cpu))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=50, help="GPU nodes, the demo's pools scaled (10: the demo)")
    parser.add_argument("--playbook", action="append", help="playbooks/<name> to run (default nodes.yml and mig.yml)")
    parser.add_argument("--collection-tree", default=str(ROOT), help="checkout to build the collection from")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-node-playbooks-"))
    tree = Path(args.collection_tree).resolve()
    collections = build(tree, work)
    inventory, gpu_hosts = scaled_demo(work, args.hosts)
    for playbook in args.playbook or ["nodes.yml", "mig.yml"]:
        run(inventory, playbook, tree, collections, gpu_hosts)


if __name__ == "__main__":
    main()
