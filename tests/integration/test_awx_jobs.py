"""Every job template of awx/gpuops-platform.yml, launched as AWX launches it.

Each job runs through the real ansible-runner from a private data directory that
AWX's RunJob would build (tests/integration/awx_support.py): the project, the
inventory script of the job's slice of hosts, the survey defaults as extra vars, the
credentials' injectors as environment variables and files, and AWX's fact storage
for use_fact_cache. The inventory is the shipped one with the demo fleet synced into
it from the project (inventories/demo), every job runs in check mode at verbosity 3,
and the jobs run in the rollout workflow's order, so Apply cluster plans the cluster
from the facts the three slices of Apply nodes stored. The workflow's nodes get what
AWX gives them: the workflow survey's answers (here the driver question left empty) and
the artifacts of the Plan fleet job before them, whose plan.json lies in the shipped
report folder (a temporary folder stands for /var/lib/gpuops/fleet).
"""
import hashlib
import secrets

import pytest
import yaml

from ansible.release import __version__ as ansible_version

import awx_support as awx

pytestmark = pytest.mark.slow

TOKEN = "gpuops-awx-test-" + secrets.token_hex(16)
CA = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUZ3B1b3BzLXRlc3QtY2E=\n-----END CERTIFICATE-----\n"
CREDENTIALS = {"GPU cluster API": {"host": "https://k8s-api.gpu.test:6443", "token": TOKEN, "ca_cert": CA},
               "GPU nodes SSH": {"username": "root"}}
# AWX's fact storage (awx/main/tasks/facts.py) reads and writes <fact_cache>/<host>
# JSON files; ansible-core 2.19 and later keep the jsonfile cache as s1_<host> holding
# {"__payload__": ...} (ansible/ansible#85874), so facts would not cross from one job to
# the next. The execution environment pins the compat stage's ansible-core for this, and
# scripts/compat.sh runs these jobs there.
EE_ANSIBLE_CORE = awx.ee_ansible_core()
if ansible_version != EE_ANSIBLE_CORE:
    pytest.skip("the AWX jobs run on the execution environment's ansible-core %s (scripts/compat.sh), not %s"
                % (EE_ANSIBLE_CORE, ansible_version), allow_module_level=True)
GPU_NODES = ["dgx-a100-01", "h200-mig-01", "hgx-h100-01", "hgx-h100-02", "hgx-h100-03", "hgx-h100-04",
             "l40s-01", "l40s-02", "l40s-03", "l40s-04"]


class Jobs:
    def __init__(self, workdir):
        self.assets = awx.load_assets()
        self.templates = awx.by_name(self.assets, "job_templates")
        self.project = awx.copy_project(workdir / "project")
        self.inventory = awx.awx_inventory_from_project(
            awx.ROOT / "inventories" / "demo" / "hosts.yml", self.project, base=self.assets["inventory"][0])
        # The shipped report folder, named by the job id, under a folder of its own.
        shipped = yaml.safe_load(self.assets["inventory"][0]["variables"])["gpuops_fleet_report_dir"]
        self.report_root = workdir / "persistent"
        self.inventory["vars"]["gpuops_fleet_report_dir"] = shipped.replace("/var/lib/gpuops/fleet", str(self.report_root))
        self.workdir = workdir
        self.facts = awx.FactStore()
        self.next_id = 100
        self.runs = {}

    def launch(self, name, key=None, facts=None, **kwargs):
        self.next_id += 1
        kwargs.setdefault("verbosity", 3)
        result = awx.launch(self.templates[name], self.assets, self.inventory, self.project, self.workdir,
                            self.next_id, credential_inputs=CREDENTIALS, facts=facts or self.facts, **kwargs)
        self.runs[key or name] = result
        return result


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    jobs = Jobs(tmp_path_factory.mktemp("awx"))
    # The rollout workflow, each job as its node launches it (check mode but for
    # Record facts, which changes no node: the demo is plan-only).
    workflow = awx.by_name(jobs.assets, "workflow_job_templates")["GPU fleet rollout"]
    jobs.workflow_vars = awx.api_launch(workflow, {"gpuops_driver_version": ""}, workflow=True)
    nodes = {n["identifier"]: n for n in workflow["related"]["workflow_nodes"]}
    jobs.artifacts = {}

    def node_vars(identifier):
        template = jobs.templates[nodes[identifier]["unified_job_template"]["name"]]
        runtime, errors = awx.workflow_node_job_kwargs(template, nodes[identifier], jobs.workflow_vars, jobs.artifacts)
        assert errors == {}, errors
        return runtime

    jobs.launch("Record facts", answers=node_vars("record"))
    jobs.launch("Plan fleet", answers=node_vars("plan"))
    jobs.artifacts.update(awx.job_artifacts(jobs.runs["Plan fleet"][0]))
    slices = jobs.templates["Apply nodes"]["job_slice_count"]
    for number in range(1, slices + 1):
        jobs.launch("Apply nodes", key="Apply nodes %d/%d" % (number, slices), job_type="check",
                    slice_number=number, slice_count=slices, verbosity=3 if number == 1 else 0,
                    answers=node_vars("apply-nodes"))
    jobs.launch("Apply cluster", job_type="check", answers=node_vars("apply-cluster"))
    jobs.launch("GPU health", job_type="check", answers=node_vars("health"))
    # Day 2.
    jobs.launch("Rolling driver upgrade", job_type="check")
    jobs.launch("DCGM diagnostics", job_type="check")
    jobs.launch("Kubelet tuning", job_type="check")
    # The node layer once more, unsliced and with a fact storage of its own, as its node launches it.
    jobs.launch("Apply nodes", key="Apply nodes unsliced", job_type="check", facts=awx.FactStore(), verbosity=0,
                answers=node_vars("apply-nodes"))
    # A slice without the k8s_control host, in an inventory that leaves MIG's control
    # host to the mig role's default.
    plain = awx.awx_inventory_from_project(awx.ROOT / "inventories" / "demo" / "hosts.yml", jobs.project)
    jobs.next_id += 1
    jobs.runs["Apply nodes 1/3, no control host"] = awx.launch(
        jobs.templates["Apply nodes"], jobs.assets, plain, jobs.project, jobs.workdir, jobs.next_id,
        credential_inputs=CREDENTIALS, facts=awx.FactStore(), job_type="check", slice_number=1, slice_count=3)
    return jobs


def _ok(run):
    result = run[0]
    return result.status == "successful" and result.rc == 0, result.stdout.read()[-3000:]


@pytest.mark.parametrize("name", ["Record facts", "Plan fleet", "Apply nodes 1/3", "Apply nodes 2/3", "Apply nodes 3/3",
                                  "GPU health", "Rolling driver upgrade", "DCGM diagnostics", "Kubelet tuning",
                                  "Apply nodes unsliced", "Apply nodes 1/3, no control host"])
def test_job_succeeds_in_check_mode(jobs, name):
    ok, tail = _ok(jobs.runs[name])
    assert ok, tail
    stats = jobs.runs[name][0].stats
    assert not stats.get("failures") and not stats.get("dark"), stats
    # Check mode: each node's summary is a plan (changed counts what would change).
    plans = [e["event_data"]["res"]["msg"][0] for e in jobs.runs[name][0].events if e["event"] == "runner_on_ok" and
             e["event_data"].get("task") == "Summarize the node"]
    assert all(p.startswith("PLAN: ") for p in plans), plans


def test_record_facts_records_every_gpu_node_into_the_fact_cache(jobs):
    result = jobs.runs["Record facts"][0]
    summary = [e["event_data"]["res"]["msg"] for e in result.events if e["event"] == "runner_on_ok" and
               e["event_data"].get("task") == "Summarize the recording"]
    assert summary and summary[0][0].startswith("Recorded 10 of 10 host(s) into the fact cache"), summary


def test_awx_stores_the_recorded_facts(jobs):
    """What Record facts recorded reaches AWX's fact storage, for Plan fleet and Apply cluster."""
    assert all("gpuops_recorded" in jobs.facts.facts.get(h, {}) for h in GPU_NODES), jobs.facts.facts


def test_the_recorded_facts_are_where_awx_reads_them(jobs):
    """ansible-core writes each host's cache entry as <fact_cache>/<host>, the plain
    JSON of its facts that AWX's finish_fact_cache stores for the next job."""
    result = jobs.runs["Record facts"][0]
    cache = awx.Path(result.config.private_data_dir) / "artifacts" / result.config.ident / "fact_cache"
    names = sorted(p.name for p in cache.iterdir())
    assert set(GPU_NODES) <= set(names) and not any(n.startswith("s1_") for n in names), names
    entry = awx.json.loads((cache / GPU_NODES[0]).read_text())
    assert "__payload__" not in entry and entry["gpuops_recorded"]["host"] == GPU_NODES[0]


def test_plan_fleet_plans_every_gpu_node_from_its_facts(jobs):
    result = jobs.runs["Plan fleet"][0]
    assert set(result.stats["ok"]) == {"localhost"}, "the plan contacts no node"
    summary = [e["event_data"]["res"]["msg"] for e in result.events if e["event"] == "runner_on_ok" and
               e["event_data"].get("task") == "Summarize the fleet"]
    assert summary and summary[0][0].startswith("10 hosts, "), summary


def test_apply_cluster_plans_from_the_facts_the_slices_stored(jobs):
    """Without the GPU nodes' facts the tenants' quota is larger than the fleet (0 GPUs)
    and the job fails: the facts must come through AWX's fact storage from Apply nodes."""
    assert all(jobs.facts.facts.get(h) for h in GPU_NODES), sorted(h for h in GPU_NODES if not jobs.facts.facts.get(h))
    assert _ok(jobs.runs["Apply cluster"])[0], _ok(jobs.runs["Apply cluster"])[1]
    assert all("nvidia" in jobs.facts.facts[h] for h in GPU_NODES)
    result = jobs.runs["Apply cluster"][0]
    assert set(result.stats["ok"]) == {"localhost"}, "run once, on the control host"
    plays = [e["event_data"]["play"] for e in result.events if e["event"] == "playbook_on_play_start"]
    assert plays == ["Kubernetes GPU stack"], plays


@pytest.mark.parametrize("name", ["Record facts", "Plan fleet", "Apply nodes 1/3", "Apply cluster", "GPU health",
                                  "Rolling driver upgrade", "DCGM diagnostics", "Kubelet tuning"])
def test_token_reaches_the_job_as_environment_only_and_never_its_events(jobs, name):
    result, env, safe_env = jobs.runs[name]
    template = jobs.templates[name.split(" 1/")[0]]
    uses_k8s = any(c["name"] == "GPU cluster API" for c in template["related"]["credentials"])
    assert (env.get("K8S_AUTH_API_KEY") == TOKEN) is uses_k8s
    assert TOKEN not in awx.json.dumps(safe_env)
    command = awx.json.loads(open("%s/artifacts/%s/command" % (result.config.private_data_dir, result.config.ident)).read())
    assert "-vvv" in command["command"], command
    assert any(e["event"] == "verbose" for e in result.events)
    assert awx.mentions(result, TOKEN) == []
    assert TOKEN not in open(result.config.private_data_dir + "/env/extravars").read(), "never an extra var"


def test_slices_are_awxs_round_robin_of_the_hosts_by_name(jobs):
    slices = [jobs.runs["Apply nodes %d/3" % n][0] for n in (1, 2, 3)]
    ran = [sorted(set(r.stats.get("ok", {})) | set(r.stats.get("skipped", {}))) for r in slices]
    everyone = sorted(jobs.inventory["hosts"])
    assert everyone == sorted(GPU_NODES + ["localhost"])
    for number, hosts in enumerate(ran, 1):
        assert set(hosts) - {"localhost"} == set(everyone[number - 1::3]) - {"localhost"}, (number, hosts)
    assert sorted(h for hosts in ran for h in hosts if h != "localhost") == GPU_NODES


def _run_once_tasks():
    """The names of the run_once tasks of the playbooks and roles, blocks included."""
    names = set()

    def walk(tasks):
        for task in tasks if isinstance(tasks, list) else []:
            if isinstance(task, dict):
                if task.get("run_once") and task.get("name"):
                    names.add(task["name"])
                for key in ("tasks", "block", "rescue", "always"):
                    walk(task.get(key))

    for path in list((awx.ROOT / "playbooks").rglob("*.yml")) + list((awx.ROOT / "roles").glob("*/tasks/*.yml")):
        walk(yaml.safe_load(path.read_text()))
    assert "Refuse driver settings that no plan can use" in names and "Refuse a stale approved plan, and take its hosts" in names
    return names


def test_union_of_the_slices_is_the_unsliced_run(jobs):
    """Every task of every node ends the same whether its node ran with the whole fleet
    or with a third of it: no node play depends on another host of its slice. A
    run_once task checks the job's whole inventory once: it speaks of the slice (how
    many variables, which plan hosts it leaves to other slices) from whichever host
    comes first, so it is compared as "each slice passed it"."""
    union = {}
    once = _run_once_tasks()

    def node_results(run):
        results = awx.host_results(run[0])
        passed = [r for rs in results.values() for r in rs if r[1] in once]
        assert passed and all(r[2] in ("ok", "skipped") for r in passed), passed
        return dict((host, [r for r in rs if r[1] not in once]) for host, rs in results.items())

    for number in (1, 2, 3):
        for host, results in node_results(jobs.runs["Apply nodes %d/3" % number]).items():
            assert host not in union or host == "localhost", "%s ran in two slices" % host
            union.setdefault(host, []).extend(results)
    whole = node_results(jobs.runs["Apply nodes unsliced"])
    for host in GPU_NODES:
        assert union[host] == whole[host], host
    assert set(union) - {"localhost"} == set(whole) - {"localhost"} == set(GPU_NODES)


class _ExtraVarsLoader(yaml.SafeLoader):
    """Reads the extravars file AWX writes, every string tagged !unsafe."""


_ExtraVarsLoader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def _extravars(run):
    result = run[0]
    return yaml.load(open(result.config.private_data_dir + "/env/extravars").read(), Loader=_ExtraVarsLoader)


def test_plan_fleet_keeps_the_plan_outside_the_job_and_names_it(jobs):
    """The plan is not in the job's project copy (AWX throws it away) but in the report
    folder named by the job's id, and the artifacts name it with its digest."""
    result = jobs.runs["Plan fleet"][0]
    artifacts = awx.job_artifacts(result)
    plan_file = jobs.report_root / result.config.ident / "plan.json"
    assert artifacts["gpuops_approved_plan"] == str(plan_file) and plan_file.is_file(), artifacts
    assert artifacts["gpuops_approved_plan_sha256"] == hashlib.sha256(plan_file.read_bytes()).hexdigest()
    assert artifacts["gpuops_fleet_plan_report"] == str(plan_file.parent / "index.html")
    assert not (jobs.project / "build" / "fleet" / "plan.json").exists()
    assert "report: %s" % artifacts["gpuops_fleet_plan_report"] in result.stdout.read(), "the job's summary names the page"


def test_an_empty_driver_answer_keeps_every_pools_pin(jobs):
    """The workflow's driver question answered empty reaches every node as "", and
    only the pool pinned to 570.195.03 moves."""
    assert all(_extravars(jobs.runs[k])["gpuops_driver_version"] == "" for k in ("Plan fleet", "Apply nodes 1/3"))
    plan = awx.json.loads(open(awx.job_artifacts(jobs.runs["Plan fleet"][0])["gpuops_approved_plan"]).read())
    assert plan["summary"]["driver_changes"] == ["hgx-h100-0%d" % i for i in range(1, 5)], plan["summary"]["driver_changes"]


@pytest.mark.parametrize("name", ["Apply nodes 1/3", "Apply nodes 2/3", "Apply nodes 3/3", "Apply cluster", "GPU health"])
def test_the_nodes_after_the_plan_get_the_approved_plan(jobs, name):
    artifacts = awx.job_artifacts(jobs.runs["Plan fleet"][0])
    extra = _extravars(jobs.runs[name])
    assert extra["gpuops_approved_plan"] == artifacts["gpuops_approved_plan"], name
    assert extra["gpuops_approved_plan_sha256"] == artifacts["gpuops_approved_plan_sha256"], name
    assert "gpuops_approved_plan" not in _extravars(jobs.runs["Record facts"])


def test_each_slice_runs_its_part_of_the_approved_plan_and_names_the_rest(jobs):
    """The workflow hands Plan fleet's plan.json to every slice of Apply nodes: a slice holds a
    third of the plan's hosts, which is not a stale plan; it names the hosts left to the others."""
    for number in (1, 2, 3):
        result = jobs.runs["Apply nodes %d/3" % number][0]
        shown = [e["event_data"]["res"]["msg"] for e in result.events if e["event"] == "runner_on_ok" and
                 e["event_data"].get("task") == "Show the approved plan's hosts"]
        # Once for the node play, once for the MIG play: the same plan, the same hosts.
        assert len(shown) == 2 and shown[0] == shown[1], shown
        mine = set(GPU_NODES[number - 1::3])
        outside = [line for line in shown[0] if line.startswith("in the approved plan but not in this run's inventory")]
        assert len(outside) == 1, shown[0]
        named = set(outside[0].split("not run here: ")[1].split(", "))
        assert named == set(GPU_NODES) - mine, (number, named)
