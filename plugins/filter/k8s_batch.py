# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Apply the queued layers of a run phase by phase, and count them per layer.

cluster.yml queues every layer (k8s_apply tasks_from=batch, then main per
layer) and applies them at once (tasks_from=flush): each phase of all the
layers in one call. ``k8s_batch`` merges the queue into those calls;
``k8s_batch_layers`` splits what the calls returned back into one summary
entry per layer, the shape a single-layer apply records.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpuops.platform.plugins.filter.k8s_applyset import k8s_applyset_identities, k8s_applyset_members
from ansible_collections.gpuops.platform.plugins.filter.k8s_objects import (
    k8s_apply_report, k8s_helm_release, k8s_in_namespaces, k8s_manifest, k8s_phases, k8s_release_files, k8s_served)
from ansible_collections.gpuops.platform.plugins.plugin_utils import k8s_apply  # RELEASE_VARIABLES below needs it loaded
from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module, lazy_module

k8s_addons = lazy_module("plugin_utils.k8s_addons")

# Helm's release name rule (pkg/chartutil/validate_name.go): the names go onto
# helm's command lines (helm_releases), so nothing else may pass.
RELEASE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


# What a layer may say (k8s_apply's tasks_from=layers); only layer is required.
LAYER_KEYS = frozenset(("layer", "order", "objects", "template", "errors", "releases", "release_from", "wait_crds",
                        "wait", "no_log", "force_conflicts"))
# Read for each layer with a release_from prefix, in this order, by k8s_layer_variables.
RELEASE_VARIABLES = k8s_apply.RELEASE_SUFFIXES + ["__helm_values", "_values"]


def _layer_list(layers):
    """The layers as given: a list of mappings (a role's <role>__layer may be one layer or a list of them)."""
    if not isinstance(layers, list):
        raise AnsibleFilterError("k8s_apply_layers must be a list of layers, got %r" % (layers,))
    flat = []
    for layer in layers:
        flat += layer if isinstance(layer, list) else [layer]
    for layer in flat:
        if not isinstance(layer, Mapping) or not layer.get("layer") or not isinstance(layer.get("objects", []), list):
            raise AnsibleFilterError("a layer needs a name (layer), and its objects as a list, got %r" % (layer,))
        unknown = sorted(set(layer) - LAYER_KEYS)
        if unknown:
            raise AnsibleFilterError("layer %s: unknown key(s) %s (known: %s)"
                                     % (layer["layer"], ", ".join(unknown), ", ".join(sorted(LAYER_KEYS))))
    return flat


def k8s_layer_variables(layers):
    """The variables that describe the releases of ``layers`` (RELEASE_VARIABLES of each release_from prefix),
    for one ``query('ansible.builtin.vars', ..., default='')`` whose answer k8s_layers takes."""
    return [to_text(layer["release_from"]) + suffix
            for layer in _layer_list(layers) if layer.get("release_from") for suffix in RELEASE_VARIABLES]


def k8s_layer_errors(layers):
    """Every layer's errors (its role's checks of its settings), each as ``<layer>: <error>``, layer by layer."""
    return ["%s: %s" % (layer["layer"], to_text(error)) for layer in _layer_list(layers) for error in layer.get("errors") or []]


def k8s_layer_templates(layers, roles_dir):
    """``{layer: path}``: the objects template (``<roles_dir>/<layer>/templates/objects.yml.j2``) of each layer that
    says ``template``, for one ``query('gpuops.platform.template', ...)`` whose answer k8s_layer_objects takes."""
    out = {}
    for layer in _layer_list(layers):
        if boolean(layer.get("template", False), strict=False):
            path = os.path.join(to_text(roles_dir), to_text(layer["layer"]), k8s_addons.OBJECTS_TEMPLATE)
            if not os.path.isfile(path):
                raise AnsibleFilterError("layer %s says template, but %s does not exist" % (layer["layer"], path))
            out[to_text(layer["layer"])] = path
    return out


def k8s_layer_objects(templates, rendered):
    """``{layer: objects}`` from the rendered templates of k8s_layer_templates, in its order.

    ``rendered`` holds the YAML documents of each template; a document that is a list gives its items, empty
    documents are dropped.
    """
    if len(templates) != len(rendered):
        raise AnsibleFilterError("k8s_layer_objects: %d templates but %d rendered" % (len(templates), len(rendered)))
    out = {}
    for layer, documents in zip(templates, rendered):
        objects = []
        for document in documents or []:
            objects += [o for o in document if o] if isinstance(document, list) else [document] if document else []
        out[layer] = objects
    return out


def k8s_layers(layers, variables, settings, render=False, built=None):
    """Every layer of a run, as flush applies it (and, with ``render``, the files it renders to).

    ``layers``: each ``layer`` (its name), ``objects``, and optionally ``order`` (50), ``releases``,
    ``release_from`` (the prefix of an add-on role's release variables), ``wait_crds``, ``wait``,
    ``no_log`` and ``force_conflicts`` (default: the settings' ``force_conflicts``). ``variables``: the
    values of k8s_layer_variables(layers), in that order (``''`` for one not defined). ``settings``: the
    k8s_apply settings every layer shares, with ``applyset_namespace``. ``built``: the objects of the layers
    that say ``template`` (k8s_layer_objects), after their given ones.

    Each layer gets its ApplySet (parent Secret ``gpuops-<layer>``, the part-of label on every object),
    its phases, its releases (the given ones, then its role's) and whether its output is hidden (a Secret
    object, a sensitive release, or ``no_log``).
    """
    flat = _layer_list(layers)
    refused = [to_text(e) for layer in flat for e in layer.get("errors") or []]
    if refused:
        raise AnsibleFilterError("; ".join(refused))
    values = list(variables or [])
    if len(values) != len(k8s_layer_variables(flat)):
        raise AnsibleFilterError("k8s_layers: %d release variable values for %d names (k8s_layer_variables)"
                                 % (len(values), len(k8s_layer_variables(flat))))
    settings = dict(settings or {})
    namespace = settings.get("applyset_namespace") or "gpuops-system"
    force_default = boolean(settings.pop("force_conflicts", False), strict=False)
    out = []
    for layer in flat:
        name = to_text(layer["layer"])
        objects = list(layer.get("objects") or [])
        if boolean(layer.get("template", False), strict=False):
            if name not in (built or {}):
                raise AnsibleFilterError("layer %s says template, but its objects were not built" % name)
            objects += list(built[name])
        releases = list(layer.get("releases") or [])
        if layer.get("release_from"):
            mine = dict(zip(RELEASE_VARIABLES, values[:len(RELEASE_VARIABLES)]))
            del values[:len(RELEASE_VARIABLES)]
            role_vars = dict((k, mine[k]) for k in k8s_apply.RELEASE_SUFFIXES)
            role_vars["values"] = mine["_values"] if mine["__helm_values"] in ("", None) else mine["__helm_values"]
            releases += k8s_apply.role_release(role_vars, objects)
        set_name = "gpuops-" + name.replace("_", "-")
        members = k8s_applyset_members(objects, set_name, namespace)
        entry = {"layer": name, "order": int(layer.get("order", 50)), "set_name": set_name, "members": members,
                 "phases": k8s_phases(members), "releases": releases,
                 "wait_crds": [to_text(c) for c in layer.get("wait_crds") or []],
                 "wait": boolean(layer.get("wait", False), strict=False),
                 "no_log": any([boolean(layer.get("no_log", False), strict=False),
                                any(o.get("kind") == "Secret" for o in objects),
                                any(r.get("sensitive") for r in releases)]),
                 "force_conflicts": boolean(layer.get("force_conflicts", force_default), strict=False),
                 "objects": len(objects), "settings": settings}
        if render:
            folder = "%02d-%s" % (entry["order"], name)
            files = ([{"path": "manifests.yaml", "content": k8s_manifest(members, "Layer %s: apply in document order." % name)}]
                     if objects else []) + k8s_release_files(releases)
            entry.update(folder=folder, files=files)
        out.append(entry)
    # Stable: layers of one order keep the order they were given in.
    return sorted(out, key=lambda entry: entry["order"])


def _layers(queue):
    if not isinstance(queue, list):
        raise AnsibleFilterError("k8s_batch expects the list of queued layers (k8s_layers), got %r" % (queue,))
    for layer in queue:
        if not isinstance(layer, Mapping) or not layer.get("layer") or not isinstance(layer.get("phases"), Mapping):
            raise AnsibleFilterError("a queued layer needs layer and phases (see k8s_apply's main.yml), got %r" % (layer,))
    # Stable: layers of one order keep the order they were queued in.
    return sorted(queue, key=lambda layer: int(layer.get("order", 50)))


def _settings(layers):
    """The settings every queued layer was handed (field manager, timeouts, Helm recovery, pruning): one flush
    applies one set, so a layer that was given others is refused rather than applied with the wrong ones."""
    settings = None
    for layer in layers:
        mine = dict(layer.get("settings") or {})
        if settings is None:
            settings, first = mine, layer["layer"]
        elif mine != settings:
            differ = sorted(k for k in set(mine) | set(settings) if mine.get(k) != settings.get(k))
            raise AnsibleFilterError(
                "layer %s was queued with other k8s_apply settings than layer %s (%s): one flush applies one set; "
                "set them through the gpuops_k8s_* variables, or apply that layer without tasks_from=batch"
                % (layer["layer"], first, ", ".join(differ)))
    return settings or {}


def _all_force(layers, phase):
    """Force conflicts in a shared phase only when every layer with objects in it forces them."""
    having = [layer for layer in layers if layer["phases"].get(phase)]
    return bool(having) and all(layer.get("force_conflicts") for layer in having)


def k8s_batch(queue, api_kinds=None, namespaces=None, check=False):
    """One apply call per phase for every queued layer.

    Returns ``namespaces`` and ``crds`` (each one call), ``releases`` (Helm,
    layer by layer, normalised by k8s_helm_release), ``release_names`` (each
    name once), ``wait_crds``, ``groups`` (every other object in
    calls of one force-conflicts, no_log and wait setting, layer by layer;
    with no CRD and no release anywhere the namespaces lead the first group,
    one call less), ``no_log`` (any layer hides its output) and, in check
    mode, ``unchecked``: per layer the objects the server cannot dry-run
    (their kind or namespace would be created first). ``applysets`` is the
    ``sets`` of one k8s_applyset run: each layer's parent name and the
    identities (no data) of its objects. ``settings`` is the one set of
    k8s_apply settings the layers share (they must agree);
    ``force_namespaces`` and ``force_crds`` force conflicts only when every
    layer with objects in that phase does. ``queue`` is the queued layers
    themselves, in order: what the flush's later steps take (k8s_chart_upgrades,
    k8s_batch_layers), so one task plans both.
    """
    layers = _layers(queue)
    out = {"namespaces": [], "crds": [], "releases": [], "release_names": [], "wait_crds": [], "groups": [],
           "no_log": False, "unchecked": [], "settings": _settings(layers), "queue": layers,
           "force_namespaces": _all_force(layers, "namespaces"), "force_crds": _all_force(layers, "crds"),
           "applysets": [{"name": layer.get("set_name"), "objects": k8s_applyset_identities(layer.get("members"))}
                         for layer in layers]}
    groups = {}
    for layer in layers:
        phases = layer["phases"]
        out["namespaces"] += list(phases.get("namespaces") or [])
        out["crds"] += list(phases.get("crds") or [])
        for release in layer.get("releases") or []:
            rel = k8s_helm_release(release)
            if len(rel["name"]) > 53 or not RELEASE_NAME.match(rel["name"]):
                raise AnsibleFilterError("Helm release name %r (layer %s) is invalid: lower-case letters, digits, '-' "
                                         "and '.', at most 53 characters (Helm's rule)" % (rel["name"], layer["layer"]))
            out["releases"].append(release)
            if rel["name"] not in out["release_names"]:
                out["release_names"].append(rel["name"])
            out["no_log"] = out["no_log"] or rel["sensitive"]
        out["wait_crds"] += [to_text(c) for c in layer.get("wait_crds") or [] if to_text(c) not in out["wait_crds"]]
        out["no_log"] = out["no_log"] or bool(layer.get("no_log"))
        resources = list(phases.get("resources") or [])
        if check:
            checkable = k8s_in_namespaces(k8s_served(resources, api_kinds), namespaces)
            if len(checkable) < len(resources):
                skipped = [o for o in resources if o not in checkable]
                out["unchecked"].append({"layer": layer["layer"], "count": len(skipped),
                                         "kinds": sorted(set(to_text(o["kind"]) for o in skipped))})
            resources = checkable
        if not resources:
            continue
        key = (bool(layer.get("force_conflicts")), bool(layer.get("no_log")), bool(layer.get("wait")))
        if key not in groups:
            groups[key] = {"force_conflicts": key[0], "no_log": key[1], "wait": key[2], "objects": []}
            out["groups"].append(groups[key])
        groups[key]["objects"] += resources
    # A hidden group stays hidden; the plain one goes first, namespaces lead it.
    out["groups"].sort(key=lambda g: (g["no_log"], g["force_conflicts"], g["wait"]))
    if out["namespaces"] and not out["crds"] and not out["releases"]:
        plain = [g for g in out["groups"] if not g["no_log"] and not g["force_conflicts"] and not g["wait"]]
        if not plain:
            plain = [{"force_conflicts": False, "no_log": False, "wait": False, "objects": []}]
            out["groups"].insert(0, plain[0])
        plain[0]["objects"] = out["namespaces"] + plain[0]["objects"]
        out["namespaces"] = []
    return out


def _ident(obj):
    meta = (obj or {}).get("metadata") or {}
    return (to_text(obj.get("apiVersion") or "").rpartition("/")[0], to_text(obj.get("kind") or ""),
            to_text(meta.get("namespace") or ""), to_text(meta.get("name") or ""))


def _loop_results(registered):
    """The per-item results of a registered loop (or the one result of a plain task), skipped ones left out."""
    if not isinstance(registered, Mapping) or registered.get("skipped") and "results" not in registered:
        return []
    items = registered.get("results") if isinstance(registered.get("results"), list) else [registered]
    return [r for r in items if isinstance(r, Mapping) and not r.get("skipped")]


def _release_key(item):
    """(name, namespace) of a Helm loop item, or None when the item is not a release."""
    if not isinstance(item, Mapping):
        return None
    return to_text(item.get("name")), to_text(item.get("namespace"))


def k8s_batch_layers(queue, applied, helm=None, applysets=None, plans=None):
    """One summary entry per queued layer, from what the batch's calls returned.

    ``applied`` lists the registered k8s_server_side_apply results (namespaces,
    the objects, the hidden objects; kubernetes.core.k8s's shape); an object counts for the layer that
    planned it. ``helm`` is the registered results of the Helm tasks (their
    loop items are the releases), ``applysets`` the registered k8s_applyset
    result (its ``sets``, by parent name) and ``plans`` the Helm decisions of
    helm_releases (its ``plans``).
    """
    layers = _layers(queue)
    k8s_items = []
    for reg in applied or []:
        for res in _loop_results(reg):
            k8s_items.append(res)
    helm_items = []
    for reg in helm or []:
        helm_items += _loop_results(reg)
    sets = dict((to_text(r.get("name")), r) for r in (applysets or {}).get("sets") or [] if isinstance(r, Mapping))
    out = []
    for layer in layers:
        members = set(_ident(o) for o in layer.get("members") or [])
        mine = []
        for res in k8s_items:
            nested = (res.get("result") or {}).get("results") if isinstance(res.get("result"), Mapping) else None
            for item in nested if isinstance(nested, list) else [res]:
                obj = item.get("result") if isinstance(item, Mapping) and isinstance(item.get("result"), Mapping) else {}
                if _ident(obj) in members:
                    mine.append(item)
        releases = [k8s_helm_release(r) for r in layer.get("releases") or []]
        names = set((r["name"], r["namespace"]) for r in releases)
        layer_plans = [p for p in plans or [] if (p.get("name"), p.get("namespace")) in names]
        helm_changed = any(r.get("changed") for r in helm_items if _release_key(r.get("item")) in names)
        applyset = sets.get(to_text(layer.get("set_name"))) or {}
        report = k8s_apply_report(mine, values=not layer.get("no_log"))
        out.append({
            "name": layer["layer"],
            "order": int(layer.get("order", 50)),
            "objects": int(layer.get("objects", len(layer.get("members") or []))),
            "releases": [r["name"] for r in releases],
            "changed": bool(report["created"] or report["changed"] or helm_changed or applyset.get("changed")),
            "report": report,
            "helm": [p.get("action") for p in layer_plans],
            "pruned": list(applyset.get("pruned") or []),
            "kept": list(applyset.get("kept") or []),
            "finalizing": list(applyset.get("finalizing") or []),
            "recovered": ["%s: %s" % (p.get("name"), p.get("reason")) for p in layer_plans if p.get("recover")],
            "files": [],
        })
    return out


FilterModule = filter_module(
    k8s_layers,
    k8s_layer_variables,
    k8s_layer_errors,
    k8s_layer_templates,
    k8s_layer_objects,
    k8s_batch,
    k8s_batch_layers,
)
