#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_applyset
short_description: Track each layer's objects as an ApplySet and prune what it no longer plans
version_added: 0.1.0
author:
  - gpuops.platform maintainers (@gpuops)
description:
  - Keeps one ApplySet (KEP-3659, the specification behind C(kubectl apply --prune --applyset)) per layer.
    Its parent is a Secret labelled C(applyset.kubernetes.io/id) with the annotations
    C(applyset.kubernetes.io/tooling) and C(applyset.kubernetes.io/contains-group-kinds); members carry
    C(applyset.kubernetes.io/part-of=<id>), with the id computed as kubectl does.
  - Lists the members of every group-kind the parent names or the plan has (one list call each, by label selector),
    deletes those the plan no longer has (namespaced objects first, namespaces last), then records the
    group-kinds in the parent.
  - With O(sets), one run reconciles the ApplySets of several layers, in their order, with one list call per
    group-kind for all of them (C(part-of in (...))) and one for their parents.
  - Only objects that carry this ApplySet's C(part-of) label are ever deleted. A namespace that holds objects the
    collection did not create (no C(part-of) label of the collection, no owner, not one of Kubernetes' own
    defaults) is kept unless O(prune_namespaces_with_foreign_objects) is set. C(default), C(kube-system),
    C(kube-public) and C(kube-node-lease) are never deleted. That check lists each namespaced kind once, at its
    group's preferred version (never v1 Endpoints or Events), so no deprecated API version is called.
  - A member whose deletion began earlier (C(metadata.deletionTimestamp) set; finalizers hold it) counts as gone:
    it is not deleted again and does not make the run changed; RV(finalizing) names it.
  - Used by the C(gpuops.platform.k8s_apply) role after a layer's objects are applied; connection options come from
    the play's C(module_defaults) like those of kubernetes.core.
options:
  name:
    description: Name of the parent Secret; one of O(name) and O(sets) is required.
    type: str
  namespace:
    description: Namespace of the parent Secrets; created when missing.
    type: str
    required: true
  objects:
    description: The layer's planned objects (only C(apiVersion), C(kind) and C(metadata.name)/C(namespace) are read).
    type: list
    elements: dict
    default: []
  sets:
    description:
      - Several ApplySets at once, instead of O(name) and O(objects); reconciled in this order.
    type: list
    elements: dict
    suboptions:
      name:
        description: Name of the parent Secret.
        type: str
        required: true
      objects:
        description: The layer's planned objects.
        type: list
        elements: dict
        default: []
  prune:
    description: Delete members that the plan no longer has. With V(false) they are listed and kept in the set.
    type: bool
    default: true
  prune_namespaces_with_foreign_objects:
    description: Delete a pruned namespace even when it holds objects the collection did not create.
    type: bool
    default: false
  field_manager:
    description: Field manager of the parent's server-side apply.
    type: str
    default: gpuops-platform
  kubeconfig:
    description: Path of a kubeconfig file (as kubernetes.core; C(K8S_AUTH_KUBECONFIG)).
    type: raw
  context:
    description: Context of the kubeconfig.
    type: str
  host:
    description: URL of the API server.
    type: str
  api_key:
    description: Bearer token.
    type: str
  ca_cert:
    description: CA certificate of the API server.
    type: path
  validate_certs:
    description: Verify the API server's certificate.
    type: bool
extends_documentation_fragment: [gpuops.platform.attributes, gpuops.platform.attributes.node]
attributes:
  check_mode:
    support: full
    details: Lists what would be deleted, deletes nothing and writes no parent.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Once the stale members are pruned and the parent is written, a second run changes nothing.
requirements:
  - kubernetes (Python) >= 24.2.0
"""

EXAMPLES = r"""
- name: Prune what the sharing layer no longer plans
  gpuops.platform.k8s_applyset:
    name: gpuops-gpu-sharing
    namespace: gpuops-system
    objects: "{{ layer_objects }}"

- name: Prune what two layers no longer plan, in one run
  gpuops.platform.k8s_applyset:
    namespace: gpuops-system
    sets:
      - name: gpuops-gpu-sharing
        objects: "{{ sharing_objects }}"
      - name: gpuops-gpu-tenants
        objects: "{{ tenant_objects }}"
"""

RETURN = r"""
id:
  description: The ApplySet id, the value of every member's C(applyset.kubernetes.io/part-of) label.
  returned: with O(name)
  type: str
  sample: applyset-0eFHV8ySqp7XoShsGvyWFQD3s96yqwHmzc4e0HR1dsY-v1
pruned:
  description:
    - Members deleted (in check mode, or with O(prune=false), that would be deleted), as C(Kind.group ns/name).
    - With O(sets), those of every set.
  returned: always
  type: list
  elements: str
kept:
  description: Members the plan no longer has but that were kept, with the reason (with O(sets), of every set).
  returned: always
  type: list
  elements: str
finalizing:
  description:
    - Members the plan no longer has whose deletion began before this run (C(metadata.deletionTimestamp) set) and
      that wait for their finalizers, with the time deletion began (with O(sets), of every set).
    - They count as gone; no DELETE is sent again and they do not make the run changed.
  returned: always
  type: list
  elements: str
group_kinds:
  description: The group-kinds recorded in the parent.
  returned: with O(name)
  type: list
  elements: str
sets:
  description: One result per ApplySet, in the order given (one entry with O(name)).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Name of the parent Secret.
      type: str
    id:
      description: The ApplySet id.
      type: str
    changed:
      description: Whether members were pruned or the parent was written.
      type: bool
    pruned:
      description: As the top-level RV(pruned), for this set.
      type: list
      elements: str
    kept:
      description: As the top-level RV(kept), for this set.
      type: list
      elements: str
    finalizing:
      description: As the top-level RV(finalizing), for this set.
      type: list
      elements: str
    group_kinds:
      description: The group-kinds recorded in this set's parent.
      type: list
      elements: str
    unlisted_group_kinds:
      description: Group-kinds the parent named that the API no longer serves.
      type: list
      elements: str
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import applyset as aset

try:
    from kubernetes.dynamic.exceptions import NotFoundError
    # kubernetes.core's discoverer wraps *List kinds in its own class, not kubernetes.dynamic's.
    from ansible_collections.kubernetes.core.plugins.module_utils.client.resource import ResourceList
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
    HAS_K8S = True
    K8S_ERROR = None
except ImportError:
    HAS_K8S = False
    K8S_ERROR = traceback.format_exc()


class _Module(object):
    """What kubernetes.core's get_api_client reads from a module."""

    def __init__(self, module):
        self._module = module
        self.params = module.params
        self.check_mode = module.check_mode
        self.server_side_dry_run = module.check_mode

    def requires(self, *args, **kwargs):
        return None

    def fail_json(self, **kwargs):
        self._module.fail_json(**kwargs)


def _listable(resource):
    """A resource that can be listed: not a subresource, not discovery's own *List wrapper."""
    return not isinstance(resource, ResourceList) and not getattr(resource, "subresource", None) \
        and "list" in (getattr(resource, "verbs", None) or [])


def _resource(client, group_kind):
    kind, dummy, group = group_kind.partition(".")
    found = [r for r in client.resources.search(kind=kind, group=group) if _listable(r)]
    preferred = [r for r in found if getattr(r, "preferred", False)]
    return (preferred or found or [None])[0]


def _items(result):
    data = result.to_dict() if hasattr(result, "to_dict") else result
    return list((data or {}).get("items") or [])


def _list_members(client, group_kind, ids):
    """Every object of ``group_kind`` that belongs to one of the ApplySets ``ids``, one list call; None when not served."""
    resource = _resource(client, group_kind)
    if resource is None:
        return None
    selector = "%s in (%s)" % (aset.PART_OF_LABEL, ",".join(sorted(ids))) if len(ids) > 1 \
        else "%s=%s" % (aset.PART_OF_LABEL, ids[0])
    return [dict(o, apiVersion=o.get("apiVersion") or resource.group_version, kind=o.get("kind") or resource.kind)
            for o in _items(resource.get(label_selector=selector))]


def _foreign_in(client, namespace, set_id):
    """Objects in ``namespace`` that the collection did not create: one list per namespaced kind, at the group's
    preferred version (every served version shows the same objects; older ones may be deprecated)."""
    foreign = []
    for res in client.resources.search():
        if not _listable(res) or not res.namespaced or not getattr(res, "preferred", False) \
                or (res.group, res.kind) in aset.NOT_LISTED_FOR_FOREIGN:
            continue
        items = [dict(o, apiVersion=o.get("apiVersion") or res.group_version, kind=o.get("kind") or res.kind)
                 for o in _items(res.get(namespace=namespace))]
        foreign += aset.foreign_objects(items, [set_id])
    return foreign


def reconcile(module, client, sets, namespace):
    """Prune each set's stale members and record its group-kinds; one result per set."""
    params = module.params
    secrets = client.resource("Secret", "v1")
    ids = dict((s["name"], aset.applyset_id(s["name"], namespace)) for s in sets)
    # The parents: one list of the Secrets that carry an ApplySet id in that namespace.
    parents = {}
    for secret in _items(secrets.get(namespace=namespace, label_selector=aset.ID_LABEL)):
        parents[(secret.get("metadata") or {}).get("name")] = secret
    plans, wanted = [], {}
    for entry in sets:
        meta = (parents.get(entry["name"]) or {}).get("metadata") or {}
        tooling = (meta.get("annotations") or {}).get(aset.TOOLING_ANNOTATION)
        if tooling and tooling.split("/", maxsplit=1)[0] != aset.TOOLING.split("/", maxsplit=1)[0]:
            module.fail_json(msg="Secret %s/%s is the parent of an ApplySet of %s, not of this collection: choose another "
                                 "gpuops_k8s_applyset_namespace." % (namespace, entry["name"], tooling))
        planned = [o for o in entry.get("objects") or [] if aset.is_member(o)]
        recorded = aset.parse_group_kinds((meta.get("annotations") or {}).get(aset.GROUP_KINDS_ANNOTATION))
        plans.append((entry["name"], ids[entry["name"]], planned, meta, tooling, recorded))
        for group_kind in set(recorded) | set(aset.group_kinds(planned)):
            wanted.setdefault(group_kind, set()).add(ids[entry["name"]])
    # The members: one list call per group-kind for every set that has it.
    found, unlisted = {}, set()
    for group_kind in sorted(wanted):
        items = _list_members(client, group_kind, sorted(wanted[group_kind]))
        if items is None:  # no longer served: nothing of that kind can exist
            unlisted.add(group_kind)
            continue
        for obj in items:
            found.setdefault(((obj.get("metadata") or {}).get("labels") or {}).get(aset.PART_OF_LABEL), []).append(obj)
    results, namespace_checked = [], False
    for name, set_id, planned, meta, tooling, recorded in plans:
        candidates = aset.prune_candidates(found.get(set_id, []), planned, set_id)
        # Deleted already and held by finalizers (a namespace whose objects or an aggregated API are slow to go):
        # gone as far as this run goes, never deleted again.
        finalizing = ["%s (being deleted since %s)" % (aset.describe(o), o["metadata"]["deletionTimestamp"])
                      for o in aset.finalizing(found.get(set_id, []), planned, set_id)]
        pruned, kept = [], []
        for obj in candidates:
            label = aset.describe(obj)
            if not params["prune"]:
                kept.append("%s (gpuops_k8s_prune is off)" % label)
                continue
            if obj["kind"] == "Namespace" and not params["prune_namespaces_with_foreign_objects"]:
                foreign = _foreign_in(client, obj["metadata"]["name"], set_id)
                if foreign:
                    kept.append("%s (holds objects this collection did not create: %s; set "
                                "gpuops_k8s_prune_namespaces_with_foreign_objects to delete it anyway)"
                                % (label, ", ".join(sorted(aset.describe(f) for f in foreign)[:5])))
                    continue
            pruned.append(label)
            if not module.check_mode:
                dummy, kind, obj_namespace, obj_name = aset.identity(obj)
                try:
                    client.resource(kind, obj["apiVersion"]).delete(name=obj_name, namespace=obj_namespace or None)
                except NotFoundError:
                    pass
        kept_objects = [o for o in candidates if aset.describe(o) not in pruned]
        group_kinds = sorted(set(aset.group_kinds(planned)) | set(aset.group_kinds(kept_objects)))
        parent_changed = (meta.get("labels") or {}).get(aset.ID_LABEL) != set_id or tooling != aset.TOOLING \
            or recorded != group_kinds
        if parent_changed and not module.check_mode:
            if not namespace_checked:
                namespace_checked = True
                namespaces = client.resource("Namespace", "v1")
                try:
                    namespaces.get(name=namespace)
                except NotFoundError:
                    namespaces.server_side_apply(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                                                 name=namespace, field_manager=params["field_manager"])
            desired = {
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": name, "namespace": namespace,
                             "labels": {aset.ID_LABEL: set_id},
                             "annotations": {aset.TOOLING_ANNOTATION: aset.TOOLING,
                                             aset.GROUP_KINDS_ANNOTATION: ",".join(group_kinds)}},
            }
            secrets.server_side_apply(body=desired, name=name, namespace=namespace,
                                      field_manager=params["field_manager"], force_conflicts=True)
        results.append({"name": name, "id": set_id, "changed": bool(pruned) or parent_changed, "pruned": pruned,
                        "kept": kept, "finalizing": finalizing, "group_kinds": group_kinds,
                        "unlisted_group_kinds": sorted(gk for gk in unlisted
                                                       if gk in recorded or gk in aset.group_kinds(planned))})
    return results


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str"),
            namespace=dict(type="str", required=True),
            objects=dict(type="list", elements="dict", default=[]),
            sets=dict(type="list", elements="dict", options=dict(
                name=dict(type="str", required=True),
                objects=dict(type="list", elements="dict", default=[]),
            )),
            prune=dict(type="bool", default=True),
            prune_namespaces_with_foreign_objects=dict(type="bool", default=False),
            field_manager=dict(type="str", default="gpuops-platform"),
            kubeconfig=dict(type="raw"),
            context=dict(type="str"),
            host=dict(type="str"),
            api_key=dict(type="str", no_log=True),
            ca_cert=dict(type="path"),
            validate_certs=dict(type="bool"),
        ),
        required_one_of=[("name", "sets")],
        mutually_exclusive=[("name", "sets")],
        supports_check_mode=True,
    )
    if not HAS_K8S:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=K8S_ERROR)
    params = module.params
    sets = params["sets"] if params["sets"] is not None else [{"name": params["name"], "objects": params["objects"]}]
    names = [s["name"] for s in sets]
    if len(set(names)) != len(names):
        module.fail_json(msg="sets: each ApplySet parent name must be given once, got %s" % ", ".join(names))
    for entry in sets:
        for obj in entry["objects"] or []:
            if not aset.is_member(obj):
                continue
            if not isinstance(obj.get("metadata"), dict) or not obj["metadata"].get("name") or not obj.get("kind") \
                    or not obj.get("apiVersion"):
                module.fail_json(msg="objects: every object needs apiVersion, kind and metadata.name; got %r" % (obj,))
    try:
        results = reconcile(module, get_api_client(_Module(module)), sets, params["namespace"])
    except Exception as exc:  # the API client raises many types; all mean the same to the user
        module.fail_json(msg="ApplySet %s/%s: %s" % (params["namespace"], ", ".join(names), exc),
                         exception=traceback.format_exc())
    out = dict(changed=any(r["changed"] for r in results), sets=results,
               pruned=[p for r in results for p in r["pruned"]], kept=[k for r in results for k in r["kept"]],
               finalizing=[f for r in results for f in r["finalizing"]])
    if params["sets"] is None:
        out.update(id=results[0]["id"], group_kinds=results[0]["group_kinds"],
                   unlisted_group_kinds=results[0]["unlisted_group_kinds"])
    module.exit_json(**out)


if __name__ == "__main__":
    main()
