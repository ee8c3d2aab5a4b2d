#!/usr/bin/env python
"""Benchmark: a no-op `cluster.yml` apply against the in-memory API server.

Not a test: run it by hand, on an idle machine, from the repository root:

    .venv/bin/python tests/benchmarks/bench_k8s_noop.py [--runs 3] [--collection-tree DIR]

It applies the configuration of tests/integration/k8s/test_core_apply.py once
(two tenants, time-slicing, two GPU nodes; the Helm layers off, as no helm
binary is available here), then times `--runs` no-op runs and prints, per
run, the tasks executed (PLAY RECAP) and the API calls by verb as the fake
API server counted them. `--collection-tree` builds the collection from
another checkout (e.g. `git archive main | tar -x -C /tmp/main`) to compare
before and after.

The issue's floor (`kubectl apply --server-side` of the rendered objects plus
one `helm status` per release, on a real kube-apiserver) cannot be measured
here: there is no API server binary on this machine.
"""
import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration" / "k8s"))

from fake_apiserver import FakeAPIServer  # noqa: E402
import test_core_apply as scenario  # noqa: E402


def build(tree, dest):
    bindir = Path(sys.executable).parent
    env = dict(os.environ, PATH=str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    subprocess.run([str(bindir / "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(dest / "dist")],
                   cwd=str(tree), env=env, check=True, stdout=subprocess.DEVNULL)
    archive = next((dest / "dist").glob("gpuops-platform-*.tar.gz"))
    subprocess.run([str(bindir / "ansible-galaxy"), "collection", "install", "--offline", "--force", "-p",
                    str(dest / "collections"), str(archive)], env=env, check=True, stdout=subprocess.DEVNULL)
    return dest / "collections"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--collection-tree", default=str(ROOT), help="checkout to build the collection from")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-k8s-noop-"))
    collections_path = build(Path(args.collection_tree), work)
    gpus = len(scenario.load_facts("hgx-h100")["gpus"])
    with FakeAPIServer() as api:
        scenario.seed(api, str(gpus * 4))
        scenario.run(work, api, "setup", collections=collections_path)
        rows = []
        for i in range(args.runs):
            del api.requests[:]
            start = time.monotonic()
            result = scenario.run(work, api, "noop-%d" % i, collections=collections_path)
            elapsed = time.monotonic() - start
            verbs = collections.Counter()
            for method, path, dummy, dummy in api.requests:
                discovery = method == "GET" and (path in ("/version", "/api", "/apis")
                                                 or re.match(r"^/api/v1/?$|^/apis/[^/]+/[^/]+/?$", path))
                verbs["discovery" if discovery else method] += 1
            rows.append((elapsed, result.tasks, len(api.requests), dict(verbs)))
            print("run %d: %.1f s, %d tasks, %d API calls %s" % (
                i + 1, elapsed, result.tasks, len(api.requests), dict(sorted(verbs.items()))))
    print("median: %.1f s, %d tasks, %d API calls (collection from %s)" % (
        statistics.median(r[0] for r in rows), rows[-1][1], rows[-1][2], args.collection_tree))


if __name__ == "__main__":
    main()
