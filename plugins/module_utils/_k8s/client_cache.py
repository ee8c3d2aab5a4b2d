# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): kubernetes.core's discovery cache.
"""kubernetes.core's discovery cache, filled from a discovery already read.

Every kubernetes.core client (``get_api_client``) builds a ``kubernetes.dynamic``
DynamicClient whose discoverer (kubernetes.core's LazyDiscoverer) reads a cache
file under the temporary folder, named after the server and the user, when it
starts. Without one it asks ``GET /version`` and ``GET /apis`` to write it, and
each group-version whose resources a lookup needs costs one more GET
(``GET /api/v1`` for a Node), written back to the file.

``fill`` gives the discoverer the resources of every served group-version from
a discovery read already (discovery.discover's ``lists``) and has the
discoverer write its own file, so that no later client of the run asks the
server again. The resources go through the discoverer's own
``get_resources_for_api_version``, handed the APIResourceList that the legacy
discovery would have answered, and the file through its own writer: the cache
holds what kubernetes.core would have written itself (the tests compare the
two files).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:
    from kubernetes.dynamic.discovery import ResourceGroup
except ImportError:  # the module fails first with kubernetes.core's missing-library message
    ResourceGroup = None


class _Answered(object):
    """The discoverer's client while it reads resources from the APIResourceLists in hand."""

    class _List(object):
        def __init__(self, resources):
            self.resources = resources

    def __init__(self, answers):
        self._answers = answers

    def request(self, method, path, **kwargs):
        # get_resources_for_api_version pops keys off each resource: a copy each time.
        return self._List([dict(r) for r in self._answers[path]])


def _path(prefix, group, version):
    """The path as get_resources_for_api_version asks it (``apis/<group>/<version>``, ``api/v1``)."""
    return "/".join(p for p in (prefix, group, version) if p)


def served(discoverer):
    """``{(group, version): sorted resource names, or None where the cache holds none}`` of every group-version in
    the discoverer's cache (its ``apis`` ``v1`` List entry is not a group-version). Asks nothing: the discoverer
    read its file, or the server, when it started."""
    out = {}
    for prefix, groups in (discoverer.parse_api_groups(request_resources=False) or {}).items():
        for group, versions in groups.items():
            if (prefix, group) == ("apis", ""):
                continue
            for version, resource_group in versions.items():
                # A Resource has a name, a ResourceList (the <Kind>List entries) none.
                names = sorted(vars(r)["name"] for rs in (resource_group.resources or {}).values() for r in rs
                               if vars(r).get("name"))
                out[(group, version)] = names or None
    return out


def listed(lists):
    """served()'s form of discovery.discover's ``lists``."""
    return dict(((group, version), sorted(r["name"] for r in resources if "/" not in r["name"]) or None
                 if resources is not None else None) for group, version, dummy, resources in lists)


def changed(cached, read):
    """Whether the served group-versions, or the resources of one the cache holds resources of, differ."""
    if set(cached) != set(read):
        return True
    return any(names is not None and read[gv] != names for gv, names in cached.items())


def fill(discoverer, lists, version_doc):
    """Give ``discoverer`` (``client.client.resources`` of a kubernetes.core client) every group-version of
    ``lists`` with its resources (none for one that could not be read now: a lookup asks it later, as
    kubernetes.core does) and the server's ``/version`` answer, and have it write its cache file."""
    real = discoverer.client
    answers = dict((_path("apis" if group else "api", group, version), resources)
                   for group, version, dummy, resources in lists if resources is not None)
    discoverer.client = _Answered(answers)
    try:
        groups = discoverer.default_groups(request_resources=False)
        for group, version, preferred, resources in lists:
            prefix = "apis" if group else "api"
            found = (discoverer.get_resources_for_api_version(prefix, group, version, preferred)
                     if resources is not None else {})
            groups[prefix].setdefault(group, {})[version] = ResourceGroup(preferred, resources=found)
    finally:
        discoverer.client = real
    for versions in groups.values():
        for by_version in versions.values():
            for resource_group in by_version.values():
                for kind_resources in resource_group.resources.values():
                    for resource in kind_resources:
                        resource.client = real  # as the discoverer's own lookups give them
    discoverer._cache["resources"] = groups
    discoverer._cache["version"] = {"kubernetes": version_doc}
    discoverer._write_cache()
    discoverer.discover()  # its in-memory table is the new one (no request: the cache holds the resources)
