# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release).
"""What a chart upgrade changes, before it is made: pure functions over CRDs and values.

- crd_changes: one CRD as the cluster has it (or the previous chart ships it)
  against the new chart's: served versions added or removed, the storage
  version, fields that appear or disappear, validation that changes.
- crd_set_changes: the same over every CRD of two charts (CRDs added or dropped).
- values_renamed: keys the inventory sets that the new chart's values.yaml no
  longer has (renamed or dropped), with the keys that appeared beside them.
- values_defaults: defaults that change between the two values.yaml files,
  for keys the inventory does not set.
- stored_version_refusal: a CRD update that would remove a served version in
  which objects may still be stored (``status.storedVersions``), naming them.
- held_fields: the objects that hold a value at fields a CRD update removes.

Paths are dotted; ``[]`` stands for the items of a list, ``*`` for the values
of a map (additionalProperties) and ``[name]`` for the entry of a list of maps
keyed by ``name`` (chart values such as kuberay's featureGates).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re
from collections.abc import Mapping

# Schema keywords that change what the API server accepts or stores (descriptions do not).
VALIDATION_KEYWORDS = ("type", "format", "pattern", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                       "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "multipleOf",
                       "nullable", "default", "required", "x-kubernetes-validations", "x-kubernetes-list-type",
                       "x-kubernetes-list-map-keys", "x-kubernetes-map-type", "x-kubernetes-int-or-string",
                       "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource")


def crd_name(crd):
    """``<plural>.<group>``, as the CRD's metadata.name must be."""
    spec = (crd or {}).get("spec") or {}
    return (crd.get("metadata") or {}).get("name") or "%s.%s" % ((spec.get("names") or {}).get("plural"), spec.get("group"))


def _check_crd(crd, what):
    if not isinstance(crd, Mapping) or crd.get("kind") != "CustomResourceDefinition" or \
            not isinstance((crd.get("spec") or {}).get("versions"), list):
        raise ValueError("%s is not a CustomResourceDefinition with spec.versions (apiextensions.k8s.io/v1)" % what)


def _versions(crd):
    return dict((v.get("name"), v) for v in crd["spec"]["versions"] if isinstance(v, Mapping))


def served_versions(crd):
    """The names of the versions a CRD serves, in its order."""
    return [v.get("name") for v in crd["spec"]["versions"] if v.get("served", True)]


def storage_version(crd):
    """The version a CRD stores objects in (the one marked ``storage``); None when none is."""
    found = [v.get("name") for v in crd["spec"]["versions"] if v.get("storage")]
    return found[0] if found else None


def schema_fields(schema, prefix=""):
    """``{path: schema node}`` of every field of an openAPIV3Schema, the root (``""``) included."""
    out = {prefix: schema or {}}
    if not isinstance(schema, Mapping):
        return out
    for name, sub in sorted((schema.get("properties") or {}).items()):
        out.update(schema_fields(sub, "%s.%s" % (prefix, name) if prefix else name))
    if isinstance(schema.get("items"), Mapping):
        out.update(schema_fields(schema["items"], prefix + "[]"))
    if isinstance(schema.get("additionalProperties"), Mapping):
        out.update(schema_fields(schema["additionalProperties"], prefix + ".*" if prefix else "*"))
    return out


def _topmost(paths):
    """The paths none of whose ancestors is among them (a new object's own fields are not listed)."""
    chosen = []
    for path in sorted(paths):
        if not any(path.startswith(p) and path[len(p):len(p) + 1] in (".", "[") for p in chosen if p):
            chosen.append(path)
    return chosen


def _validation(node):
    return dict((k, node[k]) for k in VALIDATION_KEYWORDS if isinstance(node, Mapping) and k in node)


def _schema(version):
    return ((version.get("schema") or {}).get("openAPIV3Schema")) or {}


def crd_changes(old, new):
    """What replacing CRD ``old`` (as served now) by ``new`` (the new chart's) changes; None when nothing does.

    Returns ``{name, versions_added, versions_removed, served_added, served_removed, deprecated,
    storage: [old, new] or None, fields_added, fields_removed, validation_changed}``; the field lists map a version
    kept by both to the top-most paths added or removed (``spec.workerGroupSpecs[].priority``), and to the paths
    whose validation keywords differ (``path: [keyword, ...]``).
    """
    _check_crd(old, "the current CRD")
    _check_crd(new, "the new CRD")
    if crd_name(old) != crd_name(new):
        raise ValueError("cannot compare CRD %s with CRD %s" % (crd_name(old), crd_name(new)))
    before, after = _versions(old), _versions(new)
    served_before, served_after = set(served_versions(old)), set(served_versions(new))
    out = {"name": crd_name(new),
           "versions_added": [v for v in after if v not in before],
           "versions_removed": [v for v in before if v not in after],
           "served_added": sorted(served_after - served_before),
           "served_removed": sorted(served_before - served_after),
           "deprecated": sorted(v for v in after if after[v].get("deprecated") and not (before.get(v) or {}).get("deprecated")),
           "storage": None, "fields_added": {}, "fields_removed": {}, "validation_changed": {}}
    if storage_version(old) != storage_version(new):
        out["storage"] = [storage_version(old), storage_version(new)]
    for version in [v for v in after if v in before]:
        was, now = schema_fields(_schema(before[version])), schema_fields(_schema(after[version]))
        added, removed = _topmost(set(now) - set(was)), _topmost(set(was) - set(now))
        changed = dict((path, sorted(k for k in set(_validation(was[path])) | set(_validation(now[path]))
                                     if _validation(was[path]).get(k) != _validation(now[path]).get(k)))
                       for path in sorted(set(was) & set(now)) if _validation(was[path]) != _validation(now[path]))
        if added:
            out["fields_added"][version] = added
        if removed:
            out["fields_removed"][version] = removed
        if changed:
            out["validation_changed"][version] = changed
    significant = [k for k in out if k != "name" and out[k]]
    return out if significant else None


def crd_set_changes(old_crds, new_crds):
    """crd_changes over two sets of CRDs (the live or previous chart's, the new chart's), by name.

    Returns ``{"added": [names], "removed": [names], "changed": [crd_changes entries]}``: a CRD only the new set has is
    added, one only the old set has is removed (the new chart no longer ships it: Helm leaves it in place).
    """
    before = dict((crd_name(c), c) for c in old_crds or [])
    after = dict((crd_name(c), c) for c in new_crds or [])
    changed = [crd_changes(before[n], after[n]) for n in sorted(after) if n in before]
    return {"added": sorted(n for n in after if n not in before),
            "removed": sorted(n for n in before if n not in after),
            "changed": [c for c in changed if c]}


def _keyed(items):
    """A list of maps that each name themselves (``name``), as a map by name; None for any other list."""
    if not items or not all(isinstance(i, Mapping) and isinstance(i.get("name"), str) for i in items):
        return None
    names = [i["name"] for i in items]
    return dict((n, i) for n, i in zip(names, items)) if len(set(names)) == len(names) else None


def _leaves(values, prefix=""):
    """``{path: value}`` of chart values: maps are walked (an empty one is a leaf), lists of named maps by name."""
    out = {}
    if isinstance(values, Mapping) and values:
        for key, value in values.items():
            out.update(_leaves(value, "%s.%s" % (prefix, key) if prefix else str(key)))
        return out
    keyed = _keyed(values) if isinstance(values, list) else None
    if keyed:
        for name, item in keyed.items():
            rest = dict((k, v) for k, v in item.items() if k != "name")
            out.update(_leaves(rest, "%s[%s]" % (prefix, name)) if rest else {"%s[%s]" % (prefix, name): item})
        return out
    out[prefix] = values
    return out


def _lookup(values, path_keys):
    """How far ``path_keys`` reaches into ``values``: (the keys found, whether the last one found is free-form)."""
    found, node = [], values
    for key in path_keys:
        if not isinstance(node, Mapping) or key not in node:
            return found, isinstance(node, Mapping) and not node and bool(found)
        found.append(key)
        node = node[key]
    return found, False


def _map_paths(values, prefix=()):
    """Key paths (tuples) of every map entry of chart values, innermost too."""
    out = []
    for key, value in (values or {}).items() if isinstance(values, Mapping) else []:
        path = prefix + (str(key),)
        out.append(path)
        if isinstance(value, Mapping):
            out.extend(_map_paths(value, path))
    return out


def values_renamed(old_values, new_values, set_values):
    """Keys the inventory sets (``set_values``, the release's values) that the previous chart's values.yaml has and the
    new chart's no longer has: renamed or dropped, so the new chart ignores them.

    Returns ``[{key, candidates}]``: ``key`` the dotted key as the old chart has it (the inventory may set keys below
    a free-form map), ``candidates`` the keys that appeared beside it in the new chart (what it may now be called).
    """
    for what, values in (("previous chart values", old_values), ("new chart values", new_values),
                         ("release values", set_values)):
        if values is not None and not isinstance(values, Mapping):
            raise ValueError("%s must be a mapping, got %s" % (what, type(values).__name__))
    old_values, new_values = old_values or {}, new_values or {}
    out, seen = [], set()
    for path in _map_paths(set_values):
        found, free = _lookup(old_values, path)
        # Keys the old chart does not know are not the upgrade's doing; below a free-form map the map is the key.
        known = tuple(found) if (len(found) == len(path) or free) else None
        if not known or known in seen:
            continue
        now, dummy = _lookup(new_values, known)
        if len(now) == len(known):
            continue
        seen.add(known)
        gone_at = known[:len(now) + 1]
        parent_old = _get(old_values, gone_at[:-1])
        parent_new = _get(new_values, gone_at[:-1])
        candidates = sorted(".".join(gone_at[:-1] + (str(k),)) for k in (parent_new or {})
                            if isinstance(parent_new, Mapping) and k not in (parent_old or {}))
        out.append({"key": ".".join(known), "candidates": candidates})
    return out


def _get(values, keys):
    for key in keys:
        if not isinstance(values, Mapping):
            return None
        values = values.get(key)
    return values


def _covers(set_paths, path):
    """Whether the inventory sets ``path``, a value (or list) above it or something below it."""
    for setp in set_paths:
        if path == setp or path.startswith(setp + ".") or path.startswith(setp + "[") or \
                setp.startswith(path + ".") or setp.startswith(path + "["):
            return True
    return False


def values_defaults(old_values, new_values, set_values):
    """Defaults of the chart's own values.yaml that change between the previous and the new chart, for the keys the
    inventory does not set (``set_values``, the release's values): ``[{key, old, new}]``, by key.

    Keys only one chart has are left out (values_renamed names the ones the inventory sets).
    """
    for what, values in (("previous chart values", old_values), ("new chart values", new_values),
                         ("release values", set_values)):
        if values is not None and not isinstance(values, Mapping):
            raise ValueError("%s must be a mapping, got %s" % (what, type(values).__name__))
    before, after = _leaves(old_values or {}), _leaves(new_values or {})
    # Helm merges maps key by key but replaces a list whole: a list the inventory sets covers every default in it.
    set_paths = set(_leaves(set_values or {})) | set(".".join(p) for p in _map_paths(set_values)
                                                     if isinstance(_get(set_values, p), list))
    out = []
    for path in sorted(set(before) | set(after)):
        if path in before and path in after:
            old, new = before[path], after[path]
        elif path in before and _below(after, path):
            old, new = before[path], _below(after, path)   # an empty map that now has defaults
        elif path in after and _below(before, path):
            old, new = _below(before, path), after[path]   # defaults that are now an empty map
        else:
            continue
        if old != new and not _covers(set_paths, path):
            out.append({"key": path, "old": copy.deepcopy(old), "new": copy.deepcopy(new)})
    return out


def _below(leaves, path):
    """The leaves under ``path`` (by their path below it), or {} when there are none."""
    return dict((p[len(path):].lstrip("."), v) for p, v in leaves.items() if p.startswith(path + ".") or p.startswith(path + "["))


def _object_name(obj):
    meta = obj.get("metadata") or {}
    return "%s/%s" % (meta["namespace"], meta.get("name")) if meta.get("namespace") else meta.get("name")


def stored_version_refusal(live, new, objects):
    """Why applying CRD ``new`` over ``live`` (as the API server has it, with ``status.storedVersions``) must be
    refused; "" when it may go ahead.

    It is refused when a version that ``live`` serves and lists in ``status.storedVersions`` (objects may be stored in
    it: the API server keeps the list until a storage migration trims it) is removed or no longer served by ``new``,
    and objects of the kind exist (``objects``, listed through any served version; each is named). Without objects
    the update may go ahead, as the API server itself requires storedVersions to be trimmed first.
    """
    _check_crd(live, "the current CRD")
    _check_crd(new, "the new CRD")
    stored = [v for v in ((live.get("status") or {}).get("storedVersions") or []) if v in served_versions(live)]
    gone = [v for v in stored if v not in served_versions(new)]
    if not gone or not objects:
        return ""
    names = sorted(_object_name(o) for o in objects)
    kind = ((live["spec"].get("names") or {}).get("kind")) or crd_name(live)
    return ("CRD %s: the new chart no longer serves %s, which status.storedVersions lists (%s), and %d %s object%s "
            "may be stored in it: %s. Migrate them to %s (read and write each one back), remove %s from the CRD's "
            "status.storedVersions, then upgrade; or keep the chart version that serves %s."
            % (crd_name(live), ", ".join(gone), ", ".join(stored), len(names), kind, "" if len(names) == 1 else "s",
               ", ".join(names), storage_version(new) or "the new storage version", ", ".join(gone), ", ".join(gone)))


def _path_steps(path):
    """A schema_fields path as steps: names, ``[]`` (every item of a list) and ``*`` (every value of a map)."""
    return re.findall(r"\[\]|[^.\[\]]+", path)


def _holds(value, steps):
    """Whether ``value`` has something (not null) at ``steps``."""
    if not steps:
        return value is not None
    step, rest = steps[0], steps[1:]
    if step == "[]":
        return isinstance(value, list) and any(_holds(item, rest) for item in value)
    if step == "*":
        return isinstance(value, Mapping) and any(_holds(item, rest) for item in value.values())
    return isinstance(value, Mapping) and step in value and _holds(value[step], rest)


def held_fields(objects, paths):
    """The objects (as the API lists them) that hold a value at any of ``paths`` (crd_changes' ``fields_removed`` of
    one version): ``[{"name": "namespace/name", "fields": [paths it holds]}]``, by name."""
    out = []
    for obj in objects or []:
        held = [path for path in paths or [] if _holds(obj, _path_steps(path))]
        if held:
            out.append({"name": _object_name(obj), "fields": held})
    return sorted(out, key=lambda entry: entry["name"])


# --- what helm prints about the deployed and the new chart ---------------------

# `helm get all --template` data is the release; Go's text/template has no JSON function (no sprig there), so the
# deployed chart's own values (its values.yaml, as Helm keeps it in the release) are written out as JSON by hand.
CHART_VALUES_TEMPLATE = "".join([
    '{{- define "j" -}}{{- $t := printf "%T" . -}}',
    '{{- if eq $t "map[string]interface {}" -}}{ {{- $first := true -}}{{- range $k, $v := . -}}',
    '{{- if not $first -}},{{- end -}}{{- $first = false -}}{{ printf "%q" $k }}:{{ template "j" $v }}{{- end -}} }',
    '{{- else if eq $t "[]interface {}" -}}[{{- range $i, $v := . -}}{{- if $i -}},{{- end -}}{{ template "j" $v }}',
    '{{- end -}}]{{- else if eq $t "string" -}}{{ printf "%q" . }}{{- else if eq $t "<nil>" -}}null',
    '{{- else -}}{{ printf "%v" . }}{{- end -}}{{- end -}}',
    '{{ template "j" .Release.Chart.Values }}'])


def chart_args(release):
    """The chart arguments of ``helm template`` and ``helm show`` for a release (k8s_helm_release's shape): the same
    chart the release is installed from (a path, an oci:// reference or a chart in a repository), at its version."""
    source = release.get("source")
    if source == "path":
        return [release["chart_ref"]]
    args = [release["chart_ref"], "--version", str(release["chart_version"])]
    if source == "repo":
        args += ["--repo", release["chart_repo_url"]]
    elif source != "oci":
        raise ValueError("Helm release %s: unknown chart source %r (path, oci or repo)" % (release.get("name"), source))
    return args


# `helm get all --template`: the deployed release's manifest, then each file of its chart's crds/ folder (Helm keeps
# the chart's files, crds/ among them, in the release) under the `# Source:` line `helm template` would give it, so
# that rendered_crds reads the CRDs the deployed chart ships as it reads the new chart's. Built-in functions only;
# one line (the line breaks are the template's own \n escapes).
DEPLOYED_CRDS_TEMPLATE = "".join([
    '{{ .Release.Manifest }}{{ range .Release.Chart.Files }}{{ if eq (printf "%.5s" .Name) "crds/" }}',
    '{{ printf "\\n---\\n# Source: %s/%s\\n%s\\n" $.Release.Chart.Metadata.Name .Name .Data }}{{ end }}{{ end }}'])


def deployed_version(listed_chart, chart=""):
    """The chart version of ``helm list``'s ``chart`` column (``<name>-<version>``); "" when it cannot be read."""
    listed_chart = listed_chart or ""
    if chart and listed_chart.startswith(chart + "-"):
        return listed_chart[len(chart) + 1:]
    match = re.match(r"^.+?-(v?[0-9]+(\.[0-9]+)*([-+][0-9A-Za-z.+-]*)?)\Z", listed_chart)
    return match.group(1) if match else ""


def rendered_crds(text, load):
    """The CRDs of ``helm template --include-crds`` output: ``[(crd, from_crds_dir)]``, in the order rendered.

    Helm heads each document with ``# Source: <chart>/<path>``; a CRD from the chart's ``crds/`` folder (which
    ``helm upgrade`` never updates) is told from one that a template makes (which it does). ``load`` parses YAML.
    """
    out, path = [], ""
    for doc in re.split(r"(?m)^---[ \t]*$", text or ""):
        source = re.search(r"(?m)^# Source: ([^\n]+)$", doc)
        # A file of crds/ that starts with its own `---` leaves the Source line alone in the document before it.
        path = source.group(1).strip() if source else path
        if not re.search(r"(?m)^kind:\s*CustomResourceDefinition\s*$", doc):
            continue
        obj = load(doc)
        if isinstance(obj, Mapping) and obj.get("kind") == "CustomResourceDefinition":
            out.append((obj, path.split("/", 1)[-1].startswith("crds/")))
        path = ""
    return out


def shipped_crds(rendered):
    """The CRDs a chart ships (rendered_crds' pairs), by name: ``[{"name", "deleted"}]``, ``deleted`` telling whether
    ``helm upgrade`` deletes the CRD (and with it every object of its kind) once the next chart no longer ships it:
    Helm deletes what the release's manifest has and the new one lacks - a CRD of the chart's templates - unless the
    manifest annotates it ``helm.sh/resource-policy: keep``; it never touches a CRD of the crds/ folder."""
    out = {}
    for crd, crds_dir in rendered:
        annotations = (crd.get("metadata") or {}).get("annotations") or {}
        out[crd_name(crd)] = not crds_dir and annotations.get("helm.sh/resource-policy") != "keep"
    return [{"name": name, "deleted": out[name]} for name in sorted(out)]


def merged_values(base, over):
    """``over`` deep-merged onto ``base`` (maps key by key, anything else replaced), as Helm merges values."""
    out = dict(base or {})
    for key, value in (over or {}).items():
        out[key] = merged_values(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) else value
    return out
