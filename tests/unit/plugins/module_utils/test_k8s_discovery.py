"""The served API table from aggregated discovery, and from the legacy discovery where a server lacks it.

The documents follow the Kubernetes API reference: aggregated discovery
(https://kubernetes.io/docs/concepts/overview/kubernetes-api/#aggregated-discovery; the types of
k8s.io/api/apidiscovery/v2: APIGroupDiscoveryList > APIGroupDiscovery > APIVersionDiscovery, "versions are in
descending order of preference, with the first version being the preferred entry" > APIResourceDiscovery with
resource, responseKind, scope and subresources; freshness Current or Stale) and the legacy discovery documents
(APIVersions, APIGroupList with preferredVersion, APIResourceList with name/sub entries for subresources).
"""
import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import discovery as d


VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def resource(plural, kind, group, version, namespaced=True, subresources=(), verbs=None):
    return {"resource": plural, "responseKind": {"group": group, "version": version, "kind": kind},
            "scope": "Namespaced" if namespaced else "Cluster", "singularResource": kind.lower(),
            "verbs": verbs or VERBS,
            "subresources": [{"subresource": s, "responseKind": {"group": group, "version": version, "kind": kind},
                              "verbs": ["get", "patch", "update"]} for s in subresources]}


def group(name, *versions, **freshness):
    return {"metadata": {"name": name}, "versions": [
        {"version": v, "resources": [resource(r[0], r[1], name, v, *r[2:]) for r in rs],
         "freshness": freshness.get(v, "Current")} for v, rs in versions]}


def aggregated_list(*groups):
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": list(groups)}


CORE = aggregated_list(group("", ("v1", [("pods", "Pod", True, ("status", "log")),
                                         ("namespaces", "Namespace", False, ()),
                                         ("endpoints", "Endpoints", True, ()),
                                         # A virtual kind: it takes a create only, no list (kube-apiserver's discovery).
                                         ("bindings", "Binding", True, (), ["create"])])))
APIS = aggregated_list(
    group("apps", ("v1", [("deployments", "Deployment", True, ("scale", "status"))])),
    group("kueue.x-k8s.io", ("v1beta2", [("localqueues", "LocalQueue", True, ()), ("clusterqueues", "ClusterQueue", False, ())]),
          ("v1beta1", [("localqueues", "LocalQueue", True, ()), ("clusterqueues", "ClusterQueue", False, ())])),
    group("visibility.kueue.x-k8s.io", ("v1beta1", [("clusterqueues", "ClusterQueue", False, ())]), v1beta1="Stale"),
)


def server(docs, unavailable=()):
    """A get(path, accept) over a dict of answers, recording what was asked."""
    asked = []

    def get(path, accept):
        asked.append((path, accept))
        if path in unavailable:
            raise d.Unavailable(path)
        return docs[path]
    return get, asked


def test_aggregated_documents_give_the_table_with_preferred_versions_first():
    table, stale = d.parse_aggregated(APIS)
    assert {"group": "apps", "version": "v1", "kind": "Deployment", "resource": "deployments", "namespaced": True,
            "preferred": True, "verbs": sorted(VERBS)} in table
    # The first version listed is the preferred one; every served version is a row.
    assert [(r["version"], r["preferred"]) for r in table if r["kind"] == "LocalQueue"] == [("v1beta2", True), ("v1beta1", False)]
    assert [r["namespaced"] for r in table if r["kind"] == "ClusterQueue"] == [False, False]
    # A Stale version (its aggregated API server did not answer) is left out and named.
    assert stale == ["visibility.kueue.x-k8s.io/v1beta1"]
    assert not [r for r in table if r["group"] == "visibility.kueue.x-k8s.io"]
    assert all(sorted(r) == sorted(d.KEYS + ("verbs",)) for r in table)


def test_subresources_are_not_rows():
    table, dummy = d.parse_aggregated(CORE)
    assert sorted(r["resource"] for r in table) == ["bindings", "endpoints", "namespaces", "pods"]
    assert d.api_kinds(table) == ["v1/Binding", "v1/Endpoints", "v1/Namespace", "v1/Pod"]


def test_two_calls_where_the_server_aggregates():
    get, asked = server({"/version": {"major": "1", "minor": "36", "gitVersion": "v1.36.0"}, "/api": CORE, "/apis": APIS})
    found = d.discover(get)
    assert [p for p, a in asked] == ["/version", "/api", "/apis"] == found["paths"]
    # What client-go sends: aggregated v2, then v2beta1, then the plain document.
    assert [a for p, a in asked][1:] == [d.ACCEPT] * 2
    assert d.ACCEPT.startswith("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,")
    assert found["aggregated"] and found["server_version"] == "1.36"
    assert found["stale"] == ["visibility.kueue.x-k8s.io/v1beta1"]
    assert d.api_resources(found["table"]) == ["clusterqueues.kueue.x-k8s.io", "deployments.apps", "localqueues.kueue.x-k8s.io"]
    del asked[:]
    assert d.discover(get, version=False)["version"] is None and [p for p, a in asked] == ["/api", "/apis"]


def test_the_lists_are_the_apiresourcelists_the_legacy_discovery_answers():
    """What kubernetes.core's discovery cache is built from: per group-version, the resources of its
    APIResourceList, a ``<plural>/<sub>`` entry per subresource that names its group and version only where they
    differ from the list's (deployments/scale answers autoscaling/v1 Scale); a Stale version has none."""
    get, dummy = server({"/api": CORE, "/apis": APIS})
    lists = d.discover(get, version=False)["lists"]
    assert [(g, v, p) for g, v, p, r in lists] == [("", "v1", True), ("apps", "v1", True), ("kueue.x-k8s.io", "v1beta2", True),
                                                   ("kueue.x-k8s.io", "v1beta1", False),
                                                   ("visibility.kueue.x-k8s.io", "v1beta1", True)]
    assert lists[-1][3] is None
    verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
    assert lists[0][3][:3] == [
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "verbs": verbs},
        {"name": "pods/status", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get", "patch", "update"]},
        {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get", "patch", "update"]}]
    scale = dict(resource("deployments", "Deployment", "apps", "v1", subresources=("scale",)), shortNames=["deploy"],
                 categories=["all"])
    scale["subresources"][0]["responseKind"] = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert d.legacy_resources("apps", "v1", {"resources": [scale]}) == [
        {"name": "deployments", "singularName": "deployment", "namespaced": True, "kind": "Deployment", "verbs": verbs,
         "shortNames": ["deploy"], "categories": ["all"]},
        {"name": "deployments/scale", "singularName": "", "namespaced": True, "kind": "Scale",
         "verbs": ["get", "patch", "update"], "group": "autoscaling", "version": "v1"}]


LEGACY = {
    "/version": {"major": "1", "minor": "29+", "gitVersion": "v1.29.4"},
    "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}},
        {"name": "kueue.x-k8s.io", "versions": [{"groupVersion": "kueue.x-k8s.io/v1beta2", "version": "v1beta2"},
                                                {"groupVersion": "kueue.x-k8s.io/v1beta1", "version": "v1beta1"}],
         "preferredVersion": {"groupVersion": "kueue.x-k8s.io/v1beta2", "version": "v1beta2"}},
        {"name": "visibility.kueue.x-k8s.io", "versions": [{"groupVersion": "visibility.kueue.x-k8s.io/v1beta1",
                                                            "version": "v1beta1"}],
         "preferredVersion": {"groupVersion": "visibility.kueue.x-k8s.io/v1beta1", "version": "v1beta1"}}]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "pods", "namespaced": True, "kind": "Pod", "verbs": VERBS},
        {"name": "pods/status", "namespaced": True, "kind": "Pod", "verbs": ["get", "patch", "update"]},
        {"name": "namespaces", "namespaced": False, "kind": "Namespace", "verbs": VERBS},
        {"name": "endpoints", "namespaced": True, "kind": "Endpoints", "verbs": VERBS},
        {"name": "bindings", "namespaced": True, "kind": "Binding", "verbs": ["create"]}]},
    "/apis/apps/v1": {"kind": "APIResourceList", "groupVersion": "apps/v1", "resources": [
        {"name": "deployments", "namespaced": True, "kind": "Deployment", "verbs": VERBS},
        {"name": "deployments/scale", "namespaced": True, "kind": "Scale", "verbs": ["get", "patch", "update"]}]},
    "/apis/kueue.x-k8s.io/v1beta2": {"kind": "APIResourceList", "groupVersion": "kueue.x-k8s.io/v1beta2", "resources": [
        {"name": "localqueues", "namespaced": True, "kind": "LocalQueue", "verbs": VERBS},
        {"name": "clusterqueues", "namespaced": False, "kind": "ClusterQueue", "verbs": VERBS}]},
    "/apis/kueue.x-k8s.io/v1beta1": {"kind": "APIResourceList", "groupVersion": "kueue.x-k8s.io/v1beta1", "resources": [
        {"name": "localqueues", "namespaced": True, "kind": "LocalQueue", "verbs": VERBS},
        {"name": "clusterqueues", "namespaced": False, "kind": "ClusterQueue", "verbs": VERBS}]},
}


def row_key(row):
    return (row["group"], row["version"], row["resource"])


def test_a_server_without_aggregation_is_read_group_version_by_group_version():
    get, asked = server(LEGACY, unavailable=["/apis/visibility.kueue.x-k8s.io/v1beta1"])
    found = d.discover(get)
    assert [p for p, a in asked] == ["/version", "/api", "/apis", "/api/v1", "/apis/apps/v1", "/apis/kueue.x-k8s.io/v1beta2",
                                     "/apis/kueue.x-k8s.io/v1beta1", "/apis/visibility.kueue.x-k8s.io/v1beta1"]
    assert not found["aggregated"] and found["server_version"] == "1.29"
    assert found["stale"] == ["visibility.kueue.x-k8s.io/v1beta1"]
    # The same table as the aggregated documents give.
    aggregated = d.discover(server({"/version": LEGACY["/version"], "/api": CORE, "/apis": APIS})[0])["table"]
    assert sorted(found["table"], key=row_key) == sorted(aggregated, key=row_key)


def test_one_aggregated_answer_and_one_plain_answer_are_both_read():
    """/api and /apis are served by different handlers; each answer is taken as it comes."""
    get, asked = server({"/version": LEGACY["/version"], "/api": LEGACY["/api"], "/api/v1": LEGACY["/api/v1"], "/apis": APIS})
    found = d.discover(get)
    assert [p for p, a in asked] == ["/version", "/api", "/apis", "/api/v1"]
    assert not found["aggregated"] and "v1/Pod" in d.api_kinds(found["table"]) and "apps/v1/Deployment" in d.api_kinds(found["table"])


@pytest.mark.parametrize("doc, message", [
    ({"kind": "Status", "status": "Failure"}, "answered Status, not an APIVersions"),
    (["v1"], "answered list"),
])
def test_an_answer_that_is_no_discovery_document_is_refused(doc, message):
    with pytest.raises(d.DiscoveryError, match=message):
        d.discover(server({"/version": LEGACY["/version"], "/api": doc, "/apis": APIS})[0])


@pytest.mark.parametrize("doc", [{"major": "", "minor": "36"}, {"gitVersion": "v1.36.0"}, "1.36"])
def test_a_version_without_major_and_minor_is_refused(doc):
    with pytest.raises(d.DiscoveryError, match="/version"):
        d.server_version(doc)


def test_lookups_prefer_the_asked_then_the_preferred_version():
    table = d.parse_aggregated(APIS)[0] + d.parse_aggregated(CORE)[0]
    assert d.find(table, "kueue.x-k8s.io", "LocalQueue")["version"] == "v1beta2"
    assert d.find(table, "kueue.x-k8s.io", "LocalQueue", "v1beta1")["version"] == "v1beta1"
    assert d.find(table, "kueue.x-k8s.io", "LocalQueue", "v1alpha1")["version"] == "v1beta2"
    assert d.find(table, "", "ConfigMap") is None
    # A kind of an older version only is not listed there: older versions may be deprecated.
    table.append(d.entry("kueue.x-k8s.io", "v1beta1", "OldQueue", "oldqueues", True, False))
    assert [(r["group"], r["kind"], r["version"]) for r in d.preferred_namespaced(table)] == [
        ("apps", "Deployment", "v1"), ("kueue.x-k8s.io", "LocalQueue", "v1beta2"), ("", "Pod", "v1"), ("", "Endpoints", "v1"),
        ("", "Binding", "v1")]
    # Asked for a verb, only the kinds that take it: v1 Binding takes a create only, no list.
    assert [(r["group"], r["kind"]) for r in d.preferred_namespaced(table, "list")] == [
        ("apps", "Deployment"), ("kueue.x-k8s.io", "LocalQueue"), ("", "Pod"), ("", "Endpoints")]
    assert [r["kind"] for r in d.preferred_namespaced(table, "create")] == ["Deployment", "LocalQueue", "Pod", "Endpoints",
                                                                            "Binding"]
    queue = d.find(table, "kueue.x-k8s.io", "LocalQueue")
    assert d.path(queue, "team-a", "default") == "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues/default"
    assert d.path(d.find(table, "", "Namespace"), "ignored", "team-a") == "/api/v1/namespaces/team-a"
    assert d.path(queue) == "/apis/kueue.x-k8s.io/v1beta2/localqueues"
    # A name is one path segment, whatever it holds.
    assert d.path(queue, "team-a", "a/../b?x") == "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues/a%2F..%2Fb%3Fx"


def test_a_table_given_as_an_option_is_checked():
    assert d.check_table([]) == []
    with pytest.raises(d.DiscoveryError, match="must be a list"):
        d.check_table({"group": ""})
    with pytest.raises(d.DiscoveryError, match="lacks namespaced, preferred"):
        d.check_table([{"group": "", "version": "v1", "kind": "Pod", "resource": "pods"}])
    pod = d.entry("", "v1", "Pod", "pods", True, True, ["list", "get"])
    assert d.check_table([pod]) == [pod] and pod["verbs"] == ["get", "list"]
    with pytest.raises(d.DiscoveryError, match="verbs must be a list of strings"):
        d.check_table([dict(pod, verbs="list")])


def test_a_row_allows_the_verbs_discovery_names_and_a_hand_built_row_any():
    """APIResource.verbs (API reference): what a resource takes; a row without verbs was built by hand."""
    binding = d.entry("", "v1", "Binding", "bindings", True, True, ["create"])
    assert d.allows(binding, "create") and not d.allows(binding, "list")
    assert not d.allows(d.entry("", "v1", "Pod", "pods", True, True, []), "list")
    assert d.allows(d.entry("", "v1", "Pod", "pods", True, True), "list")


def test_the_nodes_of_a_list_answer_keep_only_what_the_roles_read_and_a_bad_answer_is_refused():
    taint = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
    applied = {"manager": "gpuops-platform", "operation": "Apply", "apiVersion": "v1", "time": "2026-11-28T00:00:00Z",
               "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}}}}
    updated = {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
               "fieldsV1": {"f:status": {"f:allocatable": {}}}}
    doc = {"kind": "NodeList", "items": [
        {"metadata": {"name": "gpu-b", "labels": {"a": "b"}, "resourceVersion": "9", "uid": "u",
                      "managedFields": [applied, updated]}, "spec": {"taints": [taint], "podCIDR": "10.0.0.0/24"},
         "status": {"allocatable": {"nvidia.com/gpu": "8"}, "images": [{"names": ["big"]}]}},
        {"metadata": {"name": "gpu-a"}, "spec": {}}]}
    kept = dict((k, v) for k, v in applied.items() if k != "time")
    assert d.nodes(doc) == [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a"}, "spec": {"taints": []},
         "status": {"allocatable": {}}},
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": "gpu-b", "resourceVersion": "9", "labels": {"a": "b"}, "managedFields": [kept]},
         "spec": {"taints": [taint]}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}]
    assert d.nodes({"kind": "NodeList", "items": []}) == []
    for bad, message in (({"kind": "Status"}, "did not answer with a list"), ({"items": [{"metadata": {}}]}, "no metadata.name"),
                         ({"items": [{"metadata": {"name": "n"}, "spec": {"taints": "gpu"}}]}, "Node n whose spec.taints"),
                         ({"items": [{"metadata": {"name": "n"}, "spec": {"taints": ["gpu"]}}]}, "Node n whose spec.taints")):
        with pytest.raises(d.DiscoveryError, match="GET /api/v1/nodes .*" + message):
            d.nodes(bad)


def test_the_names_of_a_list_answer_are_read_sorted_and_a_bad_answer_is_refused():
    doc = {"kind": "NamespaceList", "items": [{"metadata": {"name": "team-b"}}, {"metadata": {"name": "default"}}]}
    assert d.names(doc) == ["default", "team-b"]
    assert d.names({"kind": "NamespaceList", "items": []}) == []
    for bad in ({"kind": "Status"}, {"items": "x"}, [], {"items": [{"metadata": {}}]}, {"items": [{"metadata": {"name": 7}}]},
                {"items": ["default"]}):
        with pytest.raises(d.DiscoveryError, match="GET /api/v1/namespaces"):
            d.names(bad)
