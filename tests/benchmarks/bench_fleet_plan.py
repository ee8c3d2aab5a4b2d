#!/usr/bin/env python
"""Benchmark: the fleet planner and its page on generated fleets of 50 to 20,000 hosts.

Not a test: run it by hand, on an idle machine, from the repository root, after
scripts/bootstrap.sh (the playbook runs the installed collection):

    .venv/bin/python tests/benchmarks/bench_fleet_plan.py [--sizes 50 500 5000 20000] [--runs 3] [--no-browser]

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
import importlib.util
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time


def _tests_conftest():
    """tests/conftest.py (it puts the collection on sys.path; FIXTURES, ROOT), by its path: a test that imports this
    generator runs under pytest, where the module ``conftest`` may be another folder's."""
    if "gpuops_tests_conftest" not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conftest.py")
        spec = importlib.util.spec_from_file_location("gpuops_tests_conftest", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["gpuops_tests_conftest"] = module
        spec.loader.exec_module(module)
    return sys.modules["gpuops_tests_conftest"]


conftest = _tests_conftest()

from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan, fleet_report, fleet_views  # noqa: E402

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
        "vars": {"gpuops_k8s_mig_strategy": "mixed", "gpuops_upgrade_serial": "5%", "gpuops_upgrade_canary": True}}}
    path = os.path.join(folder, "hosts.json")
    with open(path, "w") as handle:
        json.dump(inventory, handle)
    return facts_dir, path, hosts


def time_function(facts_dir, hosts):
    cpu = time.process_time()
    start = time.perf_counter()
    plan = fleet_plan.plan_fleet(hosts, facts_dir, "mixed", SHARING, "default")
    names = [name for name, _vars in hosts]
    groups = {}
    for name in names:
        groups.setdefault(name.split("-")[0], []).append(name)
    fleet_views.enrich(plan, names, fleet_views.pools(names, groups, "gpu_nodes"), "5%", True)
    fleet_report.render(plan)
    return time.perf_counter() - start, plan, time.process_time() - cpu


def time_playbook(facts_dir, inventory, report, *extra):
    """(seconds, peak resident memory in MB of the largest process, CPU seconds of the run).

    On a shared machine the CPU seconds are what the run would take alone on one core, near enough
    (the planner is one process; ansible-playbook's forks are idle here)."""
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    command = [playbook, "-i", inventory, "playbooks/plan_fleet.yml",
               "-e", "gpuops_fleet_facts_dir=%s" % facts_dir, "-e", "gpuops_fleet_report_dir=%s" % report]
    for pair in extra:
        command += ["-e", pair]
    proc = subprocess.run(command,
                          cwd=str(conftest.ROOT), capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit("plan_fleet.yml failed:\n%s" % proc.stdout[-3000:])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return elapsed, after.ru_maxrss / 1024.0, cpu


def time_page(page, profile, port=9339):
    """The page's own figures from headless Chromium, read over the DevTools protocol once it has painted:
    {parsed-ms, fcp-ms, ready-ms, bench-filter-max-ms, bench-sort-max-ms}."""
    import urllib.request

    import websocket  # websocket-client: the kubernetes client (requirements/collection.txt) needs it

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if not binary:
        return {}
    browser = subprocess.Popen([binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                "--user-data-dir=%s" % profile, "--window-size=1400,1000",
                                "--remote-debugging-port=%d" % port, "file://%s#bench=1" % page],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _try in range(600):
            try:
                targets = json.load(urllib.request.urlopen("http://127.0.0.1:%d/json" % port, timeout=2))
                target = [t for t in targets if t.get("type") == "page" and t["url"].startswith("file://")][0]
                break
            except (OSError, IndexError, ValueError):
                time.sleep(0.2)
        conn = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=60)
        expression = ('(function () { var p = document.getElementById("perf"); if (!p || p.getAttribute("data-state") '
                      '!== "ready") { return null; } var out = {}; Array.prototype.forEach.call(p.attributes, '
                      'function (a) { out[a.name.slice(5)] = a.value; }); var f = performance.getEntriesByName('
                      '"first-contentful-paint")[0]; out["fcp-ms"] = f ? f.startTime.toFixed(1) : "-"; '
                      'return JSON.stringify(out); })()')
        for attempt in range(600):
            conn.send(json.dumps({"id": attempt + 1, "method": "Runtime.evaluate", "params": {"expression": expression}}))
            while True:
                reply = json.loads(conn.recv())
                if reply.get("id") == attempt + 1:
                    break
            value = reply.get("result", {}).get("result", {}).get("value")
            if value:
                found = json.loads(value)
                if found.get("fcp-ms") != "-":
                    return found
            time.sleep(0.2)
        return {}
    finally:
        browser.terminate()
        browser.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 500, 5000, 20000])
    parser.add_argument("--runs", type=int, default=1, help="best of N for each figure")
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium figures")
    args = parser.parse_args()
    print("%s, Python %s, %d CPU(s), load average %s" % (platform.platform(), platform.python_version(),
                                                         os.cpu_count(), " ".join("%.1f" % x for x in os.getloadavg())))
    print("| hosts | GPUs | function | playbook | peak memory | with a previous plan | index.html | plan.json "
          "| parsed | first paint | table ready | filter (max) | sort (max) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        folder = tempfile.mkdtemp(prefix="bench-fleet-")
        try:
            facts_dir, inventory, hosts = generate(size, folder)
            func = min(time_function(facts_dir, hosts)[0] for _run in range(args.runs))
            _t, plan, func_cpu = time_function(facts_dir, hosts)
            assert plan["valid"], plan["errors"][:3]
            gpus = plan["summary"]["gpus"]
            del plan
            runs = []
            for run in range(args.runs):
                report = os.path.join(folder, "report%d" % run)
                runs.append(time_playbook(facts_dir, inventory, report))
            book, memory, book_cpu = min(r[0] for r in runs), max(r[1] for r in runs), min(r[2] for r in runs)
            previous = os.path.join(folder, "previous.json")
            shutil.copy(os.path.join(folder, "report0", "plan.json"), previous)
            again = [time_playbook(facts_dir, inventory, os.path.join(folder, "again%d" % run),
                                   "gpuops_fleet_previous_plan=%s" % previous) for run in range(args.runs)]
            again, again_cpu = min(r[0] for r in again), min(r[2] for r in again)
            page = os.path.join(folder, "report0", "index.html")
            perf = {} if args.no_browser else time_page(page, os.path.join(folder, "profile"))
            row = (size, gpus, func, func_cpu, book, book_cpu, memory, again, again_cpu, os.path.getsize(page) / 1e6,
                   os.path.getsize(os.path.join(folder, "report0", "plan.json")) / 1e6,
                   perf.get("parsed-ms", "-"), perf.get("fcp-ms", "-"), perf.get("ready-ms", "-"),
                   perf.get("bench-filter-max-ms", "-"), perf.get("bench-sort-max-ms", "-"))
            print("| %d | %d | %.2f s (%.1f s CPU) | %.2f s (%.1f s CPU) | %.0f MB | %.2f s (%.1f s CPU) | %.2f MB | %.1f MB "
                  "| %s ms | %s ms | %s ms | %s ms | %s ms |" % row)
            sys.stdout.flush()
        finally:
            shutil.rmtree(folder)


if __name__ == "__main__":
    main()
