"""check_variables: unknown role and platform variables (typos) fail the plan, known ones never do."""
from pathlib import Path
from unittest import mock

import pytest
import yaml

from ansible_collections.gpuops.platform.plugins.action import check_variables as check_action
from ansible_collections.gpuops.platform.plugins.plugin_utils import variable_check as cv
from ansible_collections.gpuops.platform.plugins.plugin_utils.variable_sources import shown_path

ROOT = Path(__file__).resolve().parents[4]
CATALOG = cv.load_catalog(str(ROOT))
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "meta" / "argument_specs.yml").is_file())


def problems(names, roles=None, check_globals=True, catalog=CATALOG):
    return [(name, role, close) for name, role, close, dummy in cv.unknown_variables(names, catalog, roles, check_globals)]


def test_every_role_of_the_collection_is_in_the_catalog_with_its_specs_and_defaults():
    assert sorted(CATALOG["roles"]) == ROLES and len(ROLES) >= 16
    for role in ROLES:
        specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        options = set().union(*[set((e or {}).get("options") or {}) for e in specs.values()])
        defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) \
            if (ROOT / "roles" / role / "defaults" / "main.yml").is_file() else {}
        own = {n for n in options | set(defaults or {}) if n.startswith(role + "_")}
        assert own <= CATALOG["roles"][role], role
        # Nothing of a role's own is ever reported, and each name belongs to that role, not to one with a shorter prefix.
        assert problems(own) == [], role
        assert {cv.owner(n, CATALOG["roles"]) for n in own} <= {role}, role


@pytest.mark.parametrize("name, role, close", [
    ("gpu_sharing_config", "gpu_sharing", "gpu_sharing_configs"),
    ("gpu_sharing_replica", "gpu_sharing", None),
    ("gpu_tenants_lists", "gpu_tenants", "gpu_tenants_list"),
    ("gpu_nodes_device_plugin_confg", "gpu_nodes", "gpu_nodes_device_plugin_config"),
    ("dra_driver_enable", "dra_driver", "dra_driver_enabled"),
    ("nvidia_driver_branc", "nvidia_driver", "nvidia_driver_branch"),
    ("mig_confg_name", "mig", "mig_config_name"),
    ("gpuops_k8s_mig_stratgy", "gpuops", "gpuops_k8s_mig_strategy"),
    ("gpuops_nodes_serail", "gpuops", "gpuops_nodes_serial"),
])
def test_typos_are_reported_with_the_closest_known_variable(name, role, close):
    (found,) = problems(["gpu_sharing_configs", "gpuops_k8s_render_dir", name])
    assert found[:2] == (name, role)
    if close:
        assert found[2] == close


def test_a_typo_without_a_close_match_lists_the_known_variables():
    (entry,) = cv.unknown_variables(["gpu_sharing_zzz"], CATALOG)
    line = cv.format_problems([("localhost", [entry])])[0]
    assert line.startswith("gpu_sharing_zzz (host localhost): no such variable in role gpu_sharing, so it would be ignored;")
    assert "known: " in line and "gpu_sharing_configs" in line and "gpu_sharing_namespace" in line


def test_longest_prefix_owns_a_name_and_only_checked_roles_are_judged():
    """Roles gpu and gpu_nodes, mig and mig_manager: gpu_nodes_* is never gpu's, mig_manager_* never mig's."""
    catalog = {"roles": {"gpu": {"gpu_enabled"}, "gpu_nodes": {"gpu_nodes_group"}, "mig": {"mig_config"},
                         "mig_manager": {"mig_manager_image"}}, "globals": {"gpuops_x"}}
    assert problems(["gpu_nodes_group", "mig_manager_image", "gpu_enabled", "mig_config"], catalog=catalog) == []
    assert problems(["gpu_nodes_grup", "mig_manager_imag"], catalog=catalog) == [
        ("gpu_nodes_grup", "gpu_nodes", "gpu_nodes_group"), ("mig_manager_imag", "mig_manager", "mig_manager_image")]
    # Checking role gpu judges only gpu_*: gpu_nodes_grup is gpu_nodes' business.
    assert problems(["gpu_nodes_grup", "gpu_enabld"], roles=["gpu"], catalog=catalog) == [("gpu_enabld", "gpu", "gpu_enabled")]
    assert cv.owner("gpuops_x", catalog["roles"]) is None and cv.owner("gpu", catalog["roles"]) is None


def test_internal_names_unrelated_names_and_unchecked_globals_pass():
    assert problems(["gpu_sharing__configs", "__gpu_sharing_x", "_gpu_sharing", "gpu_sharingx", "ansible_host",
                     "inventory_hostname", "gpu", "my_gpu_sharing_configs"]) == []
    assert problems(["gpuops_typo"], check_globals=False) == []
    assert problems(["gpuops_typo"]) == [("gpuops_typo", "gpuops", None)]


def test_published_facts_and_argument_spec_globals_are_known():
    listed = yaml.safe_load((ROOT / "meta" / "variables.yml").read_text())
    assert problems(list(listed["variables"]) + list(listed["facts"])) == []
    # gpuops_k8s_mig_strategy is in meta/variables.yml and in role argument specs; either makes it known.
    assert "gpuops_k8s_mig_strategy" in CATALOG["globals"]


@pytest.mark.parametrize("old, new", [
    ("gpu_monitoring_adapter_enabled", "prometheus_adapter_enabled"),
    ("gpu_operator_extra_values", "gpu_operator_values"),
    ("gpu_monitoring_stack_values", "kube_prometheus_stack_values"),
])
def test_a_renamed_variable_is_reported_with_its_new_name(old, new):
    (entry,) = cv.unknown_variables([old], CATALOG)
    assert entry[:3] == (old, old.split("_")[0] + "_" + old.split("_")[1], new)
    line = cv.format_problems([("gpu-a", [entry])], CATALOG["renamed"])[0]
    assert line == "%s (host gpu-a): no such variable in role %s, so it would be ignored; it was renamed: set %s instead" % (
        old, entry[1], new)


def test_the_renamed_table_names_only_gone_variables_and_existing_successors():
    renamed = yaml.safe_load((ROOT / "meta" / "variables.yml").read_text())["renamed"]
    known = set().union(CATALOG["globals"], *CATALOG["roles"].values())
    assert renamed and not set(renamed) & known, "an old name is defined again"
    assert set(n for new in renamed.values() for n in cv.targets(new)) <= known, \
        "a new name that no role (or meta/variables.yml) defines"


@pytest.mark.parametrize("old, owner, new", [
    ("gpu_health_replay_file", "gpu_health", "gpuops_nvml_replay_file"),
    ("gpu_upgrade_facts_file", "gpu_upgrade", "gpuops_nvml_replay_file"),
    ("mig_nvml_replay_file", "mig", "gpuops_nvml_replay_file"),
    ("nvidia_driver_nvml_replay_file", "nvidia_driver", "gpuops_nvml_replay_file"),
    ("node_preflight_nvml_replay_file", "node_preflight", "gpuops_nvml_replay_file"),
    ("gpuops_nvml_replay_dir", "gpuops", "gpuops_fleet_facts_dir"),
])
def test_a_per_role_replay_variable_fails_naming_the_one_facts_source(old, owner, new):
    (entry,) = cv.unknown_variables([old], CATALOG)
    assert entry[:3] == (old, owner, new)
    line = cv.format_problems([("gpu-a", [entry])], CATALOG["renamed"])[0]
    assert line.endswith("so it would be ignored; it was renamed: set %s instead" % new)


@pytest.mark.parametrize("inventory", ["example", "local"])
def test_the_shipped_inventories_use_only_known_variables(inventory):
    names = set()
    for path in (ROOT / "inventories" / inventory).rglob("*.yml"):
        data = yaml.safe_load(path.read_text()) or {}
        if path.name == "hosts.yml":
            continue
        names.update(data)
    assert names and problems(names) == []


def test_a_role_added_later_is_checked_from_its_argument_specs(tmp_path):
    meta = tmp_path / "roles" / "gpu_health" / "meta"
    meta.mkdir(parents=True)
    (meta / "argument_specs.yml").write_text(yaml.safe_dump({"argument_specs": {"main": {"options": {
        "gpu_health_taint_effect": {"type": "str"}}}}}))
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "variables.yml").write_text("variables:\n  gpuops_upgrade_serial: x\n")
    catalog = cv.load_catalog(str(tmp_path))
    assert problems(["gpu_health_taint_effect", "gpuops_upgrade_serial"], catalog=catalog) == []
    assert problems(["gpu_health_taint_efect"], catalog=catalog) == [
        ("gpu_health_taint_efect", "gpu_health", "gpu_health_taint_effect")]


def test_names_set_by_tasks_are_left_out():
    manager = mock.Mock(_nonpersistent_fact_cache={"n1": {"gpu_nodes_reg": 1}}, _fact_cache={"n1": {"gpu_nodes_fact": 2}})
    assert cv.set_by_tasks(manager, "n1") == {"gpu_nodes_reg", "gpu_nodes_fact"}
    assert cv.set_by_tasks(manager, "other") == set()
    assert cv.set_by_tasks(None, "n1") == set()


def _run(args, task_vars):
    task = mock.Mock(args=args, async_val=0)
    action = check_action.ActionModule(task, mock.Mock(), mock.Mock(check_mode=False), loader=None, templar=None,
                                       shared_loader_obj=None)
    return action.run(task_vars=task_vars)


def test_run_fails_naming_variable_host_and_closest_and_skips_facts():
    class HostVars(dict):
        _variable_manager = mock.Mock(_nonpersistent_fact_cache={"gpu-a": {"gpu_nodes_registered": {}}}, _fact_cache={})
    hostvars = HostVars({"gpu-a": {"gpu_nodes_dra": True, "gpu_nodes_registered": {}, "gpu_nodes_device_plugin_confg": "ts"}})
    task_vars = {"inventory_hostname": "localhost", "hostvars": hostvars, "gpu_nodes_group": "gpu_nodes",
                 "gpuops_k8s_mig_strategy": "single", "gpu_nodes_lables": {}}
    result = _run({"roles": ["gpu_nodes"], "hosts": ["gpu-a", "missing"]}, task_vars)
    assert result["failed"] is True and result["changed"] is False
    assert result["unknown"] == ["gpu_nodes_lables", "gpu_nodes_device_plugin_confg"]
    assert "gpu_nodes_lables (host localhost): no such variable in role gpu_nodes, so it would be ignored; " \
           "did you mean gpu_nodes_labels?" in result["msg"]
    assert "gpu_nodes_device_plugin_confg (host gpu-a)" in result["msg"]
    assert "did you mean gpu_nodes_device_plugin_config?" in result["msg"]
    ok = _run({"roles": ["gpu_nodes"]}, {"inventory_hostname": "localhost", "gpu_nodes_group": "x"})
    assert not ok.get("failed") and ok["unknown"] == [] and ok["checked"] == 2


def test_run_refuses_a_role_the_collection_does_not_have():
    with pytest.raises(Exception, match="no role gpu_sharin in this collection"):
        _run({"roles": ["gpu_sharin"]}, {"inventory_hostname": "localhost"})


def test_one_line_per_variable_with_its_hosts_grouped_and_the_file_that_sets_it():
    (entry,) = cv.unknown_variables(["nvidia_driver_verison"], CATALOG)
    lines = cv.format_problems([(h, [entry]) for h in ("h1", "h2", "h3", "h4")], CATALOG["renamed"],
                               {"nvidia_driver_verison": ["inventories/x/group_vars/h100/main.yml"]})
    assert lines == ["nvidia_driver_verison (4 hosts: h1, h2, h3, h4; set in inventories/x/group_vars/h100/main.yml): "
                     "no such variable in role nvidia_driver, so it would be ignored; did you mean nvidia_driver_version?"]


def test_the_files_that_set_a_variable_are_found_beside_the_inventory(tmp_path):
    inventory = tmp_path / "inv"
    for rel, text in (("group_vars/all.yml", "gpuops_x: 1\n"), ("group_vars/h100/main.yml", "nvidia_driver_branch: R570\n"),
                      ("group_vars/gpu/main.yml", "nvidia_driver_branch: '570'\n"), ("host_vars/a.yml", "gpuops_y: 2\n"),
                      ("group_vars/other/main.yml", "gpuops_y: 3\n")):
        (inventory / rel).parent.mkdir(parents=True, exist_ok=True)
        (inventory / rel).write_text(text)
    from ansible_collections.gpuops.platform.plugins.plugin_utils import variable_sources as vs
    host = {"inventory_hostname": "a", "group_names": ["gpu", "h100"], "inventory_dir": str(inventory / "sub" / ".."),
            "nvidia_driver_branch": "R570"}
    found = vs.variable_sources(["gpuops_x", "gpuops_y", "nvidia_driver_branch", "gpuops_z"], [host], cwd=str(tmp_path))
    # Normalised and relative; the file whose value the host has wins over the group that set another value.
    assert found == {"gpuops_x": ["inv/group_vars/all.yml"], "gpuops_y": ["inv/host_vars/a.yml"],
                     "nvidia_driver_branch": ["inv/group_vars/h100/main.yml"]}
    assert vs.hosts_phrase(["a"]) == "host a" and vs.hosts_phrase(["a", "b"]) == "2 hosts: a, b"


def test_host_globals_checks_the_platform_variables_of_the_named_hosts():
    class HostVars(dict):
        _variable_manager = mock.Mock(_nonpersistent_fact_cache={}, _fact_cache={})
    hostvars = HostVars({"gpu-%d" % i: {"gpuops_nvml_replay_fiel": "/x.json"} for i in range(3)})
    task_vars = {"inventory_hostname": "localhost", "hostvars": hostvars}
    assert not _run({"hosts": sorted(hostvars)}, task_vars).get("failed")
    result = _run({"hosts": sorted(hostvars), "host_globals": True}, task_vars)
    assert result["failed"] and result["unknown"] == ["gpuops_nvml_replay_fiel"]
    assert "gpuops_nvml_replay_fiel (3 hosts: gpu-0, gpu-1, gpu-2): no such variable in platform-wide" in result["msg"]


def test_hosts_with_the_same_variable_names_are_judged_once(monkeypatch):
    """A fleet's hosts share their groups' names: 20,000 hosts in 4 groups are 4 judgements, reported per host."""
    calls = []
    judge = cv.unknown_variables
    monkeypatch.setattr(cv, "unknown_variables", lambda *args: calls.append(args[0]) or judge(*args))
    targets = [("gpu-%d" % i, {"gpu_nodes_dra": True, "nvidia_driver_verison": "1"}, True) for i in range(4)]
    targets += [("cpu-0", {"gpuops_nvml_replay_fiel": "/x.json"}, True), ("cpu-1", {"gpuops_nvml_replay_fiel": "/x.json"}, False)]
    checked, unknown, lines = cv.check_hosts(targets, None, CATALOG)
    assert len(calls) == 3 and checked == 10
    assert unknown == ["nvidia_driver_verison", "gpuops_nvml_replay_fiel"]
    assert lines[0].startswith("nvidia_driver_verison (4 hosts: gpu-0, gpu-1, gpu-2, gpu-3): no such variable in role nvidia_driver")
    assert lines[1].startswith("gpuops_nvml_replay_fiel (host cpu-0): ") and len(lines) == 2


def _trusted(value):
    """A template string as the inventory gives it (ansible-core 2.19+ templates only trusted strings)."""
    try:
        from ansible.template import trust_as_template
    except ImportError:     # older ansible-core templates every string
        return value
    return trust_as_template(value) if isinstance(value, str) else value


def _run_templated(args, task_vars):
    """The action with a real Templar over the task variables, as ansible-playbook gives it."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    task_vars = dict((k, _trusted(v)) for k, v in task_vars.items())
    task = mock.Mock(args=args, async_val=0)
    action = check_action.ActionModule(task, mock.Mock(), mock.Mock(check_mode=False), loader=DataLoader(),
                                       templar=Templar(loader=DataLoader(), variables=task_vars), shared_loader_obj=None)
    return action.run(task_vars=task_vars)


def test_validate_refuses_values_the_argument_specs_refuse_with_ansibles_messages():
    """One task validates every role's values (cluster.yml includes the roles without rolespec_validate):
    the messages are those of a role's own argument validation (ArgumentSpecValidator)."""
    task_vars = {"inventory_hostname": "localhost", "gpuops_k8s_mig_strategy": "triple", "kueue_enabled": "maybe",
                 "gpu_tenants_list": "team-a", "volcano_enabled": True}
    result = _run_templated({"validate": True}, task_vars)
    assert result["failed"] is True and result["changed"] is False
    errors = " ".join(result["argument_errors"])
    assert "value of gpuops_k8s_mig_strategy must be one of: none, single, mixed, got: triple" in errors
    assert "kueue_enabled" in errors and "gpu_tenants_list" in errors
    assert "volcano_enabled" not in errors
    assert result["msg"].startswith("Variables that their role's argument specs refuse")
    # Without validate the values are not judged; an unknown name is refused first either way.
    assert not _run_templated({}, task_vars).get("failed")
    typo = _run_templated({"validate": True}, dict(task_vars, gpu_tenants_lists=[]))
    assert typo["unknown"] == ["gpu_tenants_lists"] and "argument_errors" not in typo


def test_validate_leaves_a_value_that_reads_what_is_not_defined_yet_to_the_role():
    task_vars = {"inventory_hostname": "localhost", "gpu_sharing_namespace": "{{ gpu_operator_namespace }}",
                 "gpu_tenants_default_gpu_share": "0.5"}
    result = _run_templated({"validate": True}, task_vars)
    assert not result.get("failed"), result
    assert result["validated"] == 1     # the share; the namespace reads a role default not loaded yet


def test_enabled_is_each_switch_as_set_or_the_argument_spec_default():
    result = _run_templated({}, {"inventory_hostname": "localhost", "kueue_enabled": False,
                                 "kai_scheduler_enabled": "{{ 'yes' }}",
                                 # Reads another role's default, which is not loaded yet: the spec default is used.
                                 "prometheus_adapter_enabled": "{{ gpu_monitoring_enabled }}"})
    enabled = result["enabled"]
    specs = cv.load_specs(str(ROOT))
    assert set(enabled) == {r for r, o in specs.items() if r + "_enabled" in o} >= {"kueue", "volcano", "gpu_operator"}
    assert enabled["kueue"] is False and enabled["kai_scheduler"] is True
    assert enabled["volcano"] is True and enabled["dra_driver"] is False     # the specs' defaults
    assert enabled["prometheus_adapter"] is specs["gpu_monitoring"]["gpu_monitoring_enabled"]["default"] is False


def test_validate_never_quotes_the_value_of_a_no_log_option():
    specs = {"demo": {"demo_token": {"type": "str", "no_log": True, "choices": ["a"]},
                      "demo_port": {"type": "int", "no_log": True}, "demo_mode": {"type": "str", "choices": ["x"]}}}
    values = {"demo_token": "sekrit-123", "demo_port": "sekrit-456", "demo_mode": "plain-y"}
    checked, errors = cv.invalid_values(set(values), specs, values.__getitem__)
    assert checked == 3 and len(errors) == 3
    assert "sekrit" not in " ".join(errors)
    assert "value of demo_token must be one of: a, got: ********" in errors
    # A value of an option that is not no_log is quoted as ansible-core quotes it.
    assert "value of demo_mode must be one of: x, got: plain-y" in errors


def test_a_suggestion_never_offers_an_internal_name():
    """A role's internal names (<role>__x, set by its vars or tasks) are no variable to set: never a hint."""
    internal = sorted(n for names in CATALOG["roles"].values() for n in names if "__" in n)
    assert "gpu_operator__registry_values" in internal
    reported = 0
    for name in internal:
        # The public-looking spelling of an internal name is the closest possible typo of it.
        for entry in cv.unknown_variables([name.replace("__", "_", 1)], CATALOG):
            reported += 1
            line = cv.format_problems([("gpu-a", [entry])], CATALOG["renamed"])[0]
            assert "__" not in line.split("; ", 1)[1], line
            assert not [k for k in entry[3] if "__" in k], entry[0]
    assert reported >= 10
    (entry,) = cv.unknown_variables(["gpu_operator_registry_password"], CATALOG)
    assert cv.format_problems([("gpu-a", [entry])], CATALOG["renamed"])[0].endswith(
        "it was renamed: set gpu_operator_image_pull_secrets instead")


def test_a_renamed_name_without_a_role_prefix_is_reported_with_the_platform_variables():
    """DeepOps' k8s_gpu_mig_strategy starts like no role here; the renamed table still names its successor."""
    assert problems(["k8s_gpu_mig_strategy"]) == [("k8s_gpu_mig_strategy", "gpuops", "gpuops_k8s_mig_strategy")]
    assert problems(["k8s_gpu_mig_strategy"], check_globals=False) == []
    # Names the table does not list stay unchecked: other tools' variables share an inventory.
    assert problems(["k8s_gpu_mig_strateg", "gpu_clock_lock"]) == []
    (entry,) = cv.unknown_variables(["deepops_gpu_operator_enabled"], CATALOG)
    assert cv.format_problems([("gpu-a", [entry])], CATALOG["renamed"])[0].endswith(
        "it was renamed: set gpuops_driver_source and gpuops_toolkit_source instead")


@pytest.mark.parametrize("option, value, words", [
    ({"type": "list", "elements": "dict"}, 3, "demo_list must be a list of mappings, got a whole number 3"),
    ({"type": "list", "elements": "dict"}, "team-a", "demo_list must be a list of mappings, got a string 'team-a'"),
    ({"type": "list", "elements": "dict"}, [{"a": 1}, 2], "demo_list[1] must be a mapping, got a whole number 2"),
    ({"type": "list", "elements": "str"}, {"a": 1}, "demo_list must be a list, got a mapping {'a': 1}"),
    ({"type": "dict"}, [1], "demo_list must be a mapping, got a list [1]"),
])
def test_validate_says_in_words_what_a_list_or_mapping_was_given_as(option, value, words):
    """gpu_sharing_configs: 3 was "Elements value for option ... is of type str" (ansible-core converted it first)."""
    checked, errors = cv.invalid_values({"demo_list"}, {"demo": {"demo_list": option}}, {"demo_list": value}.__getitem__)
    assert checked == 1 and errors == [words]


def test_validate_names_where_each_refused_variable_was_set(tmp_path):
    (tmp_path / "group_vars" / "all").mkdir(parents=True)
    (tmp_path / "group_vars" / "all" / "k8s.yml").write_text("gpu_sharing_configs: 3\n")
    task_vars = {"inventory_hostname": "localhost", "inventory_dir": str(tmp_path), "group_names": [],
                 "gpu_sharing_configs": 3}
    result = _run_templated({"validate": True}, task_vars)
    assert result["argument_errors"] == [
        "gpu_sharing_configs must be a list of mappings, got a whole number 3 (host localhost; set in %s)"
        % shown_path(tmp_path / "group_vars" / "all" / "k8s.yml")]


def test_a_lookalike_name_is_shown_escaped():
    """gpu_sharing_c\u043enfigs (a Cyrillic o) looks like the real name: the message shows which character it is."""
    catalog = {"roles": {"gpu_sharing": {"gpu_sharing_configs"}}, "globals": set(), "renamed": {}}
    problems = cv.unknown_variables(["gpu_sharing_c\u043enfigs"], catalog)
    (line,) = cv.format_problems([("gpu-\u0430", problems)])
    assert line.startswith("'gpu_sharing_c\\u043enfigs' (host 'gpu-\\u0430'): no such variable in role gpu_sharing")
    assert line.isascii()


def test_validate_never_echoes_a_huge_value_whole():
    specs = {"demo": {"demo_mode": {"type": "str", "choices": ["x"]}}}
    checked, (error,) = cv.invalid_values({"demo_mode"}, specs, {"demo_mode": "y" * (1024 * 1024)}.__getitem__)
    assert error.startswith("value of demo_mode must be one of: x, got: yyy") and len(error) < 1000
    assert error.endswith("... (%d characters)" % len("value of demo_mode must be one of: x, got: " + "y" * (1024 * 1024)))
