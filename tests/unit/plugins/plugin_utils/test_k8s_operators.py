"""Values of NVIDIA's operators (plugin_utils/k8s_operators.py)."""
from ansible_collections.gpuops.platform.plugins.filter import k8s_operators as filters
from ansible_collections.gpuops.platform.plugins.plugin_utils import jinja_tests

REPOS = {"toolkit": "nvcr.io/nvidia/k8s", "driver.manager": "nvcr.io/nvidia/cloud-native", "other": "ghcr.io/x"}


def test_a_registry_moves_every_nvcr_repository_under_it():
    assert filters.gpu_operator_registry_values(REPOS, "registry.local/nvcr//", [], []) == {
        "toolkit.repository": "registry.local/nvcr/nvidia/k8s",
        "driver.manager.repository": "registry.local/nvcr/nvidia/cloud-native",
        "other.repository": "ghcr.io/x"}


def test_pull_secrets_go_to_every_component_that_takes_them():
    assert filters.gpu_operator_registry_values(REPOS, "", ["driver", "toolkit"], ["pull"]) == {
        "driver.imagePullSecrets": ["pull"], "toolkit.imagePullSecrets": ["pull"]}
    assert filters.gpu_operator_registry_values(REPOS, "", ["driver"], []) == {}


def test_a_registry_is_taken_literally_not_as_a_regex_replacement():
    assert filters.gpu_operator_registry_values({"a": "nvcr.io/x"}, r"reg\1", [], [])["a.repository"] == r"reg\1/x"


def test_rdma_config_has_a_default_hca_max_and_only_the_selectors_set():
    got = filters.rdma_shared_device_config([{"name": "a", "vendors": ["15b3"], "device_ids": [], "if_names": ["ib0"]},
                                             {"name": "b", "rdma_hca_max": "32", "device_ids": ["1017"]}])
    assert got == {"configList": [
        {"resourceName": "a", "rdmaHcaMax": 63, "selectors": {"vendors": ["15b3"], "ifNames": ["ib0"]}},
        {"resourceName": "b", "rdmaHcaMax": 32, "selectors": {"deviceIDs": ["1017"]}}]}


def test_the_jinja_like_helpers_mean_what_jinja_means():
    assert jinja_tests.is_integer(3) and not jinja_tests.is_integer(True) and not jinja_tests.is_integer(3.0)
    assert jinja_tests.is_number(1.5) and not jinja_tests.is_number(False) and not jinja_tests.is_number("1")
    assert jinja_tests.to_int("1.5") == 1 and jinja_tests.to_int("x") == 0 and jinja_tests.to_int(None) == 0
    assert jinja_tests.to_float("2Gi") == 0.0 and jinja_tests.to_float("2.5") == 2.5
    # Jinja's "| string" writes None as None.
    assert jinja_tests.matches(12, r"^[0-9]+$") and jinja_tests.matches(None, r"^None$") and not jinja_tests.matches("x1", r"^[0-9]")
    assert jinja_tests.unique(["b", "a", "b"]) == ["b", "a"]
    assert [k for k, v in jinja_tests.dictsort({"b": 1, "A": 2, "c": 3})] == ["A", "b", "c"]
