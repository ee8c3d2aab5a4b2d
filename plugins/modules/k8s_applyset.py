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
short_description: Track a layer's objects as an ApplySet and prune what it no longer plans
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
  - Only objects that carry this ApplySet's C(part-of) label are ever deleted. A namespace that holds objects the
    collection did not create (no C(part-of) label of the collection, no owner, not one of Kubernetes' own
    defaults) is kept unless O(prune_namespaces_with_foreign_objects) is set. C(default), C(kube-system),
    C(kube-public) and C(kube-node-lease) are never deleted.
  - Used by the C(gpuops.platform.k8s_apply) role after a layer's objects are applied; connection options come from
    the play's C(module_defaults) like those of kubernetes.core.
options:
  name:
    description: Name of the parent Secret.
    type: str
    required: true
  namespace:
    description: Namespace of the parent Secret; created when missing.
    type: str
    required: true
  objects:
    description: The layer's planned objects (only C(apiVersion), C(kind) and C(metadata.name)/C(namespace) are read).
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
"""

RETURN = r"""
id:
  description: The ApplySet id, the value of every member's C(applyset.kubernetes.io/part-of) label.
  returned: always
  type: str
  sample: applyset-0eFHV8ySqp7XoShsGvyWFQD3s96yqwHmzc4e0HR1dsY-v1
pruned:
  description: Members deleted (in check mode, or with O(prune=false), that would be deleted), as C(Kind.group ns/name).
  returned: always
  type: list
  elements: str
kept:
  description: Members the plan no longer has but that were kept, with the reason.
  returned: always
  type: list
  elements: str
group_kinds:
  description: The group-kinds recorded in the parent.
  returned: always
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


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            namespace=dict(type="str", required=True),
            objects=dict(type="list", elements="dict", default=[]),
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
        supports_check_mode=True,
    )
    if not HAS_K8S:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=K8S_ERROR)
    params = module.params
    set_id = aset.applyset_id(params["name"], params["namespace"])
    planned = [o for o in params["objects"] if aset.is_member(o)]
    for obj in planned:
        if not isinstance(obj.get("metadata"), dict) or not obj["metadata"].get("name") or not obj.get("kind") \
                or not obj.get("apiVersion"):
            module.fail_json(msg="objects: every object needs apiVersion, kind and metadata.name; got %r" % (obj,))
    try:
        client = get_api_client(_Module(module))
        secrets = client.resource("Secret", "v1")
        namespaces = client.resource("Namespace", "v1")
        try:
            parent = secrets.get(name=params["name"], namespace=params["namespace"]).to_dict()
        except NotFoundError:
            parent = None
        meta = (parent or {}).get("metadata") or {}
        tooling = (meta.get("annotations") or {}).get(aset.TOOLING_ANNOTATION)
        if parent and tooling and tooling.split("/", maxsplit=1)[0] != aset.TOOLING.split("/", maxsplit=1)[0]:
            module.fail_json(msg="Secret %s/%s is the parent of an ApplySet of %s, not of this collection: choose another "
                                 "gpuops_k8s_applyset_namespace." % (params["namespace"], params["name"], tooling))
        recorded = aset.parse_group_kinds((meta.get("annotations") or {}).get(aset.GROUP_KINDS_ANNOTATION))
        found, unlisted = [], []
        for group_kind in sorted(set(recorded) | set(aset.group_kinds(planned))):
            resource = _resource(client, group_kind)
            if resource is None:  # no longer served: nothing of that kind can exist
                unlisted.append(group_kind)
                continue
            found += [dict(o, apiVersion=o.get("apiVersion") or resource.group_version, kind=o.get("kind") or resource.kind)
                      for o in _items(resource.get(label_selector="%s=%s" % (aset.PART_OF_LABEL, set_id)))]
        candidates = aset.prune_candidates(found, planned, set_id)
        pruned, kept = [], []
        foreign_ok = params["prune_namespaces_with_foreign_objects"]
        for obj in candidates:
            name = aset.describe(obj)
            if not params["prune"]:
                kept.append("%s (gpuops_k8s_prune is off)" % name)
                continue
            if obj["kind"] == "Namespace" and not foreign_ok:
                ns = obj["metadata"]["name"]
                foreign = []
                for res in client.resources.search(namespaced=True):
                    if not _listable(res):
                        continue
                    items = [dict(o, apiVersion=o.get("apiVersion") or res.group_version, kind=o.get("kind") or res.kind)
                             for o in _items(res.get(namespace=ns))]
                    foreign += aset.foreign_objects(items, [set_id])
                if foreign:
                    kept.append("%s (holds objects this collection did not create: %s; set "
                                "gpuops_k8s_prune_namespaces_with_foreign_objects to delete it anyway)"
                                % (name, ", ".join(sorted(aset.describe(f) for f in foreign)[:5])))
                    continue
            pruned.append(name)
            if not module.check_mode:
                group, kind, namespace, oname = aset.identity(obj)
                res = client.resource(kind, obj["apiVersion"])
                try:
                    res.delete(name=oname, namespace=namespace or None)
                except NotFoundError:
                    pass
        kept_objects = [o for o in candidates if aset.describe(o) not in pruned]
        group_kinds = sorted(set(aset.group_kinds(planned)) | set(aset.group_kinds(kept_objects)))
        desired = {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": params["name"], "namespace": params["namespace"],
                         "labels": {aset.ID_LABEL: set_id},
                         "annotations": {aset.TOOLING_ANNOTATION: aset.TOOLING,
                                         aset.GROUP_KINDS_ANNOTATION: ",".join(group_kinds)}},
        }
        parent_changed = (meta.get("labels") or {}).get(aset.ID_LABEL) != set_id or tooling != aset.TOOLING \
            or recorded != group_kinds
        if parent_changed and not module.check_mode:
            try:
                namespaces.get(name=params["namespace"])
            except NotFoundError:
                namespaces.server_side_apply(body={"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": params["namespace"]}},
                                             name=params["namespace"], field_manager=params["field_manager"])
            secrets.server_side_apply(body=desired, name=params["name"], namespace=params["namespace"],
                                      field_manager=params["field_manager"], force_conflicts=True)
    except Exception as exc:  # the API client raises many types; all mean the same to the user
        module.fail_json(msg="ApplySet %s/%s: %s" % (params["namespace"], params["name"], exc),
                         exception=traceback.format_exc())
    module.exit_json(changed=bool(pruned) or parent_changed, id=set_id, pruned=pruned, kept=kept,
                     group_kinds=group_kinds, unlisted_group_kinds=unlisted)


if __name__ == "__main__":
    main()
