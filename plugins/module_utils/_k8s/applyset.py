# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): ApplySet ids, group-kinds and pruning (pure).
"""ApplySet bookkeeping (KEP-3659, as `kubectl apply --prune --applyset` does it).

One ApplySet per layer: a parent Secret carries the label
``applyset.kubernetes.io/id`` and the annotations ``applyset.kubernetes.io/tooling``
and ``applyset.kubernetes.io/contains-group-kinds``; every member object carries
``applyset.kubernetes.io/part-of=<id>``. The pure functions here compute the id,
the group-kind list and what to prune; the API calls are in the k8s_applyset module.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import hashlib

ID_LABEL = "applyset.kubernetes.io/id"
PART_OF_LABEL = "applyset.kubernetes.io/part-of"
TOOLING_ANNOTATION = "applyset.kubernetes.io/tooling"
GROUP_KINDS_ANNOTATION = "applyset.kubernetes.io/contains-group-kinds"
TOOLING = "gpuops.platform/v1"
# The recommended label (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/),
# one value on every member, so that one selector finds everything the collection manages.
MANAGED_BY_LABEL, MANAGED_BY = "app.kubernetes.io/managed-by", "gpuops.platform"
PARENT_KIND, PARENT_GROUP = "Secret", ""

# Never members: nodes belong to the cluster (gpu_nodes only labels them).
NOT_MEMBERS = frozenset(["Node"])
# Never pruned, whoever labelled them.
PROTECTED_NAMESPACES = frozenset(["default", "kube-system", "kube-public", "kube-node-lease"])
# Created in every namespace by Kubernetes itself: not "foreign" objects.
NAMESPACE_DEFAULTS = frozenset([("ServiceAccount", "", "default"), ("ConfigMap", "", "kube-root-ca.crt")])
# Kinds the API server derives from others, never listed when looking for foreign objects: v1 Endpoints
# mirror a Service (deprecated since Kubernetes 1.33, every request draws a warning), Events record what happened.
NOT_LISTED_FOR_FOREIGN = frozenset([("", "Endpoints"), ("", "Event"), ("events.k8s.io", "Event")])


def applyset_id(name, namespace, kind=PARENT_KIND, group=PARENT_GROUP):
    """kubectl's ID(): "applyset-" + base64url(sha256(<name>.<namespace>.<kind>.<group>)), unpadded, + "-v1"."""
    digest = hashlib.sha256(".".join([name, namespace, kind, group]).encode("utf-8")).digest()
    return "applyset-%s-v1" % base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def group_of(api_version):
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def group_kind(obj):
    """``Kind`` for the core group, else ``Kind.group`` (schema.GroupKind.String())."""
    group = group_of(obj.get("apiVersion") or "")
    return "%s.%s" % (obj["kind"], group) if group else obj["kind"]


def identity(obj):
    """(group, kind, namespace, name): what makes two objects the same across API versions."""
    meta = obj.get("metadata") or {}
    return (group_of(obj.get("apiVersion") or ""), obj.get("kind"), meta.get("namespace") or "", meta.get("name"))


def is_member(obj):
    return obj.get("kind") not in NOT_MEMBERS


def with_membership(objects, set_id):
    """The objects with ``part-of`` and ``managed-by`` set (Nodes left as they are); inputs are not modified."""
    out = []
    for obj in objects or []:
        if is_member(obj):
            obj = dict(obj)
            meta = dict(obj.get("metadata") or {})
            labels = dict(meta.get("labels") or {})
            labels[PART_OF_LABEL] = set_id
            labels[MANAGED_BY_LABEL] = MANAGED_BY
            meta["labels"] = labels
            obj["metadata"] = meta
        out.append(obj)
    return out


def group_kinds(objects):
    return sorted(set(group_kind(o) for o in objects or [] if is_member(o)))


def parse_group_kinds(text):
    return sorted(set(p.strip() for p in (text or "").split(",") if p.strip()))


def being_deleted(obj):
    """Deletion has begun (metadata.deletionTimestamp); the object stays until its finalizers clear."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _dropped(found, planned, set_id):
    """This set's members that the plan no longer has, in deletion order: namespaced objects first, namespaces last."""
    wanted = set(identity(o) for o in planned or [])
    out = []
    for obj in found or []:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if labels.get(PART_OF_LABEL) != set_id or identity(obj) in wanted:
            continue
        if obj.get("kind") == "Namespace" and identity(obj)[3] in PROTECTED_NAMESPACES:
            continue
        out.append(obj)
    rank = {True: 0, False: 1}
    out.sort(key=lambda o: (o.get("kind") == "Namespace", rank[bool(identity(o)[2])], identity(o)))
    return out


def prune_candidates(found, planned, set_id):
    """Members found on the cluster that the plan no longer has and that are not being deleted already.

    Only objects that carry this set's part-of label count (the label is the
    ApplySet's proof of ownership); protected namespaces never. An object
    whose deletion has begun counts as gone (see finalizing).
    """
    return [o for o in _dropped(found, planned, set_id) if not being_deleted(o)]


def finalizing(found, planned, set_id):
    """The dropped members whose deletion has begun and that wait for their finalizers: no DELETE again."""
    return [o for o in _dropped(found, planned, set_id) if being_deleted(o)]


def foreign_objects(objects, own_ids):
    """Objects in a namespace that the collection did not create: no part-of label of ours,
    not owned by another object (controllers clean those up), not a Kubernetes default."""
    out = []
    for obj in objects or []:
        meta = obj.get("metadata") or {}
        ours = (meta.get("labels") or {}).get(PART_OF_LABEL) in own_ids
        default = (obj.get("kind"), group_of(obj.get("apiVersion") or ""), meta.get("name")) in NAMESPACE_DEFAULTS
        if ours or meta.get("ownerReferences") or default or obj.get("kind") == "Event":
            continue
        out.append(obj)
    return out


def describe(obj):
    group, kind, namespace, name = identity(obj)
    return "%s%s %s%s" % (kind, "." + group if group else "", namespace + "/" if namespace else "", name)
