"""The views of plan.json: waves as upgrade.yml runs them, disruption, pools, tenants, facts age, diff, schema."""
import json
import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.executor.playbook_executor import PlaybookExecutor
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play import Play
from ansible.template import Templar
try:
    from ansible.template import trust_as_template
except ImportError:  # ansible-core < 2.19 templates every string it is given
    def trust_as_template(value):
        return value
from ansible.vars.manager import VariableManager

from ansible_collections.gpuops.platform.plugins.filter import fleet as fleet_filter
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan, fleet_report, fleet_schema, fleet_waves
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_views as fv

from test_fleet_plan import MIG, ROOT, fixture, plan, write

HOSTS = {
    "dgx": ("dgx-a100", {"mig_config": MIG, "mig_config_name": "all-balanced"}),
    "hgx1": ("hgx-h100", {"nvidia_driver_version": "570.195.03"}),
    "hgx2": ("hgx-h100", {"nvidia_driver_version": "570.195.03"}),
    "l40s": ("l40s", {}),
}
GROUPS = {"gpu_nodes": list(HOSTS), "dgx_pool": ["dgx"], "hgx_pool": ["hgx1", "hgx2"], "everything": list(HOSTS),
          "k8s_control": ["localhost"], "racks": ["dgx", "hgx1", "hgx2"]}


def _views(tmp_path, previous=None, **kw):
    out = plan(tmp_path, HOSTS, mig_strategy="mixed")
    names = list(HOSTS)
    return fv.enrich(out, names, fv.pools(names, GROUPS, "gpu_nodes"), **kw)


# --- waves ---------------------------------------------------------------------------

def _ansible_batches(tmp_path, size, hosts, serial):
    """The batches ansible-playbook makes of a ``size``-host inventory for a play's ``hosts`` and ``serial``."""
    loader = DataLoader()
    inventory_file = tmp_path / "hosts.yml"
    inventory_file.write_text(yaml.safe_dump({"gpu_nodes": {"hosts": dict(("n%05d" % i, None) for i in range(size))}}))
    inventory = InventoryManager(loader, [str(inventory_file)])
    play = Play.load({"hosts": hosts, "serial": serial, "gather_facts": False, "tasks": []},
                     variable_manager=VariableManager(loader, inventory), loader=loader)
    executor = PlaybookExecutor.__new__(PlaybookExecutor)
    executor._inventory = inventory
    return [[h.name for h in batch] for batch in executor._get_serialized_batches(play)]


@pytest.mark.parametrize("size, serial, canary", [
    (10, 1, False), (10, "30%", True), (7, "3", True), (20000, "5%", True), (5, "1%", False), (5, "100%", False),
    (4, "100%", True), (9, 4, False),
])
def test_waves_are_the_batches_ansible_makes_for_serial_and_canary(tmp_path, size, serial, canary):
    names = ["n%05d" % i for i in range(size)]
    assert fv.batches(names, serial, canary) == _ansible_batches(tmp_path, size, "gpu_nodes", fv.serial_list(serial, canary))


def _upgrade_play_keywords(fact):
    """playbooks/upgrade.yml's upgrade play: its hosts and serial, templated with the first play's fact."""
    # The play that upgrades: the one with a serial (those before check the variables and decide the waves).
    play = [p for p in yaml.safe_load((ROOT / "playbooks" / "upgrade.yml").read_text()) if "serial" in p][0]
    templar = Templar(DataLoader(), variables={"hostvars": {"localhost": {"ansible_facts": {
        "gpuops_upgrade_rollout": fact}}}})
    return (templar.template(trust_as_template(play["hosts"])), templar.template(trust_as_template(play["serial"])),
            templar.template(trust_as_template(play["max_fail_percentage"])))


@pytest.mark.parametrize("size, serial, canary, reverse", [
    (10, "30%", True, False), (7, 3, False, True), (50, 5, True, False), (5, "100%", False, True),
])
def test_upgrade_yml_runs_exactly_the_waves_in_their_order(tmp_path, size, serial, canary, reverse):
    """The upgrade play takes the decided hosts in their order (ansible-core keeps a host list's order) and
    one wave per serial step: the batches Ansible makes are the waves, whatever the inventory order."""
    names = ["n%05d" % i for i in range(size)]
    if reverse:
        names.reverse()
    rollout = fleet_waves.rollout([(n, {"gpuops_upgrade_serial": serial, "gpuops_upgrade_canary": canary,
                                        "gpuops_upgrade_max_fail_percentage": "20"}) for n in names])
    fact = {"hosts": [n for wave in rollout["waves"] for n in wave], "serial": [len(w) for w in rollout["waves"]],
            "max_fail_percentage": rollout["max_fail_percentage"]}
    hosts, steps, max_fail = _upgrade_play_keywords(fact)
    assert _ansible_batches(tmp_path, size, hosts, steps) == rollout["waves"] == fv.batches(names, serial, canary)
    # ansible-core 2.17 templates the keyword to text, 2.19+ to a number: the play takes either as a percentage.
    assert int(max_fail) == 20 and rollout["waves"][0][0] == names[0]


def test_upgrade_yml_without_decided_waves_runs_no_host(tmp_path):
    """No fact (the first play matched no host, or failed): the upgrade play matches no host at all."""
    hosts, _steps, _max_fail = _upgrade_play_keywords(None)
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"gpu_nodes": {"hosts": {"n1": None}}}))
    assert hosts == [] and InventoryManager(DataLoader(), [str(tmp_path / "hosts.yml")]).get_hosts(hosts) == []


def test_a_serial_that_is_not_a_count_is_refused():
    with pytest.raises(fleet_schema.FleetPlanDataError, match="gpuops_upgrade_serial 'ten' is neither"):
        fv.batches(["a"], "ten", False)


def test_waves_take_away_the_capacity_of_the_nodes_they_drain(tmp_path):
    out = _views(tmp_path, serial=2, canary=True)
    batches = out["waves"]["batches"]
    assert [(b["first"], b["size"], b["drained"], b["reboots"]) for b in batches] == [(0, 1, 0, 0), (1, 2, 2, 2),
                                                                                      (3, 1, 0, 0)]
    assert batches[1]["capacity_removed"] == {"nvidia.com/gpu": 16} and batches[0]["capacity_removed"] == {}
    assert [out["hosts"][n]["wave"] for n in HOSTS] == [1, 2, 2, 3]


# --- per host ----------------------------------------------------------------------

def test_a_mig_change_is_a_drain_and_a_gpu_reset_and_a_new_driver_a_reboot(tmp_path):
    out = _views(tmp_path)
    assert out["hosts"]["dgx"]["disruption"] == {"drain": True, "gpu_reset": True, "reboot": False,
                                                 "summary": "drain + GPU reset"}
    assert out["hosts"]["hgx1"]["disruption"]["summary"] == "drain + reboot"
    assert out["hosts"]["l40s"]["disruption"]["summary"] == "none"


def test_each_host_is_in_its_smallest_group_and_facts_paths_are_normalised(tmp_path):
    out = _views(tmp_path)
    assert [out["hosts"][n]["pool"] for n in HOSTS] == ["dgx_pool", "hgx_pool", "hgx_pool", "everything"]
    assert fv.pools(["a", "b"], {"gpu_nodes": ["a", "b"]}, "gpu_nodes") == {"a": "ungrouped", "b": "ungrouped"}
    crooked = plan(tmp_path, {"x": ("l40s", {"gpuops_nvml_replay_file": str(tmp_path / "sub" / ".." / "x.json")})})
    fv.enrich(crooked, ["x"], {})
    assert crooked["hosts"]["x"]["facts_file"] == str(tmp_path / "x.json") and crooked["facts_root"] == str(tmp_path)


@pytest.mark.parametrize("wrap, expected", [
    (lambda f: dict(ansible_facts={"nvidia": f}, recorded_at="2026-11-20T08:00:00Z", format_version=1), 1795161600.0),
    (lambda f: dict(f, recorded_at=1795161600), 1795161600.0),
    (lambda f: dict(recorded_at="2026-11-20T09:00:00+01:00", ansible_facts={"nvidia": f}), 1795161600.0),
])
def test_the_recording_time_in_the_facts_file_wins_over_its_mtime(tmp_path, wrap, expected):
    path = write(tmp_path, "x", wrap(fixture("dgx-a100")))
    os.utime(str(path), (1000, 1000))
    assert fv.facts_time(str(path)) == (expected, "recorded")


@pytest.mark.parametrize("text", ['{"recorded_at": "last tuesday", "gpus": []}', '{"gpus": []}'])
def test_without_a_usable_recording_time_the_mtime_counts(tmp_path, text):
    path = write(tmp_path, "x", text)
    os.utime(str(path), (1000, 1000))
    assert fv.facts_time(str(path)) == (1000.0, "mtime")
    assert fv.facts_time(str(tmp_path / "missing.json")) == (None, None)


def test_old_facts_are_stale(tmp_path):
    out = plan(tmp_path, HOSTS, mig_strategy="mixed")
    os.utime(str(tmp_path / "hgx2.json"), (1000, 1000))
    fv.enrich(out, list(HOSTS), fv.pools(list(HOSTS), GROUPS, "gpu_nodes"), stale_after_hours=24)
    assert fv.stale_hosts(out) == ["hgx2"] and out["pools"]["hgx_pool"]["stale"] == 1
    assert "facts older than 24 h: 1 (hgx2)" in fv.overview(out)


def test_facts_from_the_fact_cache_keep_their_recording_time(tmp_path):
    """AWX's Record -> Plan and the CLI's jsonfile cache: the record's recorded_at, not "unknown", dates the facts,
    so facts recorded a minute ago are fresh and a week-old record is stale."""
    from ansible_collections.gpuops.platform.plugins.plugin_utils import recorded_facts as rf

    def cached(name, at):
        record = rf.make_record(name, fixture("hgx-h100"), {}, at, "0.1.0")
        return (name, {"gpuops_fleet_facts_cache": True, "ansible_facts": {rf.CACHE_FACT: record},
                       "nvidia_driver_version": "570.195.03"})

    out = fleet_plan.plan_fleet([cached("fresh", "2026-11-27T09:00:00Z"), cached("old", "2026-11-19T09:00:00Z")], "")
    assert out["valid"], out["errors"]
    now = rf.epoch("2026-11-27T09:01:00Z")
    fv.enrich(out, ["fresh", "old"], {}, now=now)
    fresh, old = out["hosts"]["fresh"], out["hosts"]["old"]
    assert (fresh["facts_recorded_at"], fresh["facts_time_source"]) == (now - 60, "recorded")
    assert (old["facts_recorded_at"], old["facts_time_source"]) == (now - 60 - 8 * 86400, "recorded")
    assert fv.stale_hosts(out, now=now) == ["old"] and fv.no_facts_hosts(out) == []
    assert out["pools"]["ungrouped"]["stale"] == 1 and out["pools"]["ungrouped"]["no_facts"] == 0
    # Where they came from is said as such, not made into a path under the current folder.
    assert fresh["facts_file"] == rf.CACHE_WHERE and out["facts_root"] == ""
    fleet_schema.check(json.loads(json.dumps(out)))


def test_a_host_without_facts_is_reported_as_such_not_as_stale(tmp_path):
    hosts = dict(HOSTS, gone=("missing", {}), broken=('{"not": "facts"}', {}))
    out = plan(tmp_path, hosts, mig_strategy="mixed")
    names = list(hosts)
    fv.enrich(out, names, fv.pools(names, dict(GROUPS, gpu_nodes=names), "gpu_nodes"), stale_after_hours=24)
    assert fv.no_facts_hosts(out) == ["gone", "broken"]
    assert fv.stale_hosts(out) == []
    for name in ("gone", "broken"):
        assert (out["hosts"][name]["facts_recorded_at"], out["hosts"][name]["facts_time_source"]) == (None, None)
    assert out["pools"]["ungrouped"]["no_facts"] == 2 and out["pools"]["ungrouped"]["stale"] == 0
    line = [x for x in fv.overview(out) if x.startswith("facts older than")][0]
    assert line == ("facts older than 24 h: none; no facts: 2 (gone, broken)"), line
    page = fleet_report.render(out)
    assert '<div class="n" data-summary="no_facts">2</div>' in page and '<div class="n" data-summary="stale">0</div>' in page


# --- tenants -----------------------------------------------------------------------

def test_tenant_and_queue_quotas_against_capacity_flag_overcommit_instead_of_failing(tmp_path):
    out = _views(tmp_path, tenant_settings={
        "tenants": [{"name": "a", "gpu_share": 0.5, "kueue_cluster_queue": "train"},
                    {"name": "b", "quota": {"requests.nvidia.com/gpu": 20}, "gpu_share": 0}],
        "cluster_queues": [{"name": "infer", "quotas": {"nvidia-l40s": {"nvidia.com/gpu": 2}}}],
        "tenant_cluster_queues": "True"})
    t = out["tenants"]
    cap = out["summary"]["capacity"]["nvidia.com/gpu"]
    assert cap == 17 and t["tenants"][0]["quota"]["nvidia.com/gpu"] == 8 and t["tenants"][1]["quota"]["nvidia.com/gpu"] == 20
    gpu = [r for r in t["resources"] if r["resource"] == "nvidia.com/gpu"][0]
    assert gpu == {"resource": "nvidia.com/gpu", "capacity": 17, "tenants": 28, "overcommitted": True}
    assert [q["name"] for q in t["cluster_queues"]] == ["infer", "train"] and t["cluster_queues"][1]["nominal"] == {}
    l40s = [r for r in t["flavors"] if r["flavor"] == "nvidia-l40s"][0]
    assert l40s == {"flavor": "nvidia-l40s", "resource": "nvidia.com/gpu", "capacity": 1, "nominal": 2,
                    "overcommitted": True}
    assert t["overcommitted"]
    # without queues of its own, the default ClusterQueue gets the whole fleet: never overcommitted
    t = _views(tmp_path)["tenants"]
    assert [q["name"] for q in t["cluster_queues"]] == ["gpu-fleet"] and not any(r["overcommitted"] for r in t["flavors"])


@pytest.mark.parametrize("settings, error", [
    ({"tenants": [{"name": "inference", "quota": {"requests.nvidia.com/gpu": "eight"}}]},
     "gpu_tenants_list: tenant inference: quota requests.nvidia.com/gpu 'eight' is not a whole number of devices"),
    ({"tenants": [{"name": "research", "gpu_share": "half"}]},
     "gpu_tenants_list: tenant research: gpu_share must be a number between 0 and 1, got 'half'"),
    ({"tenants": [{"name": "research", "gpu_share": 1.5}]},
     "gpu_tenants_list: tenant research: gpu_share must be a number between 0 and 1, got 1.5"),
    ({"tenants": [], "cluster_queues": [{"name": "infer", "quotas": {"nvidia-l40s": {"nvidia.com/gpu": "eight"}}}]},
     "kueue_cluster_queues: ClusterQueue infer: nominal quota nvidia.com/gpu of flavor nvidia-l40s 'eight' is not a whole"),
])
def test_a_quota_that_cannot_be_read_is_an_error_of_the_plan(tmp_path, settings, error):
    """Never silently left out: the plan is not valid and says which quota, on the page and in the summary."""
    out = _views(tmp_path, tenant_settings=settings)
    errors = out["tenants"]["errors"]
    assert len(errors) == 1 and errors[0].startswith(error), errors
    assert out["valid"] is False and out["summary"]["hosts_invalid"] == [] and out["errors"] == []
    line = fv.overview(out)[4]
    assert line.startswith("quotas against capacity: 1 cannot be read (%s" % error), line
    page = fleet_report.render(out)
    assert 'data-quota-errors="1"' in page and "1 quota(s) cannot be read" in page
    fleet_schema.check(json.loads(json.dumps(out)))


def test_readable_quotas_leave_the_plan_valid(tmp_path):
    out = _views(tmp_path, tenant_settings={"tenants": [{"name": "a", "gpu_share": "0.5",
                                                         "quota": {"requests.nvidia.com/gpu": "8", "requests.cpu": "lots"}}]})
    assert out["tenants"]["errors"] == [] and out["valid"] is True
    assert out["tenants"]["tenants"][0]["quota"]["nvidia.com/gpu"] == 8


# --- diff --------------------------------------------------------------------------

def test_the_diff_names_added_removed_and_changed_hosts_and_totals(tmp_path):
    before = _views(tmp_path)
    hosts = dict(HOSTS)
    del hosts["l40s"]
    hosts["new"] = ("l40s", {})
    hosts["hgx2"] = ("hgx-h100", {"nvidia_driver_version": "570.172.08"})
    bad = fixture("hgx-h100")
    bad["gpus"][0]["ecc"]["volatile_uncorrectable"] = 3
    hosts["hgx1"] = (bad, HOSTS["hgx1"][1])
    after = plan(tmp_path, hosts, mig_strategy="mixed")
    names = list(hosts)
    fv.enrich(after, names, fv.pools(names, GROUPS, "gpu_nodes"))
    d = fv.diff(json.loads(json.dumps(before)), after, "old/plan.json")
    assert d["added"] == ["new"] and d["removed"] == ["l40s"] and d["previous"] == "old/plan.json"
    assert d["changed"] == {"hgx1": {"health": ["ok", "critical"]},
                            "hgx2": {"wanted": ["570.195.03", "570.172.08"]}}
    assert d["counts"] == {"driver": 0, "wanted": 1, "mig": 0, "health": 1, "capacity": 0}
    assert d["totals"]["reboot"] == [2, 1] and d["totals"]["unhealthy_nodes"] == [0, 1]
    assert d["totals"]["capacity"] == {}
    fleet_schema.check(dict(after, diff=d))


def test_the_diff_reads_a_plan_of_the_previous_version(tmp_path):
    old = plan(tmp_path, HOSTS, mig_strategy="mixed")            # version 1: what plan.json was before the views
    assert old["version"] == 1
    d = fv.diff(json.loads(json.dumps(old)), _views(tmp_path))
    assert d["previous_version"] == 1 and d["changed"] == {} and d["added"] == d["removed"] == []


@pytest.mark.parametrize("previous, message", [
    ({"version": 7}, "has version 7; this release reads plan.json versions 1, 2"),
    ([], "is not a JSON object"),
    ({"version": 1, "hosts": {}}, "does not follow the plan.json schema version 1"),
])
def test_a_previous_plan_that_is_not_a_plan_is_refused(tmp_path, previous, message):
    with pytest.raises(fleet_schema.FleetPlanDataError, match=message):
        fv.diff(previous, _views(tmp_path), "x.json")


# --- schema ------------------------------------------------------------------------

def test_the_plan_follows_its_schema_and_a_broken_one_does_not(tmp_path):
    out = json.loads(json.dumps(_views(tmp_path)))
    assert fleet_schema.check(out) is out
    for path, value, what in ((("hosts", "hgx1", "wave"), 0, "hosts/hgx1/wave: 0 is less than the minimum of 1"),
                              (("hosts", "dgx", "health", "status"), "fine", "hosts/dgx/health/status"),
                              (("waves", "canary"), "yes", "waves/canary: 'yes' is not of type 'boolean'"),
                              (("hosts", "l40s", "host"), 5, "hosts/l40s/host: 5 is not of type 'string'")):
        broken = json.loads(json.dumps(out))
        target = broken
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        with pytest.raises(fleet_schema.FleetPlanDataError, match=what.replace("'", ".")):
            fleet_schema.check(broken)
    del out["waves"]
    with pytest.raises(fleet_schema.FleetPlanDataError, match="'waves' is a required property"):
        fleet_schema.check(out)


def test_the_documented_schema_is_the_one_the_code_checks():
    for version in fleet_schema.SUPPORTED:
        documented = json.loads((ROOT / "docs" / ("fleet_plan_schema.v%d.json" % version)).read_text())
        assert documented == fleet_schema.schema(version)
    text = (ROOT / "docs" / "fleet_plan_schema.md").read_text()
    for key in fleet_schema.schema(2)["required"]:
        assert "`%s`" % key in text


def test_the_page_is_rendered_again_from_plan_json_alone(tmp_path):
    out = _views(tmp_path, tenant_settings={"tenants": [{"name": "a"}]})
    kept = json.loads(json.dumps(out, sort_keys=True))
    for name in HOSTS:
        os.remove(str(tmp_path / ("%s.json" % name)))                  # no facts, no inventory
    assert fleet_filter.fleet_page(kept) == fleet_report.render(out)
    with pytest.raises(AnsibleFilterError, match="fleet_page: plan.json does not follow"):
        fleet_filter.fleet_page(dict(kept, waves=[]))


def test_the_summary_lines_name_a_few_hosts_and_where_the_rest_are(tmp_path):
    write(tmp_path, "x", fixture("hgx-h100"))
    many = fleet_plan.plan_fleet([("h%04d" % i, {"gpuops_nvml_replay_file": str(tmp_path / "x.json"),
                                                 "nvidia_driver_version": "570.195.03"}) for i in range(1250)], "")
    names = sorted(many["hosts"])
    lines = fv.overview(fv.enrich(many, names, {}, serial="10%", canary=True))
    assert lines[0] == ("reboots: 1250 (h0000, h0001, h0002, h0003, h0004 and 1245 more: plan.json summary.reboot, "
                        "or the page's node table with the filter disruption:reboot)")
    assert lines[1].startswith("upgrade waves (serial 10%, canary first): 11, 11 of them drain nodes")
    assert all(len(line) < 400 for line in lines)


def test_the_diff_counts_every_host_that_changes_a_facet(tmp_path):
    """Three hosts with a new wanted driver and two with new health: each is counted, not one per facet."""
    hosts = dict(("h%d" % n, ("hgx-h100", {"nvidia_driver_version": "570.195.03"})) for n in range(4))
    names = list(hosts)
    before = fv.enrich(plan(tmp_path, hosts), names, {})
    bad = fixture("hgx-h100")
    bad["gpus"][0]["ecc"]["volatile_uncorrectable"] = 3
    for name in ("h0", "h1", "h2"):
        hosts[name] = (hosts[name][0], {"nvidia_driver_version": "570.172.08"})
    for name in ("h2", "h3"):
        hosts[name] = (bad, hosts[name][1])
    after = fv.enrich(plan(tmp_path, hosts), names, {})
    d = fv.diff(json.loads(json.dumps(before)), after, "old/plan.json")
    assert sorted(d["changed"]) == names
    assert d["counts"] == {"driver": 0, "wanted": 3, "mig": 0, "health": 2, "capacity": 0}
    assert "changed: driver 0, wanted driver 3, MIG 0, health 2, capacity 0" in fv.overview(dict(after, diff=d))[2]


def test_a_host_that_needs_only_a_reboot_is_drained_in_its_wave(tmp_path):
    """Driver current, but the kernel module loaded is an older one: upgrade.yml reboots it, so its wave drains it."""
    stale = fixture("l40s")
    stale["kernel_module_version"] = "570.158.01"
    hosts = {"current": ("l40s", {"nvidia_driver_version": "570.172.08"}),
             "reboot": (stale, {"nvidia_driver_version": "570.172.08"})}
    out = fv.enrich(plan(tmp_path, hosts), list(hosts), {}, serial=1)
    host = out["hosts"]["reboot"]
    assert host["driver"]["action"] == "none" and host["driver"]["reboot_required"]
    assert host["disruption"]["drain"] and host["wave"] == 2
    batches = out["waves"]["batches"]
    assert [(b["wave"], b["drained"], b["reboots"]) for b in batches] == [(1, 0, 0), (2, 1, 1)]
    assert batches[1]["capacity_removed"] == out["hosts"]["reboot"]["capacity"]["resources"] != {}
    assert "upgrade waves (serial 1): 2, 1 of them drain nodes" in fv.overview(out)[1]
