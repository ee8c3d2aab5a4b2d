"""The helm_chart_upgrades module on what a fake helm prints: the commands it runs (the values only in a private
file), what it returns, and a failing helm named without the values."""
import copy
import json
from unittest import mock

import pytest
import yaml

from support.module_args import ExitJson, FailJson, patch_module_args

from ansible.module_utils import basic
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import NotFoundError
from ansible_collections.gpuops.platform.plugins.module_utils._k8s import upgrade
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
        # The deployed release's manifest and crds/ files, as DEPLOYED_CRDS_TEMPLATE prints them.
        self.template = CRD  # the new chart's CRD
        self.deployed = "---\n# Source: kuberay-operator/crds/ray.io_rayclusters.yaml\n" + yaml.safe_dump(CRD)

    def __call__(self, module, args, **kwargs):
        argv = list(args)[1:]
        self.calls.append(argv)
        if argv[0] in self.broken:
            return self.broken[argv[0]]
        if argv[0] == "template":
            with open(argv[argv.index("--values") + 1]) as handle:
                self.values.append(json.load(handle))
            return 0, "---\n# Source: kuberay-operator/crds/ray.io_rayclusters.yaml\n---\n" + yaml.safe_dump(self.template), ""
        if argv[:2] == ["show", "values"]:
            return 0, yaml.safe_dump(NEW), ""
        if argv[:2] == ["get", "all"] and argv[-1] == upgrade.DEPLOYED_CRDS_TEMPLATE:
            return 0, self.deployed, ""
        if argv[:2] == ["get", "all"]:
            return 0, json.dumps(OLD), ""
        if argv[:2] == ["get", "values"]:
            return 0, json.dumps({"metrics": {"serviceMonitor": {"selector": {"release": MARKER}}}}), ""
        raise AssertionError(argv)


class FakeApi:
    """kubernetes.core's client as the module's Api uses it (client.client.request by path); a missing object is
    kubernetes' NotFoundError, as the dynamic client raises it for a 404."""

    def __init__(self, objects=None, down=False, lists=None):
        self.objects, self.down, self.requests, self.auth = dict(objects or {}), down, [], None
        self.lists = dict(lists or {})  # LIST answers (their items) by path
        self.client = self

    def connect(self, **auth):
        self.auth = auth
        return self

    def request(self, method, path, serializer=None, **params):
        self.requests.append((method, path))
        if self.down:
            raise ConnectionRefusedError("[Errno 111] Connection refused")
        if path in self.lists:
            return {"items": json.loads(json.dumps(self.lists[path]))}
        if path not in self.objects:
            raise NotFoundError(ApiException(status=404, reason="Not Found"))
        return json.loads(json.dumps(self.objects[path]))


CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/rayclusters.ray.io"
LIVE = dict(CRD, status={"storedVersions": ["v1"]})


def run(helm, releases=None, api=None, args=None):
    api = FakeApi({CRD_PATH: LIVE}) if api is None else api
    with patch_module_args(dict({"releases": [RELEASE] if releases is None else releases}, **(args or {}))), \
            mock.patch.object(basic.AnsibleModule, "run_command", autospec=True, side_effect=helm), \
            mock.patch.object(basic.AnsibleModule, "get_bin_path", return_value="/usr/local/bin/helm"), \
            mock.patch.object(helm_chart_upgrades, "get_api_client", side_effect=api.connect):
        with pytest.raises((ExitJson, FailJson)) as caught:
            helm_chart_upgrades.main()
    return caught.type is ExitJson, caught.value.args[0]


def test_the_clusters_crds_of_the_new_charts_names_are_read_through_the_same_connection(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    api = FakeApi({CRD_PATH: LIVE})
    ok, result = run(FakeHelm(), api=api, args={"host": "https://10.0.0.1:6443", "kubeconfig": str(kubeconfig)})
    assert ok and result["live_crds"] == [LIVE]
    assert api.requests == [("GET", CRD_PATH)]
    assert api.auth["host"] == "https://10.0.0.1:6443" and api.auth["kubeconfig"] == str(kubeconfig)
    # A CRD the cluster lacks is left out; no CRD in the charts, no call.
    api = FakeApi()
    assert run(FakeHelm(), api=api)[1]["live_crds"] == [] and api.requests == [("GET", CRD_PATH)]
    api = FakeApi()
    ok, result = run(FakeHelm(), releases=[], api=api)
    assert ok and result["live_crds"] == [] and api.requests == [] and api.auth is None


def test_an_unreachable_api_fails_naming_the_step():
    ok, result = run(FakeHelm(), api=FakeApi(down=True))
    assert not ok and "Reading the cluster's CRDs that the charts ship, and their objects, failed" in result["msg"]
    assert "Connection refused" in result["msg"] and MARKER not in json.dumps(result)


def test_reads_the_new_chart_and_the_deployed_one_and_keeps_the_values_out_of_the_result():
    helm = FakeHelm()
    ok, result = run(helm)
    assert ok and result["changed"] is False
    assert [c[:2] for c in helm.calls] == [["template", "kuberay-operator"], ["show", "values"], ["get", "all"],
                                           ["get", "values"], ["get", "all"]]
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


def test_the_crds_the_deployed_chart_ships_and_the_new_one_drops_are_read_and_named():
    # The deployed chart shipped rayjobs.ray.io too (from its templates): it is read from the cluster with the new
    # chart's CRDs, and the upgrade names it.
    helm = FakeHelm()
    jobs = dict(CRD, metadata={"name": "rayjobs.ray.io"}, spec=dict(CRD["spec"], names={"plural": "rayjobs", "kind": "RayJob"}))
    helm.deployed += "---\n# Source: kuberay-operator/templates/rayjobs.yaml\n" + yaml.safe_dump(jobs)
    jobs_path = CRD_PATH.replace("rayclusters", "rayjobs")
    api = FakeApi({CRD_PATH: LIVE, jobs_path: dict(jobs, status={"storedVersions": ["v1"]})})
    ok, result = run(helm, api=api)
    assert ok and result["upgrades"][0]["previous_crds"] == [{"name": "rayclusters.ray.io", "deleted": False},
                                                             {"name": "rayjobs.ray.io", "deleted": True}]
    assert sorted(c["metadata"]["name"] for c in result["live_crds"]) == ["rayclusters.ray.io", "rayjobs.ray.io"]
    assert result["upgrades"][0]["held"] == []
    assert result["commands"][-1][-1] == "<the deployed chart's CRDs>"


def test_the_objects_holding_a_field_the_new_crd_drops_are_listed_and_named():
    # The live CRD has spec.size in v1, the new chart's does not: the RayClusters are listed through v1 and those
    # holding spec.size are named; one LIST, and none when no field or version goes.
    live = copy.deepcopy(LIVE)
    live["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}, "name": {"type": "string"}}}}}}
    new = copy.deepcopy(live)
    del new["status"]
    del new["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]
    helm = FakeHelm()
    helm.template = new
    listing = "/apis/ray.io/v1/rayclusters"
    api = FakeApi({CRD_PATH: live}, lists={listing: [
        {"metadata": {"name": "big", "namespace": "ray"}, "spec": {"size": 3}},
        {"metadata": {"name": "small", "namespace": "ray"}, "spec": {"name": "s"}}]})
    ok, result = run(helm, api=api)
    assert ok, result
    assert result["upgrades"][0]["held"] == [{"crd": "rayclusters.ray.io", "kind": "RayCluster", "version": "v1",
                                              "fields": ["spec.size"],
                                              "objects": [{"name": "ray/big", "fields": ["spec.size"]}]}]
    assert api.requests == [("GET", CRD_PATH), ("GET", listing)]
