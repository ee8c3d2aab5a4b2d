"""Plan the gpu_monitoring role (and the GPU Operator values it feeds) without
a cluster, and read the metric names out of PromQL.

plan_monitoring(workdir, extra_vars, collections_path) -> (rc, output, data)
    data: {"objects": [...], "releases": [...], "monitoring": gpuops_k8s_monitoring,
    "render": Path of the render folder of both layers (gpu_operator, gpu_monitoring)},
    None when the run failed.
promql_metrics(expr) -> set of metric names an expression reads.
counters(csv_text) -> {name: type} of the exporter's counters CSV (comments skipped).
find_promtool() -> path of promtool (PATH, else .cache/prometheus from scripts/test.sh).
"""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from k8s_support import ROOT

PLAYBOOK = Path(__file__).parent / "monitoring" / "plan.yml"

# PromQL words that look like metric names but are not.
_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
             "inf", "nan"}


def plan_monitoring(workdir, extra_vars, collections_path):
    workdir = Path(workdir)
    out = workdir / "planned.json"
    render = workdir / "rendered"
    # No wait for the ClusterPolicy: nothing is applied.
    evars = dict({"gpuops_k8s_render_dir": str(render), "gpu_operator_wait_ready": False}, **extra_vars)
    (workdir / "extra_vars.json").write_text(json.dumps(dict(evars, monitoring_out=str(out))))
    bindir = Path(sys.executable).parent
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(collections_path), str(ROOT / "collections")]),
               PATH=str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.run(
        [str(bindir / "ansible-playbook"), "-i", "localhost,", "-c", "local",
         "-e", "ansible_python_interpreter=%s" % sys.executable, "-e", "@%s" % (workdir / "extra_vars.json"),
         str(PLAYBOOK)],
        cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, check=False)
    data = json.loads(out.read_text()) if proc.returncode == 0 else None
    if data is not None:
        data["render"] = render
    return proc.returncode, proc.stdout, data


def promql_metrics(expr):
    """Metric names in a PromQL expression (or a Grafana label_values() query)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)          # string literals
    text = re.sub(r"\$\{?\w+\}?", "", text)                   # Grafana variables
    text = re.sub(r"\{[^}]*\}", "", text)                     # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)                    # ranges
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    match = re.match(r"\s*label_values\(\s*([a-zA-Z_:][\w:]*)?\s*,", text)
    if match:
        return {match.group(1)} if match.group(1) else set()
    names = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?", text):
        name, call = m.group(1), m.group(2)
        if call or name.lower() in _KEYWORDS or re.match(r"^\d", name):
            continue
        names.add(name)
    return names


def counters(csv_text):
    out = {}
    for line in csv_text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split(",")]
        assert len(fields) == 3, "not NAME, type, help: %r" % line
        out[fields[0]] = fields[1]
    return out


def reference_fields(csv_path):
    """Every field named in an upstream counters CSV, commented out or not."""
    return set(re.findall(r"^#?\s*(DCGM_(?:FI|EXP)_[A-Z0-9_]+)\s*,", Path(csv_path).read_text(), re.M))


def find_promtool():
    found = shutil.which("promtool") or str(ROOT / ".cache" / "prometheus" / "usr" / "bin" / "promtool")
    assert os.access(found, os.X_OK), "promtool not found: run 'bash scripts/test.sh setup' (it extracts Debian's prometheus package)"
    return found
