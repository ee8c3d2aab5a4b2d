"""Versions and batch sizes of the wrong type, named with where they were set (plugin_utils/variable_types)."""
import pytest

from ansible_collections.gpuops.platform.plugins.plugin_utils import variable_types as vt
from ansible_collections.gpuops.platform.plugins.plugin_utils.variable_sources import shown_path


def _owned(name):
    return name.startswith(("gpuops_", "kueue_", "nvidia_driver_"))


@pytest.mark.parametrize("name, value, words", [
    ("gpuops_driver_version", 570.19, "gpuops_driver_version is the number 570.19, not a string"),
    ("gpuops_driver_version", 570, "gpuops_driver_version is the number 570, not a string"),
    ("nvidia_driver_branch", True, "nvidia_driver_branch is the boolean True, not a string: YAML reads an unquoted "
                                   "yes, no, true or false as a boolean"),
    ("kueue_chart_version", 0.2, "kueue_chart_version is a number 0.2, not a string"),
    ("kueue_chart_version", False, "kueue_chart_version is a boolean False, not a string"),
    ("kueue_chart_version", ["1"], "kueue_chart_version must be a version (a string), got a list ['1']"),
    ("gpuops_nodes_serial", 0, "gpuops_nodes_serial '0' is not above 0"),
    ("gpuops_mig_serial", 1.5, "gpuops_mig_serial must be a number of hosts or a percentage such as \"25%\", got a number 1.5"),
])
def test_a_version_or_serial_of_the_wrong_type_is_refused(name, value, words):
    assert words in vt.problem(name, value)


@pytest.mark.parametrize("name, value", [
    ("gpuops_driver_version", "570.172.08"), ("gpuops_driver_version", ""), ("nvidia_driver_branch", 570),
    ("kueue_chart_version", "0.19.2"), ("dra_driver_min_driver_version", 580), ("gpuops_nodes_serial", "100%"),
    ("gpuops_nodes_serial", 3), ("gpuops_nodes_serial", ""),
])
def test_good_values_pass(name, value):
    assert vt.problem(name, value) is None


def test_only_the_collections_own_version_variables_are_checked():
    assert vt.checked("kueue_chart_version", _owned) and not vt.checked("ansible_version", _owned)


def test_an_extra_var_is_named_with_the_file_that_set_it(tmp_path):
    first, last = tmp_path / "a.yml", tmp_path / "b.yml"
    first.write_text("gpuops_driver_version: 570.190\n")
    last.write_text("other: 1\n")
    args = ["@%s" % first, "@%s" % last, "x=1"]
    # Shown as every source is: relative to the current folder when under it (pytest's basetemp may be).
    assert vt.extra_vars_source("gpuops_driver_version", args) == "extra vars file %s" % shown_path(first)
    assert vt.extra_vars_source("gpuops_driver_version", args + ['{"gpuops_driver_version": 570.19}']) == \
        "extra vars (-e on the command line)"
    assert vt.extra_vars_source("gpuops_driver_version", []) == "extra vars"


def test_problems_group_their_hosts_and_skip_what_tasks_set():
    targets = [("a", {"gpuops_nodes_serial": 0}), ("b", {"gpuops_nodes_serial": 0}),
               ("c", {"gpuops_nodes_serial": 0})]
    lines = vt.value_problems(targets, lambda variables, name: variables[name], _owned,
                              skip=lambda host: {"gpuops_nodes_serial"} if host == "c" else set())
    assert lines == ["gpuops_nodes_serial '0' is not above 0: set a number of hosts per wave, or \"100%\" for every "
                     "host at once (2 hosts: a, b)"]
    extra = vt.value_problems(targets[:1], lambda variables, name: variables[name], _owned, {"gpuops_nodes_serial"})
    assert extra[0].endswith("(set in extra vars)")


def test_a_value_not_known_yet_is_left_to_the_role():
    def unknown(variables, name):
        raise LookupError(name)
    assert vt.value_problems([("a", {"gpuops_driver_version": "{{ later }}"})], unknown, _owned) == []


@pytest.mark.parametrize("host, variables, variable", [
    ("L40S-01", {}, "inventory_hostname"),
    ("l40s-01", {"gpu_nodes_node_name": "Node_1"}, "gpu_nodes_node_name"),
    ("l40s-01", {"mig_k8s_node_name": "-x"}, "mig_k8s_node_name"),
    ("n\u0430me", {}, "inventory_hostname"),
    ("a" * 254, {}, "inventory_hostname"),
])
def test_a_node_name_that_no_kubernetes_node_can_have_is_refused(host, variables, variable):
    found = vt.node_name_problem(host, variables)
    assert found and found[0] == variable and "is not a lowercase RFC 1123 name" in found[1]
    assert "\u0430" not in found[1] and len(found[1]) < 600


@pytest.mark.parametrize("host, variables", [
    ("l40s-01", {}), ("L40S-01", {"gpu_nodes_node_name": "l40s-01"}), ("gpu-1.example.com", {}),
    ("h", {"gpu_nodes_node_name": 7}),  # not text: the type check's to report
])
def test_a_lowercase_rfc_1123_node_name_passes(host, variables):
    assert vt.node_name_problem(host, variables) is None


def test_a_plan_refusal_names_the_variable_the_host_and_the_file(tmp_path):
    (tmp_path / "group_vars" / "all").mkdir(parents=True)
    (tmp_path / "group_vars" / "all" / "k8s.yml").write_text("gpu_sharing_configs:\n  - {name: ts, mode: time-slicing, replicas: 1}\n")
    variables = {"inventory_hostname": "cp-1", "inventory_dir": str(tmp_path), "group_names": [],
                 "gpu_sharing_configs": [{"name": "ts", "mode": "time-slicing", "replicas": 1}]}
    (line,) = vt.plan_refusal(variables["gpu_sharing_configs"], "gpu_sharing_configs", "gpu_sharing_configs", variables,
                              "single", "")
    assert line.startswith("gpu_sharing_configs: sharing config 'ts': replicas of nvidia.com/gpu is 1")
    assert line.endswith("(host cp-1; set in %s)" % shown_path(tmp_path / "group_vars" / "all" / "k8s.yml"))
    assert vt.plan_refusal([{"name": "default", "mode": "none"}], "gpu_sharing_configs", "gpu_sharing_configs",
                           variables, "single", "default") == []
    with pytest.raises(ValueError, match="unknown check"):
        vt.plan_refusal([], "os.system", "x", variables)
