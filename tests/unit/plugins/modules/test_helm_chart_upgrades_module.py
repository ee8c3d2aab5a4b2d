"""The helm_chart_upgrades module on what a fake helm prints: the commands it runs (the values only in a private
file), what it returns, and a failing helm named without the values."""
import json
from unittest import mock

import pytest
import yaml

from support.module_args import ExitJson, FailJson, patch_module_args

from ansible.module_utils import basic
from ansible_collections.gpuops.platform.plugins.modules import helm_chart_upgrades

pytestmark = pytest.mark.usefixtures("module_exits")

MARKER = "values-marker-0b7e"
RELEASE = {"name": "kuberay-operator", "namespace": "kuberay", "chart_ref": "kuberay-operator",
           "chart_repo_url": "https://charts.example/", "chart_version": "1.7.0", "source": "repo",
           "deployed_version": "1.6.2", "values": {"metrics": {"serviceMonitor": {"selector": {"release": MARKER}}}},
           "sensitive": False, "layer": "kuberay"}
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "rayclusters.ray.io"},
       "spec": {"group": "ray.io", "names": {"plural": "rayclusters", "kind": "RayCluster"}, "scope": "Namespaced",
                "versions": [{"name": "v1", "served": True, "storage": True}]}}
OLD = {"metrics": {"serviceMonitor": {"selector": {}}}, "gate": False}
NEW = {"metrics": {"serviceMonitor": {"additionalLabels": {}}}, "gate": True}


class FakeHelm:
    def __init__(self, broken=None):
        self.calls, self.values, self.broken = [], [], broken or {}

    def __call__(self, module, args, **kwargs):
        argv = list(args)[1:]
        self.calls.append(argv)
        if argv[0] in self.broken:
            return self.broken[argv[0]]
        if argv[0] == "template":
            with open(argv[argv.index("--values") + 1]) as handle:
                self.values.append(json.load(handle))
            return 0, "---\n# Source: kuberay-operator/crds/ray.io_rayclusters.yaml\n---\n" + yaml.safe_dump(CRD), ""
        if argv[:2] == ["show", "values"]:
            return 0, yaml.safe_dump(NEW), ""
        if argv[:2] == ["get", "all"]:
            return 0, json.dumps(OLD), ""
        if argv[:2] == ["get", "values"]:
            return 0, json.dumps({"metrics": {"serviceMonitor": {"selector": {"release": MARKER}}}}), ""
        raise AssertionError(argv)


def run(helm, releases=None):
    with patch_module_args({"releases": [RELEASE] if releases is None else releases}), \
            mock.patch.object(basic.AnsibleModule, "run_command", autospec=True, side_effect=helm), \
            mock.patch.object(basic.AnsibleModule, "get_bin_path", return_value="/usr/local/bin/helm"):
        with pytest.raises((ExitJson, FailJson)) as caught:
            helm_chart_upgrades.main()
    return caught.type is ExitJson, caught.value.args[0]


def test_reads_the_new_chart_and_the_deployed_one_and_keeps_the_values_out_of_the_result():
    helm = FakeHelm()
    ok, result = run(helm)
    assert ok and result["changed"] is False
    assert [c[:2] for c in helm.calls] == [["template", "kuberay-operator"], ["show", "values"], ["get", "all"],
                                           ["get", "values"]]
    assert helm.calls[0][helm.calls[0].index("--include-crds") - 1] == "https://charts.example/"
    assert helm.values == [RELEASE["values"]]  # the values reached helm through a file
    entry = result["upgrades"][0]
    assert entry["crds"] == [{"crds_dir": True, "object": CRD}]
    assert entry["values_renamed"] == [{"key": "metrics.serviceMonitor.selector",
                                        "candidates": ["metrics.serviceMonitor.additionalLabels"]}]
    assert entry["values_defaults"] == [{"key": "gate", "old": False, "new": True}]
    assert (entry["from_version"], entry["to_version"], entry["layer"]) == ("1.6.2", "1.7.0", "kuberay")
    assert MARKER not in json.dumps(result)
    assert ["template", "kuberay-operator", "--namespace", "kuberay"] == helm.calls[0][:4]
    assert "<values>" in result["commands"][0]


def test_a_failing_helm_is_named_without_the_values():
    ok, result = run(FakeHelm(broken={"template": (1, "", "Error: chart kuberay-operator 1.7.0 not found")}))
    assert not ok and "`helm template kuberay-operator" in result["msg"]
    assert "chart kuberay-operator 1.7.0 not found" in result["msg"] and MARKER not in json.dumps(result)


def test_a_bad_release_is_refused_before_helm_runs():
    helm = FakeHelm()
    ok, result = run(helm, [dict(RELEASE, name="Bad|Name")])
    assert not ok and "Helm release name 'Bad|Name' is invalid" in result["msg"] and helm.calls == []
