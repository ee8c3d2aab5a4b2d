"""Plan the scheduling and add-on roles without a cluster (see sched_plan.yml).

plan_roles(workdir, extra_vars, collections_path, roles=None) -> (rc, output, data)
    data: {role: {"objects": [...], "release": {name, namespace, chart, version,
    repo_url, chart_path, values} or None}}, None when the run failed.
fleet(nodes, mig_strategy="single", sharing=(), default_config="") -> capacity fact
    The gpuops.platform.gpu_capacity filter over recorded node facts, exactly
    what the gpu_nodes plan publishes as gpuops_k8s_capacity.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

from ansible_collections.gpuops.platform.plugins.filter import gpu_capacity as capacity_filter

from k8s_support import ROOT, load_facts

PLAYBOOK = Path(__file__).with_name("sched_plan.yml")


def fleet(nodes, mig_strategy="single", sharing=(), default_config=""):
    """nodes: {node name: facts file name}."""
    configs = capacity_filter.gpu_sharing_configs(list(sharing), mig_strategy) if sharing else {}
    return capacity_filter.gpu_capacity(
        [{"name": name, "host": name, "nvidia": load_facts(facts)} for name, facts in nodes.items()],
        mig_strategy, configs, default_config)


def plan_roles(workdir, extra_vars, collections_path, roles=None):
    workdir = Path(workdir)
    out = workdir / "planned.json"
    evars = dict(extra_vars, sched_out=str(out))
    if roles:
        evars["sched_roles"] = roles
    (workdir / "extra_vars.json").write_text(json.dumps(evars))
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
    return proc.returncode, proc.stdout, data
