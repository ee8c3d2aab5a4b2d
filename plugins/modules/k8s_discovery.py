#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_discovery
short_description: The API resources a Kubernetes cluster serves and its version, in as few calls as it allows
version_added: 0.1.0
author:
  - gpuops.platform maintainers (@gpuops)
description:
  - Reads every resource the API server serves, as one table, and its version.
  - Where the server offers aggregated discovery (Kubernetes 1.30 and later, see
    U(https://kubernetes.io/docs/concepts/overview/kubernetes-api/#aggregated-discovery)), the table takes two
    calls, C(GET /api) and C(GET /apis) asked for the C(apidiscovery.k8s.io/v2) APIGroupDiscoveryList, as kubectl
    does. A server that answers with the plain lists instead gets one more C(GET) per served group-version (the
    legacy discovery, as C(kubernetes.core.k8s_cluster_info) does), so nothing is lost.
  - The version is the C(GET /version) answer that kubernetes.core's client holds (see the notes), asked when the
    client started without a cache file, else read from it. Where the served group-versions, or the resources of
    one, differ from the cache's (an upgrade, a CRD established since), the module asks C(GET /version) again, as
    kubernetes.core does when its cache misses a kind.
  - A group-version that its aggregated API server cannot serve now (C(Stale) in the aggregated answer, 503 or 404 in
    the legacy one) is left out of the table and named in RV(stale).
  - Used once per run by the C(gpuops.platform.k8s_apply) role (C(tasks_from=discover)); connection options come from
    the play's C(module_defaults) like those of kubernetes.core.
options:
  namespaces:
    description:
      - Also list the cluster's namespaces (one C(GET /api/v1/namespaces)), returned in RV(namespaces).
      - The C(gpuops.platform.k8s_apply) role asks for them in check mode, where the server cannot dry-run an object
        in a namespace that the run would create; one module run then reads both.
    type: bool
    default: false
  nodes:
    description:
      - Also list the cluster's nodes (one C(GET /api/v1/nodes)), returned in RV(nodes), each cut to what the
        roles read of it.
      - The C(gpuops.platform.gpu_nodes) role reads them to refuse a GPU node that is not a Kubernetes node and to
        taint only the nodes that lack a taint; one module run then reads both. The label apply
        (M(gpuops.platform.k8s_server_side_apply)'s O(gpuops.platform.k8s_server_side_apply#module:nodes)) takes
        them as the Nodes' states before, so no Node is read again.
    type: bool
    default: false
  token_kubeconfig:
    description:
      - First write O(api_key) and O(host) into a private kubeconfig, as M(gpuops.platform.k8s_token_kubeconfig) does
        (mode 0600 in a new 0700 folder under the temporary folder), connect through it, and return its path in
        RV(token_kubeconfig), for every later module of the run; remove it at the end of the run with
        M(gpuops.platform.k8s_token_kubeconfig) O(gpuops.platform.k8s_token_kubeconfig#module:state=absent).
      - Needs O(host) and O(api_key), and refuses O(kubeconfig) and O(context), which the token would override.
      - Written in check mode too, as the discovery cache is (a run artefact, not managed state). When discovery
        fails, the module removes it again before it fails, so no token stays behind.
      - The C(gpuops.platform.k8s_apply) role's C(discover) sets it for C(gpuops_k8s_api_key), one module run instead
        of two.
    type: bool
    default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpuops.platform.attributes
  - gpuops.platform.attributes.node
  - gpuops.platform.attributes.read_only
notes:
  - kubernetes.core's client, whose connection handling this module shares, reads its discovery cache file (under the
    temporary folder, one per server and user) when it starts and, when there is none, asks C(GET /version) and
    C(GET /apis) to write it; a lookup of a kind then asks its group-version (C(GET /api/v1) for a Node). This
    module writes into that file every served group-version with its resources, through the discoverer's own
    code, so that no later kubernetes.core client of the run asks the server for discovery again.
  - That file is kubernetes.core's cache, which its client writes in check mode too; nothing on the cluster changes.
  - So a run costs C(GET /api) and C(GET /apis) where the server aggregates discovery and the cache file is there,
    and C(GET /version) and a plain C(GET /apis) more without one (a fresh execution environment).
requirements:
  - kubernetes (Python) >= 24.2.0
"""

EXAMPLES = r"""
- name: Discover the cluster's APIs and version
  gpuops.platform.k8s_discovery:
  register: cluster

- name: Discover through a private kubeconfig of the API token (removed at the end of the run)
  gpuops.platform.k8s_discovery:
    host: https://10.0.0.1:6443
    api_key: "{{ k8s_token }}"
    token_kubeconfig: true
  register: cluster_with_token

- name: Whether the Prometheus Operator is installed
  ansible.builtin.debug:
    msg: "{{ 'monitoring.coreos.com/v1/ServiceMonitor' in cluster.api_kinds }}"
"""

RETURN = r"""
api_table:
  description:
    - One entry per served top-level resource (subresources are not listed), for every served version.
    - C(preferred) is true for the rows of the group's preferred version.
    - C(verbs) are the resource's verbs as discovery names them, sorted; a virtual kind such as v1 C(Binding) or
      C(LocalSubjectAccessReview) takes C(create) only, so nothing lists it.
  returned: always
  type: list
  elements: dict
  sample:
    - {group: apps, version: v1, kind: Deployment, resource: deployments, namespaced: true, preferred: true,
       verbs: [create, delete, deletecollection, get, list, patch, update, watch]}
api_kinds:
  description: Sorted C(apiVersion/Kind) strings of every served version.
  returned: always
  type: list
  elements: str
  sample: [apps/v1/Deployment, monitoring.coreos.com/v1/ServiceMonitor, v1/Pod]
api_resources:
  description: Sorted C(<plural>.<group>) names of the resources of named groups, as their CRDs are named.
  returned: always
  type: list
  elements: str
  sample: [deployments.apps, servicemonitors.monitoring.coreos.com]
server_version:
  description: The server's Kubernetes C(major.minor), digits only, from RV(version).
  returned: always
  type: str
  sample: "1.36"
version:
  description: The server's C(/version) answer, as kubernetes.core's client holds it (see the description).
  returned: always
  type: dict
  sample: {major: "1", minor: "36", gitVersion: v1.36.0}
aggregated:
  description: Whether the server answered both C(/api) and C(/apis) with the aggregated discovery document.
  returned: always
  type: bool
token_kubeconfig:
  description: The private kubeconfig written with O(token_kubeconfig=true); empty otherwise.
  returned: always
  type: str
  sample: /tmp/gpuops-k8s-3xq0v1yz/kubeconfig
stale:
  description: Group-versions left out because their API server could not answer now.
  returned: always
  type: list
  elements: str
  sample: [visibility.kueue.x-k8s.io/v1beta1]
namespaces:
  description: Sorted names of the cluster's namespaces, with O(namespaces=true); else empty.
  returned: always
  type: list
  elements: str
  sample: [default, gpu-operator, kube-system]
nodes:
  description:
    - The cluster's Nodes, sorted by name, with O(nodes=true); else empty.
    - Each with only C(apiVersion), C(kind), C(metadata.name), C(metadata.resourceVersion), C(metadata.labels), the
      entries of C(metadata.managedFields) whose C(operation) is C(Apply) (without their C(time)), C(spec.taints)
      and C(status.allocatable).
  returned: always
  type: list
  elements: dict
  sample: [{apiVersion: v1, kind: Node, metadata: {name: gpu-node-01, resourceVersion: "4711", labels: {kubernetes.io/hostname: gpu-node-01}},
            spec: {taints: [{key: gpu, value: "true", effect: NoSchedule}]}, status: {allocatable: {nvidia.com/gpu: "8"}}}]
requests:
  description:
    - The paths this module asked, in order (C(/api), C(/apis), then any legacy group-versions, then C(/version) where
      the cache was of an older state of the server).
    - Not those that kubernetes.core's client asked when it started without a cache file.
  returned: always
  type: list
  elements: str
"""

import copy
import traceback

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import client_cache, discovery, token_kubeconfig
from ansible_collections.gpuops.platform.plugins.module_utils._k8s.api import reader

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException


def _token_kubeconfig(module):
    """The private kubeconfig of O(api_key), which the module then connects through (kubernetes.core's client takes
    a kubeconfig's token as it takes api_key; every later module of the run gets that path)."""
    params = module.params
    # A kubeconfig that an earlier play of the same run wrote for its token is replaced; any other is refused.
    earlier = isinstance(params["kubeconfig"], str) and token_kubeconfig.owned(params["kubeconfig"])
    if (params["kubeconfig"] and not earlier) or params["context"]:
        module.fail_json(msg="token_kubeconfig: the kubeconfig or context given would take the place of api_key: "
                             "give host and api_key alone (or put the token into that kubeconfig's user instead)")
    try:
        path = token_kubeconfig.write(params["host"] or "", params["api_key"] or "")
    except token_kubeconfig.TokenKubeconfigError as exc:
        module.fail_json(msg="token_kubeconfig: %s" % exc)
    except OSError as exc:
        module.fail_json(msg="token_kubeconfig: could not write the kubeconfig: %s (check the temporary folder's space "
                             "and permissions)" % exc)
    params.update(kubeconfig=path, api_key=None)
    return path


def _forget(path):
    try:
        token_kubeconfig.remove(path)
    except (token_kubeconfig.TokenKubeconfigError, OSError):  # the discovery's own failure is the one to report
        pass


def main():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(namespaces=dict(type="bool", default=False), nodes=dict(type="bool", default=False),
                token_kubeconfig=dict(type="bool", default=False))
    module = AnsibleK8SModule(argument_spec=spec, supports_check_mode=True)
    written = _token_kubeconfig(module) if module.params["token_kubeconfig"] else ""
    found = None
    try:
        found, version, server_version, namespaces, nodes = _discover(module)
    except CoreException as exc:
        module.fail_from_exception(exc)
    except discovery.DiscoveryError as exc:
        module.fail_json(msg="Kubernetes API discovery: %s" % exc)
    except Exception as exc:  # the API client raises many types (connection, TLS, 401); all mean the same here
        module.fail_json(msg="Kubernetes API discovery failed: %s" % exc, exception=traceback.format_exc())
    finally:
        if written and found is None:  # failed: nothing else knows its path, so no token file stays behind
            _forget(written)
    table = found["table"]
    module.exit_json(changed=False, api_table=table, api_kinds=discovery.api_kinds(table),
                     api_resources=discovery.api_resources(table), server_version=server_version,
                     version=version, aggregated=found["aggregated"], stale=found["stale"],
                     namespaces=namespaces, nodes=nodes, requests=found["paths"], token_kubeconfig=written)


def _discover(module):
    namespaces, nodes = [], []
    client = get_api_client(module=module)
    # The discoverer read its cache file, or asked /version and /apis to write one, when the client started.
    cached = client_cache.served(client.client.resources)
    get = reader(client)
    found = discovery.discover(get, version=False)
    version = (client.client.version or {}).get("kubernetes")
    if not version or client_cache.changed(cached, client_cache.listed(found["lists"])):
        # The cache is of an older state of the server (an upgrade, a CRD since): its version too.
        found["paths"].append("/version")
        version = get("/version", discovery.JSON)
    server_version = discovery.server_version(version)
    client_cache.fill(client.client.resources, found["lists"], version)
    if module.params["namespaces"]:
        found["paths"].append("/api/v1/namespaces")
        namespaces = discovery.names(get("/api/v1/namespaces", discovery.JSON))
    if module.params["nodes"]:
        found["paths"].append("/api/v1/nodes")
        nodes = discovery.nodes(get("/api/v1/nodes", discovery.JSON))
    return found, version, server_version, namespaces, nodes


if __name__ == "__main__":
    main()
