# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the served API table (pure).
"""Which resources a Kubernetes API server serves, in as few calls as it allows.

Aggregated discovery (https://kubernetes.io/docs/concepts/overview/kubernetes-api/#aggregated-discovery,
Kubernetes 1.30+): ``GET /api`` and ``GET /apis`` with the Accept header below
(what client-go sends) answer an ``APIGroupDiscoveryList`` (apidiscovery.k8s.io/v2)
that names every group, its versions (preferred first) and each version's
resources: two calls for the whole table. A server that does not aggregate
answers an ``APIVersions`` (/api) or ``APIGroupList`` (/apis) instead; then each
served group-version is asked on its own (``GET /api/v1``, ``GET /apis/<g>/<v>``),
the legacy discovery, so that nothing is lost.

The table is a list of dicts, one per served top-level resource (subresources
are not listed), each exactly::

    {"group": "apps", "version": "v1", "kind": "Deployment", "resource": "deployments",
     "namespaced": True, "preferred": True, "verbs": ["create", "delete", ..., "list", ...]}

``preferred``: this version is the group's preferred one. ``verbs``: what the
resource takes, as discovery names them (APIResource.verbs); a virtual kind such
as v1 Binding or authorization.k8s.io's LocalSubjectAccessReview takes only
``create``, so a list of it is 405 MethodNotAllowed. A row built by hand may
lack ``verbs``; it is then taken to allow every verb. The functions here are
pure; the one that reads the server takes a ``get(path, accept)`` callable.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.six.moves.urllib.parse import quote

# Aggregated discovery first (v2, then v2beta1 for 1.26-1.29 servers), plain JSON last, as client-go asks.
AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
ACCEPT = ",".join([AGGREGATED_V2, AGGREGATED_V2BETA1, "application/json"])
JSON = "application/json"
AGGREGATED_KIND = "APIGroupDiscoveryList"
STALE = "Stale"
KEYS = ("group", "version", "kind", "resource", "namespaced", "preferred")
VERBS = "verbs"  # a row key that discovery always fills; optional in a table given by hand


class DiscoveryError(Exception):
    """The server's discovery answer is not what the API reference describes."""


class Unavailable(Exception):
    """A group-version that cannot be read now (503 from an aggregated API without endpoints, or 404)."""


def entry(group, version, kind, resource, namespaced, preferred, verbs=None):
    """One row of the table; ``verbs`` (the discovery document's) only where known."""
    row = {"group": group or "", "version": version, "kind": kind, "resource": resource,
           "namespaced": bool(namespaced), "preferred": bool(preferred)}
    if verbs is not None:
        row[VERBS] = sorted(set(verbs))
    return row


def allows(row, verb):
    """Whether a row's resource takes ``verb`` (``list``, ``create``...): its discovery verbs name it, or the row
    names no verbs (built by hand)."""
    return VERBS not in row or verb in (row[VERBS] or [])


def group_version(group, version):
    """``v1`` for the core group, else ``<group>/<version>`` (an object's apiVersion)."""
    return "%s/%s" % (group, version) if group else version


def split_api_version(api_version):
    """``(group, version)`` of an apiVersion string."""
    group, dummy, version = (api_version or "").rpartition("/")
    return group, version


def _need(doc, kinds, path):
    if not isinstance(doc, dict) or doc.get("kind") not in kinds:
        what = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
        raise DiscoveryError("GET %s answered %s, not an %s" % (path, what, " or ".join(kinds)))
    return doc


def aggregated(doc):
    """Whether a /api or /apis answer is the aggregated APIGroupDiscoveryList."""
    return isinstance(doc, dict) and doc.get("kind") == AGGREGATED_KIND


def parse_aggregated(doc):
    """``(table, stale)`` of an APIGroupDiscoveryList (apidiscovery.k8s.io/v2 or v2beta1).

    Each APIGroupDiscovery lists its versions in descending order of preference, the
    first being the preferred one; each APIVersionDiscovery lists its resources
    (``resource``, ``responseKind``, ``scope`` Namespaced or Cluster, and their
    ``subresources``, which are not rows). A version whose ``freshness`` is Stale
    (an aggregated API server that did not answer) is left out, as client-go
    does, and named in ``stale``.
    """
    _need(doc, (AGGREGATED_KIND,), "/api(s)")
    table, stale = [], []
    for group_doc in doc.get("items") or []:
        group = (group_doc.get("metadata") or {}).get("name") or ""
        for index, version_doc in enumerate(group_doc.get("versions") or []):
            version = version_doc.get("version")
            if not version:
                raise DiscoveryError("group %r lists a version without a name" % group)
            if version_doc.get("freshness") == STALE:
                stale.append(group_version(group, version))
                continue
            for res in version_doc.get("resources") or []:
                kind = (res.get("responseKind") or {}).get("kind")
                if not res.get("resource") or not kind:
                    continue  # nothing a request could name
                table.append(entry(group, version, kind, res["resource"], res.get("scope") == "Namespaced", index == 0,
                                   res.get("verbs") or []))
    return table, stale


def _legacy_subresource(group, version, parent, namespaced, sub):
    """The ``<plural>/<sub>`` entry of an APIResourceList for one APISubresourceDiscovery."""
    kind = sub.get("responseKind") or {}
    out = {"name": "%s/%s" % (parent, sub["subresource"]), "singularName": "", "namespaced": namespaced,
           "kind": kind.get("kind"), "verbs": sub.get("verbs") or []}
    # An APIResource names a group and version only where they differ from its list's (deployments/scale:
    # autoscaling/v1 Scale); the aggregated document names them always.
    other = (kind.get("group") or "", kind.get("version") or version)
    if other != (group, version):
        out["group"], out["version"] = other
    return out


def legacy_resources(group, version, version_doc):
    """The ``resources`` of the APIResourceList that the legacy discovery answers for one APIVersionDiscovery
    (``GET /apis/<group>/<version>``): name, singularName, namespaced, kind, verbs, shortNames and categories
    of each resource, then a ``<plural>/<sub>`` entry per subresource. The legacy list also names a
    storageVersionHash, which the aggregated document does not carry."""
    out = []
    for res in version_doc.get("resources") or []:
        kind = (res.get("responseKind") or {}).get("kind")
        if not res.get("resource") or not kind:
            continue  # nothing a request could name
        namespaced = res.get("scope") == "Namespaced"
        doc = {"name": res["resource"], "singularName": res.get("singularResource") or "", "namespaced": namespaced,
               "kind": kind, "verbs": res.get("verbs") or []}
        for key in ("shortNames", "categories"):
            if res.get(key):
                doc[key] = res[key]
        out.append(doc)
        out += [_legacy_subresource(group, version, res["resource"], namespaced, sub)
                for sub in res.get("subresources") or [] if sub.get("subresource")]
    return out


def aggregated_lists(doc):
    """``[(group, version, preferred, resources)]`` of an APIGroupDiscoveryList, ``resources`` as the legacy
    APIResourceList has them (legacy_resources), None for a Stale version."""
    _need(doc, (AGGREGATED_KIND,), "/api(s)")
    out = []
    for group_doc in doc.get("items") or []:
        group = (group_doc.get("metadata") or {}).get("name") or ""
        for index, version_doc in enumerate(group_doc.get("versions") or []):
            version = version_doc.get("version")
            fresh = version_doc.get("freshness") != STALE
            out.append((group, version, index == 0, legacy_resources(group, version, version_doc) if fresh else None))
    return out


def legacy_group_versions(core_doc, groups_doc):
    """``[(group, version, preferred)]`` every served group-version, from an APIVersions (/api) and an
    APIGroupList (/apis); either may be None (not asked)."""
    out = []
    if core_doc is not None:
        for index, version in enumerate(_need(core_doc, ("APIVersions",), "/api").get("versions") or []):
            out.append(("", version, index == 0))
    if groups_doc is not None:
        for group_doc in _need(groups_doc, ("APIGroupList",), "/apis").get("groups") or []:
            preferred = (group_doc.get("preferredVersion") or {}).get("version")
            for version_doc in group_doc.get("versions") or []:
                out.append((group_doc["name"], version_doc["version"], version_doc["version"] == preferred))
    return out


def parse_resource_list(group, version, preferred, doc):
    """The rows of one group-version's APIResourceList (legacy discovery); ``name/sub`` entries are subresources."""
    _need(doc, ("APIResourceList",), group_version_path(group, version))
    return [entry(group, version, res["kind"], res["name"], res.get("namespaced"), preferred, res.get("verbs") or [])
            for res in doc.get("resources") or [] if res.get("name") and "/" not in res["name"] and res.get("kind")]


def group_version_path(group, version):
    """The discovery path of one group-version."""
    return "/apis/%s/%s" % (group, version) if group else "/api/%s" % version


def server_version(doc):
    """``major.minor`` of a /version answer (version.Info), digits only (``1.36+`` -> ``1.36``)."""
    if not isinstance(doc, dict):
        raise DiscoveryError("GET /version answered %r, not a version.Info" % (doc,))
    major, minor = (re.sub(r"[^0-9]", "", str(doc.get(k) or "")) for k in ("major", "minor"))
    if not major or not minor:
        raise DiscoveryError("GET /version answered major %r, minor %r: no Kubernetes version"
                             % (doc.get("major"), doc.get("minor")))
    return "%s.%s" % (major, minor)


def discover(get, version=True):
    """Read the server: ``get(path, accept)`` returns the decoded JSON of a GET, raising Unavailable for a
    group-version that cannot be read now.

    Returns ``{"table", "stale", "aggregated", "version", "server_version", "paths", "lists"}``;
    ``paths`` are the GETs made, in order (/version first when ``version``); ``lists`` are
    ``[(group, version, preferred, resources)]``, every served group-version with the resources of its
    APIResourceList (subresources included), None for one that could not be read now.
    """
    paths = []

    def _get(path, accept):
        paths.append(path)
        return get(path, accept)

    version_doc = _get("/version", JSON) if version else None
    table, stale, legacy, flags, lists = [], [], [], [], []
    for path in ("/api", "/apis"):
        doc = _get(path, ACCEPT)
        flags.append(aggregated(doc))
        if aggregated(doc):
            rows, gone = parse_aggregated(doc)
            table += rows
            stale += gone
            lists += aggregated_lists(doc)
        else:
            legacy += legacy_group_versions(doc if path == "/api" else None, doc if path == "/apis" else None)
    for group, ver, preferred in legacy:
        try:
            doc = _get(group_version_path(group, ver), JSON)
        except Unavailable:
            stale.append(group_version(group, ver))
            lists.append((group, ver, preferred, None))
            continue
        table += parse_resource_list(group, ver, preferred, doc)
        lists.append((group, ver, preferred, list(doc.get("resources") or [])))
    return {"table": table, "stale": sorted(stale), "aggregated": all(flags), "lists": lists,
            "version": version_doc, "server_version": server_version(version_doc) if version else None, "paths": paths}


def _named_items(doc, path):
    """``[(name, object)]`` of a list answer; DiscoveryError for one that is not a list of named objects."""
    items = doc.get("items") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise DiscoveryError("GET %s did not answer with a list of objects" % path)
    out = []
    for item in items:
        name = (item.get("metadata") or {}).get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            raise DiscoveryError("GET %s answered with an object that has no metadata.name" % path)
        out.append((name, item))
    return out


def names(doc, path="/api/v1/namespaces"):
    """The sorted object names of a list answer (a NamespaceList, say)."""
    return sorted(name for name, _item in _named_items(doc, path))


# Of a Node's managedFields, what says which fields a server-side apply owns (not when it took them).
APPLY_ENTRY = ("manager", "operation", "apiVersion", "subresource", "fieldsType", "fieldsV1")


def node_state(item, path="/api/v1/nodes"):
    """What the roles and the apply read of a Node: its name, resourceVersion, labels, the entries of its
    managedFields that server-side applies made, its taints and its allocatable resources (a small task result on a
    cluster of thousands of nodes, where a whole Node holds its images, conditions and addresses too)."""
    meta = item.get("metadata") or {}
    taints = (item.get("spec") or {}).get("taints") or []
    if not isinstance(taints, list) or not all(isinstance(t, dict) for t in taints):
        raise DiscoveryError("GET %s answered with Node %s whose spec.taints is not a list of taints" % (path, meta.get("name")))
    out = {"name": meta.get("name")}
    if meta.get("resourceVersion") is not None:
        out["resourceVersion"] = meta["resourceVersion"]
    if isinstance(meta.get("labels"), dict):
        out["labels"] = dict(meta["labels"])
    applied = [dict((k, e[k]) for k in APPLY_ENTRY if k in e) for e in meta.get("managedFields") or []
               if isinstance(e, dict) and e.get("operation") == "Apply"]
    if applied:
        out["managedFields"] = applied
    allocatable = (item.get("status") or {}).get("allocatable")
    return {"apiVersion": "v1", "kind": "Node", "metadata": out, "spec": {"taints": taints},
            "status": {"allocatable": dict(allocatable) if isinstance(allocatable, dict) else {}}}


def nodes(doc, path="/api/v1/nodes"):
    """The Nodes of a NodeList answer, each cut to node_state (what the roles read of it at plan time and the apply
    takes as its state before), sorted by name."""
    out = [node_state(item, path) for _name, item in _named_items(doc, path)]
    return sorted(out, key=lambda n: n["metadata"]["name"])


def api_kinds(table):
    """Sorted ``apiVersion/Kind`` strings of every served version (``monitoring.coreos.com/v1/ServiceMonitor``)."""
    return sorted(set("%s/%s" % (group_version(e["group"], e["version"]), e["kind"]) for e in table or []))


def api_resources(table):
    """Sorted ``<plural>.<group>`` names of the served resources of named groups, as their CRDs are named.

    A custom resource is served only once its CRD is Established, so a CRD whose name is here needs no wait.
    """
    return sorted(set("%s.%s" % (e["resource"], e["group"]) for e in table or []
                      if e["group"] and e.get("resource") and "/" not in e["resource"]))


def find(table, group, kind, version=None):
    """The row of ``kind`` in ``group``: at ``version`` when that version serves it, else at the group's preferred
    version, else at any served version; None when the kind is not served."""
    rows = [e for e in table or [] if e["group"] == (group or "") and e["kind"] == kind]
    for wanted in ((lambda e: e["version"] == version) if version else None, lambda e: e["preferred"], lambda e: True):
        found = [e for e in rows if wanted and wanted(e)]
        if found:
            return found[0]
    return None


def preferred_namespaced(table, verb=None):
    """One row per namespaced kind of each group's preferred version (older versions may be deprecated); with
    ``verb``, only those whose resource takes it (``list``: the kinds a namespace can be listed for, see allows)."""
    out, seen = [], set()
    for row in table or []:
        if verb and not allows(row, verb):
            continue
        if row["preferred"] and row["namespaced"] and (row["group"], row["kind"]) not in seen:
            seen.add((row["group"], row["kind"]))
            out.append(row)
    return out


def path(row, namespace=None, name=None):
    """The request path of a row's resource: its collection, in ``namespace`` when namespaced, or one object."""
    base = "/apis/%s/%s" % (row["group"], row["version"]) if row["group"] else "/api/%s" % row["version"]
    if row["namespaced"] and namespace:
        base += "/namespaces/%s" % quote(namespace, safe="")
    base += "/%s" % row["resource"]
    return base + "/%s" % quote(name, safe="") if name else base


def check_table(table):
    """The table as given (a module option): a list of rows with every key; raises DiscoveryError otherwise."""
    if not isinstance(table, list):
        raise DiscoveryError("api_table must be a list of rows, got %s" % type(table).__name__)
    for row in table:
        missing = [k for k in KEYS if not isinstance(row, dict) or k not in row]
        if missing:
            raise DiscoveryError("api_table: row %r lacks %s (give the gpuops_k8s_api_table fact as it is)"
                                 % (row, ", ".join(missing)))
        verbs = row.get(VERBS, [])
        if not isinstance(verbs, list) or not all(isinstance(v, str) for v in verbs):
            raise DiscoveryError("api_table: row %r: verbs must be a list of strings, as discovery names them "
                                 "(give the gpuops_k8s_api_table fact as it is)" % (row,))
    return table
