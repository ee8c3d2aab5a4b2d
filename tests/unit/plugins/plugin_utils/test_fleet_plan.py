"""The fleet planner: each host from its own facts and variables, bad hosts reported, the rest planned."""
import copy
import json
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter import fleet as fleet_filter
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan as fp

ROOT = Path(__file__).resolve().parents[4]
NVML = ROOT / "tests" / "fixtures" / "nvml"
MIG = {"version": "v1", "mig-configs": {
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
    "all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
    "all-1g.18gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}}],
    "all-balanced": [{"devices": "all", "mig-enabled": True,
                      "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}],
    "too-many": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 8}}],
}}
TS4 = [{"name": "default", "mode": "none"}, {"name": "ts4", "mode": "time-slicing", "replicas": 4}]


def fixture(name):
    return json.loads((NVML / ("%s.json" % name)).read_text())


def write(tmp_path, name, data):
    path = tmp_path / ("%s.json" % name)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


# The recorded fixtures run branch 570; the roles' default branch is the pinned chart's (580).
ON_570 = {"nvidia_driver_branch": "570"}


def plan(tmp_path, hosts, **kw):
    """hosts: {name: (facts fixture name or data or None, hostvars)}; a host without a version follows the fixtures' branch."""
    for name, (facts, _hv) in hosts.items():
        if isinstance(facts, str) and (NVML / ("%s.json" % facts)).is_file():
            write(tmp_path, name, fixture(facts))
        elif facts is not None:
            write(tmp_path, name, facts)
    return fp.plan_fleet([(n, hv if "nvidia_driver_version" in hv else dict(ON_570, **hv)) for n, (_f, hv) in hosts.items()],
                         str(tmp_path), **kw)


# --- driver -------------------------------------------------------------------

@pytest.mark.parametrize("settings, action, reboot", [
    ({"nvidia_driver_branch": "570"}, "none", False),                    # branch 570, 570.172.08 installed
    ({"nvidia_driver_version": "570.172.08"}, "none", False),
    ({"nvidia_driver_version": "570.195.03"}, "upgrade", True),
    ({"nvidia_driver_version": "550.163.01"}, "downgrade", True),
    ({"nvidia_driver_branch": "580"}, "upgrade", True),                  # follows a newer branch
    ({"nvidia_driver_branch": "550"}, "downgrade", True),
    ({"nvidia_driver_state": "absent"}, "remove", True),
])
def test_driver_plan_compares_wanted_installed_and_loaded(settings, action, reboot):
    # A downgrade with consent (without it: test_a_downgrade_without_consent_is_a_host_error).
    s = dict(fp.DEFAULTS, nvidia_driver_allow_downgrade=action == "downgrade", **settings)
    out, errors = fp.plan_driver(s, fixture("hgx-h100"))
    assert errors == []
    assert (out["action"], out["reboot_required"]) == (action, reboot)
    assert out["installed"] == out["loaded"] == "570.172.08"


def test_driver_plan_reboots_when_the_loaded_module_is_older_even_without_a_change():
    facts = fixture("l40s")
    facts["kernel_module_version"] = "570.158.01"
    facts["reboot_reasons"] = ["the loaded NVIDIA kernel module is 570.158.01 but the user-space driver is 570.172.08"]
    out, _errors = fp.plan_driver(dict(fp.DEFAULTS, nvidia_driver_version="570.172.08"), facts)
    assert out["action"] == "none" and out["reboot_required"]
    assert any("570.158.01" in r for r in out["reasons"])


def test_driver_plan_installs_on_a_node_without_driver():
    out, errors = fp.plan_driver(dict(fp.DEFAULTS), fixture("no-gpu"))
    assert errors == [] and out["action"] == "install" and not out["reboot_required"]


@pytest.mark.parametrize("settings, word", [
    ({"nvidia_driver_version": "570.172.08; reboot"}, "nvidia_driver_version"),
    ({"nvidia_driver_branch": "latest"}, "nvidia_driver_branch"),
    ({"nvidia_driver_state": "installed"}, "nvidia_driver_state"),
])
def test_driver_plan_rejects_bad_settings(settings, word):
    out, errors = fp.plan_driver(dict(fp.DEFAULTS, **settings), fixture("l40s"))
    assert out["action"] == "invalid" and len(errors) == 1 and word in errors[0]


@pytest.mark.parametrize("version", ["", "570.172.08"])
def test_the_branch_is_checked_whether_or_not_a_version_is_pinned(version):
    settings = dict(fp.DEFAULTS, nvidia_driver_branch="R570", nvidia_driver_version=version)
    assert fp.setting_errors(settings) == [
        ("nvidia_driver_branch", "nvidia_driver_branch 'R570' is not a driver branch: set the major version only, "
                                 "such as \"570\"")]
    out, errors = fp.plan_driver(settings, fixture("l40s"))
    assert out["action"] == "invalid" and len(errors) == 1
    bad = fleet_filter.nvidia_driver_replay_plan(fixture("l40s"), "present", version, "R570")
    assert bad["failed"] and "set the major version only" in bad["msg"]


def test_settings_problems_are_grouped_by_variable_and_message_over_hosts():
    good = {"nvidia_driver_branch": "570"}
    bad = {"nvidia_driver_branch": "R570", "nvidia_driver_version": "570.172.08"}
    hosts = [("a", bad), ("b", good), ("c", bad), ("d", dict(bad, nvidia_driver_fabricmanager="maybe"))]
    problems = fp.check_settings(hosts)
    assert [(v, h) for v, _m, h in problems] == [("nvidia_driver_branch", ["a", "c", "d"]),
                                                 ("nvidia_driver_fabricmanager", ["d"])]
    assert fp.check_settings([("b", good), ("e", {})]) == []


def test_planner_defaults_are_the_roles_defaults():
    found = {}
    for role in ("nvidia_driver", "mig"):
        found.update(yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()))
    assert dict((k, found[k]) for k in fp.DEFAULTS) == fp.DEFAULTS


# --- health and fabric ----------------------------------------------------------

def test_health_is_judged_from_the_raw_fields_not_the_recorded_status():
    facts = fixture("hgx-h100")
    facts["gpus"][3]["ecc"]["volatile_uncorrectable"] = 2     # recorded health still says ok
    facts["gpus"][5]["remapped_rows"]["pending"] = True
    health = fp.plan_health(facts)
    assert health["status"] == "critical" and health["unhealthy_gpus"] == 2
    assert [g["status"] for g in health["gpus"]][3:6] == ["critical", "ok", "warning"]


def test_fabric_manager_follows_the_nvswitches():
    fabric, errors, warnings = fp.plan_fabric(dict(fp.DEFAULTS), fixture("hgx-h100"))
    assert (fabric["nvswitches"], fabric["fabric_manager"], errors, warnings) == (4, True, [], [])
    fabric, _errors, _warnings = fp.plan_fabric(dict(fp.DEFAULTS), fixture("l40s"))
    assert (fabric["nvswitches"], fabric["fabric_manager"]) == (0, False)
    fabric, _errors, warnings = fp.plan_fabric(dict(fp.DEFAULTS, nvidia_driver_fabricmanager="false"), fixture("dgx-a100"))
    assert fabric["fabric_manager"] is False and "6 NVSwitch" in warnings[0]


# --- the fleet ------------------------------------------------------------------

def test_each_host_is_planned_from_its_own_facts_and_variables(tmp_path):
    out = plan(tmp_path, {
        "dgx": ("dgx-a100", {"mig_config": MIG, "mig_config_name": "all-balanced"}),
        "hgx": ("hgx-h100", {"nvidia_driver_version": "570.195.03"}),
        "h200": ("h200-mig", {"mig_config": MIG, "mig_config_name": "all-1g.18gb"}),
        "l40s": ("l40s", {"gpu_nodes_device_plugin_config": "ts4"}),
    }, mig_strategy="mixed", sharing_configs=TS4, default_config="default")
    assert out["valid"] and out["errors"] == []
    h = out["hosts"]
    assert [h[n]["gpu_count"] for n in ("dgx", "hgx", "h200", "l40s")] == [8, 8, 1, 1]
    assert h["hgx"]["driver"]["action"] == "upgrade" and h["dgx"]["driver"]["action"] == "none"
    assert h["dgx"]["mig"]["changed"] and not h["h200"]["mig"]["changed"]
    assert h["dgx"]["capacity"]["resources"] == {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8,
                                                 "nvidia.com/mig-3g.40gb": 8}
    assert h["hgx"]["capacity"]["resources"] == {"nvidia.com/gpu": 8}
    assert h["h200"]["capacity"]["resources"] == {"nvidia.com/mig-1g.18gb": 7}
    assert h["l40s"]["capacity"]["resources"] == {"nvidia.com/gpu": 4}      # time-sliced x4
    s = out["summary"]
    assert s["capacity"] == {"nvidia.com/gpu": 12, "nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8,
                             "nvidia.com/mig-3g.40gb": 8, "nvidia.com/mig-1g.18gb": 7}
    assert s["gpus"] == 18 and s["gpus_by_model"]["NVIDIA H100 80GB HBM3"] == 8
    assert s["reboot"] == ["hgx"] and s["driver_changes"] == ["hgx"] and s["mig_changes"] == ["dgx"]
    assert s["fabric_manager"] == ["dgx", "hgx"] and s["hosts_valid"] == 4


def test_bad_input_is_reported_per_host_and_the_rest_is_planned(tmp_path):
    unknown = fixture("l40s")
    unknown["gpus"][0]["pci"]["device_id"] = "0x12341002"          # not an NVIDIA vendor id
    out = plan(tmp_path, {
        "good": ("l40s", {}),
        "nofile": (None, {}),
        "notfacts": ({"hello": "world"}, {}),
        "notjson": ("<html>oops</html>", {}),
        "unknown": (unknown, {}),
    })
    assert not out["valid"]
    h = out["hosts"]
    assert h["good"]["valid"] and h["good"]["capacity"]["resources"] == {"nvidia.com/gpu": 1}
    assert "no facts file for this host" in h["nofile"]["errors"][0]
    assert "not a recorded nvml_facts result" in h["notfacts"]["errors"][0]
    assert "is not JSON" in h["notjson"]["errors"][0]
    assert "unknown GPU" in h["unknown"]["errors"][0] and "0x12341002" in h["unknown"]["errors"][0]
    assert out["summary"]["hosts_invalid"] == ["nofile", "notfacts", "notjson", "unknown"]
    assert [e.split(":")[0] for e in out["errors"]] == ["nofile", "notfacts", "notjson", "unknown"]


def test_invalid_mig_layout_names_the_host_and_the_gpu(tmp_path):
    out = plan(tmp_path, {"a": ("dgx-a100", {"mig_config": MIG, "mig_config_name": "too-many"}),
                          "b": ("dgx-a100", {"mig_config": MIG, "mig_config_name": "nope"}),
                          "c": ("dgx-a100", {"mig_config": MIG, "mig_config_name": "all-1g.10gb"})})
    h = out["hosts"]
    assert out["summary"]["invalid_mig"] == ["a", "b"]
    assert any("GPU 0" in e for e in h["a"]["errors"])
    assert "not in mig-configs" in h["b"]["errors"][0]
    assert h["b"]["errors"][0].startswith("invalid MIG config (mig_config_name 'nope'): ")
    assert h["c"]["valid"] and h["c"]["capacity"]["resources"] == {"nvidia.com/gpu": 56}   # single strategy


def test_gpus_that_nvml_cannot_read_are_named_not_called_missing(tmp_path):
    unread = dict(fixture("no-gpu"), pci_gpu_count=1,
                  reason="NVML cannot read the 1 NVIDIA GPU(s) on the PCI bus: libnvidia-ml.so.1 not found")
    unread["health"] = {"status": "critical", "reasons": [unread["reason"]]}
    out = plan(tmp_path, {"unread": (unread, {"mig_config": MIG, "mig_config_name": "all-disabled"}),
                          "cpu": ("no-gpu", {})})
    host = out["hosts"]["unread"]
    assert unread["reason"] in host["warnings"] and not [w for w in host["warnings"] if "no NVIDIA GPU" in w]
    assert "MIG cannot be planned: " + unread["reason"] in host["errors"]
    assert host["health"]["status"] == "critical"
    assert [w for w in out["hosts"]["cpu"]["warnings"] if w.startswith("no NVIDIA GPU: ")]


def test_mig_asked_of_a_node_without_mig_is_a_warning_and_in_the_summary(tmp_path):
    out = plan(tmp_path, {"l40s": ("l40s", {"mig_config": MIG, "mig_config_name": "all-1g.10gb"}),
                          "l40s-off": ("l40s", {"mig_config": MIG, "mig_config_name": "all-disabled"}),
                          "dgx": ("dgx-a100", {"mig_config": MIG, "mig_config_name": "all-1g.10gb"})})
    assert out["valid"]
    assert out["summary"]["mig_unsupported"] == ["l40s"]
    assert [w for w in out["hosts"]["l40s"]["warnings"] if "no GPU on this node supports MIG" in w] == [
        "config 'all-1g.10gb' asks for MIG (entry 1) but no GPU on this node supports MIG (NVIDIA L40S x1): "
        "mig-parted skips such GPUs, so the node keeps its whole GPUs; give it a config without MIG "
        "(mig-enabled: false) or check which config this node gets"]
    assert not any("supports MIG" in w for w in out["hosts"]["l40s-off"]["warnings"] + out["hosts"]["dgx"]["warnings"])


def test_the_strategy_decides_whether_a_layout_can_be_advertised(tmp_path):
    hosts = {"dgx": ("dgx-a100", {"mig_config": MIG, "mig_config_name": "all-balanced"})}
    single = plan(tmp_path, hosts, mig_strategy="single")
    assert not single["valid"] and "Kubernetes capacity" in single["hosts"]["dgx"]["errors"][0]
    # The error names the variable to change, not only the node and the strategy.
    assert "set gpuops_k8s_mig_strategy: mixed" in single["hosts"]["dgx"]["errors"][0]
    assert plan(tmp_path, hosts, mig_strategy="mixed")["valid"]


def test_half_mig_under_the_single_strategy_names_the_variable_to_change(tmp_path):
    half = {"version": "v1", "mig-configs": {"half": [
        {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "1g.10gb": 4}},
        {"devices": [4, 5, 6, 7], "mig-enabled": False}]}}
    out = plan(tmp_path, {"h": ("hgx-h100", {"mig_config": half, "mig_config_name": "half"})}, mig_strategy="single")
    (error,) = out["hosts"]["h"]["errors"]
    assert "4 of 8 are not" in error and "set gpuops_k8s_mig_strategy: mixed" in error, error


def test_hosts_with_the_same_gpus_but_another_mig_state_get_their_own_plan(tmp_path):
    disabled = fixture("h200-mig")
    disabled["gpus"][0]["mig"].update(current_mode="disabled", pending_mode="disabled", devices=[])
    out = plan(tmp_path, {"on": ("h200-mig", {"mig_config": MIG, "mig_config_name": "all-1g.18gb"}),
                          "off": (disabled, {"mig_config": MIG, "mig_config_name": "all-1g.18gb"})})
    assert not out["hosts"]["on"]["mig"]["changed"] and out["hosts"]["off"]["mig"]["changed"]


def test_replay_file_of_a_host_wins_over_the_facts_dir(tmp_path):
    write(tmp_path, "x", fixture("l40s"))
    out = fp.plan_fleet([("x", {"gpuops_nvml_replay_file": str(NVML / "hgx-h100.json")})], str(tmp_path))
    assert out["hosts"]["x"]["gpu_count"] == 8


def test_unknown_sharing_config_and_duplicate_node_names_fail_the_host(tmp_path):
    out = plan(tmp_path, {"a": ("l40s", {"gpu_nodes_device_plugin_config": "ts8"}),
                          "b": ("l40s", {"gpu_nodes_node_name": "n1"}),
                          "c": ("l40s", {"gpu_nodes_node_name": "n1"})}, sharing_configs=TS4)
    assert "ts8" in out["hosts"]["a"]["errors"][0]
    assert out["hosts"]["b"]["valid"] and "also used by host b" in out["hosts"]["c"]["errors"][0]


def test_bad_shared_settings_stop_the_whole_plan(tmp_path):
    # Each names the variable to change, not only the key.
    with pytest.raises(fp.FleetPlanError, match="^gpu_sharing_configs .*replicas"):
        fp.plan_fleet([], str(tmp_path), sharing_configs=[{"name": "x", "mode": "time-slicing", "replicas": 0}])
    with pytest.raises(fp.FleetPlanError, match="default device-plugin config 'ts9' .gpu_sharing_default_config"):
        fp.plan_fleet([], str(tmp_path), sharing_configs=TS4, default_config="ts9")


def test_the_plan_does_not_change_the_facts_it_read(tmp_path):
    data = fixture("dgx-a100")
    write(tmp_path, "a", data)
    before = copy.deepcopy(data)
    out = fp.plan_fleet([("a", {"mig_config": MIG, "mig_config_name": "all-balanced"})], str(tmp_path),
                        mig_strategy="mixed", keep={})
    assert out["valid"] and json.loads((tmp_path / "a.json").read_text()) == before


# --- the driver plan of a replayed node (nvidia_driver role) -------------------------

def test_replay_driver_filter_has_the_module_result_shape():
    out = fleet_filter.nvidia_driver_replay_plan(fixture("hgx-h100"), "present", "570.195.03")
    assert out["replayed"] and out["check_mode"] and out["reboot_required"]
    assert (out["previous_version"], out["installed_version"], out["loaded_version"]) == (
        "570.172.08", "570.195.03", "570.172.08")
    assert out["gpu_count"] == 8 and out["nvswitch_count"] == 4 and "nvidia-fabricmanager" in out["services"]
    assert out["actions"] and "upgrade" in out["actions"][0]
    same = fleet_filter.nvidia_driver_replay_plan(fixture("l40s"), "present", "570.172.08")
    assert same["actions"] == [] and not same["reboot_required"] and same["services"] == ["nvidia-persistenced"]
    # Bad settings give a failed result that the role reports as it is, not an exception from inside set_fact.
    bad = fleet_filter.nvidia_driver_replay_plan(fixture("l40s"), "present", "570.x")
    assert bad["failed"] and "nvidia_driver_version '570.x' is not a driver version" in bad["msg"]
    with pytest.raises(AnsibleFilterError, match="replayed"):
        fleet_filter.nvidia_driver_replay_plan({"present": True}, "present")


@pytest.mark.parametrize("wanted, action", [("570.99.01", "downgrade"), ("570.1.1", "downgrade"),
                                            ("575.51.02", "upgrade"), ("570.172.9", "upgrade")])
def test_driver_plan_compares_versions_part_by_part_as_numbers(wanted, action):
    out, errors = fp.plan_driver(dict(fp.DEFAULTS, nvidia_driver_version=wanted,
                                      nvidia_driver_allow_downgrade=action == "downgrade"), fixture("hgx-h100"))
    assert errors == [] and out["installed"] == "570.172.08"
    assert out["action"] == action


def test_a_downgrade_without_consent_is_a_host_error(tmp_path):
    out = plan(tmp_path, {"old": ("hgx-h100", {"nvidia_driver_version": "570.99.01"}),
                          "ok": ("l40s", {"nvidia_driver_version": "570.172.08"}),
                          "consent": ("hgx-h100", {"nvidia_driver_version": "570.99.01",
                                                   "nvidia_driver_allow_downgrade": True})})
    assert not out["valid"] and out["hosts"]["ok"]["valid"] and out["hosts"]["consent"]["valid"]
    assert out["hosts"]["consent"]["driver"]["action"] == "downgrade"
    old = out["hosts"]["old"]
    assert not old["valid"] and old["driver"]["action"] == "invalid" and "old" not in out["summary"]["driver_changes"]
    assert old["errors"] == ["driver 570.172.08 is installed and the wanted 570.99.01 is older: nothing is downgraded "
                             "without consent. Set nvidia_driver_allow_downgrade: true (the nvidia_driver module's "
                             "allow_downgrade) to downgrade, or want 570.172.08 (nvidia_driver_version: \"570.172.08\")"]
    replayed = fleet_filter.nvidia_driver_replay_plan(fixture("hgx-h100"), "present", "570.99.01")
    assert replayed["failed"] and replayed["msg"] == old["errors"][0] and replayed["action"] == "invalid"
    assert fleet_filter.nvidia_driver_replay_plan(fixture("hgx-h100"), "present", "570.99.01",
                                                  allow_downgrade=True)["action"] == "downgrade"


def test_the_summary_explains_time_slicing_replicas(tmp_path):
    out = plan(tmp_path, {"l1": ("l40s", {"gpu_nodes_device_plugin_config": "ts4"}),
                          "l2": ("l40s", {"gpu_nodes_device_plugin_config": "ts4"}),
                          "h": ("hgx-h100", {})},
               mig_strategy="single", sharing_configs=TS4, default_config="default")
    s = out["summary"]
    assert s["gpus"] == 10 and s["capacity"] == {"nvidia.com/gpu": 8 + 2 * 4}
    assert s["shared"] == {"nvidia.com/gpu": {"devices": 2, "replicas": 8, "mode": "time-slicing"}}
    assert s["no_capacity"] == []


def test_a_layout_the_strategy_cannot_advertise_is_an_invalid_mig_layout_in_the_summary(tmp_path):
    hosts = {"dgx": ("dgx-a100", {"mig_config": MIG, "mig_config_name": "all-balanced"}), "l": ("l40s", {})}
    s = plan(tmp_path, hosts, mig_strategy="single")["summary"]
    assert s["hosts_invalid"] == ["dgx"] and s["invalid_mig"] == ["dgx"] and s["mig_changes"] == []
    assert s["no_capacity"] == ["dgx"]
    s = plan(tmp_path, hosts, mig_strategy="mixed")["summary"]
    assert s["hosts_invalid"] == [] and s["invalid_mig"] == [] and s["mig_changes"] == ["dgx"]


def test_a_bad_mig_document_names_the_variable_that_holds_it(tmp_path):
    bad = {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": "yes"}]}}
    out = plan(tmp_path, {"a": ("dgx-a100", {"mig_config": bad, "mig_config_name": "x"})})
    (error,) = out["hosts"]["a"]["errors"]
    assert error.startswith("invalid MIG config (mig_config): ") and "'mig-enabled' is required" in error


# --- one host's facts never stop the fleet --------------------------------------

def test_a_fabric_state_null_beside_completed_is_unknown(tmp_path):
    facts = fixture("hgx-h100")
    gpus = (facts.get("ansible_facts", {}).get("nvidia") or facts)["gpus"]
    gpus[0]["fabric"] = {"state": "completed", "status": "success", "clique_id": 0, "cluster_uuid": None,
                         "degraded_bandwidth": False}
    gpus[1]["fabric"] = {"state": None, "status": None, "clique_id": None, "cluster_uuid": None,
                         "degraded_bandwidth": None}
    out = plan(tmp_path, {"a": (facts, {})})
    assert out["hosts"]["a"]["fabric"]["fabric_states"] == ["completed", "unknown"]


def test_a_host_whose_facts_break_the_planner_is_that_hosts_error(tmp_path, monkeypatch):
    real = fp.plan_fabric

    def broken(settings, facts):
        if facts.get("driver_version") == "999.99":
            raise TypeError("'<' not supported between instances of 'NoneType' and 'str'")
        return real(settings, facts)
    monkeypatch.setattr(fp, "plan_fabric", broken)
    bad = fixture("hgx-h100")
    (bad.get("ansible_facts", {}).get("nvidia") or bad)["driver_version"] = "999.99"
    out = plan(tmp_path, {"bad": (bad, {}), "good": ("hgx-h100", {})})
    assert out["hosts"]["good"]["valid"] and not out["hosts"]["bad"]["valid"]
    error = out["hosts"]["bad"]["errors"][0]
    assert str(tmp_path / "bad.json") in error and "TypeError" in error and "record it again" in error
    assert out["summary"]["hosts_invalid"] == ["bad"] and out["errors"][0].startswith("bad: ")


@pytest.mark.parametrize("health, error", [
    (7, "health in the node's facts must be a mapping, got 7"),
    ({"status": 7, "reasons": []}, "unknown health status 7 in its facts"),
    ({"status": "fine"}, "unknown health status 'fine' in its facts"),
])
def test_a_damaged_health_record_is_that_hosts_own_error(tmp_path, health, error):
    """plan_host never raises for the host's own facts: the record's field is named, nothing else is planned."""
    bad = fixture("hgx-h100")
    (bad.get("ansible_facts", {}).get("nvidia") or bad)["health"] = health
    out = plan(tmp_path, {"bad": (bad, {}), "good": ("hgx-h100", {})})
    assert out["hosts"]["bad"]["errors"] == [error]
    assert not out["hosts"]["bad"]["valid"] and out["hosts"]["bad"]["health"] is None
    assert out["hosts"]["good"]["valid"] and out["hosts"]["good"]["health"]["status"] == "ok"


@pytest.mark.parametrize("hostvars, error", [
    ({"gpu_nodes_host_labels": ["gpu=true"]}, "gpu_nodes_host_labels must be a mapping, got a list ['gpu=true']"),
    ({"gpu_nodes_host_labels": {1: "x"}}, "gpu_nodes_host_labels must map label names (strings) to values"),
    ({"gpu_nodes_node_name": ["a", "b"]}, "gpu_nodes_node_name must be a string, got a list"),
    # an int path would be opened as a file descriptor
    ({"mig_config_name": "x", "mig_config_file": 5}, "mig_config_file must be a string, got a whole number 5"),
    ({"nvidia_driver_state": True}, "nvidia_driver_state must be a string, got a boolean True"),
])
def test_a_variable_of_the_wrong_type_is_that_hosts_error(tmp_path, hostvars, error):
    out = plan(tmp_path, {"bad": ("hgx-h100", hostvars), "good": ("hgx-h100", {})})
    assert out["hosts"]["bad"]["errors"] == [error] or out["hosts"]["bad"]["errors"][0].startswith(error)
    assert out["hosts"]["good"]["valid"]


@pytest.mark.parametrize("hostvars", [{"nvidia_driver_branch": 570}, {"nvidia_driver_version": "570.172.08"},
                                      {"nvidia_driver_fabricmanager": True}, {"mig_config": None}])
def test_values_yaml_reads_as_numbers_and_booleans_are_fine(tmp_path, hostvars):
    assert plan(tmp_path, {"a": ("hgx-h100", hostvars)})["hosts"]["a"]["valid"]


def test_a_wrong_type_is_named_in_words_and_a_huge_value_is_cut(tmp_path):
    """No class name (ansible-core's _AnsibleTaggedDate), and no 1 MiB value echoed whole."""
    import datetime

    class _AnsibleTaggedDate(datetime.date):
        pass

    out = plan(tmp_path, {"bad": ("hgx-h100", {"mig_config_name": _AnsibleTaggedDate(2026, 1, 2)}),
                          "big": ("hgx-h100", {"gpu_nodes_node_name": ["x" * (1024 * 1024)]})})
    (error,) = out["hosts"]["bad"]["errors"]
    assert error == "mig_config_name must be a string, got a date 2026-01-02"
    (error,) = out["hosts"]["big"]["errors"]
    assert "_Ansible" not in error and len(error) < 600 and error.startswith("gpu_nodes_node_name must be a string, got a list")
