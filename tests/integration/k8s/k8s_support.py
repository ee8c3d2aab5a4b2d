"""Render ``playbooks/cluster.yml`` without a cluster and check what it renders.

Import from tests under ``tests/integration/k8s/`` (pytest puts this folder on
sys.path)::

    from k8s_support import (render_cluster, load_facts, validate_objects,
                             validate_builtin, validate_custom, check_helm_values,
                             DEFAULT_K8S_VERSION)

API
---
render_cluster(workdir, extra_vars=None, nodes=None, expect_failure=False) -> Rendered
    Run ``ansible-playbook playbooks/cluster.yml`` from the repository root in
    render mode (``gpuops_k8s_render_dir`` = ``workdir/rendered``), against an
    inventory written into ``workdir``: ``localhost`` is ``k8s_control``, and
    every entry of ``nodes`` is a ``gpu_nodes`` host that is never connected to.
    ``nodes`` maps an inventory hostname to a dict with:
      ``facts``: the host's ``ansible_facts.nvidia`` (a dict, or the name of a
                 facts file found by :func:`load_facts`),
      ``mig_k8s_resources``: optional host fact of the MIG plan,
      ``vars``: optional other host variables (e.g. gpu_nodes_* per host).
    Facts are replayed by a first play that sets them as cacheable host facts,
    exactly as the node layer leaves them for cluster.yml in site.yml.
    The collection is the one built from this checkout and installed into a
    temporary collections path once per test session (``installed_collection``
    fixture in conftest.py passes it in as ``collections_path``).
    kubernetes.core is pointed at an unreachable API server (``K8S_AUTH_HOST``),
    so a render that touched the API would fail.
    With ``inventory`` (a path), that inventory and its group_vars are used
    instead, with only the test's host variables over them (every host local,
    ``nodes`` naming its hosts that get replayed facts).
    ``env`` overrides environment variables (None removes one), ``args`` adds
    ansible-playbook arguments (e.g. ``["--check"]``); with
    ``gpuops_k8s_render_dir: ""`` in ``extra_vars`` the run applies instead.
    With ``expect_failure`` the run must fail; ``Rendered.output`` holds the
    combined output for asserting the error message.

Rendered
    .dir         the render folder (Path)
    .output      ansible-playbook stdout+stderr
    .layers      {layer: {"order": int, "objects": [...], "releases": {name: {...}}}}
    .objects     every object, in apply order (layers by order, then file order)
    .releases    {release name: {"release": descriptor, "values": values, "layer": name}}
    .find(kind, name=None, namespace=None) -> list of objects
    .one(kind, name, namespace=None) -> the single matching object (AssertionError otherwise)
    .tasks       number of tasks the run executed (ok + changed + failed + skipped, from PLAY RECAP)

validate_builtin(obj, version=DEFAULT_K8S_VERSION)
    kubernetes-validate in strict mode (unknown fields are errors). Raises
    ``AssertionError`` naming the object; returns False for kinds it does not know
    (custom resources).
validate_custom(obj, reference_dir)
    jsonschema check of a custom resource against the ``openAPIV3Schema`` of its
    CRD, found by group, kind and served version in ``reference_dir/*/crds``.
    ``x-kubernetes-preserve-unknown-fields`` and ``x-kubernetes-int-or-string``
    are honoured; unknown fields are errors (structural schemas prune them).
validate_objects(objects, reference_dir, version=DEFAULT_K8S_VERSION) -> {"builtin": n, "custom": n}
    Every object through one of the two; an object that neither knows fails.
check_helm_values(values, chart_values, free_form=()) -> list of unknown key paths
    Every key path we set must exist in the upstream chart's ``values.yaml``
    (a path or a loaded dict). Below an upstream empty map (``{}``), a list or a
    path named in ``free_form`` (dotted, e.g. ``"hostPaths.kubeletRootDir"``
    for a key upstream documents in a comment), anything is allowed.
"""
import contextlib
import copy
import functools
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils
import yaml
from kubernetes_validate.utils import SchemaNotFoundError

ROOT = Path(__file__).resolve().parents[3]
# Recorded nvml_facts fixtures first; ./facts holds layouts no recording has (MIG mixed).
FIXTURE_DIRS = [ROOT / "tests" / "fixtures" / "nvml", Path(__file__).resolve().parent / "facts"]

# Kubernetes version the collection targets by default (gpuops_k8s_version).
DEFAULT_K8S_VERSION = "1.34"


def load_facts(name):
    """``ansible_facts.nvidia`` from a facts file: tests/fixtures/nvml/<name>.json, else ./facts/<name>.json."""
    for folder in FIXTURE_DIRS:
        path = folder / ("%s.json" % name)
        if path.is_file():
            data = json.loads(path.read_text())
            # Accept both a bare facts document and a module result.
            return data.get("ansible_facts", {}).get("nvidia", data)
    raise FileNotFoundError("no facts file %s.json in %s" % (name, ", ".join(str(f) for f in FIXTURE_DIRS)))


class Rendered:
    def __init__(self, render_dir, output, elapsed=None, cpu=None):
        self.dir = Path(render_dir)
        self.output = output
        self.elapsed = elapsed  # seconds of the ansible-playbook run alone (not the harness's inventory work)
        self.cpu = cpu  # CPU seconds (user and system) of that run and every process it waited for
        self.layers = {}
        self.objects = []
        self.releases = {}
        self.tasks = _count_tasks(output)
        if not self.dir.is_dir():
            return
        for layer_dir in sorted(p for p in self.dir.iterdir() if p.is_dir() and re.match(r"^[0-9]{2}-", p.name)):
            order, dummy, name = layer_dir.name.partition("-")
            layer = {"order": int(order), "objects": [], "releases": {}, "dir": layer_dir}
            manifest = layer_dir / "manifests.yaml"
            if manifest.is_file():
                layer["objects"] = [d for d in yaml.safe_load_all(manifest.read_text()) if d is not None]
            helm = layer_dir / "helm"
            if helm.is_dir():
                for rel_dir in sorted(helm.iterdir()):
                    if not (rel_dir / "release.yaml").is_file():
                        continue  # left empty by the pruning of an earlier render
                    entry = {
                        "release": yaml.safe_load((rel_dir / "release.yaml").read_text()),
                        "values": yaml.safe_load((rel_dir / "values.yaml").read_text()) or {},
                        "layer": name,
                    }
                    layer["releases"][rel_dir.name] = entry
                    self.releases[rel_dir.name] = entry
            if layer["objects"] or layer["releases"]:
                self.layers[name] = layer
            self.objects.extend(layer["objects"])

    def find(self, kind, name=None, namespace=None):
        return [o for o in self.objects
                if o["kind"] == kind
                and (name is None or o["metadata"]["name"] == name)
                and (namespace is None or o["metadata"].get("namespace") == namespace)]

    def one(self, kind, name, namespace=None):
        found = self.find(kind, name, namespace)
        assert len(found) == 1, "expected one %s %s, found %d in %s" % (
            kind, name, len(found), sorted({o["kind"] for o in self.objects}))
        return found[0]


def _count_tasks(output):
    """Tasks executed on all hosts, from the PLAY RECAP (ok + changed + failed + skipped + ignored, per host)."""
    total = 0
    for m in re.finditer(r"^\S+\s+:\s+ok=(\d+)\s+changed=\d+\s+unreachable=\d+\s+failed=(\d+)\s+skipped=(\d+)\s+"
                         r"rescued=\d+\s+ignored=(\d+)", output, re.M):
        total += sum(int(g) for g in m.groups())
    return total


def _inventory(nodes):
    hosts = {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}
    gpu_nodes = {}
    for host, spec in (nodes or {}).items():
        hv = dict(spec.get("vars") or {})
        hv["ansible_connection"] = "local"
        facts = spec.get("facts")
        if isinstance(facts, str):
            facts = load_facts(facts)
        if facts is not None:
            hv["test_nvidia_facts"] = facts
        if spec.get("mig_k8s_resources") is not None:
            hv["test_mig_k8s_resources"] = spec["mig_k8s_resources"]
        hosts[host] = hv
        gpu_nodes[host] = None
    return {"all": {"hosts": hosts, "children": {
        "gpu_nodes": {"hosts": gpu_nodes}, "k8s_control": {"hosts": {"localhost": None}}}}}


def _overlay(inventory, nodes):
    """Host variables over an existing inventory: every host local, GPU hosts with replayed facts."""
    base = _inventory(nodes)["all"]["hosts"]
    base.pop("localhost")
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(inventory), "--list"],
                          cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
    hosts = {}
    listed = json.loads(proc.stdout)
    names = set(listed["_meta"]["hostvars"])
    for group in listed.values():
        names.update(group.get("hosts", []) if isinstance(group, dict) else [])
    for host in sorted(names):
        hosts[host] = dict(base.get(host, {}), ansible_connection="local", ansible_become=False,
                           ansible_python_interpreter=sys.executable)
    unknown = sorted(set(base) - set(hosts))
    assert not unknown, "nodes not in %s: %s" % (inventory, unknown)
    return {"all": {"hosts": hosts}}


_REPLAY_PLAY = """---
# Replay recorded node facts as the node layer leaves them, then the cluster layer.
- name: Replay GPU node facts
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Set the recorded facts
      ansible.builtin.set_fact:
        nvidia: "{{ test_nvidia_facts }}"
        cacheable: true
      when: test_nvidia_facts is defined
%s
- name: Kubernetes layer
  ansible.builtin.import_playbook: %s
"""
_PLAYBOOK_ONLY = """---
- name: Kubernetes layer
  ansible.builtin.import_playbook: %s
"""
# Only when a node has them: the run's task count is what cluster.yml runs, plus one task per GPU node.
_REPLAY_MIG = """    - name: Set the MIG plan's resource counts
      ansible.builtin.set_fact:
        mig_k8s_resources: "{{ test_mig_k8s_resources }}"
      when: test_mig_k8s_resources is defined
"""


@contextlib.contextmanager
def short_tmpdir(prefix):
    """An empty TMPDIR of its own, with a short path: ansible-core's local RPC server puts a Unix socket there,
    and pytest-xdist's folder names would pass the 107-byte socket path limit."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield tmp
    finally:
        shutil.rmtree(str(tmp), ignore_errors=True)


def render_cluster(workdir, extra_vars=None, nodes=None, expect_failure=False, collections_path=None,
                   playbook="playbooks/cluster.yml", timeout=600, env=None, args=(), inventory=None):
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    render_dir = workdir / "rendered"
    inventories = []
    if inventory:
        # The given inventory with its group_vars, then only the test's host
        # variables over it (local connection, replayed facts).
        inventories = [str(inventory)]
        hosts = _overlay(inventory, nodes)
    else:
        hosts = _inventory(nodes)
    # JSON, which ansible-core's YAML inventory plugin parses with the json module first: the recorded facts in it
    # would take the YAML parser half a second per run.
    (workdir / "hosts.json").write_text(json.dumps(hosts))
    mig = any((spec or {}).get("mig_k8s_resources") is not None for spec in (nodes or {}).values())
    replayed = mig or any((spec or {}).get("facts") is not None for spec in (nodes or {}).values())
    # Without facts to replay (nodes planned from recorded facts, say), the playbook alone, as a site runs it.
    (workdir / "play.yml").write_text(_REPLAY_PLAY % (_REPLAY_MIG if mig else "", ROOT / playbook) if replayed
                                      else _PLAYBOOK_ONLY % (ROOT / playbook))
    evars = dict(extra_vars or {})
    evars.setdefault("gpuops_k8s_render_dir", str(render_dir))
    (workdir / "extra_vars.json").write_text(json.dumps(evars))
    run_env = dict(os.environ)
    run_env.update({
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
        # Render mode must make no API call: any kubernetes.core module that ran
        # would try this unreachable API server and fail the run.
        "K8S_AUTH_HOST": "https://127.0.0.1:9",
        "K8S_AUTH_KUBECONFIG": str(workdir / "no-such-kubeconfig"),
    })
    for key, value in (env or {}).items():
        if value is None:
            run_env.pop(key, None)
        else:
            run_env[key] = value
    if collections_path:
        run_env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join([str(collections_path), str(ROOT / "collections")])
    bindir = Path(sys.executable).parent
    run_env["PATH"] = str(bindir) + os.pathsep + run_env.get("PATH", "")
    argv = [str(bindir / "ansible-playbook")]
    for source in inventories + [str(workdir / "hosts.json")]:
        argv += ["-i", source]
    argv += [str(workdir / "play.yml"), "-e", "@%s" % (workdir / "extra_vars.json")] + list(args)
    start, cpu = time.monotonic(), children_cpu()
    proc = subprocess.run(
        argv, cwd=str(ROOT), env=run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
        check=False)
    elapsed, cpu = time.monotonic() - start, children_cpu() - cpu
    output = proc.stdout
    (workdir / "output.txt").write_text(output)
    if expect_failure:
        assert proc.returncode != 0, "cluster.yml should have failed:\n" + output[-3000:]
    else:
        assert proc.returncode == 0, "cluster.yml failed (rc %d):\n%s" % (proc.returncode, output[-6000:])
    return Rendered(render_dir, output, elapsed, cpu)


def children_cpu():
    """CPU seconds (user and system) of this process's children that ended and were waited for, so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _describe(obj):
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return "%s %s%s" % (obj.get("kind"), ns + "/" if ns else "", meta.get("name"))


# kubernetes_validate reads and parses its schema files, the definitions of every kind
# included (megabytes of JSON), on each call: read each once. The schemas are only read.
kubernetes_validate.utils.schema_contents = functools.lru_cache(maxsize=None)(kubernetes_validate.utils.schema_contents)


def validate_builtin(obj, version=DEFAULT_K8S_VERSION):
    try:
        kubernetes_validate.validate(copy.deepcopy(obj), version, strict=True)
    except SchemaNotFoundError:
        return False
    except kubernetes_validate.ValidationError as exc:
        raise AssertionError("%s is not valid Kubernetes %s: %s" % (_describe(obj), version, str(exc).split("\n", maxsplit=1)[0]))
    return True


_CRD_CACHE = {}


def _crds(reference_dir):
    key = str(reference_dir)
    if key not in _CRD_CACHE:
        index = {}
        for path in sorted(Path(reference_dir).glob("*/crds/*.yaml")):
            # libyaml's loader where PyYAML has it: the reference CRDs are megabytes of YAML.
            for doc in yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                spec = doc["spec"]
                for ver in spec.get("versions", []):
                    if ver.get("served", True) and "schema" in ver:
                        index[(spec["group"], spec["names"]["kind"], ver["name"])] = (
                            ver["schema"]["openAPIV3Schema"], spec.get("scope"), path)
        _CRD_CACHE[key] = index
    return _CRD_CACHE[key]


def _to_jsonschema(schema):
    """OpenAPI v3 (structural, Kubernetes flavour) to JSON Schema: unknown fields are errors."""
    if isinstance(schema, list):
        return [_to_jsonschema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in ("properties", "patternProperties"):
            out[key] = dict((k, _to_jsonschema(v)) for k, v in value.items())
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = _to_jsonschema(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = _to_jsonschema(value)
        elif key == "x-kubernetes-int-or-string" and value:
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        elif key == "nullable" and value:
            out["__nullable"] = True
        elif key.startswith("x-kubernetes-") or key in ("description", "example", "externalDocs", "format"):
            # format is advisory on the API server (int32, date-time, quantity...)
            continue
        else:
            out[key] = value
    if "__nullable" in out:
        del out["__nullable"]
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
    if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out \
            and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@functools.lru_cache(maxsize=None)
def _crd_validator(reference_dir, group, kind, version):
    """The JSON Schema validator of one served CRD version, made once (its schema converted, metadata checked)."""
    schema = _to_jsonschema(_crds(reference_dir)[(group, kind, version)][0])
    props = schema.setdefault("properties", {})
    # The API server checks metadata itself; the CRD schema leaves it open.
    props["metadata"] = {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", "maxLength": 253},
        "namespace": {"type": "string"}, "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}, "additionalProperties": False}
    return jsonschema.Draft7Validator(schema)


def validate_custom(obj, reference_dir):
    group, dummy, version = obj["apiVersion"].rpartition("/")
    found = _crds(reference_dir).get((group, obj["kind"], version))
    if not found:
        raise AssertionError("no CRD in %s serves %s/%s (%s)" % (reference_dir, obj["apiVersion"], obj["kind"], _describe(obj)))
    dummy, scope, path = found
    errors = sorted(_crd_validator(str(reference_dir), group, obj["kind"], version).iter_errors(obj),
                    key=lambda e: list(e.path))
    if errors:
        raise AssertionError("%s does not match the CRD in %s:\n%s" % (
            _describe(obj), path, "\n".join("  %s: %s" % ("/".join(str(p) for p in e.path), e.message) for e in errors[:10])))
    namespaced = bool((obj.get("metadata") or {}).get("namespace"))
    if scope == "Namespaced" and not namespaced:
        raise AssertionError("%s is namespaced (CRD %s) but has no metadata.namespace" % (_describe(obj), path.name))
    if scope == "Cluster" and namespaced:
        raise AssertionError("%s is cluster-scoped (CRD %s) but has a metadata.namespace" % (_describe(obj), path.name))
    return True


def validate_objects(objects, reference_dir, version=DEFAULT_K8S_VERSION):
    counts = {"builtin": 0, "custom": 0}
    for obj in objects:
        if validate_builtin(obj, version):
            counts["builtin"] += 1
        else:
            validate_custom(obj, reference_dir)
            counts["custom"] += 1
    return counts


def check_helm_values(values, chart_values, free_form=()):
    if not isinstance(chart_values, dict):
        chart_values = yaml.safe_load(Path(chart_values).read_text()) or {}
    free = set(free_form)
    unknown = []

    def walk(ours, theirs, path):
        for key, value in ours.items():
            here = "%s.%s" % (path, key) if path else str(key)
            if here in free:
                continue
            if not isinstance(theirs, dict) or key not in theirs:
                unknown.append(here)
                continue
            upstream = theirs[key]
            if isinstance(value, dict) and isinstance(upstream, dict) and upstream:
                walk(value, upstream, here)
            # Below an empty upstream map, a list or a scalar slot, the chart takes what we give.
    walk(values or {}, chart_values, "")
    return unknown
