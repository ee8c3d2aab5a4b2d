"""Each chart's previous -> current upgrade through k8s_apply, with the real helm, against the in-memory API server.

The charts are built in a temporary folder from the upstream reference data (shared/reference/<chart>/previous and
current: Chart.yaml, values.yaml and the CRDs, where upstream keeps them - crds/ for gpu-operator and kuberay,
templates for kueue and volcano); no other template, so helm installs and upgrades only what matters here. Once
(module scope), each chart in a layer of its own, all in one run: the previous charts are installed by a first run,
whose layers also apply objects that use fields only the new CRDs know (the server prunes them, as the real one does);
a second run wants the current charts. The CRDs
of crds/ must then be applied server-side before the release is upgraded (Helm never updates them), the objects keep
the new fields, and the summary names what changed: CRD fields, renamed values keys, changed defaults.

Only real API semantics are used (CRD conditions Established/NamesAccepted, status.storedVersions), so the same
path runs on a real API server.
"""
import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fake_apiserver import FakeAPIServer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "upgrade-token-77c1"
PLAY = """---
- name: Apply one layer
  hosts: localhost
  gather_facts: false
  vars_files:
    - %s/playbooks/vars/k8s_connection.yml
  module_defaults:
    group/gpuops.platform.k8s: "{{ gpuops_k8s_connection }}"
    group/kubernetes.core.k8s: "{{ gpuops_k8s_connection }}"
    group/kubernetes.core.helm: "{{ gpuops_k8s_connection }}"
  tasks:
    - name: Discover
      ansible.builtin.import_role:
        name: gpuops.platform.k8s_apply
        tasks_from: discover
    - name: Apply
      ansible.builtin.import_role:
        name: gpuops.platform.k8s_apply
        tasks_from: layers
      vars:
        k8s_apply_layers: "{{ test_layers }}"
    - name: Summarise
      ansible.builtin.import_role:
        name: gpuops.platform.k8s_apply
        tasks_from: summary
""" % ROOT

RAY_WORKERS = {"groupName": "gpu", "replicas": 1, "minReplicas": 0, "maxReplicas": 2, "priority": 7,
               "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray"}]}}}
# Per chart: the versions, the CRDs' place in the chart, the values the inventory sets, and an object (as the layer
# applies it) with the field only the new CRD has, at `new_field`.
CHARTS = {
    "kuberay": {
        "chart": "kuberay-operator", "old": "1.6.2", "new": "1.7.0", "crds_dir": True, "namespace": "kuberay",
        "values": {"metrics": {"serviceMonitor": {"enabled": True, "selector": {"release": "prometheus"}}}},
        "object": {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "demo", "namespace": "kuberay"},
                   "spec": {"tlsOptions": {"enabled": True},
                            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                                {"name": "ray-head", "image": "rayproject/ray"}]}}},
                            "workerGroupSpecs": [RAY_WORKERS]}},
        "new_field": ("spec", "workerGroupSpecs", 0, "priority"), "wait_crds": ["rayclusters.ray.io"],
    },
    "gpu-operator": {
        "chart": "gpu-operator", "old": "v26.3.3", "new": "v26.7.0", "crds_dir": True, "namespace": "gpu-operator",
        "values": {"driver": {"enabled": False}, "operator": {"upgradeCRD": False}},
        "object": {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
                   "spec": {"hostPaths": {"kubeletRootDir": "/var/lib/k0s/kubelet", "rootFS": "/"},
                            "driver": {"enabled": False}}},
        "new_field": ("spec", "hostPaths", "kubeletRootDir"), "wait_crds": ["clusterpolicies.nvidia.com"],
    },
    "volcano": {
        "chart": "volcano", "old": "1.14.4", "new": "1.15.0", "crds_dir": False, "namespace": "volcano-system",
        "values": {"custom": {"scheduler_enable": True}},
        "object": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "gang", "namespace": "volcano-system"},
                   "spec": {"minAvailable": 1, "tasks": [{"name": "t", "replicas": 1, "template": {"spec": {
                       "workloadRef": {"name": "w"}, "containers": [{"name": "c", "image": "busybox"}]}}}]}},
        "new_field": ("spec", "tasks", 0, "template", "spec", "workloadRef"), "wait_crds": ["jobs.batch.volcano.sh"],
    },
    "kueue": {
        "chart": "kueue", "old": "0.18.6", "new": "0.19.2", "crds_dir": False, "namespace": "kueue-system",
        "values": {"controllerManager": {"replicas": 1}},
        "object": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "team-a"},
                   "spec": {"namespaceSelector": {}, "stopPolicy": "None"}},
        # Kueue's reference CRDs are byte-identical at both versions: the field is known before and after.
        "new_field": ("spec", "stopPolicy"), "wait_crds": ["clusterqueues.kueue.x-k8s.io"], "known_before": True,
    },
}


def build_chart(dest, reference, spec, version):
    """A chart folder from the reference data: Chart.yaml (its version the released one: gpu-operator's file says
    v1.0.0-devel, kuberay's main-branch file 1.1.0; no dependencies), values.yaml and the CRDs where upstream has them."""
    dest.mkdir(parents=True)
    chart = yaml.safe_load((reference / "chart" / "Chart.yaml").read_text())
    chart.pop("dependencies", None)
    chart["version"] = version
    (dest / "Chart.yaml").write_text(yaml.safe_dump(chart))
    shutil.copy(str(reference / "chart" / "values.yaml"), str(dest / "values.yaml"))
    crds = sorted((reference / "crds").glob("*.yaml"))
    if spec["crds_dir"]:
        (dest / "crds").mkdir()
        for crd in crds:
            shutil.copy(str(crd), str(dest / "crds" / crd.name))
        return dest
    # As volcano's templates do: each CRD file loaded by a template (.Files.Get), so helm upgrade updates it.
    (dest / "crd").mkdir()
    (dest / "templates").mkdir()
    for crd in crds:
        shutil.copy(str(crd), str(dest / "crd" / crd.name))
        (dest / "templates" / crd.name).write_text('{{ .Files.Get "crd/%s" }}\n' % crd.name)
    return dest


def layer(name, spec, chart_path, version, objects=True):
    return {"layer": name.replace("-", "_"), "order": 50, "objects": [spec["object"]] if objects else [],
            "wait_crds": spec["wait_crds"],
            "releases": [{"name": spec["chart"], "namespace": spec["namespace"], "chart": spec["chart"],
                          "version": version, "chart_path": str(chart_path), "values": spec["values"],
                          "wait": False}]}


def watched_helm(folder, real, tmpdir):
    """A helm wrapper that, before each run of the real one, logs the KUBECONFIG it was given and every file in
    ``tmpdir`` (the runs' TMPDIR) that holds the token: to prove helm reads the collection's own kubeconfig, with no
    copy of it anywhere."""
    folder.mkdir()
    log = folder / "seen.log"
    (folder / "helm").write_text(
        '#!/bin/sh\nprintf "KUBECONFIG=%%s\\n" "$KUBECONFIG" >> "%s"\n'
        'grep -rl -- "%s" "%s" 2>/dev/null | sed "s/^/HOLDS /" >> "%s"\nexec "%s" "$@"\n'
        % (log, TOKEN, tmpdir, log, real))
    (folder / "helm").chmod(0o755)
    return log


class Runner:
    """ansible-playbook of PLAY against one fake API server, the real helm first on PATH (behind watched_helm), with
    a TMPDIR of its own."""

    def __init__(self, workdir, api, collections, helm_dir):
        self.workdir, self.api = workdir, api
        self.tmpdir = workdir / "tmp"
        self.tmpdir.mkdir()
        self.seen = watched_helm(workdir / "helm-watch", helm_dir / "helm", self.tmpdir)
        kubeconfig = workdir / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "t",
            "clusters": [{"name": "t", "cluster": {"server": api.url}}],
            "users": [{"name": "t", "user": {"token": TOKEN}}],
            "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
        (workdir / "play.yml").write_text(PLAY)
        bindir = Path(sys.executable).parent
        self.env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0",
                        ANSIBLE_INVENTORY_UNPARSED_WARNING="0", ANSIBLE_PYTHON_INTERPRETER=sys.executable,
                        ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(collections), str(ROOT / "collections")]),
                        ANSIBLE_ROLES_PATH=str(ROOT / "roles"), HOME=str(workdir),
                        TMPDIR=str(self.tmpdir),
                        PATH=os.pathsep.join([str(self.seen.parent), str(bindir), os.environ.get("PATH", "")]))
        for var in ("K8S_AUTH_HOST", "K8S_AUTH_KUBECONFIG", "K8S_AUTH_API_KEY", "HELM_DRIVER"):
            self.env.pop(var, None)
        self.kubeconfig = str(kubeconfig)

    def __call__(self, layers, name, args=()):
        extra = self.workdir / ("%s.json" % name)
        extra.write_text(json.dumps({"test_layers": layers, "gpuops_k8s_kubeconfig": self.kubeconfig,
                                     "gpuops_k8s_render_dir": ""}))
        proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                               str(self.workdir / "play.yml"), "-e", "@%s" % extra] + list(args),
                              env=self.env, capture_output=True, text=True, check=False, timeout=900, cwd=str(ROOT))
        # Kept beside the run's variables, for a look after a failure.
        (self.workdir / ("%s.log" % name)).write_text(proc.stdout + proc.stderr)
        return proc.returncode, proc.stdout + proc.stderr


def at(obj, path):
    for key in path:
        try:
            obj = obj[key]
        except (KeyError, IndexError, TypeError):
            return None
    return obj


def live(api, obj):
    return api.get(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace", ""))


def helm_chart(api, spec):
    """The chart column helm would list for the latest revision in Helm's storage (Secrets)."""
    import base64
    import gzip
    latest = None
    for key, obj in api.objects.items():
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if obj.get("kind") == "Secret" and labels.get("owner") == "helm" and labels.get("name") == spec["chart"]:
            if latest is None or int(labels["version"]) > int(latest[0]):
                latest = (labels["version"], obj)
    data = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(latest[1]["data"]["release"]))))
    return data["info"]["status"], data["chart"]["metadata"]["version"]


@pytest.fixture(scope="module")
def fleet_of_charts(tmp_path_factory, shared_reference, installed_collection, helm_dir):
    """Every chart installed at its previous version, then upgraded to the current one, each in a layer of its own:
    one API server and one run for all of them, as cluster.yml applies its layers together."""
    work = tmp_path_factory.mktemp("upgrade")
    built = {}
    for name, spec in sorted(CHARTS.items()):
        built[name] = (build_chart(work / "charts" / "old" / spec["chart"], shared_reference / name / "previous", spec,
                                   spec["old"]),
                       build_chart(work / "charts" / "new" / spec["chart"], shared_reference / name, spec, spec["new"]))
    with FakeAPIServer() as api:
        # One second of the server's clock for the whole module (metav1.Time has seconds): each object's creation and
        # its later patches carry the same timestamps, so nothing but the API's answers can tell created from patched.
        api.now = lambda: "2026-11-28T12:00:00Z"
        for spec in CHARTS.values():
            api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": spec["namespace"]}})
        run = Runner(work, api, installed_collection, helm_dir)
        rc, first = run([layer(n, CHARTS[n], built[n][0], CHARTS[n]["old"]) for n in sorted(CHARTS)], "install")
        assert rc == 0, first[-6000:]
        installed = dict((n, copy.deepcopy(live(api, CHARTS[n]["object"]))) for n in CHARTS)
        crds_before = dict((c, copy.deepcopy(api.get("CustomResourceDefinition", c)))
                           for spec in CHARTS.values() for c in spec["wait_crds"])
        rc, second = run([layer(n, CHARTS[n], built[n][1], CHARTS[n]["new"]) for n in sorted(CHARTS)], "upgrade")
        assert rc == 0, second[-6000:]
        yield {"api": api, "run": run, "first": first, "second": second, "installed": installed,
               "crds_before": crds_before, "work": work, "built": built}


@pytest.fixture(params=sorted(CHARTS))
def upgraded(request, fleet_of_charts):
    """One chart's part of the upgrade of them all."""
    name = request.param
    return dict(fleet_of_charts, name=name, spec=CHARTS[name], installed=fleet_of_charts["installed"][name],
                old=fleet_of_charts["built"][name][0], new=fleet_of_charts["built"][name][1])


def summary(output):
    """The lines of the summary task's message."""
    start = output.rfind("TASK [gpuops.platform.k8s_apply : Summarise the Kubernetes layer]")
    assert start >= 0, output[-3000:]
    return output[start:]


def chart_summary(output, chart):
    """The part of the summary about one chart's upgrade: from its "Chart upgrade:" to the next one."""
    text = " ".join(summary(output).split())
    parts = [p for p in text.split("Chart upgrade: ")[1:] if p.startswith(chart + " ")]
    assert len(parts) == 1, (chart, text[:4000])
    return "Chart upgrade: " + parts[0]


def test_the_previous_chart_installs_and_the_new_field_is_pruned_by_the_old_crd(upgraded):
    spec = upgraded["spec"]
    assert upgraded["installed"] is not None
    if spec.get("known_before"):
        assert at(upgraded["installed"], spec["new_field"]) == at(spec["object"], spec["new_field"])
    else:
        # The old CRD does not know the field: the server dropped it, as a real one does (structural pruning).
        assert at(upgraded["installed"], spec["new_field"]) is None
    assert "Chart upgrade" not in summary(upgraded["first"])


def test_the_release_is_upgraded_and_the_object_keeps_the_new_field(upgraded):
    spec, api = upgraded["spec"], upgraded["api"]
    assert helm_chart(api, spec) == ("deployed", spec["new"])
    now = live(api, spec["object"])
    assert at(spec["object"], spec["new_field"]) is not None
    assert at(now, spec["new_field"]) == at(spec["object"], spec["new_field"])


def test_the_crds_are_the_new_charts_and_established(upgraded, shared_reference):
    api, spec = upgraded["api"], upgraded["spec"]
    for name in spec["wait_crds"]:
        crd = api.get("CustomResourceDefinition", name)
        ref = yaml.load((shared_reference / upgraded["name"] / "crds" / ("%s_%s.yaml" % (
            name.split(".", 1)[1], name.split(".")[0]))).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        assert crd["spec"]["versions"] == ref["spec"]["versions"], name
        conditions = dict((c["type"], c["status"]) for c in crd["status"]["conditions"])
        assert conditions == {"NamesAccepted": "True", "Established": "True"}
        assert crd["status"]["storedVersions"] == [v["name"] for v in ref["spec"]["versions"] if v.get("storage")]


def test_crds_of_crds_dir_are_applied_server_side_before_the_upgrade_and_template_ones_left_to_helm(upgraded):
    api, spec = upgraded["api"], upgraded["spec"]
    name = spec["wait_crds"][0]
    owners = api.owners("CustomResourceDefinition", name)
    if spec["crds_dir"]:
        # The new chart's crds/ CRD went in by server-side apply (the field manager of the role), forced over helm's.
        assert "gpuops-platform" in owners and any(f.startswith("spec.versions") for f in owners["gpuops-platform"])
        applies = [i for i, r in enumerate(api.requests) if r[0] == "PATCH" and r[1].endswith("/" + name)
                   and "apply-patch" in r[3]]
        upgrade_secret = [i for i, r in enumerate(api.requests) if r[0] == "POST"
                          and r[1].endswith("/namespaces/%s/secrets" % spec["namespace"])]
        assert applies and len(upgrade_secret) == 2 and applies[-1] < upgrade_secret[-1]
    else:
        # Helm itself updates the CRDs its templates make; the role leaves them to it.
        assert "gpuops-platform" not in (owners or {})
        assert "helm" in owners


def test_the_summary_names_the_upgrade_its_crd_changes_and_values(upgraded):
    spec = upgraded["spec"]
    text = chart_summary(upgraded["second"], spec["chart"])
    assert "Chart upgrade: %s (layer %s): chart %s -> %s" % (spec["chart"], upgraded["name"].replace("-", "_"),
                                                             spec["old"], spec["new"]) in text
    expected = {
        "kuberay": ["CRD rayclusters.ray.io (applied server-side first): deprecated v1alpha1",
                    "spec.workerGroupSpecs[].priority", "spec.tlsOptions",
                    "values key metrics.serviceMonitor.selector is set but the new chart no longer has it "
                    "(now metrics.serviceMonitor.additionalLabels?)",
                    "default featureGates[RayServiceIncrementalUpgrade].enabled changes: False -> True"],
        "gpu-operator": ["CRD clusterpolicies.nvidia.com (applied server-side first): fields added in v1: "
                         "spec.dcgmExporter.serviceMonitor.scrapeTimeout, spec.hostPaths.kubeletRootDir, spec.operator.metrics",
                         "default dcgmExporter.serviceMonitor.enabled changes: False -> True",
                         "default driver.version changes: 580.126.20 -> 595.91.07"],
        "volcano": ["CRD jobs.batch.volcano.sh: fields added in v1alpha1:",
                    "validation changed in v1alpha1: spec.networkTopology.highestTierName",
                    "default basic.image_tag_version changes: v1.14.4 -> v1.15.0"],
        "kueue": ["default kueueViz.frontend.podSecurityContext changes: {} ->",
                  "default managerConfig.controllerManagerConfigYaml changes:"],
    }[upgraded["name"]]
    for part in expected:
        assert part in text, (part, text[:4000])
    # A key the inventory sets is not a changed default; a renamed one only where the chart renamed it.
    assert "default driver.enabled" not in text and "default controllerManager.replicas" not in text
    if upgraded["name"] != "kuberay":
        assert "is set but the new chart no longer has it" not in text
    if upgraded["name"] == "kueue":
        assert "CRD " not in text


def test_an_object_the_upgrade_only_patched_is_changed_not_created(upgraded):
    """The layer's object existed (same uid) and the upgrade run patched it (the new CRD keeps its new field): the
    summary counts it as changed, never created."""
    spec, api = upgraded["spec"], upgraded["api"]
    now = live(api, spec["object"])
    assert now["metadata"]["uid"] == upgraded["installed"]["metadata"]["uid"]
    line = [x for x in summary(upgraded["second"]).splitlines() if " %s: 1 objects" % upgraded["name"].replace("-", "_") in x]
    assert len(line) == 1, summary(upgraded["second"])[:3000]
    assert "created" not in line[0], line[0]
    if spec.get("known_before"):
        assert "(objects: 1 unchanged)" in line[0], line[0]
    else:
        assert "(objects: 1 changed)" in line[0], line[0]


def test_helm_reads_the_collections_kubeconfig_and_no_copy_of_the_token_is_written(fleet_of_charts):
    """kubernetes.core's helm modules copy a kubeconfig given by path, token included, into a new file in $TMPDIR for
    each module run; the collection's helm runs (the state read, the chart upgrades' reads, the upgrades) are given
    the kubeconfig itself. Checked while each helm runs, and after the runs."""
    run = fleet_of_charts["run"]
    seen = run.seen.read_text().splitlines()
    assert len(seen) > 8, seen
    assert [line for line in seen if line.startswith("HOLDS ")] == []
    assert sorted(set(seen)) == ["KUBECONFIG=%s" % run.kubeconfig]
    holding = [str(p) for p in run.tmpdir.rglob("*") if p.is_file() and TOKEN in p.read_text(errors="replace")]
    assert holding == []


@pytest.fixture(scope="module")
def again(fleet_of_charts):
    """A second run that wants the current charts, once: its output, and the objects it changed."""
    api = fleet_of_charts["api"]
    before = copy.deepcopy(api.objects)
    layers = [layer(n, CHARTS[n], fleet_of_charts["built"][n][1], CHARTS[n]["new"]) for n in sorted(CHARTS)]
    rc, output = fleet_of_charts["run"](layers, "again")
    assert rc == 0, output[-4000:]
    return output, [k for k in api.objects if api.objects[k] != before.get(k)]


def test_a_second_run_plans_no_upgrade_and_changes_nothing(again):
    output, changed = again
    assert "Chart upgrade" not in summary(output)
    assert changed == []


def test_a_downgrade_that_stops_serving_a_stored_version_is_refused_before_any_change(
        fleet_of_charts, again, shared_reference, tmp_path):
    """Back to a Kueue chart whose ClusterQueue CRD serves v1beta1 alone, while the cluster lists v1beta2 in
    status.storedVersions and team-a exists: the run stops before any change, naming the CRD, the version and the
    object, and the release stays at the current chart. The layer also brings a new tenant's namespace: it is not
    created either, since the refusal is decided before the first write (no PATCH, POST, PUT or DELETE at all)."""
    api, built = fleet_of_charts["api"], fleet_of_charts["built"]
    older = tmp_path / "kueue-older"
    (older / "chart").mkdir(parents=True)
    for name in ("Chart.yaml", "values.yaml"):
        shutil.copy(str(shared_reference / "kueue" / "chart" / name), str(older / "chart" / name))
    shutil.copytree(str(shared_reference / "kueue" / "crds"), str(older / "crds"))
    crd_file = older / "crds" / "kueue.x-k8s.io_clusterqueues.yaml"
    crd = yaml.load(crd_file.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    crd["spec"]["versions"] = [dict(v, storage=True) for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    crd_file.write_text(yaml.safe_dump(crd))
    chart = build_chart(tmp_path / "charts" / "kueue", older, CHARTS["kueue"], "0.8.4")
    layers = [layer(n, CHARTS[n], built[n][1], CHARTS[n]["new"]) if n != "kueue" else layer(n, CHARTS[n], chart, "0.8.4")
              for n in sorted(CHARTS)]
    kueue = [entry for entry in layers if entry["layer"] == "kueue"][0]
    kueue["objects"] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-new"}}] + kueue["objects"]
    before = copy.deepcopy(api.objects)
    start = len(api.requests)
    rc, output = fleet_of_charts["run"](layers, "downgrade")
    assert rc != 0, output[-4000:]
    text = " ".join(output.split())
    assert ("CRD clusterqueues.kueue.x-k8s.io: the new chart no longer serves v1beta2, which status.storedVersions "
            "lists (v1beta2), and 1 ClusterQueue object may be stored in it: team-a.") in text, output[-4000:]
    assert [k for k in set(api.objects) | set(before) if api.objects.get(k) != before.get(k)] == []
    assert [r for r in api.requests[start:] if r[0] != "GET"] == []
    assert api.get("Namespace", "team-new") is None
    assert helm_chart(api, CHARTS["kueue"]) == ("deployed", CHARTS["kueue"]["new"])


def reference_without(tmp_path, shared_reference, name, source, dropped):
    """A copy of a chart's reference data (``source``: its folder under shared/reference) without one CRD file."""
    copy_ = tmp_path / ("%s-without" % name)
    shutil.copytree(str(shared_reference / source / "chart"), str(copy_ / "chart"))
    shutil.copytree(str(shared_reference / source / "crds"), str(copy_ / "crds"))
    (copy_ / "crds" / dropped).unlink()
    return copy_


def test_a_chart_change_names_the_crds_it_drops_and_the_objects_holding_fields_it_drops(
        fleet_of_charts, again, shared_reference, tmp_path):
    """Planned (--check, nothing written): Volcano back to 1.14.4 without its HyperNode CRD, whose Job CRD no longer
    has spec.tasks[].template.spec.workloadRef that gang holds; KubeRay to a chart without its RayService CRD. The
    summary names both dropped CRDs (Helm deletes Volcano's, made by its templates, and leaves KubeRay's crds/ one)
    and gang with the field it holds."""
    api, built = fleet_of_charts["api"], fleet_of_charts["built"]
    volcano = build_chart(tmp_path / "charts" / "volcano", reference_without(
        tmp_path, shared_reference, "volcano", "volcano/previous", "topology.volcano.sh_hypernodes.yaml"),
        CHARTS["volcano"], CHARTS["volcano"]["old"])
    kuberay = build_chart(tmp_path / "charts" / "kuberay", reference_without(
        tmp_path, shared_reference, "kuberay", "kuberay", "ray.io_rayservices.yaml"), CHARTS["kuberay"], "1.7.1")
    wanted = {"volcano": (volcano, CHARTS["volcano"]["old"]), "kuberay": (kuberay, "1.7.1")}
    layers = [layer(n, CHARTS[n], *(wanted.get(n) or (built[n][1], CHARTS[n]["new"]))) for n in sorted(CHARTS)]
    start, before = len(api.requests), copy.deepcopy(api.objects)
    rc, output = fleet_of_charts["run"](layers, "drops", ["--check"])
    assert rc == 0, output[-4000:]
    assert [r for r in api.requests[start:] if r[0] != "GET" and r[2].get("dryRun") != ["All"]] == []
    assert [k for k in set(api.objects) | set(before) if api.objects.get(k) != before.get(k)] == []
    text = " ".join(summary(output).split())
    assert ("CRD hypernodes.topology.volcano.sh: no longer in the new chart, made by the templates of the deployed chart: "
            "helm upgrade deletes it, and every object of its kind with it") in text, text[:4000]
    assert ("CRD jobs.batch.volcano.sh: 1 Job object holds fields that v1alpha1 no longer has (the API server prunes "
            "them): volcano-system/gang (spec.tasks[].template.spec.workloadRef)") in text, text[:4000]
    assert ("CRD rayservices.ray.io: no longer in the new chart; Helm leaves it and its objects in place (delete it "
            "once nothing uses it)") in text, text[:4000]
    # Neither chart moved: the CRDs are all there.
    assert api.get("CustomResourceDefinition", "hypernodes.topology.volcano.sh") is not None
    assert helm_chart(api, CHARTS["volcano"]) == ("deployed", CHARTS["volcano"]["new"])
