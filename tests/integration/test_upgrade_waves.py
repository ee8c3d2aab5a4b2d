"""An approved plan is what runs.

With -e gpuops_approved_plan, upgrade.yml runs that plan's waves (the batches
ansible-playbook really runs, one "PLAY [Upgrade ...]" per batch, and the
"wave N/M" lines), and a plan whose hosts' facts or settings changed since is
refused before the upgrade play starts. That the waves an inventory gives are
plan.json's is proven with the other decisions, in test_decisions_agree.py.
"""
import hashlib
import json
import os
import re
import subprocess
import sys

import pytest

from rollout_support import UPGRADE_PLAY, members, planned_waves, ran_waves, said_waves

pytestmark = pytest.mark.slow

PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
SERIAL_REFUSAL = "gpuops_upgrade_serial 'ten' is neither a number of hosts nor a percentage such as 10%"


def _run(repo_root, inventories, playbook, *extra):
    installed = repo_root / "collections" / "ansible_collections" / "gpuops" / "platform"
    assert installed.is_dir(), "run scripts/bootstrap.sh first: ansible-playbook needs the installed collection"
    command = [PLAYBOOK]
    for inventory in inventories:
        command += ["-i", str(inventory)]
    proc = subprocess.run(command + ["playbooks/%s.yml" % playbook] + list(extra), cwd=str(repo_root),
                          capture_output=True, text=True, check=False, timeout=600,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    return proc, proc.stdout + proc.stderr


def _plan(repo_root, inventories, report, *extra):
    proc, out = _run(repo_root, inventories, "plan_fleet", "-e", "gpuops_fleet_report_dir=%s" % report, *extra)
    plan = json.loads((report / "plan.json").read_text()) if (report / "plan.json").exists() else None
    return proc, out, plan


@pytest.fixture
def fleet(tmp_path):
    """bench_fleet_plan's fleet of 14 hosts in four pools, serial and canary in group_vars/all."""
    sys.path.insert(0, str(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")))
    import bench_fleet_plan

    folder = tmp_path / "fleet"
    folder.mkdir()
    facts_dir, path, _hosts = bench_fleet_plan.generate(14, str(folder))
    inventory = json.loads(open(path).read())
    for name in ("gpuops_upgrade_serial", "gpuops_upgrade_canary"):
        del inventory["all"]["vars"][name]
    inventory["all"]["vars"].update(ansible_connection="local", ansible_python_interpreter=sys.executable,
                                    gpuops_nodes_plan_only=True, gpuops_nodes_become=False)
    (folder / "hosts.json").write_text(json.dumps(inventory))
    (folder / "group_vars" / "all").mkdir(parents=True)
    (folder / "group_vars" / "all" / "rollout.yml").write_text(
        "gpuops_upgrade_serial: 3\ngpuops_upgrade_canary: true\ngpuops_fleet_facts_dir: %s\n"
        "gpu_upgrade_driver_version: '570.195.03'\n" % facts_dir)
    return folder


def test_an_approved_plan_runs_its_waves_and_a_changed_one_is_refused(repo_root, tmp_path, fleet):
    inventories = [fleet / "hosts.json"]
    _proc, out, plan = _plan(repo_root, inventories, tmp_path / "report")
    approved = tmp_path / "approved.json"
    # The approved plan is what runs: its waves, which its own settings cut (a canary, then 3 at a time).
    approved.write_text(json.dumps(plan))
    proc, out = _run(repo_root, inventories, "upgrade", "--check", "-e", "gpuops_approved_plan=%s" % approved)
    assert proc.returncode == 0, out[-4000:]
    assert said_waves(out) == planned_waves(plan) and ran_waves(out) == members(planned_waves(plan))
    assert [len(w) for w in planned_waves(plan)] == [1, 3, 3, 3, 3, 1]
    assert "the approved plan %s: 14 host(s) in 6 wave(s), inputs unchanged since it was made" % approved in " ".join(
        out.split())

    # With --limit, only the selected hosts of the plan, still in its waves.
    proc, out = _run(repo_root, inventories, "upgrade", "--check", "-e", "gpuops_approved_plan=%s" % approved,
                     "--limit", ",".join(plan["order"][0:3]))
    assert proc.returncode == 0, out[-4000:]
    assert ran_waves(out) == members([plan["order"][0:1], plan["order"][1:3]])

    # Since the plan was made: a pool's driver changed, and one host's facts were recorded again.
    hgx = [n for n in plan["order"] if n.startswith("hgx")]
    dgx = [n for n in plan["order"] if n.startswith("dgx")][0]
    facts_file = plan["hosts"][dgx]["facts_file"]
    facts = json.loads(open(facts_file).read())
    facts["driver_version"] = "570.195.03"
    open(facts_file, "w").write(json.dumps(facts))
    inventory = json.loads((fleet / "hosts.json").read_text())
    inventory["all"]["children"]["gpu_nodes"]["children"]["hgx"]["vars"]["nvidia_driver_version"] = "580.82.07"
    (fleet / "hosts.json").write_text(json.dumps(inventory))
    proc, out = _run(repo_root, inventories, "upgrade", "--check", "-e", "gpuops_approved_plan=%s" % approved)
    assert proc.returncode != 0
    text = " ".join(out.split())
    assert "The approved plan %s is stale: the inputs of %d host(s) changed since it was made, and nothing was changed" % (
        approved, len(hgx) + 1) in text
    assert "- %s: changed: facts -" % dgx in text
    for name in hgx:
        assert "- %s: changed: nvidia_driver_version" % name in text
    assert UPGRADE_PLAY not in out
    # A run limited to hosts whose inputs did not change is the plan's for them: the stale hosts are not its own.
    unchanged = [n for n in plan["order"] if n not in hgx and n != dgx][:2]
    proc, out = _run(repo_root, inventories, "upgrade", "--check", "-e", "gpuops_approved_plan=%s" % approved,
                     "--limit", ",".join(unchanged))
    assert proc.returncode == 0, out[-4000:]
    assert "the approved plan %s: 2 host(s) in" % approved in " ".join(out.split())
    assert sorted(sum(ran_waves(out), [])) == sorted(unchanged)


def test_a_bad_serial_is_refused_by_the_planner_and_upgrade_yml_alike(repo_root, tmp_path, fleet):
    (fleet / "group_vars" / "all" / "rollout.yml").write_text(
        (fleet / "group_vars" / "all" / "rollout.yml").read_text().replace("gpuops_upgrade_serial: 3",
                                                                           "gpuops_upgrade_serial: ten"))
    proc, out, plan = _plan(repo_root, [fleet / "hosts.json"], tmp_path / "report")
    assert proc.returncode != 0 and plan is None
    planner = " ".join(out.split())
    proc, out = _run(repo_root, [fleet / "hosts.json"], "upgrade", "--check")
    assert proc.returncode != 0 and UPGRADE_PLAY not in out
    upgrade = " ".join(out.split())
    refusal = SERIAL_REFUSAL + " (14 hosts: "
    assert refusal in planner and refusal in upgrade
    assert "set in %s" % (fleet / "group_vars" / "all" / "rollout.yml") in upgrade


def test_an_approved_plan_of_an_older_version_is_refused(repo_root, tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"version": 2}))
    proc, out = _run(repo_root, [repo_root / "inventories" / "demo" / "hosts.yml"], "upgrade", "--check",
                     "-e", "gpuops_approved_plan=%s" % old)
    assert proc.returncode != 0 and UPGRADE_PLAY not in out
    assert "the approved plan %s does not follow the plan.json schema version 2" % old in " ".join(out.split())


def test_nodes_and_mig_change_only_an_approved_plans_hosts_and_refuse_a_stale_one(repo_root, tmp_path, fleet):
    inventories = [fleet / "hosts.json"]
    _proc, out, plan = _plan(repo_root, inventories, tmp_path / "report")
    assert plan is not None, out[-3000:]
    kept = plan["order"][:2]
    for name in plan["order"][2:]:
        del plan["hosts"][name]
    plan.update(order=kept)
    # The two hosts in the waves the plan's own settings cut: the canary, then the other.
    plan["waves"]["batches"] = [dict(plan["waves"]["batches"][0], first=0, size=1),
                                dict(plan["waves"]["batches"][1], first=1, size=1)]
    approved = tmp_path / "two.json"
    approved.write_text(json.dumps(plan))
    proc, out = _run(repo_root, inventories, "mig", "--check", "-e", "gpuops_approved_plan=%s" % approved,
                     "-e", "gpuops_mig_serial=100%", "--limit", ",".join(kept + ["l40s-00009"]))
    assert proc.returncode == 0, out[-4000:]
    ran = out.split("PLAY [Partition the GPUs with MIG]")[1]
    assert sorted(set(re.findall(r"^ok: \[([^\]]+)\]", ran, re.M))) == sorted(kept)
    assert "not in the approved plan, left alone: l40s-00009" in " ".join(out.split())

    facts_file = plan["hosts"][kept[1]]["facts_file"]
    facts = json.loads(open(facts_file).read())
    facts["gpus"] = facts["gpus"][:-1]                   # a GPU fell off the bus since the plan
    open(facts_file, "w").write(json.dumps(facts))
    for playbook, play in (("nodes", "PLAY [Prepare GPU nodes]"), ("mig", "PLAY [Partition the GPUs with MIG]")):
        proc, out = _run(repo_root, inventories, playbook, "--check", "-e", "gpuops_approved_plan=%s" % approved)
        assert proc.returncode != 0 and play not in out, out[-3000:]
        assert "is stale: the inputs of 1 host(s) changed since it was made" in " ".join(out.split())
        assert "- %s: changed: facts" % kept[1] in " ".join(out.split())


def test_an_approved_plan_made_with_a_run_driver_version_is_current_for_that_run(repo_root, tmp_path, fleet):
    """AWX's driver question (gpuops_driver_version) reaches Plan fleet and the jobs after the approval alike: the
    approved plan was made with that version on every host, and the run that applies it sets the same version before
    it checks the plan, so the plan is current, not stale for nvidia_driver_version."""
    inventories = [fleet / "hosts.json"]
    answer = ("-e", "gpuops_driver_version=580.82.07")
    _proc, out, plan = _plan(repo_root, inventories, tmp_path / "report", *answer)
    assert plan is not None, out[-3000:]
    assert set(h["driver"]["wanted"] for h in plan["hosts"].values()) == {"580.82.07"}, out[-3000:]
    approved = tmp_path / "approved.json"
    approved.write_text(json.dumps(plan))
    # A host of each pool: the version replaces every pool's pin, whichever its driver settings.
    one_per_pool = sorted(dict((h["pool"], name) for name, h in plan["hosts"].items()).values())
    assert len(one_per_pool) == 4
    for playbook in ("upgrade", "nodes"):
        proc, out = _run(repo_root, inventories, playbook, "--check", "-e", "gpuops_approved_plan=%s" % approved, *answer,
                         "--limit", ",".join(one_per_pool))
        assert proc.returncode == 0, out[-4000:]
        assert "inputs unchanged since it was made" in " ".join(out.split()), out[-4000:]
    # Without the answer, the same plan is stale: its hosts' version is not the one the run would use.
    proc, out = _run(repo_root, inventories, "upgrade", "--check", "-e", "gpuops_approved_plan=%s" % approved)
    assert proc.returncode != 0 and "changed: nvidia_driver_version" in " ".join(out.split())


def _refused(out, *says):
    text = " ".join(out.split())
    assert UPGRADE_PLAY not in out and "PLAY RECAP" in out, out[-3000:]
    for said in says:
        assert said in text, text[-3000:]


def test_an_approved_plan_is_taken_whole_or_refused(repo_root, tmp_path, fleet):
    """The plan that runs is the one approved, whole: its digest is the one Plan fleet published (when AWX hands it
    on), its waves are the ones its own settings cut, it holds each host once, and it names hosts of this run."""
    inventories = [fleet / "hosts.json"]
    _proc, out, plan = _plan(repo_root, inventories, tmp_path / "report")
    assert plan is not None, out[-3000:]
    published = tmp_path / "report" / "plan.json"
    digest = hashlib.sha256(published.read_bytes()).hexdigest()
    proc, out = _run(repo_root, inventories, "upgrade", "--check", "-e", "gpuops_approved_plan=%s" % published,
                     "-e", "gpuops_approved_plan_sha256=%s" % digest, "--limit", plan["order"][0])
    assert proc.returncode == 0, out[-4000:]
    assert "its SHA-256 the approved one" in " ".join(out.split())

    def edited(name, edit):
        copy = json.loads(json.dumps(plan))
        edit(copy)
        path = tmp_path / ("%s.json" % name)
        path.write_text(json.dumps(copy))
        return path

    def one_wave(p):
        p["waves"]["batches"] = [dict(p["waves"]["batches"][0], first=0, size=14)]
        for host in p["hosts"].values():
            host["wave"] = 1

    def renamed(p):
        p["hosts"] = dict(("other-%s" % n, h) for n, h in p["hosts"].items())
        p["order"] = ["other-%s" % n for n in p["order"]]

    cases = [
        # Every host in one wave: 4 H100 nodes would be drained at once.
        (edited("one-wave", one_wave), (), ["it says 1 wave(s) of 14 host(s) (serial 1/3), and they give 6 wave(s) "
                                            "of 1, 3, 3, 3, 3, 1 host(s) (serial 1/3)"]),
        (edited("twice", lambda p: p["order"].insert(1, p["order"][0])), (),
         ["lists %s more than once in its order" % plan["order"][0]]),
        (edited("other", renamed), (), ["names none of this run's hosts", "another inventory"]),
        (edited("empty", lambda p: p.update(order=[], hosts={})), (), ["has no hosts"]),
        (published, ("-e", "gpuops_approved_plan_sha256=%s" % ("0" * 64)), [
            "the approved plan %s is not the plan that was approved: its SHA-256 is %s" % (published, digest)]),
    ]
    for path, extra, says in cases:
        proc, out = _run(repo_root, inventories, "upgrade", "--check", "-e", "gpuops_approved_plan=%s" % path, *extra)
        assert proc.returncode != 0, (path, out[-3000:])
        _refused(out, "nothing was changed" if "none of this" not in says[0] else "Nothing was changed", *says)


def test_a_job_slice_without_the_plans_hosts_runs_nothing_and_a_limit_without_them_is_refused(repo_root, tmp_path, fleet):
    """A plan of one pool (gpuops_fleet_group) records the inventory's other hosts. An AWX job slice's inventory holds
    its own hosts alone: one that holds none of the plan's hosts, only hosts the planner's inventory held, has
    nothing to run. --limit leaves the inventory whole, so a run limited to hosts outside the plan is refused."""
    _proc, out, plan = _plan(repo_root, [fleet / "hosts.json"], tmp_path / "report", "-e", "gpuops_fleet_group=hgx")
    assert plan is not None and all(n.startswith("hgx-") for n in plan["order"]), out[-3000:]
    assert "localhost" in plan["unplanned"] and "l40s-00006" in plan["unplanned"]
    approved = tmp_path / "report" / "plan.json"
    inventory = json.loads((fleet / "hosts.json").read_text())
    inventory["all"]["children"]["gpu_nodes"]["children"]["hgx"]["hosts"] = {}
    sliced = fleet / "slice.json"
    sliced.write_text(json.dumps(inventory))
    proc, out = _run(repo_root, [sliced], "upgrade", "--check", "-e", "gpuops_approved_plan=%s" % approved)
    assert proc.returncode == 0, out[-4000:]
    text = " ".join(out.split()).replace("''", "'")
    assert "the approved plan %s: this run is a job slice that holds none of its hosts, so nothing runs here" % (
        approved) in text
    assert "skipping: no hosts matched" in out.split(UPGRADE_PLAY)[1].split("PLAY RECAP")[0], out[-3000:]
    proc, out = _run(repo_root, [fleet / "hosts.json"], "upgrade", "--check", "-e", "gpuops_approved_plan=%s" % approved,
                     "--limit", "l40s-00006")
    assert proc.returncode != 0
    _refused(out, "names none of this run's hosts (l40s-00006): this run's inventory holds 7 of its hosts, but the "
                  "run (--limit) selects none of them")
