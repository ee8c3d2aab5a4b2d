"""Checks of rendered objects against the upstream reference (CRD schemas and
chart values), read at test time from the shared reference folder."""
import copy
import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = Path(__file__).with_name("objects.yml")

# The reference folder and file of each custom resource kind.
CRDS = {
    ("scheduling.volcano.sh", "Queue"): "volcano/crds/scheduling.volcano.sh_queues.yaml",
    ("scheduling.volcano.sh", "PodGroup"): "volcano/crds/scheduling.volcano.sh_podgroups.yaml",
    ("batch.volcano.sh", "Job"): "volcano/crds/batch.volcano.sh_jobs.yaml",
    ("kueue.x-k8s.io", "ResourceFlavor"): "kueue/crds/kueue.x-k8s.io_resourceflavors.yaml",
    ("kueue.x-k8s.io", "ClusterQueue"): "kueue/crds/kueue.x-k8s.io_clusterqueues.yaml",
    ("kueue.x-k8s.io", "LocalQueue"): "kueue/crds/kueue.x-k8s.io_localqueues.yaml",
    ("kueue.x-k8s.io", "WorkloadPriorityClass"): "kueue/crds/kueue.x-k8s.io_workloadpriorityclasses.yaml",
    ("ray.io", "RayCluster"): "kuberay/crds/ray.io_rayclusters.yaml",
    ("ray.io", "RayJob"): "kuberay/crds/ray.io_rayjobs.yaml",
    ("scheduling.run.ai", "Queue"): "kai-scheduler/crds/scheduling.run.ai_queues.yaml",
    ("mellanox.com", "NicClusterPolicy"): "network-operator/crds/mellanox.com_nicclusterpolicies.yaml",
}
# The reference chart of each role's release.
CHARTS = {
    "volcano": "volcano",
    "kueue": "kueue",
    "kuberay": "kuberay",
    "kai_scheduler": "kai-scheduler",
    "dra_driver": "dra-driver-gpu",
    "network_operator": "network-operator",
}


def render(tmp_path, extra_vars, roles=None):
    """Run the objects playbook once; return (rc, output, {role: {objects, release}})."""
    out = Path(tmp_path) / "objects.json"
    extra = dict(extra_vars, sched_out=str(out))
    if roles:
        extra["sched_roles"] = roles
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=tmp_path, delete=False) as handle:
        json.dump(extra, handle)
    env = dict(os.environ,
               ANSIBLE_COLLECTIONS_PATH="%s:%s" % (ROOT / ".cache" / "src", ROOT / "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,", "-c", "local",
         "-e", "ansible_python_interpreter=%s" % sys.executable, "-e", "@" + handle.name, str(PLAYBOOK)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    output = proc.stdout + proc.stderr
    data = json.loads(out.read_text()) if proc.returncode == 0 else None
    return proc.returncode, output, data


def _strict(schema):
    """The CRD schema as JSON Schema that rejects unknown fields (server-side
    strict field validation) and understands the Kubernetes extensions."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if not isinstance(node, dict):
            return
        if node.pop("x-kubernetes-int-or-string", False):
            node.pop("type", None)
            node.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
        if "properties" in node and "additionalProperties" not in node \
                and not node.get("x-kubernetes-preserve-unknown-fields"):
            node["additionalProperties"] = False
        for key in ("properties", "patternProperties"):
            for child in node.get(key, {}).values():
                walk(child)
        for key in ("items", "additionalProperties", "not"):
            walk(node.get(key))
        for key in ("anyOf", "allOf", "oneOf"):
            for child in node.get(key, []):
                walk(child)

    walk(schema)
    # metadata is checked by the API server's ObjectMeta, not the CRD.
    schema.get("properties", {}).get("metadata", {}).pop("additionalProperties", None)
    return schema


@functools.lru_cache(maxsize=None)
def crd_schema(reference, group, kind, version):
    path = Path(reference) / CRDS[(group, kind)]
    crd = yaml.safe_load(path.read_text())
    for ver in crd["spec"]["versions"]:
        if ver["name"] == version:
            assert ver.get("served"), "%s/%s %s is not served by the reference CRD" % (group, version, kind)
            return _strict(ver["schema"]["openAPIV3Schema"]), crd["spec"]["scope"]
    raise AssertionError("%s %s/%s: the reference CRD has no version %s" % (kind, group, version, version))


def validate_custom(reference, obj):
    """Validate one custom resource against its upstream CRD; return the error list."""
    group, version = obj["apiVersion"].split("/")
    schema, scope = crd_schema(str(reference), group, obj["kind"], version)
    validator = jsonschema.Draft7Validator(schema)
    errors = ["%s %s: %s at %s" % (obj["kind"], obj["metadata"].get("name"), err.message, "/".join(map(str, err.path)))
              for err in validator.iter_errors(obj)]
    if (scope == "Namespaced") != ("namespace" in obj["metadata"]):
        errors.append("%s %s: scope is %s" % (obj["kind"], obj["metadata"].get("name"), scope))
    return errors


def is_custom(obj):
    group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
    return (group, obj["kind"]) in CRDS


def unknown_value_keys(values, upstream, path=""):
    """Paths set in values that the upstream values.yaml does not have. Below a
    key whose upstream value is an empty map, a list or null, anything goes
    (free-form maps like nodeSelector)."""
    missing = []
    for key, value in values.items():
        here = "%s.%s" % (path, key) if path else key
        if not isinstance(upstream, dict) or key not in upstream:
            missing.append(here)
        elif isinstance(value, dict) and isinstance(upstream[key], dict) and upstream[key]:
            missing.extend(unknown_value_keys(value, upstream[key], here))
    return missing


def chart_values(reference, role):
    return yaml.safe_load((Path(reference) / CHARTS[role] / "chart" / "values.yaml").read_text())
