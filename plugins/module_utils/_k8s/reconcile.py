# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the k8s_applyset module's run.
"""Reconcile ApplySets on the cluster: list the members, prune what the plan dropped, record the parents.

The decisions are applyset.py's (pure); this module makes the calls, through
api.Api (paths from the served API table, so no discovery happens here):
- one LIST of the parent Secrets of the namespace;
- one LIST per group-kind that a parent records or a plan has, for every set at once;
- per namespace about to be pruned, one LIST per listable namespaced kind at its preferred version (foreign objects);
- a DELETE per pruned member, and a server-side apply per parent that changed (after a GET of the namespace).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import applyset as aset
from ansible_collections.gpuops.platform.plugins.module_utils._k8s import discovery
from ansible_collections.gpuops.platform.plugins.module_utils._k8s import side_by_side

SECRET = discovery.entry("", "v1", "Secret", "secrets", True, True)
NAMESPACE = discovery.entry("", "v1", "Namespace", "namespaces", False, True)


class ApplySetError(Exception):
    """Something the user has to change; the message says what."""


def sets_of(params):
    """The sets of the module's parameters (O(sets), or one of O(name) and O(objects)), checked."""
    sets = params["sets"] if params.get("sets") is not None else [{"name": params["name"], "objects": params["objects"]}]
    names = [s["name"] for s in sets]
    if len(set(names)) != len(names):
        raise ApplySetError("sets: each ApplySet parent name must be given once, got %s" % ", ".join(names))
    for entry in sets:
        for obj in entry.get("objects") or []:
            if not aset.is_member(obj):
                continue
            if not isinstance(obj.get("metadata"), dict) or not obj["metadata"].get("name") or not obj.get("kind") \
                    or not obj.get("apiVersion"):
                raise ApplySetError("objects: every object needs apiVersion, kind and metadata.name; got %r" % (obj,))
    return sets


def _row_of(api, group_kind):
    kind, dummy, group = group_kind.partition(".")
    return api.row(group, kind)


def _list_members(api, group_kind, ids):
    """Every object of ``group_kind`` that belongs to one of the ApplySets ``ids``, one list call; None when not served."""
    return _list_of(api, _row_of(api, group_kind), ids)


def _list_of(api, row, ids):
    """As _list_members, by the kind's table row (None: not served)."""
    if row is None:
        return None
    selector = "%s in (%s)" % (aset.PART_OF_LABEL, ",".join(sorted(ids))) if len(ids) > 1 \
        else "%s=%s" % (aset.PART_OF_LABEL, ids[0])
    return api.list(row, label_selector=selector)


def _foreign_in(api, namespace, set_id):
    """Objects in ``namespace`` that the collection did not create: one list per namespaced kind that takes a list
    (discovery's verbs: v1 Binding and LocalSubjectAccessReview take only create), at the group's preferred version
    (every served version shows the same objects; older ones may be deprecated)."""
    foreign = []
    for row in discovery.preferred_namespaced(api.table, "list"):
        if (row["group"], row["kind"]) in aset.NOT_LISTED_FOR_FOREIGN:
            continue
        items = api.listable(row, namespace)
        foreign += aset.foreign_objects(items or [], [set_id])
    return foreign


def _parents(api, namespace):
    """The parent Secrets of the namespace: one list of the Secrets that carry an ApplySet id."""
    return dict(((s.get("metadata") or {}).get("name"), s) for s in api.list(SECRET, namespace, label_selector=aset.ID_LABEL))


def _plan(entry, parent, set_id, namespace):
    meta = (parent or {}).get("metadata") or {}
    tooling = (meta.get("annotations") or {}).get(aset.TOOLING_ANNOTATION)
    if tooling and tooling.split("/", maxsplit=1)[0] != aset.TOOLING.split("/", maxsplit=1)[0]:
        raise ApplySetError("Secret %s/%s is the parent of an ApplySet of %s, not of this collection: choose another "
                            "gpuops_k8s_applyset_namespace." % (namespace, entry["name"], tooling))
    planned = [o for o in entry.get("objects") or [] if aset.is_member(o)]
    recorded = aset.parse_group_kinds((meta.get("annotations") or {}).get(aset.GROUP_KINDS_ANNOTATION))
    return {"name": entry["name"], "id": set_id, "namespace": namespace, "planned": planned, "meta": meta,
            "tooling": tooling, "recorded": recorded}


def _members(api, plans):
    """``(found, unlisted)``: the members on the cluster by set id, and the group-kinds no longer served."""
    wanted = {}
    for plan in plans:
        for group_kind in set(plan["recorded"]) | set(aset.group_kinds(plan["planned"])):
            wanted.setdefault(group_kind, set()).add(plan["id"])
    found, unlisted = {}, set()
    kinds = sorted(wanted)
    # Each kind's table row first (a kind missing from the table may read it again), then every list at once.
    rows = [_row_of(api, group_kind) for group_kind in kinds]
    listed = side_by_side.in_order(lambda job: _list_of(api, *job), [(row, sorted(wanted[k])) for k, row in zip(kinds, rows)])
    for group_kind, items in zip(kinds, listed):
        if items is None:  # no longer served: nothing of that kind can exist
            unlisted.add(group_kind)
            continue
        for obj in items:
            found.setdefault(((obj.get("metadata") or {}).get("labels") or {}).get(aset.PART_OF_LABEL), []).append(obj)
    return found, unlisted


def _prune(api, plan, found, options):
    """``(candidates, pruned, kept)`` of one set; deletes unless in check mode or pruning is off."""
    candidates = aset.prune_candidates(found, plan["planned"], plan["id"])
    pruned, kept = [], []
    for obj in candidates:
        label = aset.describe(obj)
        if not options["prune"]:
            kept.append("%s (gpuops_k8s_prune is off)" % label)
            continue
        if obj["kind"] == "Namespace" and not options["prune_namespaces_with_foreign_objects"]:
            foreign = _foreign_in(api, obj["metadata"]["name"], plan["id"])
            if foreign:
                kept.append("%s (holds objects this collection did not create: %s; set "
                            "gpuops_k8s_prune_namespaces_with_foreign_objects to delete it anyway)"
                            % (label, ", ".join(sorted(aset.describe(f) for f in foreign)[:5])))
                continue
        pruned.append(label)
        if not options["check_mode"]:
            group, kind, obj_namespace, obj_name = aset.identity(obj)
            row = api.row(group, kind, discovery.split_api_version(obj["apiVersion"])[1])
            if row is not None:  # listed a moment ago, so served
                api.delete(row, obj_name, obj_namespace or None)
    return candidates, pruned, kept


def _write_parent(api, plan, group_kinds, namespace, options, state):
    """Server-side apply the parent Secret (the namespace first, once, when it is missing)."""
    if not state.get("namespace_checked"):
        state["namespace_checked"] = True
        if api.get(NAMESPACE, namespace) is None:
            api.apply(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                      options["field_manager"])
    api.apply(SECRET, {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": plan["name"], "namespace": namespace,
                     "labels": {aset.ID_LABEL: plan["id"]},
                     "annotations": {aset.TOOLING_ANNOTATION: aset.TOOLING,
                                     aset.GROUP_KINDS_ANNOTATION: ",".join(group_kinds)}},
    }, options["field_manager"], force_conflicts=True)


def prepare(api, sets, namespace):
    """What a reconcile reads before it changes anything: each set's plan, and its members on the cluster.

    ``(plans, found, unlisted)``. Listed before the objects are applied, the members are also the state before
    of the objects that are applied again (before_states), so that those need no read of their own; listed
    after, they are what reconcile prunes.
    """
    parents = _parents(api, namespace)
    plans = [_plan(entry, parents.get(entry["name"]), aset.applyset_id(entry["name"], namespace), namespace)
             for entry in sets]
    found, unlisted = _members(api, plans)
    return plans, found, unlisted


def before_states(found):
    """``{(apiVersion, kind, namespace, name): object}`` of every member listed, as ssa.Applier takes it."""
    out = {}
    for members in found.values():
        for obj in members:
            meta = obj.get("metadata") or {}
            out[(obj.get("apiVersion"), obj.get("kind"), meta.get("namespace") or "", meta.get("name"))] = obj
    return out


def after_apply(api, prepared, applied):
    """prepare's answer as it stands once the objects are applied (``applied``: the objects as the server answered
    the applies, dry runs included): an object applied in this run is taken as answered, so one that moved to
    another layer's set (its part-of label changed) is no longer a member of the one it left. The group-kinds that
    were not served before (a CRD applied in the same run) are looked up again, with one more read of the served
    API table, and listed where they are served now."""
    plans, found, unlisted = prepared
    ids = set(p["id"] for p in plans)
    answers = dict((aset.identity(o), o) for o in applied or [] if isinstance(o, dict) and o.get("kind"))
    moved = {}
    for set_id, members in found.items():
        for obj in members:
            if aset.identity(obj) not in answers:
                moved.setdefault(set_id, []).append(obj)
    for obj in answers.values():
        set_id = ((obj.get("metadata") or {}).get("labels") or {}).get(aset.PART_OF_LABEL)
        if set_id in ids:
            moved.setdefault(set_id, []).append(obj)
    still = set()
    if unlisted:
        api.allow_refresh()
        for group_kind in sorted(unlisted):
            wanted = sorted(p["id"] for p in plans if group_kind in p["recorded"] or group_kind in aset.group_kinds(p["planned"]))
            items = _list_members(api, group_kind, wanted) if wanted else None
            if items is None:
                still.add(group_kind)
                continue
            for obj in items:
                if aset.identity(obj) not in answers:
                    moved.setdefault(((obj.get("metadata") or {}).get("labels") or {}).get(aset.PART_OF_LABEL), []).append(obj)
    return plans, moved, still


def finish(api, prepared, prune=True, prune_namespaces_with_foreign_objects=False, field_manager="gpuops-platform",
           check_mode=False):
    """Prune each set's stale members (of ``prepared``, prepare's answer) and record its group-kinds; one result
    per set, in order."""
    options = {"prune": prune, "prune_namespaces_with_foreign_objects": prune_namespaces_with_foreign_objects,
               "field_manager": field_manager, "check_mode": check_mode}
    plans, found, unlisted = prepared
    results, state = [], {}
    for plan in plans:
        members = found.get(plan["id"], [])
        # Deleted already and held by finalizers (a namespace whose objects or an aggregated API are slow to go):
        # gone as far as this run goes, never deleted again.
        finalizing = ["%s (being deleted since %s)" % (aset.describe(o), o["metadata"]["deletionTimestamp"])
                      for o in aset.finalizing(members, plan["planned"], plan["id"])]
        candidates, pruned, kept = _prune(api, plan, members, options)
        kept_objects = [o for o in candidates if aset.describe(o) not in pruned]
        group_kinds = sorted(set(aset.group_kinds(plan["planned"])) | set(aset.group_kinds(kept_objects)))
        parent_changed = (plan["meta"].get("labels") or {}).get(aset.ID_LABEL) != plan["id"] \
            or plan["tooling"] != aset.TOOLING or plan["recorded"] != group_kinds
        if parent_changed and not check_mode:
            _write_parent(api, plan, group_kinds, plan["namespace"], options, state)
        results.append({"name": plan["name"], "id": plan["id"], "changed": bool(pruned) or parent_changed,
                        "pruned": pruned, "kept": kept, "finalizing": finalizing, "group_kinds": group_kinds,
                        "unlisted_group_kinds": sorted(gk for gk in unlisted
                                                       if gk in plan["recorded"] or gk in aset.group_kinds(plan["planned"]))})
    return results


def reconcile(api, sets, namespace, **options):
    """Prune each set's stale members and record its group-kinds (prepare, then finish); one result per set, in
    order. ``options``: finish's."""
    return finish(api, prepare(api, sets, namespace), **options)


def summary(results, single):
    """The module's result: every set's, and with O(name) (``single``) the one set's id and group-kinds on top."""
    out = dict(changed=any(r["changed"] for r in results), sets=results,
               pruned=[p for r in results for p in r["pruned"]], kept=[k for r in results for k in r["kept"]],
               finalizing=[f for r in results for f in r["finalizing"]])
    if single:
        out.update(id=results[0]["id"], group_kinds=results[0]["group_kinds"],
                   unlisted_group_kinds=results[0]["unlisted_group_kinds"])
    return out
