#!/usr/bin/env python
"""Benchmark: a no-op `cluster.yml` apply against the in-memory API server.

Not a test: run it by hand, on an idle machine, from the repository root:

    .venv/bin/python tests/benchmarks/bench_k8s_noop.py [--scenario core|full|example] [--runs 3] [--latency-ms MS]
        [--collection-tree DIR] [--gpu-nodes N]

`--scenario core` applies the configuration of
tests/integration/k8s/test_core_apply.py: two tenants, time-slicing, two GPU
nodes, and the layers with Helm releases off. `--scenario full` is
test_stack_apply.py's: every layer on (the GPU Operator, Volcano, Kueue, KubeRay
with a RayCluster, KAI, the DRA driver, the Network Operator and the tenants).
`--scenario example` applies `inventories/example` as a site runs it: its own
group_vars (the layers and releases they turn on), its ten GPU nodes with
recorded facts, each Node in the cluster advertising what its device-plugin
config makes of its GPUs, and the GPU Operator's ClusterPolicy reconciled.
No chart is installed here: each release is seeded into Helm's storage as
deployed with the chart and values that a render of the same inventory gives,
and the CRDs that its chart would install are seeded as Established. The real
helm (`--helm`, or the pinned one that scripts/install_helm.py installs into
the scratch folder) reads that storage; a no-op then runs one `helm list` and
one `helm get values` per release, and installs or upgrades nothing, as on a
real cluster where nothing changed. Each run prints the helm calls too.

The scenario is applied once, then `--runs` no-op runs are timed, each as its
`ansible-playbook` process alone, as the floor is (not the harness's work
around it). Each run prints the wall time, the tasks executed (PLAY RECAP, skipped ones included),
the objects applied, and the API calls by verb as the fake API server counted
them. `kubectl apply --server-side` of the same objects sends one PATCH per
object after its discovery, which is the floor for the API calls.
`--fresh-discovery-cache` runs each no-op without kubernetes.core's discovery
cache file (an empty TMPDIR), as in a fresh execution environment.
`--gpu-nodes N` (example scenario) scales the example's GPU pools to N nodes
in its 4:6 mix of HGX H100 and L40S (a copy of the inventory, its group_vars
unchanged; 10 is the example as it is), each a Node in the cluster: how the
no-op, its tasks and its API calls grow with the fleet.
`--collection-tree` builds the collection from another checkout (for example
`git archive <rev> | tar -x -C /tmp/rev`) to compare before and after.

`--latency-ms` makes every API call take that long on the in-memory server
before it is answered, for the no-op and the floors alike: a real
kube-apiserver's round trip, authentication, admission and etcd, which this
server does not have. The processes (ansible-playbook, each module, helm) are
the real ones, so their start-up costs what it costs.

The full and example scenarios are timed against the Ansible floor: one `ansible-playbook`
run with a single `kubernetes.core.k8s` server-side apply task of the same
objects (the rendered manifests), plus `helm status` per release, on the same
in-memory API server, its kubernetes.core discovery cache filled by a first
run. Each floor run follows a no-op run, so that both see the same state of a
shared machine; the last line is the median of those pairs' ratios. With `--kubectl`
(kubectl and helm come in the PyPI package that scripts/install_helm.py reads,
in its layer.zip) `kubectl apply --server-side` of the same objects plus
`helm status` per release is timed too, its discovery cached as kubectl's own
cache does. A real kube-apiserver is slower per call than this one, so there
every figure is higher.
"""
import argparse
import collections
import copy
import json
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
sys.path.insert(0, str(ROOT / "tests" / "integration" / "k8s"))

import fake_apiserver  # noqa: E402
from fake_apiserver import FakeAPIServer  # noqa: E402
from k8s_support import children_cpu, render_cluster  # noqa: E402
import test_core_apply as core  # noqa: E402
import test_sched_apply as sched  # noqa: E402
import test_stack_apply as stack  # noqa: E402
from conftest import HelmCalls  # noqa: E402


def build(tree, dest):
    bindir = Path(sys.executable).parent
    env = dict(os.environ, PATH=str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    subprocess.run([str(bindir / "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(dest / "dist")],
                   cwd=str(tree), env=env, check=True, stdout=subprocess.DEVNULL)
    archive = next((dest / "dist").glob("gpuops-platform-*.tar.gz"))
    subprocess.run([str(bindir / "ansible-galaxy"), "collection", "install", "--offline", "--force", "-p",
                    str(dest / "collections"), str(archive)], env=env, check=True, stdout=subprocess.DEVNULL)
    return dest / "collections"


class Core:
    """test_core_apply.py's configuration."""
    nodes = core.NODES

    def __init__(self, work, collections_path, tree, helm):
        # The playbook comes from the same checkout as the collection.
        self.work, self.collections, self.playbook = work, collections_path, str(tree / "playbooks" / "cluster.yml")
        self.helm = helm
        self.env = dict(helm.env)

    def seed(self, api):
        core.seed(api, str(len(core.load_facts("hgx-h100")["gpus"]) * 4))

    def run(self, api, name):
        return core.run(self.work, api, name, collections=self.collections, playbook=self.playbook, env=self.env)


class Full(Core):
    """test_stack_apply.py's configuration: every layer, each Helm release already deployed as planned."""
    nodes = stack.NODES

    def seed(self, api):
        self.releases = sorted(stack.seed(api, self.work, self.collections, self.playbook).releases)

    def run(self, api, name):
        return stack.run(api, self.work, name, self.collections, playbook=self.playbook, env=self.env)

    def manifests(self):
        """The rendered manifests that cluster.yml applies (the smoke tests' only with gpu_smoke_test_run)."""
        return sorted(p for p in (self.work / "render" / "rendered").glob("*/manifests.yaml")
                      if not p.parent.name.endswith("-gpu_smoke_test"))


class Example(Full):
    """inventories/example as a site runs it: its own group_vars (every layer they turn on, their releases), its
    ten GPU nodes with recorded facts, each release already deployed as planned and each Node in the cluster."""
    inventory = ROOT / "inventories" / "example" / "hosts.yml"
    # Each node's recorded facts, which cluster.yml loads itself (gpuops.platform.recorded_facts), as
    # inventories/example-offline.yml gives them: no play of the test harness runs before cluster.yml.
    models = dict([("hgx-h100-%02d.gpu.example.com" % i, "hgx-h100") for i in range(1, 5)]
                  + [("l40s-%02d.gpu.example.com" % i, "l40s") for i in range(1, 7)])
    nodes = dict((name, {"vars": {"gpuops_nvml_replay_file": str(ROOT / "tests" / "fixtures" / "nvml" / ("%s.json" % model))}})
                 for name, model in models.items())
    # Test timing only: one read of the Nodes' allocatable resources, no pause.
    extra = {"gpu_nodes_validate_retries": 1, "gpu_nodes_validate_delay": 0}

    def seed(self, api):
        for group_version, kinds in sched.KINDS.items():
            fake_apiserver.RESOURCES[group_version] = kinds
        fake_apiserver.RESOURCES["monitoring.coreos.com/v1"] = [
            ("prometheusrules", "PrometheusRule", True), ("servicemonitors", "ServiceMonitor", True)]
        planned = render_cluster(self.work / "render", extra_vars=self.extra, nodes=self.nodes, inventory=self.inventory,
                                 collections_path=self.collections, playbook=self.playbook)
        # Each Node advertises what its device-plugin config makes of its GPUs (the example time-slices the L40S).
        group_vars = self.inventory.parent / "group_vars"
        sharing = yaml.safe_load((group_vars / "k8s_control" / "gpu_sharing.yml").read_text())["gpu_sharing_configs"]
        replicas = dict((c["name"], c.get("replicas", 1)) for c in sharing)
        pools = {"hgx-h100": "hgx_h100", "l40s": "inference_l40s"}
        for name, spec in sorted(self.nodes.items()):
            config = yaml.safe_load((group_vars / pools[self.models[name]] / "gpu_nodes.yml").read_text())
            gpus = str(len(core.load_facts(self.models[name])["gpus"]) * replicas[config["gpu_nodes_device_plugin_config"]])
            api.add({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                     "status": {"allocatable": {"cpu": "96", "nvidia.com/gpu": gpus}}})
        for entry in planned.releases.values():
            api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": entry["release"]["namespace"]}})
            core.helm_storage(api, entry["release"], entry["values"], 1, "deployed", entry["release"]["version"])
        for name, (group, version, plural, kind, scope) in stack.CHART_CRDS.items():
            api.add({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                     "metadata": {"name": name},
                     "spec": {"group": group, "scope": scope, "names": {"plural": plural, "kind": kind},
                              "versions": [{"name": version, "served": True, "storage": True}]},
                     "status": {"conditions": [{"type": "Established", "status": "True"}]}})
        # The GPU Operator's own ClusterPolicy (its chart makes it), reconciled: the wait for it takes one read.
        fake_apiserver.RESOURCES["nvidia.com/v1"] = [("clusterpolicies", "ClusterPolicy", False)]
        api.add({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
                 "status": {"state": "ready"}})
        self.releases = sorted(planned.releases)

    def scale(self, count):
        """The example's GPU pools with ``count`` nodes in its 4:6 mix of H100 and L40S, in a copy of the inventory
        (its group_vars as they are)."""
        h100 = int(round(count * 0.4))
        folder = self.work / "inventory"
        shutil.copytree(str(self.inventory.parent), str(folder))
        names = [("hgx-h100-%02d.gpu.example.com" % i, "hgx-h100") for i in range(1, h100 + 1)] + [
            ("l40s-%02d.gpu.example.com" % i, "l40s") for i in range(1, count - h100 + 1)]
        hosts = yaml.safe_load(self.inventory.read_text())
        pools = hosts["all"]["children"]["gpu_nodes"]["children"]
        pools["hgx_h100"]["hosts"] = dict((n, None) for n, model in names if model == "hgx-h100")
        pools["inference_l40s"]["hosts"] = dict((n, None) for n, model in names if model == "l40s")
        self.inventory = folder / "hosts.yml"
        self.inventory.write_text(yaml.safe_dump(hosts))
        self.models = dict(names)
        fixtures = ROOT / "tests" / "fixtures" / "nvml"
        self.nodes = dict((name, {"vars": {"gpuops_nvml_replay_file": str(fixtures / ("%s.json" % model))}})
                          for name, model in names)

    def run(self, api, name):
        return render_cluster(self.work / name, extra_vars=dict(self.extra, gpuops_k8s_render_dir="",
                                                                gpuops_k8s_host=api.url, gpuops_k8s_api_key=core.TOKEN),
                              nodes=self.nodes, inventory=self.inventory, playbook=self.playbook,
                              env=dict({"K8S_AUTH_HOST": None, "K8S_AUTH_KUBECONFIG": None}, **self.env),
                              collections_path=self.collections)


SCENARIOS = {"core": Core, "full": Full, "example": Example}
KINDS = ("discovery", "GET", "LIST", "PATCH", "DELETE")


def verbs(requests):
    """API calls by kind: discovery (/version, /api, /apis and each group-version), GET of one object, LIST,
    PATCH (server-side apply or merge patch, dry runs included) and DELETE."""
    out = collections.Counter()
    for method, path, query, dummy in requests:
        discovery = method == "GET" and (path in ("/version", "/api", "/apis")
                                         or re.match(r"^/api/v1/?$|^/apis/[^/]+/[^/]+/?$", path))
        if discovery:
            out["discovery"] += 1
        elif method == "GET":
            out["LIST" if _is_list(path, query) else "GET"] += 1
        else:
            out[method] += 1
    return out


def _is_list(path, query):
    """A collection: /api/v1/<plural>, /api/v1/namespaces/<ns>/<plural>, /apis/<g>/<v>/[namespaces/<ns>/]<plural>."""
    parts = [p for p in path.split("/") if p]
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        rest = rest[2:]
    return len(rest) == 1 or bool(query.get("labelSelector"))


def node_calls(requests, method):
    """Calls of one Node (not the LIST of them) with ``method``."""
    return len([1 for m, path, dummy, dummy in requests if m == method and path.startswith("/api/v1/nodes/")])


def by_kind(counted):
    return ", ".join("%s %d" % (kind, counted.get(kind, 0)) for kind in KINDS)


def floor(api, scenario, args):
    """kubectl apply --server-side of the rendered objects plus helm status per release, timed."""
    home = scenario.work / "floor-home"
    kubeconfig = _kubeconfig(api, home)
    env = dict(os.environ, HOME=str(home), KUBECONFIG=str(kubeconfig))
    argv = [args.kubectl, "apply", "--server-side", "--field-manager=gpuops-platform", "--validate=false"]
    for path in scenario.manifests():
        argv += ["-f", str(path)]
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)  # fills kubectl's discovery cache
    times, calls = [], 0
    for dummy in range(args.runs):
        del api.requests[:]
        start = time.monotonic()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        for name in scenario.releases:
            namespace = _release_namespace(api, name)
            subprocess.run([args.helm, "status", name, "--namespace", namespace, "-o", "json"], env=env, check=True,
                           stdout=subprocess.DEVNULL)
        times.append(time.monotonic() - start)
        calls = len(api.requests)
    print("floor: kubectl apply --server-side of %d files plus helm status x%d: median %.2f s, %d API calls (%s)" % (
        len(scenario.manifests()), len(scenario.releases), statistics.median(times), calls, by_kind(verbs(api.requests))))


ANSIBLE_FLOOR = """---
# The Ansible floor of a no-op: one server-side apply task of every object, then helm status per release.
- name: Floor
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Server-side apply every object
      kubernetes.core.k8s:
        kubeconfig: "{{ floor_kubeconfig }}"
        state: present
        # A file, not a variable: the objects' own "{{ }}" (alert and dashboard texts) are not Ansible's to template.
        src: "{{ floor_objects_file }}"
        server_side_apply:
          field_manager: gpuops-platform
    - name: Ask helm for each release's status
      ansible.builtin.command:
        argv: ["{{ floor_helm }}", status, "{{ item.name }}", --namespace, "{{ item.namespace }}", -o, json,
               --kubeconfig, "{{ floor_kubeconfig }}"]
      changed_when: false
      loop: "{{ floor_releases }}"
"""


def _kubeconfig(api, home):
    home.mkdir(exist_ok=True)
    kubeconfig = home / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "bench",
        "clusters": [{"name": "bench", "cluster": {"server": api.url}}],
        "users": [{"name": "bench", "user": {"token": core.TOKEN}}],
        "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}]}))
    return kubeconfig


def _release_namespace(api, name):
    return next(o["metadata"]["namespace"] for o in api.objects.values()
                if o.get("kind") == "Secret" and (o["metadata"].get("labels") or {}).get("name") == name
                and (o["metadata"].get("labels") or {}).get("owner") == "helm")


# What the in-memory server stores: each side of the comparison gets its own copy back before it runs, so the
# floor's field manager never touches what the no-op reads (a no-op stays a no-op) and the other way round.
STATE = ("objects", "managed", "field_managers", "_rv", "_crds", "served")


def server_state(api):
    with api._lock:  # pylint: disable=protected-access
        return copy.deepcopy(dict((name, getattr(api, name)) for name in STATE))


def restore_state(api, state):
    with api._lock:  # pylint: disable=protected-access
        for name, value in copy.deepcopy(state).items():
            setattr(api, name, value)


def ansible_floor(api, scenario, args):
    """The issue's floor: one ansible-playbook run with a single kubernetes.core.k8s server-side apply task of the
    same objects (the rendered manifests), plus helm status per release; its discovery cache filled by a first run,
    as kubernetes.core's own cache is on a warm execution environment. Returns a callable that times one run and
    returns its seconds, the API calls it made and its recap."""
    home = scenario.work / "ansible-floor"
    kubeconfig = _kubeconfig(api, home)
    objects = [doc for path in scenario.manifests() for doc in yaml.safe_load_all(path.read_text()) if doc]
    releases = [{"name": name, "namespace": _release_namespace(api, name)} for name in scenario.releases]
    (home / "objects.yaml").write_text(yaml.safe_dump_all(objects))
    (home / "vars.json").write_text(json.dumps({"floor_objects_file": str(home / "objects.yaml"), "floor_releases": releases,
                                                "floor_kubeconfig": str(kubeconfig), "floor_helm": args.helm}))
    (home / "floor.yml").write_text(ANSIBLE_FLOOR)
    bindir = Path(sys.executable).parent
    env = dict(os.environ, PATH=str(bindir) + os.pathsep + os.environ.get("PATH", ""),
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(scenario.collections), str(ROOT / "collections")]),
               ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    argv = [str(bindir / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(home / "floor.yml"),
            "-e", "@%s" % (home / "vars.json"), "-e", "ansible_python_interpreter=%s" % sys.executable]
    noop_state = server_state(api)
    first = subprocess.run(argv, env=env, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if first.returncode:  # this run fills kubernetes.core's discovery cache
        raise SystemExit("the Ansible floor failed:\n" + first.stdout[-3000:])
    floor_state = server_state(api)
    restore_state(api, noop_state)

    def timed():
        restore_state(api, floor_state)
        del api.requests[:]
        start, cpu = time.monotonic(), children_cpu()
        out = subprocess.run(argv, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
        elapsed, cpu = time.monotonic() - start, children_cpu() - cpu
        recap = [ln for ln in out.splitlines() if ln.startswith("localhost ")][-1]
        restore_state(api, noop_state)
        return elapsed, list(api.requests), " ".join(recap.split()[1:]), cpu
    timed.objects, timed.releases = len(objects), len(releases)
    return timed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="core")
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="milliseconds each API call takes on the in-memory server, for the no-op and the floor alike "
                             "(a real kube-apiserver's round trip; 0: none)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--collection-tree", default=str(ROOT), help="checkout to build the collection from")
    parser.add_argument("--kubectl", help="kubectl binary: time the floor beside the no-op (full scenario)")
    parser.add_argument("--helm", help="helm binary (default: the pinned one, installed by scripts/install_helm.py)")
    parser.add_argument("--gpu-nodes", type=int,
                        help="example scenario: its GPU pools scaled to this many nodes, in its 4:6 mix of H100 and L40S")
    parser.add_argument("--output", help="write the last no-op run's ansible-playbook output to this file (its task list)")
    parser.add_argument("--fresh-discovery-cache", action="store_true",
                        help="each no-op run without kubernetes.core's discovery cache file, as in a fresh execution "
                             "environment (an empty TMPDIR per run)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-k8s-noop-"))
    if not args.helm:
        subprocess.run([sys.executable, str(ROOT / "scripts" / "install_helm.py"), "--dest", str(work / "helm-bin"),
                        "--wheel-dir", str(ROOT / ".cache" / "wheels")], check=True, stdout=subprocess.DEVNULL)
        args.helm = str(work / "helm-bin" / "helm")
    (work / "helm-wrapper").mkdir()
    helm = HelmCalls(work / "helm-wrapper", Path(args.helm).resolve())
    collections_path = build(Path(args.collection_tree), work)
    scenario = SCENARIOS[args.scenario](work, collections_path, Path(args.collection_tree).resolve(), helm)
    if args.gpu_nodes is not None:
        if args.scenario != "example" or args.gpu_nodes < 1:
            parser.error("--gpu-nodes takes a positive number, with --scenario example")
        scenario.scale(args.gpu_nodes)
    with FakeAPIServer() as api:
        scenario.seed(api)
        first = scenario.run(api, "setup")
        api.latency = args.latency_ms / 1000.0
        objects = len([1 for m, dummy, q, dummy in api.requests if m == "PATCH" and not q.get("dryRun")])
        # The floor runs right after each no-op run, so that both see the same state of a shared machine; the
        # ratio is the median of the runs' own ratios.
        floor_run = ansible_floor(api, scenario, args) if args.scenario != "core" else None
        rows, floors = [], []
        for i in range(args.runs):
            del api.requests[:]
            helm.clear()
            if args.fresh_discovery_cache:
                (work / ("tmp-%d" % i)).mkdir()
                scenario.env["TMPDIR"] = str(work / ("tmp-%d" % i))
            # The ansible-playbook run alone: the harness's own work around it (writing the inventory, and for the
            # example an ansible-inventory run that lists its hosts) is not what a site waits for.
            result = scenario.run(api, "noop-%d" % i)
            elapsed = result.elapsed
            counted = verbs(api.requests)
            if os.environ.get("BENCH_DEBUG"):
                print([r[1] for r in api.requests if verbs([r])["discovery"]])
                print([r[:2] for r in api.requests if r[0] == "PATCH"])
            rows.append((elapsed, result.tasks, len(api.requests), counted, result.cpu or 0.0))
            if args.output:
                Path(args.output).write_text(result.output)
            calls = collections.Counter(" ".join(c[:2]) if c[0] == "get" else c[0] for c in helm.calls())
            print("run %d: %.1f s (%.1f CPU s), %d tasks, %d API calls (%s; Node GET %d, Node PATCH %d), helm calls: %s, "
                  "%d deprecation warnings from the API server" % (
                      i + 1, elapsed, result.cpu or 0.0, result.tasks, len(api.requests), by_kind(counted),
                      node_calls(api.requests, "GET"), node_calls(api.requests, "PATCH"),
                      ", ".join("%s %d" % kv for kv in sorted(calls.items())) or "none", len(api.warnings)))
            recap = result.output.rpartition("PLAY RECAP")[2].splitlines()[1:]
            changed = [" ".join(ln.split()) for ln in recap if ":" in ln and "changed=0" not in ln]
            if changed:
                print("  not a no-op: " + "; ".join(changed))
            if floor_run:
                floors.append(floor_run())
                print("  ansible floor beside it: %.1f s (%.1f CPU s), %d API calls (%s); %s" % (
                    floors[-1][0], floors[-1][3], len(floors[-1][1]), by_kind(verbs(floors[-1][1])), floors[-1][2]))
        if args.kubectl and args.helm and args.scenario != "core":
            floor(api, scenario, args)
    print("scenario %s: %d tasks on the first apply, %d server-side apply PATCHes then" % (
        args.scenario, first.tasks, objects))
    print("median: %.1f s, %.1f CPU s, %d tasks, %d API calls (%s) (collection from %s%s)" % (
        statistics.median(r[0] for r in rows), statistics.median(r[4] for r in rows), rows[-1][1], rows[-1][2],
        by_kind(rows[-1][3]), args.collection_tree,
        ", %d GPU nodes" % len(scenario.nodes) if args.scenario == "example" else ""))
    if args.scenario != "core":
        print("releases seeded as deployed: %s" % ", ".join(scenario.releases))
        print("ansible floor: one kubernetes.core.k8s server-side apply task of %d objects plus helm status x%d: "
              "median %.2f s, %.2f CPU s" % (floor_run.objects, floor_run.releases, statistics.median(f[0] for f in floors),
                                             statistics.median(f[3] for f in floors)))
        print("no-op against the ansible floor: %.2fx (median of each run's no-op over the floor run beside it: %s)" % (
            statistics.median(r[0] / f[0] for r, f in zip(rows, floors)),
            ", ".join("%.2fx" % (r[0] / f[0]) for r, f in zip(rows, floors))))


if __name__ == "__main__":
    main()
