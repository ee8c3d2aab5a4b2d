"""gpuops.platform.k8s_discovery against the in-memory API server: what it asks and what it returns.

Aggregated discovery follows https://kubernetes.io/docs/concepts/overview/kubernetes-api/#aggregated-discovery
(/api and /apis answer one APIGroupDiscoveryList each, versions preferred first); a server before 1.30, or with
aggregation off (``server.aggregated = False``), answers the legacy APIVersions/APIGroupList and one
APIResourceList per group-version (https://kubernetes.io/docs/concepts/overview/kubernetes-api/#discovery-api).
"""
import json
import tempfile
from pathlib import Path

import kubernetes.client
import pytest

from fake_apiserver import RESOURCES, FakeAPIServer
from support.module_args import ExitJson, FailJson, patch_module_args

from ansible_collections.gpuops.platform.plugins.modules import k8s_discovery
from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client as k8s_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client

pytestmark = pytest.mark.usefixtures("module_exits")


@pytest.fixture(autouse=True)
def fresh_discovery(monkeypatch, tmp_path):
    """kubernetes.core keeps a client per server URL in memory and its discovery cache in a file under the temp
    dir: a server on a port an earlier test's server had would be read as that one."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(k8s_client, "_pool", {})
    # A kubeconfig that a module loads becomes the kubernetes client's default configuration, for the rest of
    # the process: one process per module run in Ansible, one for every test here.
    monkeypatch.setattr(kubernetes.client.Configuration, "_default", None)


def discover(api, **args):
    with patch_module_args(dict(dict(host=api.url, api_key="t0ken"), **args)):
        with pytest.raises((ExitJson, FailJson)) as err:
            k8s_discovery.main()
    return err.value.args[0]


def warm(api):
    """What any earlier kubernetes.core client of the run leaves: its discovery cache file for this server."""
    get_api_client(host=api.url, api_key="t0ken")
    k8s_client._pool.clear()
    del api.requests[:]


def row_key(row):
    return (row["group"], row["version"], row["resource"])


def paths(api):
    return [r[1] for r in api.requests]


def test_aggregated_discovery_takes_api_and_apis():
    with FakeAPIServer(version="1.36") as api:
        warm(api)
        result = discover(api)
        # The version is the one kubernetes.core's client read from the server for its cache file.
        assert paths(api) == ["/api", "/apis"] == result["requests"]
        assert result["aggregated"] and result["server_version"] == "1.36" and result["stale"] == []
        assert not result["changed"]
        table = result["api_table"]
        assert {"group": "apps", "version": "v1", "kind": "Deployment", "resource": "deployments", "namespaced": True,
                "preferred": True} not in table  # the fake serves no apps group
        every = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        assert {"group": "", "version": "v1", "kind": "Secret", "resource": "secrets", "namespaced": True,
                "preferred": True, "verbs": every} in table
        assert {"group": "kueue.x-k8s.io", "version": "v1beta1", "kind": "LocalQueue", "resource": "localqueues",
                "namespaced": True, "preferred": False, "verbs": every} in table
        # Each row carries its discovery verbs: the review kinds and v1 Binding take a create only.
        assert {"group": "authorization.k8s.io", "version": "v1", "kind": "LocalSubjectAccessReview",
                "resource": "localsubjectaccessreviews", "namespaced": True, "preferred": True, "verbs": ["create"]} in table
        assert [r["verbs"] for r in table if r["resource"] == "bindings"] == [["create"]]
        assert all(sorted(row) == ["group", "kind", "namespaced", "preferred", "resource", "verbs", "version"] for row in table)
        # Every served resource and version, once.
        assert sorted((r["group"], r["version"], r["resource"]) for r in table) == sorted(
            (gv.rpartition("/")[0], gv.rpartition("/")[2], plural) for gv, rows in RESOURCES.items() for plural, k, n in rows)
        assert "kueue.x-k8s.io/v1beta2/ClusterQueue" in result["api_kinds"]
        assert "clusterqueues.kueue.x-k8s.io" in result["api_resources"]


def test_the_namespaces_are_listed_in_the_same_run_only_when_asked():
    with FakeAPIServer(version="1.36") as api:
        for name in ("team-b", "gpu-operator"):
            api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        warm(api)
        assert discover(api)["namespaces"] == [] and "/api/v1/namespaces" not in paths(api)
        del api.requests[:]
        result = discover(api, namespaces=True)
        assert paths(api) == ["/api", "/apis", "/api/v1/namespaces"] == result["requests"]
        assert result["namespaces"] == sorted(o["metadata"]["name"] for o in api.objects.values() if o["kind"] == "Namespace")
        assert {"gpu-operator", "team-b"} <= set(result["namespaces"])


def test_the_nodes_are_listed_in_the_same_run_only_when_asked():
    with FakeAPIServer(version="1.36") as api:
        taint = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
        api.add({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-b", "labels": {"x": "y"}},
                 "spec": {"taints": [taint]}})
        api.add({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a"}})
        warm(api)
        assert discover(api)["nodes"] == [] and "/api/v1/nodes" not in paths(api)
        del api.requests[:]
        result = discover(api, nodes=True, namespaces=True)
        assert paths(api) == ["/api", "/apis", "/api/v1/namespaces", "/api/v1/nodes"] == result["requests"]
        version = dict((n, api.get("Node", n)["metadata"]["resourceVersion"]) for n in ("gpu-a", "gpu-b"))
        assert result["nodes"] == [
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a", "resourceVersion": version["gpu-a"]},
             "spec": {"taints": []}, "status": {"allocatable": {}}},
            {"apiVersion": "v1", "kind": "Node",
             "metadata": {"name": "gpu-b", "resourceVersion": version["gpu-b"], "labels": {"x": "y"}},
             "spec": {"taints": [taint]}, "status": {"allocatable": {}}}]


def test_a_server_without_aggregation_is_asked_each_group_version():
    with FakeAPIServer(version="1.29") as api:
        api.aggregated = False
        warm(api)
        legacy = discover(api)
        group_versions = sorted(RESOURCES)
        assert len(api.requests) == 2 + len(group_versions)
        assert paths(api)[:2] == ["/api", "/apis"]
        assert sorted(paths(api)[2:]) == sorted("/api/" + gv if "/" not in gv else "/apis/" + gv for gv in group_versions)
        assert not legacy["aggregated"] and legacy["server_version"] == "1.29"
    # The same table as the aggregated answer gives.
    with FakeAPIServer(version="1.29") as api:
        aggregated = discover(api)
    assert sorted(legacy["api_table"], key=row_key) == sorted(aggregated["api_table"], key=row_key)
    assert legacy["api_kinds"] == aggregated["api_kinds"] and legacy["api_resources"] == aggregated["api_resources"]


def test_a_crd_established_later_is_in_the_next_discovery():
    """A custom resource is served once its CRD is Established (CustomResourceDefinition, API reference)."""
    with FakeAPIServer() as api:
        api.served["example.com/v1"] = [("widgets", "Widget", True)]
        result = discover(api)
        assert {"group": "example.com", "version": "v1", "kind": "Widget", "resource": "widgets", "namespaced": True,
                "preferred": True, "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                                             "watch"]} in result["api_table"]
        assert "widgets.example.com" in result["api_resources"]


def cache_file():
    """kubernetes.core's discovery cache file (k8srcp-<digest of server and user>.json) in the test's temp dir."""
    found = list(Path(tempfile.gettempdir()).glob("k8srcp-*.json"))
    assert len(found) == 1, found
    return found[0]


def test_without_a_cache_file_the_client_asks_version_and_apis_once_and_nothing_later():
    """kubernetes.core's client (get_api_client) reads its discovery cache file when it starts; without one it asks
    /version and /apis to write it. The module then fills the file with every served resource, so that no later
    client of the run asks /version, /apis or any group-version again."""
    with FakeAPIServer(version="1.36") as api:
        result = discover(api)
        assert paths(api) == ["/version", "/apis", "/api", "/apis"]
        assert result["requests"] == ["/api", "/apis"] and result["server_version"] == "1.36"
        del api.requests[:]
        k8s_client._pool.clear()
        # A later kubernetes.core client, and lookups of resources of each kind of group: none asks the server.
        later = get_api_client(host=api.url, api_key="t0ken")
        assert later.client.version["kubernetes"]["gitVersion"] == "v1.36.0"
        node = later.resource("Node", "v1")
        assert (node.name, node.namespaced, sorted(node.subresources)) == ("nodes", False, ["proxy", "status"])
        assert later.resource("LocalQueue", "kueue.x-k8s.io/v1beta1").preferred is False
        assert later.resource("ClusterQueue", "kueue.x-k8s.io/v1beta2").name == "clusterqueues"
        assert later.resource("NetworkPolicyList", "networking.k8s.io/v1").base_resource().name == "networkpolicies"
        assert paths(api) == []
        k8s_client._pool.clear()
        assert discover(api)["requests"] == paths(api) == ["/api", "/apis"]


def _kubernetes_cores_own_cache(api):
    """The cache file that kubernetes.core's discoverer writes itself once it has read every group-version."""
    client = get_api_client(host=api.url, api_key="t0ken")
    assert len(list(client.client.resources)) > len(RESOURCES)  # reads each group-version, writes the file
    k8s_client._pool.clear()
    path = cache_file()
    written = json.loads(path.read_text())
    path.unlink()
    return written


@pytest.mark.parametrize("aggregated", [True, False], ids=["aggregated", "legacy"])
def test_the_cache_file_is_the_one_kubernetes_core_writes_itself(aggregated):
    """Pins the cache format to the real discoverer: the file the module writes from its discovery is the file
    kubernetes.core's LazyDiscoverer (over kubernetes.dynamic's) writes after reading each group-version on its own."""
    with FakeAPIServer() as api:
        api.aggregated = aggregated
        api.served["example.com/v1"] = [("widgets", "Widget", True)]
        own = _kubernetes_cores_own_cache(api)
        discover(api)
        assert json.loads(cache_file().read_text()) == own
        assert own["resources"]["api"][""]["v1"]["resources"]["Node"][0]["subresources"]["status"]["verbs"]


def test_the_version_is_asked_again_when_the_served_apis_changed_since_the_cache():
    """kubernetes.core asks /version again when its cache misses a kind; so does the module when the served
    group-versions or resources differ from its cache's (an upgrade: Kubernetes 1.34 serves resource.k8s.io/v1)."""
    with FakeAPIServer(version="1.33") as api:
        assert discover(api)["server_version"] == "1.33"
        api.version = "1.34"
        api.served["resource.k8s.io/v1"] = [("deviceclasses", "DeviceClass", False)]
        del api.requests[:]
        k8s_client._pool.clear()
        upgraded = discover(api)
        assert upgraded["requests"] == paths(api) == ["/api", "/apis", "/version"]
        assert upgraded["server_version"] == "1.34" and upgraded["version"]["gitVersion"] == "v1.34.0"
        assert json.loads(cache_file().read_text())["version"]["kubernetes"]["minor"] == "34"
        # A CRD established since changes the resources of a cached group-version.
        api.served["resource.k8s.io/v1"].append(("resourceclaims", "ResourceClaim", True))
        del api.requests[:]
        k8s_client._pool.clear()
        assert discover(api)["requests"] == ["/api", "/apis", "/version"]
        del api.requests[:]
        k8s_client._pool.clear()
        assert discover(api)["requests"] == ["/api", "/apis"]


def test_an_unreachable_server_fails_with_the_reason():
    with FakeAPIServer() as api:
        url = api.url
    with patch_module_args(dict(host=url, api_key="t0ken")):
        with pytest.raises(FailJson) as err:
            k8s_discovery.main()
    assert "Max retries exceeded" in err.value.args[0]["msg"] or "Connection refused" in err.value.args[0]["msg"]
    assert "t0ken" not in str(err.value.args[0])


def _token_folders():
    return sorted(Path(tempfile.gettempdir()).glob("gpuops-k8s-*"))


def test_with_token_kubeconfig_the_token_goes_into_a_private_kubeconfig_that_every_call_and_later_client_uses():
    with FakeAPIServer(version="1.36") as api:
        result = discover(api, api_key="s3cret-token", token_kubeconfig=True)
        path = Path(result["token_kubeconfig"])
        assert [p.parent for p in [path]] == _token_folders() and path.name == "kubeconfig"
        assert oct(path.stat().st_mode & 0o777) == "0o600" and oct(path.parent.stat().st_mode & 0o777) == "0o700"
        assert json.loads(path.read_text())["users"] == [{"name": "gpuops", "user": {"token": "s3cret-token"}}]
        # Every call carried the token, read from that file; the token is in no part of the result.
        assert api.authorizations == {"Bearer s3cret-token"} and "s3cret-token" not in repr(result)
        assert result["requests"] == ["/api", "/apis"] and result["server_version"] == "1.36"
        # A later module of the run connects through the same file (the play's module_defaults) and finds the
        # discovery cache this run filled: it asks the server nothing.
        del api.requests[:]
        k8s_client._pool.clear()
        later = get_api_client(kubeconfig=str(path), host=api.url)
        assert later.resource("ClusterQueue", "kueue.x-k8s.io/v1beta2").name == "clusterqueues"
        assert paths(api) == []


def test_without_token_kubeconfig_no_file_is_written():
    with FakeAPIServer() as api:
        assert discover(api)["token_kubeconfig"] == "" and _token_folders() == []


def test_a_failed_discovery_removes_the_token_kubeconfig_it_wrote():
    with FakeAPIServer() as api:
        url = api.url
    with patch_module_args(dict(host=url, api_key="s3cret-token", token_kubeconfig=True)):
        with pytest.raises(FailJson) as err:
            k8s_discovery.main()
    assert "Max retries exceeded" in err.value.args[0]["msg"] or "Connection refused" in err.value.args[0]["msg"]
    assert "s3cret-token" not in str(err.value.args[0])
    assert _token_folders() == []


REFUSED = [{"kubeconfig": "/etc/kubernetes/admin.conf"}, {"context": "admin"}, {"host": ""}, {"api_key": "two\nlines"}]


@pytest.mark.parametrize("given", REFUSED, ids=["kubeconfig", "context", "no-host", "line-break"])
def test_token_kubeconfig_refuses_what_would_replace_or_break_the_token_before_any_call(given):
    with FakeAPIServer() as api:
        result = discover(api, token_kubeconfig=True, **given)
        assert result["msg"].startswith("token_kubeconfig: ") and "api_table" not in result
        assert api.requests == [] and _token_folders() == []
        assert "t0ken" not in result["msg"]


def test_a_token_kubeconfig_of_an_earlier_play_of_the_run_is_replaced():
    """module_defaults pass the kubeconfig an earlier play wrote (and removed) for its token: a new one is written."""
    with FakeAPIServer() as api:
        earlier = discover(api, token_kubeconfig=True)["token_kubeconfig"]
        k8s_client._pool.clear()
        result = discover(api, token_kubeconfig=True, kubeconfig=earlier)
        assert not result.get("failed") and result["token_kubeconfig"] not in ("", earlier)
