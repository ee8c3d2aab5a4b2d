# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): requests by the served API table.
"""Requests to the API server by the rows of the served API table (discovery.py).

The connection is kubernetes.core's (``get_api_client``: kubeconfig, K8S_AUTH_*
variables, in-cluster config, proxies, impersonation); the paths come from the
table, so a request never sets off kubernetes.core's per-group-version discovery.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import discovery

try:
    from kubernetes.dynamic.exceptions import ConflictError, MethodNotAllowedError, NotFoundError, ServiceUnavailableError
except ImportError:  # the module fails first with kubernetes.core's missing-library message
    ConflictError = MethodNotAllowedError = NotFoundError = ServiceUnavailableError = None

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"


class Conflict(Exception):
    """409 Conflict: the object changed since the resourceVersion that a guarded write carried."""


def _raw(client, data):
    return data


def reader(client):
    """``get(path, accept)`` for discovery.discover over kubernetes.core's client (K8SClient)."""
    def get(path, accept):
        try:
            return client.client.request("GET", path, header_params={"Accept": accept}, serializer=_raw)
        except (NotFoundError, ServiceUnavailableError) as exc:
            raise discovery.Unavailable("GET %s: %s" % (path, exc))
    return get


class Api(object):
    """List, get, delete and server-side apply by table rows, over kubernetes.core's client (K8SClient)."""

    def __init__(self, client, table=None):
        """``table``: the served API table read earlier in the run; without one, it is read now (discovery.discover).
        A kind missing from a given table (a CRD established since) reads the table again, once."""
        self._read = reader(client)
        self._client = client.client  # kubernetes.dynamic's DynamicClient: requests by path, no lookups
        self._fresh = not table
        self.table = table or self._discover()

    def _discover(self):
        return discovery.discover(self._read, version=False)["table"]

    def row(self, group, kind, version=None):
        """The table row of ``kind`` in ``group`` (see discovery.find); None when not served."""
        found = discovery.find(self.table, group, kind, version)
        if found is None and not self._fresh:
            self._fresh, self.table = True, self._discover()
            found = discovery.find(self.table, group, kind, version)
        return found

    def allow_refresh(self):
        """Let the next kind missing from the table read it again (once more): after objects were applied in the
        same run, a CRD among them may serve a kind the table read before lacks."""
        self._fresh = False

    def _request(self, method, path, **params):
        return self._client.request(method, path, serializer=_raw, **params)

    def list(self, row, namespace=None, label_selector=None):
        """The objects of a row's resource (every namespace unless ``namespace``), apiVersion and kind filled in
        (a list's items carry neither)."""
        api_version = discovery.group_version(row["group"], row["version"])
        found = self._request("GET", discovery.path(row, namespace), label_selector=label_selector) or {}
        return [dict(o, apiVersion=o.get("apiVersion") or api_version, kind=o.get("kind") or row["kind"])
                for o in found.get("items") or []]

    def listable(self, row, namespace=None):
        """As list, or None when the resource takes no list (405: a virtual kind such as Binding, in a table built by
        hand without verbs; a discovered table names the verbs, see discovery.allows)."""
        try:
            return self.list(row, namespace)
        except MethodNotAllowedError:
            return None

    def get(self, row, name, namespace=None):
        """One object, or None when there is none."""
        try:
            return self._request("GET", discovery.path(row, namespace, name))
        except NotFoundError:
            return None

    def delete(self, row, name, namespace=None):
        """Delete one object; one that is gone already is fine."""
        try:
            self._request("DELETE", discovery.path(row, namespace, name))
        except NotFoundError:
            pass

    def merge_patch(self, row, name, body, namespace=None):
        """A JSON merge patch of one object; Conflict when ``body`` carries a ``metadata.resourceVersion`` that is no
        longer the object's (the server's precondition)."""
        try:
            return self._request("PATCH", discovery.path(row, namespace, name), body=body, content_type=MERGE_PATCH)
        except ConflictError:
            raise Conflict("%s %s changed since it was read" % (row["kind"], name))

    def apply(self, row, body, field_manager, force_conflicts=False):
        """Server-side apply of ``body`` (the server answers with the object as stored)."""
        meta = body["metadata"]
        return self._request("PATCH", discovery.path(row, meta.get("namespace"), meta["name"]), body=body,
                             content_type=APPLY_PATCH, field_manager=field_manager,
                             force_conflicts=True if force_conflicts else None)
