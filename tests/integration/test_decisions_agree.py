"""The fleet planner and the playbooks that act give the same answer for the same inventory, host by host.

Each inventory (inventories/demo, inventories/example with its offline file, and a
fleet made by the planner benchmark's generator, with pinned and branch-following
pools) is planned with playbooks/plan_fleet.yml, then run --check through the
playbook that acts on each decision; each playbook's own decision is read from its
task result (-v, one JSON result per line), not from its report text:

* the driver: upgrade.yml (roles/gpu_upgrade's gpu_upgrade_plan) and nodes.yml
  (roles/nvidia_driver's replayed plan) against plan.json's driver action and reboot;
* health: health.yml's label (roles/gpu_health's gpu_health_plan) against plan.json;
* MIG disruption: mig.yml (roles/mig's plan) against plan.json's drain and GPU reset;
* the waves: the batches upgrade.yml runs (one "PLAY [Upgrade ...]" per batch) and its
  "wave N/M" lines against plan.json's waves, with gpuops_upgrade_serial and
  gpuops_upgrade_canary set where operators set them (inventory group vars for the demo
  and the example, group_vars/all beside the generated fleet's inventory), which a
  play's serial keyword never sees.

Every playbook runs --check on the demo, and a version that is not an exact string is
refused by the planner and by each playbook with the same line, naming the variable,
its hosts and the file that sets it.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from rollout_support import members, planned_waves, ran_waves, shown_waves

pytestmark = pytest.mark.slow
BIN = os.path.dirname(sys.executable)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import bench_fleet_plan  # noqa: E402  (the benchmark's fleet generator)

GENERATED_HOSTS = 16
# The generated fleet's pools: a pinned version (the generator's HGX H100), pools that follow a branch (one on its
# branch, one moving to a newer one) and a pool left at the roles' defaults (branch 570).
GENERATED_POOLS = {"dgx": {"nvidia_driver_branch": "570"}, "l40s": {"nvidia_driver_branch": "580"}}
GENERATED_ROLLOUT = {"gpuops_upgrade_serial": 3, "gpuops_upgrade_canary": True}


def _run(repo_root, inventories, playbook, tmp, *extra):
    command = [os.path.join(BIN, "ansible-playbook"), "-v"]
    for inventory in inventories:
        command += ["-i", str(inventory)]
    command += ["playbooks/%s.yml" % playbook, "--check", "-e", "gpuops_fleet_report_dir=%s" % (tmp / "fleet"),
                "-e", "gpuops_k8s_render_dir=%s" % (tmp / "render"), "-e", "gpuops_mig_serial=100%"]
    for pair in extra:
        command += ["-e", pair]
    proc = subprocess.run(command, cwd=str(repo_root), capture_output=True, text=True, check=False, timeout=900,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                                   ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_CALLBACK_FORMAT_PRETTY="false"))
    return proc.returncode, proc.stdout + proc.stderr


def task_results(out, task):
    """``{host: result}`` of every run of the task whose name ends with ``task`` (each batch of a serial play)."""
    results, inside = {}, False
    for line in out.splitlines():
        if line.startswith(("TASK [", "PLAY [", "RUNNING HANDLER [", "PLAY RECAP")):
            inside = line.startswith("TASK [") and line.split("]")[0].endswith(task)
            continue
        match = re.match(r"(ok|changed|skipping|failed|fatal): \[([^\]]+)\] => (\{.*\})$", line) if inside else None
        if match:
            results[match.group(2)] = json.loads(match.group(3))
    return results


# site.yml is nodes.yml then cluster.yml (test_site_yml_is_the_node_layer_then_the_kubernetes_layer): where site.yml
# runs (the demo), its run is theirs too, the same plays in the same order, rather than a second run of each.
SITE_PARTS = ("nodes", "cluster")


class Site(object):
    """One inventory: its plan.json, and each playbook's run on it."""

    def __init__(self, repo_root, tmp, inventories):
        self.repo_root, self.tmp, self.inventories = repo_root, tmp, inventories
        self.runs = {}
        self.name = None

    def run(self, playbook):
        if playbook in SITE_PARTS and self.name == "demo":
            playbook = "site"
        if playbook not in self.runs:
            self.runs[playbook] = _run(self.repo_root, self.inventories, playbook, self.tmp / playbook)
        return self.runs[playbook]

    def plan(self):
        rc, out = self.run("plan_fleet")
        assert rc == 0, out[-4000:]
        return json.loads((self.tmp / "plan_fleet" / "fleet" / "plan.json").read_text())

    def results(self, playbook, task):
        rc, out = self.run(playbook)
        assert rc == 0, "%s.yml --check failed:\n%s" % (playbook, out[-4000:])
        found = task_results(out, task)
        assert found, "no result of %r in %s.yml's output:\n%s" % (task, playbook, out[-3000:])
        return found


def _generated(tmp):
    folder = tmp / "generated"
    folder.mkdir()
    facts_dir, inventory, _hosts = bench_fleet_plan.generate(GENERATED_HOSTS, str(folder))
    data = json.loads(open(inventory).read())
    gpu_nodes = data["all"]["children"]["gpu_nodes"]
    for pool, settings in GENERATED_POOLS.items():
        gpu_nodes["children"][pool]["vars"] = dict(gpu_nodes["children"][pool]["vars"] or {}, **settings)
    # Nothing is contacted: each node is this machine under another name, planned from its recorded facts.
    gpu_nodes["vars"] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                         "gpuops_nodes_become": False, "gpuops_nodes_plan_only": True, "mig_kubernetes": False}
    data["all"]["vars"]["gpuops_fleet_facts_dir"] = facts_dir
    for name in ("gpuops_upgrade_serial", "gpuops_upgrade_canary"):
        del data["all"]["vars"][name]
    (folder / "group_vars" / "all").mkdir(parents=True)
    (folder / "group_vars" / "all" / "rollout.yml").write_text(yaml.safe_dump(GENERATED_ROLLOUT))
    data["all"]["children"]["k8s_control"]["hosts"]["localhost"]["ansible_python_interpreter"] = sys.executable
    with open(inventory, "w") as handle:
        json.dump(data, handle)
    return [inventory]


def _rollout(tmp, **variables):
    """The rollout settings as inventory group vars of gpu_nodes, in an inventory file of their own."""
    path = tmp / "rollout.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"vars": variables}}}}))
    return path


INVENTORIES = {
    "demo": lambda root, tmp: [root / "inventories" / "demo" / "hosts.yml",
                               _rollout(tmp, gpuops_upgrade_serial=3, gpuops_upgrade_canary=True)],
    "example": lambda root, tmp: [root / "inventories" / "example" / "hosts.yml", root / "inventories" / "example-offline.yml",
                                  _rollout(tmp, gpuops_upgrade_serial="40%", gpuops_upgrade_canary=True)],
    "generated": lambda root, tmp: _generated(tmp),
}
# The sizes of the waves each inventory's rollout settings give: a canary of one, then waves of the serial.
WAVES = {"demo": [1, 3, 3, 3], "example": [1, 4, 4, 1], "generated": [1, 3, 3, 3, 3, 3]}


@pytest.fixture(scope="module")
def sites(repo_root, tmp_path_factory):
    """Each inventory's Site, made once: every test of the module reads the same runs."""
    installed = repo_root / "collections" / "ansible_collections" / "gpuops" / "platform"
    assert installed.is_dir(), "run scripts/bootstrap.sh first: ansible-playbook needs the installed collection"
    made = {}

    def get(name):
        if name not in made:
            tmp = tmp_path_factory.mktemp(name)
            made[name] = Site(repo_root, tmp, INVENTORIES[name](repo_root, tmp))
            made[name].name = name
        return made[name]
    return get


@pytest.fixture(params=sorted(INVENTORIES))
def site(request, sites):
    return sites(request.param)


# --- every playbook on the demo ---------------------------------------------------------------------

def _playbooks(root):
    return sorted(p.stem for p in (root / "playbooks").glob("*.yml"))


def test_the_list_is_every_playbook(repo_root):
    assert set(_playbooks(repo_root)) >= {"nodes", "mig", "upgrade", "health", "kubelet_tuning", "dcgm_diag", "cluster",
                                          "plan_fleet", "record_facts", "site"}


def test_site_yml_is_the_node_layer_then_the_kubernetes_layer(repo_root):
    plays = yaml.safe_load((repo_root / "playbooks" / "site.yml").read_text())
    imported = [play.get("ansible.builtin.import_playbook") for play in plays]
    assert imported[:2] == ["%s.yml" % part for part in SITE_PARTS]
    # What follows only reports: no play that changes or plans a node.
    assert imported[2:] == [None] and [t["ansible.builtin.debug"] for t in plays[2]["tasks"]]


@pytest.mark.parametrize("playbook", _playbooks(__import__("pathlib").Path(__file__).resolve().parents[2]))
def test_every_playbook_plans_the_demo_in_check_mode(sites, playbook):
    """The demo's GPU nodes are this machine under other names, each pinned to a recorded fixture
    (gpuops_nvml_replay_file): every playbook plans them from those facts through the one facts source
    (gpuops.platform.recorded_facts), and nothing is read from this machine as if it were a node."""
    rc, out = sites("demo").run(playbook)
    assert rc == 0, "%s.yml --check failed:\n%s" % (playbook, out[-4000:])
    assert "libnvidia-ml.so.1 not found" not in out and "no NVIDIA GPU facts" not in out
    if playbook == "kubelet_tuning":
        # A plan drains nothing: every node in one batch, where a change takes one node at a time.
        assert out.count("PLAY [Tune the kubelet on the GPU nodes]") == 1, out[-3000:]


def test_the_generated_fleet_mixes_pinned_and_branch_following_pools(repo_root, site):
    """The generated fleet has what the comparison needs: every driver action, a reboot, an unhealthy node."""
    if site.name != "generated":
        pytest.skip("the demo and the example are what they are")
    plan = site.plan()
    actions = set(h["driver"]["action"] for h in plan["hosts"].values())
    assert {"none", "upgrade"} <= actions and plan["summary"]["reboot"] and plan["summary"]["unhealthy_nodes"]
    assert any(h["driver"]["wanted"] == "branch 580" for h in plan["hosts"].values())


def test_upgrade_yml_plans_each_nodes_driver_action_and_reboot_as_plan_json(site):
    plan = site.plan()
    planned = site.results("upgrade", "Plan the node's upgrade")
    upgrade = dict((host, (r["ansible_facts"]["gpu_upgrade_plan"]["action"], r["ansible_facts"]["gpu_upgrade_plan"]["reboot"]))
                   for host, r in planned.items())
    assert upgrade == dict((host, (h["driver"]["action"], h["driver"]["reboot_required"]))
                           for host, h in plan["hosts"].items())


def test_upgrade_yml_runs_the_waves_plan_json_shows(site):
    plan = site.plan()
    (shown,) = site.results("upgrade", "Show the waves").values()
    rc, out = site.run("upgrade")
    waves = planned_waves(plan)
    # The printed waves are the planned ones, in order; the batches run are the same hosts.
    assert shown_waves(shown["msg"]) == waves and ran_waves(out) == members(waves)
    assert [len(w) for w in waves] == WAVES[site.name]
    assert plan["waves"]["serial"][0] == "1" and (site.name != "demo" or plan["waves"]["serial"] == ["1", "3"])
    if site.name == "generated":
        # Waves follow the inventory order across the pools (groups), not a pool at a time.
        assert waves[0] == [plan["order"][0]] and len(set(plan["hosts"][n]["pool"] for n in waves[1])) > 1


def test_nodes_yml_plans_each_nodes_driver_action_and_reboot_as_plan_json(site):
    plan = site.plan()
    planned = site.results("nodes", "Plan the driver from the replayed facts")
    nodes = dict((host, (r["ansible_facts"]["nvidia_driver_result"]["action"],
                         r["ansible_facts"]["nvidia_driver_result"]["reboot_required"])) for host, r in planned.items())
    assert nodes == dict((host, (h["driver"]["action"], h["driver"]["reboot_required"])) for host, h in plan["hosts"].items())


def test_nodes_yml_runs_fewer_than_32_tasks_on_a_gpu_node(site):
    """The host-tasks of each GPU node's PLAY RECAP line (a skipped task forks a worker too): 32 when a task of its
    own refused a plan-only inventory on every node, before recorded_facts did it (plan_only). The median, since
    the first host also runs the run-once tasks of the run; on the demo, site.yml's cluster.yml adds none."""
    plan = site.plan()
    rc, out = site.run("nodes")
    assert rc == 0, out[-4000:]
    recap = dict((m.group(1), sum(int(g) for g in m.groups()[1:])) for m in re.finditer(
        r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)\s+skipped=(\d+)\s+rescued=\d+"
        r"\s+ignored=(\d+)", out, re.M))
    counts = sorted(recap[host] for host in plan["hosts"])
    assert counts[len(counts) // 2] < 32, recap


def test_health_yml_labels_each_node_with_plan_jsons_verdict(site):
    plan = site.plan()
    judged = site.results("health", "Plan the GPU health of each node")
    (result,) = judged.values()
    labels = dict((entry["host"], entry["status"]) for entry in result["ansible_facts"]["gpu_health_plan"])
    assert labels == dict((host, h["health"]["status"]) for host, h in plan["hosts"].items())


def test_mig_yml_drains_and_resets_the_nodes_plan_json_says(site):
    plan = site.plan()
    noted = site.results("mig", "Note what the MIG change disrupts")
    mig = dict((host, (r["ansible_facts"]["mig_disruption"]["drain"], r["ansible_facts"]["mig_disruption"]["gpu_reset"]))
               for host, r in noted.items() if "ansible_facts" in r)
    managed = [host for host, h in plan["hosts"].items() if h["mig"]["config"] and h["present"]]
    assert sorted(mig) == sorted(managed)
    assert mig == dict((host, (host in plan["summary"]["mig_changes"], plan["hosts"][host]["disruption"]["gpu_reset"]))
                       for host in managed)
    # Each inventory has a MIG change to compare, and the demo's DGX A100 resets its GPUs for it.
    assert any(drain for drain, _reset in mig.values())


# --- versions that are not exact strings ------------------------------------------------------------

H100 = "4 hosts: hgx-h100-01, hgx-h100-02, hgx-h100-03, hgx-h100-04"


@pytest.fixture
def demo_copy(repo_root, tmp_path):
    """inventories/demo copied, with a link to tests/ so that its fixture paths resolve."""
    shutil.copytree(str(repo_root / "inventories" / "demo"), str(tmp_path / "inventories" / "demo"))
    (tmp_path / "tests").symlink_to(repo_root / "tests", target_is_directory=True)
    return tmp_path


@pytest.mark.parametrize("written, message", [
    ("nvidia_driver_version: 570.190\n",
     "nvidia_driver_version is the number 570.19, not a string: YAML reads an unquoted version as a number (570.190 "
     "becomes 570.19, 570.10 becomes 570.1), so quote it, such as nvidia_driver_version: \"570.172.08\""),
    ("nvidia_driver_version: |\n  570.172.08\n",
     "nvidia_driver_version '570.172.08\\n' has whitespace or a line break around the version (a YAML block scalar or "
     "an untrimmed lookup): set the version alone, quoted, such as nvidia_driver_version: \"570.172.08\""),
], ids=["float", "block-scalar"])
def test_a_version_that_is_not_an_exact_string_is_refused_alike_before_anything_runs(repo_root, demo_copy, written, message):
    vars_file = demo_copy / "inventories" / "demo" / "group_vars" / "hgx_h100" / "main.yml"
    text = vars_file.read_text()
    assert 'nvidia_driver_version: "570.195.03"\n' in text
    vars_file.write_text(text.replace('nvidia_driver_version: "570.195.03"\n', written))
    line = "%s (%s; set in %s)" % (message, H100, vars_file)
    inventory = [demo_copy / "inventories" / "demo" / "hosts.yml"]
    # The task that would plan a node from the version: never reached.
    for playbook, planning in (("plan_fleet", None), ("upgrade", "Plan the node's upgrade"),
                               ("nodes", "Plan the driver from the replayed facts")):
        rc, out = _run(repo_root, inventory, playbook, demo_copy / playbook)
        assert rc != 0, "%s.yml ran:\n%s" % (playbook, out[-3000:])
        # The same line from each (the output shows it in a JSON string: its own quotes and line breaks escaped).
        assert json.dumps(line)[1:-1] in out, "%s.yml:\n%s" % (playbook, out[-3000:])
        assert not (demo_copy / playbook / "fleet").exists()
        assert planning is None or task_results(out, planning) == {}
