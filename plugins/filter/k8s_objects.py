# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Put Kubernetes objects in apply order and render them as manifests.

One ordering serves both the API (kubernetes.core.k8s, one task per phase) and
the GitOps render (one multi-document file per layer), so what is rendered is
exactly what would be applied, in the same order.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import json
import re
from collections.abc import Mapping, Sequence

import yaml  # a dependency of ansible-core itself

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

discovery = lazy_module("module_utils._k8s.discovery")
k8s_upgrade = lazy_module("plugin_utils.k8s_upgrade")

# Within one scope, the kinds that others depend on come first. No library gives
# this order, so it follows Helm's: InstallOrder in helm/helm
# pkg/releaseutil/kind_sorter.go (Helm 3), with Namespace and
# CustomResourceDefinition moved first (Helm installs a chart's crds/ before any
# template; every namespaced object needs its Namespace) and without the kinds
# the collection never applies (PodSecurityPolicy, the *List kinds,
# ReplicationController, HorizontalPodAutoscaler, webhook configurations).
# Kinds not listed (custom resources) follow, by name.
KIND_WEIGHT = dict((kind, i) for i, kind in enumerate([
    "Namespace", "CustomResourceDefinition", "PriorityClass", "NetworkPolicy",
    "ResourceQuota", "LimitRange", "PodDisruptionBudget", "ServiceAccount",
    "Secret", "ConfigMap", "StorageClass", "PersistentVolume",
    "PersistentVolumeClaim", "ClusterRole", "ClusterRoleBinding", "Role",
    "RoleBinding", "Service", "DaemonSet", "Pod", "ReplicaSet", "Deployment",
    "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
]))

# Built-in kinds that are cluster-scoped even when a namespace is (wrongly) set.
CLUSTER_KINDS = frozenset([
    "Namespace", "CustomResourceDefinition", "PriorityClass", "ClusterRole",
    "ClusterRoleBinding", "StorageClass", "PersistentVolume", "IngressClass",
    "APIService", "Node", "RuntimeClass", "DeviceClass",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
])

PHASE_NAMESPACES = 0
PHASE_CRDS = 1
PHASE_CLUSTER = 2
PHASE_NAMESPACED = 3


def _str(value):
    """An exact ``str`` (Ansible tags its strings with a subclass that YAML cannot represent)."""
    return str.__str__(to_text(value))


def _plain(value):
    """Deep copy into plain dict/list/str/int/float/bool/None (drops Ansible tags)."""
    if isinstance(value, Mapping):
        return dict((_str(k), _plain(v)) for k, v in value.items())
    if isinstance(value, str):
        return _str(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Sequence):
        return [_plain(v) for v in value]
    raise AnsibleFilterError("cannot render value %r of type %s as YAML" % (value, type(value).__name__))


def _identity(obj):
    if not isinstance(obj, Mapping):
        raise AnsibleFilterError("each Kubernetes object must be a mapping, got %r" % (obj,))
    meta = obj.get("metadata")
    if not obj.get("apiVersion") or not obj.get("kind") or not isinstance(meta, Mapping) or not meta.get("name"):
        raise AnsibleFilterError(
            "each Kubernetes object needs apiVersion, kind and metadata.name; got %s"
            % (dict((k, obj.get(k)) for k in ("apiVersion", "kind", "metadata")),))
    return to_text(obj["apiVersion"]), to_text(obj["kind"]), to_text(meta.get("namespace") or ""), to_text(meta["name"])


def k8s_phase(obj):
    """Apply phase of one object: 0 namespaces, 1 CRDs, 2 cluster-scoped, 3 namespaced."""
    api_version, kind, namespace, dummy = _identity(obj)
    if kind == "Namespace" and api_version == "v1":
        return PHASE_NAMESPACES
    if kind == "CustomResourceDefinition":
        return PHASE_CRDS
    if kind in CLUSTER_KINDS or not namespace:
        return PHASE_CLUSTER
    return PHASE_NAMESPACED


def _sort_key(obj):
    api_version, kind, namespace, name = _identity(obj)
    group = api_version.rpartition("/")[0]
    return (k8s_phase(obj), KIND_WEIGHT.get(kind, len(KIND_WEIGHT)), group, kind, namespace, name)


def k8s_apply_order(objects):
    """Objects sorted into apply order; duplicates (same apiVersion group, kind, namespace, name) are an error."""
    if objects is None:
        return []
    if isinstance(objects, Mapping) or isinstance(objects, str):
        raise AnsibleFilterError("k8s_apply_order expects a list of Kubernetes objects")
    seen = {}
    scoped = []
    for obj in objects:
        obj = _cluster_scoped_without_namespace(obj)
        api_version, kind, namespace, name = _identity(obj)
        # One object per API group, whatever the version (apps/v1 and apps/v1beta1 Deployment x are the same).
        key = (api_version.rpartition("/")[0], kind, namespace, name)
        if key in seen:
            raise AnsibleFilterError(
                "duplicate Kubernetes object %s %s%s: each object must be defined once"
                % (kind, namespace + "/" if namespace else "", name))
        seen[key] = True
        scoped.append(obj)
    return sorted(scoped, key=_sort_key)


def _cluster_scoped_without_namespace(obj):
    """A cluster-scoped kind with a (stray) metadata.namespace, as a copy without it; others unchanged."""
    kind, namespace = _identity(obj)[1:3]
    if not namespace or kind not in CLUSTER_KINDS:
        return obj
    meta = dict((k, v) for k, v in obj["metadata"].items() if k != "namespace")
    return dict(obj, metadata=meta)


def k8s_phases(objects):
    """Split objects (in apply order) into the phases applied one after another.

    Returns ``{"namespaces": [...], "crds": [...], "resources": [...]}``:
    CRDs are applied and waited for (Established) before any other resource.
    """
    result = {"namespaces": [], "crds": [], "resources": []}
    for obj in k8s_apply_order(objects):
        phase = k8s_phase(obj)
        if phase == PHASE_NAMESPACES:
            result["namespaces"].append(obj)
        elif phase == PHASE_CRDS:
            result["crds"].append(obj)
        else:
            result["resources"].append(obj)
    return result


class _ManifestDumper(yaml.SafeDumper):
    """Block style for multi-line strings, so embedded config files stay readable."""


def _represent_str(dumper, data):
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_ManifestDumper.add_representer(str, _represent_str)


def k8s_manifest(objects, header=None):
    """Objects in apply order as one multi-document YAML string (keys sorted: deterministic)."""
    docs = []
    if header:
        docs.append("".join("# %s\n" % line for line in to_text(header).splitlines()))
    for obj in k8s_apply_order(objects):
        text = yaml.dump(_plain(obj), Dumper=_ManifestDumper, default_flow_style=False,
                         sort_keys=True, allow_unicode=True, width=1000)
        docs.append("---\n" + text)
    return "".join(docs)


def k8s_yaml(value):
    """One value as a deterministic YAML document (Helm values files, release descriptors)."""
    return "---\n" + yaml.dump(_plain(value), Dumper=_ManifestDumper, default_flow_style=False,
                               sort_keys=True, allow_unicode=True, width=1000)


def _api_table(apis, name):
    """The served API table (module_utils/_k8s/discovery.py) of gpuops.platform.k8s_discovery's ``api_table``, or of
    kubernetes.core.k8s_cluster_info's ``apis`` mapping (``{group/version: {Kind: {name, namespaced, preferred}}}``)."""
    expects = "%s expects the api_table of gpuops.platform.k8s_discovery or the apis mapping returned by " \
        "kubernetes.core.k8s_cluster_info" % name
    if not apis:
        return []
    if isinstance(apis, list):
        try:
            return discovery.check_table(apis)
        except discovery.DiscoveryError as exc:
            raise AnsibleFilterError("%s: %s" % (expects, exc))
    if not isinstance(apis, Mapping):
        raise AnsibleFilterError(expects)
    table = []
    for api_version, resources in apis.items():
        group, version = discovery.split_api_version(to_text(api_version))
        for kind, info in (resources or {}).items():
            info = info if isinstance(info, Mapping) else {}
            table.append(discovery.entry(group, version, to_text(kind), to_text(info.get("name") or ""),
                                         info.get("namespaced"), info.get("preferred")))
    return table


def k8s_api_kinds(apis):
    """Sorted ``apiVersion/Kind`` strings of the served APIs (k8s_discovery's api_table or k8s_cluster_info's apis)."""
    return discovery.api_kinds(_api_table(apis, "k8s_api_kinds"))


def k8s_api_resources(apis):
    """Sorted ``<plural>.<group>`` names (a CRD's name) of the served APIs (as k8s_api_kinds takes them).

    A custom resource is served only once its CRD is Established, so a CRD
    whose name is here needs no wait.
    """
    return discovery.api_resources(_api_table(apis, "k8s_api_resources"))


def _taint_key(taint):
    return (to_text(taint.get("key") or ""), to_text(taint.get("effect") or ""), to_text(taint.get("value") or ""))


def k8s_nodes_missing_taints(nodes, taints):
    """Names of the nodes (Node objects) that lack one of ``taints``: the same key, effect and value.

    gpuops.platform.k8s_node_taints (state present) adds a missing taint and
    replaces the value of one with the same key and effect; a node that has them
    all needs no call.
    """
    wanted = [_taint_key(t) for t in taints or []]
    out = []
    for node in nodes or []:
        if not isinstance(node, Mapping):
            raise AnsibleFilterError("k8s_nodes_missing_taints expects Node objects, got %r" % (node,))
        have = set(_taint_key(t) for t in ((node.get("spec") or {}).get("taints") or []))
        if any(w not in have for w in wanted):
            out.append(to_text((node.get("metadata") or {}).get("name")))
    return out


def k8s_node_states(nodes):
    """Of whole Node objects (a server-side apply's answers), what gpu_nodes and the next apply read of each: the
    cut k8s_discovery lists them in (name, resourceVersion, labels, the Apply entries of managedFields, taints,
    allocatable). Anything that is not a named Node object is left out."""
    out = []
    for node in nodes or []:
        if not isinstance(node, Mapping) or node.get("kind", "Node") != "Node":
            continue
        meta = node.get("metadata") if isinstance(node.get("metadata"), Mapping) else {}
        if not meta.get("name"):
            continue
        try:
            out.append(discovery.node_state(node, "the Nodes given"))
        except discovery.DiscoveryError as exc:
            raise AnsibleFilterError("k8s_node_states: %s" % exc)
    return out


def k8s_helm_release(release):
    """Normalise one Helm release into what kubernetes.core.helm and the render need.

    Input keys: name, namespace, chart, version, values, repo_url (HTTP(S) Helm
    repository or mirror, or an ``oci://`` registry path), chart_path (a local
    chart archive or folder for air-gapped sites; wins over repo_url),
    create_namespace (default true), wait (default true), wait_timeout,
    sensitive (hide values from logs).
    """
    if not isinstance(release, Mapping):
        raise AnsibleFilterError("a Helm release must be a mapping, got %r" % (release,))
    missing = [k for k in ("name", "namespace", "version") if not release.get(k)]
    if not release.get("chart") and not release.get("chart_path"):
        missing.append("chart (or chart_path)")
    if missing:
        raise AnsibleFilterError("Helm release %s lacks %s" % (release.get("name", "?"), ", ".join(missing)))
    values = release.get("values")
    values = {} if values is None else values
    if not isinstance(values, Mapping):
        raise AnsibleFilterError("Helm release %s: values must be a mapping" % release["name"])
    chart = to_text(release.get("chart") or "")
    repo = to_text(release.get("repo_url") or "")
    path = to_text(release.get("chart_path") or "")
    if path:
        chart_ref, repo_url, source = path, None, "path"
    elif repo.startswith("oci://"):
        chart_ref, repo_url, source = repo.rstrip("/") + "/" + chart, None, "oci"
    elif repo:
        chart_ref, repo_url, source = chart, repo, "repo"
    else:
        raise AnsibleFilterError("Helm release %s needs repo_url (repository, mirror or oci://) or chart_path" % release["name"])
    return {
        "name": to_text(release["name"]),
        "namespace": to_text(release["namespace"]),
        "chart": chart or None,
        "chart_ref": chart_ref,
        "chart_repo_url": repo_url,
        "chart_version": to_text(release["version"]),
        "source": source,
        "values": values,
        "create_namespace": bool(release.get("create_namespace", True)),
        "wait": bool(release.get("wait", True)),
        "wait_timeout": release.get("wait_timeout"),
        "sensitive": bool(release.get("sensitive", False)),
    }


def k8s_release_files(releases):
    """The render of Helm releases: ``[{path, content}]``, a descriptor and a values file each."""
    files = []
    for release in releases or []:
        rel = k8s_helm_release(release)
        descriptor = {
            "name": rel["name"],
            "namespace": rel["namespace"],
            "chart": rel["chart"] or rel["chart_ref"],
            "version": rel["chart_version"],
            "createNamespace": rel["create_namespace"],
            "valuesFile": "values.yaml",
        }
        if rel["source"] == "repo":
            descriptor["repoURL"] = rel["chart_repo_url"]
        elif rel["source"] == "oci":
            descriptor["repoURL"] = rel["chart_ref"].rpartition("/")[0]
        else:
            descriptor["chartPath"] = rel["chart_ref"]
        base = "helm/%s/" % rel["name"]
        files.append({"path": base + "release.yaml", "content": k8s_yaml(descriptor)})
        files.append({"path": base + "values.yaml", "content": k8s_yaml(rel["values"])})
    return files


def k8s_served(objects, api_kinds, served=True):
    """Objects whose apiVersion/Kind is (or, with served=false, is not) in api_kinds."""
    kinds = set(to_text(k) for k in (api_kinds or []))
    return [o for o in (objects or []) if (("%s/%s" % _identity(o)[:2]) in kinds) == bool(served)]


def k8s_in_namespaces(objects, namespaces):
    """Cluster-scoped objects, and namespaced ones whose namespace is in ``namespaces``."""
    known = set(to_text(n) for n in (namespaces or []))
    return [o for o in (objects or []) if k8s_phase(o) != PHASE_NAMESPACED or _identity(o)[2] in known]


def k8s_stats_lines(stats):
    """Human summary of gpuops_k8s_stats: one headline, one line per layer, then the Helm releases recovered from
    an interrupted operation and, in check mode, the objects the server could not dry-run."""
    stats = stats or {}
    layers = sorted(stats.get("layers") or [], key=lambda layer: (layer.get("order", 0), layer.get("name", "")))
    rendered = stats.get("mode") == "render"
    check = bool(stats.get("check"))
    head = "Kubernetes GPU stack %s: %d layers, %d objects, %d Helm releases" % (
        "rendered into %s" % stats.get("render_dir") if rendered else "planned (check mode)" if check else "applied",
        len(layers), int(stats.get("objects") or 0), int(stats.get("releases") or 0))
    lines = [head]
    for layer in layers:
        line = "%02d %s: %d objects" % (int(layer.get("order", 0)), layer.get("name"), int(layer.get("objects") or 0))
        if layer.get("releases"):
            line += ", releases %s" % ", ".join(layer["releases"])
        if not rendered:
            line += (", changes planned" if check else ", changed") if layer.get("changed") else ", unchanged"
            report = layer.get("report")
            if report:
                line += " (objects: %s)" % ", ".join(
                    "%d %s" % (n, word) for n, word in (
                        (len(report["created"]), "to create" if check else "created"),
                        (len(report["changed"]), "to change" if check else "changed"),
                        (report["unchanged"], "unchanged")) if n)
            if layer.get("pruned"):
                line += ", %s %d (%s)" % ("prune planned" if check else "pruned", len(layer["pruned"]),
                                          ", ".join(layer["pruned"]))
            if layer.get("kept"):
                line += ", kept %d no longer planned (%s)" % (len(layer["kept"]), "; ".join(layer["kept"]))
            if layer.get("finalizing"):
                line += ", still finalizing %d (%s)" % (len(layer["finalizing"]), "; ".join(layer["finalizing"]))
        lines.append(line)
        report = layer.get("report") or {}
        if stats.get("diff") and not rendered:
            # Names and field paths only: values (a Secret's, say) stay out of the log.
            for name in report.get("created", []):
                lines.append("    %s %s" % ("create" if check else "created", name))
            for name in report.get("changed", []):
                fields = report.get("fields", {}).get(name)
                detail = ": " + ", ".join(fields) if fields else ""
                lines.append("    %s %s%s" % ("change" if check else "changed", name, detail))
    recovered = [r for layer in layers for r in layer.get("recovered") or []]
    if recovered:
        lines.append("%s: %s" % ("Planned Helm recoveries" if check else "Helm recoveries", "; ".join(recovered)))
    for unchecked in stats.get("unchecked") or []:
        lines.append("%d object(s) of %s depend on a namespace or CRD that this run would create first; they were not "
                     "dry-run: %s" % (int(unchecked["count"]), unchecked["layer"], ", ".join(unchecked["kinds"])))
    # Releases that moved to another chart version: their CRD and values changes (k8s_apply's upgrade.yml).
    return lines + k8s_upgrade.upgrade_lines(stats.get("upgrades"), check)


# Fields the API server sets on every write; a path under them is no change of ours.
_SERVER_FIELDS = ("metadata.managedFields", "metadata.resourceVersion", "metadata.generation",
                  "metadata.creationTimestamp", "metadata.uid", "status")


def _leaves(value, prefix="", depth=4):
    """``{dotted path: value}`` of the leaves of ``value`` (a diff side), at most ``depth`` deep."""
    if isinstance(value, Mapping) and value and depth > 0:
        out = {}
        for key in sorted(value):
            out.update(_leaves(value[key], "%s.%s" % (prefix, key) if prefix else to_text(key), depth - 1))
        return out
    return {prefix: value} if prefix else {}


def _short(value, limit=60):
    """One line of at most ``limit`` characters: JSON for structures, the text itself for strings."""
    if value is None:
        return "(none)"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=to_text)
    text = " ".join(to_text(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _k8s_results(registered):
    """The per-object results in kubernetes.core.k8s registered results (one object or a list)."""
    for reg in registered or []:
        if not isinstance(reg, Mapping) or reg.get("skipped"):
            continue
        nested = (reg.get("result") or {}).get("results") if isinstance(reg.get("result"), Mapping) else None
        if isinstance(nested, list):
            for item in nested:
                if isinstance(item, Mapping):
                    yield item
        elif "method" in reg:
            yield reg


_TIMESTAMP = re.compile(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?Z\Z")


def _seconds(stamp):
    """Seconds since the epoch of an API timestamp (RFC 3339 in UTC, as metav1.Time), else None."""
    match = _TIMESTAMP.match(to_text(stamp or ""))
    if not match:
        return None
    return calendar.timegm(tuple(int(part) for part in match.groups()) + (0, 0, 0))


def _created_by_this_apply(obj):
    """Whether a changed object that kubernetes.core returned without a diff was created by that apply.

    The API server sets metadata.creationTimestamp when it creates an object, and
    a managedFields entry's time when the entry is added or its fields change
    (ManagedFieldsEntry in the API reference), both during the request that
    creates it, also in a dry run: an apply that creates goes through the
    store's create path, whose rest.BeforeCreate fills the creation time
    (FillObjectMetaSystemFields, k8s.io/apiserver pkg/registry/rest) before the
    dry-run flag is looked at, in the storage call only (generic registry
    store.go), after the field manager stamped its entry. An object that this
    server-side apply created has one entry, the applier's (operation Apply),
    whose time is the creation time; one second apart at most, as the two
    clocks are read one after the other. Anything else (another manager's entry, an older creation,
    no timestamps) counts as changed.
    """
    meta = obj.get("metadata") or {}
    entries = meta.get("managedFields") or []
    if len(entries) != 1 or not isinstance(entries[0], Mapping) or entries[0].get("operation") != "Apply":
        return False
    created, applied = _seconds(meta.get("creationTimestamp")), _seconds(entries[0].get("time"))
    return created is not None and applied is not None and abs(applied - created) <= 1


def k8s_apply_report(registered, values=False):
    """What a layer's kubernetes.core.k8s applies did, object by object.

    An object created is one the apply said it created (k8s_server_side_apply's ``created``, decided by the API's
    answers: the object did not exist before, or has another uid); for a result without it (kubernetes.core.k8s's
    shape), under ``--diff`` one whose diff has no ``before``, otherwise one that the apply created by its metadata
    (_created_by_this_apply).
    With ``values``, each changed field shows its old and new value, except in
    Secrets.
    """
    report = {"created": [], "changed": [], "unchanged": 0, "fields": {}}
    for item in _k8s_results(registered):
        obj = item.get("result") if isinstance(item.get("result"), Mapping) else {}
        meta = obj.get("metadata") or {}
        name = "%s %s%s" % (obj.get("kind", "?"), meta["namespace"] + "/" if meta.get("namespace") else "",
                            meta.get("name", "?"))
        if not item.get("changed"):
            report["unchanged"] += 1
            continue
        diff = item.get("diff") if isinstance(item.get("diff"), Mapping) else None
        if "created" in item:
            created = bool(item["created"])
        else:
            created = (not diff.get("before")) if diff is not None else _created_by_this_apply(obj)
        if created:
            report["created"].append(name)
            continue
        report["changed"].append(name)
        if diff is not None:
            before, after = _leaves(diff.get("before") or {}), _leaves(diff.get("after") or {})
            shown = values and obj.get("kind") != "Secret"
            paths = sorted(p for p in set(before) | set(after) if not p.startswith(_SERVER_FIELDS))
            # An empty map on one side ({} -> its keys) is told by the keys' own lines.
            paths = [p for p in paths if not any(q.startswith(p + ".") for q in paths)]
            report["fields"][name] = [
                "%s: %s -> %s" % (path, _short(before.get(path)), _short(after.get(path))) if shown else path
                for path in paths]
    return report


def k8s_nested(flat):
    """``{"a.b.c": 1}`` to ``{"a": {"b": {"c": 1}}}`` (Helm values overrides from dotted paths)."""
    out = {}
    for path, value in sorted((flat or {}).items()):
        node = out
        parts = to_text(path).split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise AnsibleFilterError("k8s_nested: %s is both a value and a map" % path)
        node[parts[-1]] = value
    return out


FilterModule = filter_module(
    k8s_apply_order,
    k8s_phases,
    k8s_manifest,
    k8s_yaml,
    k8s_api_kinds,
    k8s_api_resources,
    k8s_nodes_missing_taints,
    k8s_node_states,
    k8s_helm_release,
    k8s_release_files,
    k8s_served,
    k8s_in_namespaces,
    k8s_stats_lines,
    k8s_apply_report,
    k8s_nested,
)
