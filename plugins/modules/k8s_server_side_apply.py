#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_server_side_apply
short_description: Server-side apply Kubernetes objects, group by group, with at most one read per object
version_added: 0.1.0
author:
  - gpuops.platform maintainers (@gpuops)
description:
  - Applies each definition by server-side apply (a C(PATCH) with C(Content-Type application/apply-patch+yaml) and
    a field manager), as C(kubectl apply --server-side) does.
  - Per object it makes one C(GET), the state before the apply (for RV(result.results[].changed) and the diff; a
    C(404) means the apply creates it), and one C(PATCH), whose answer is the object as stored. In check mode the
    C(PATCH) is a dry run (C(dryRun=All)); the server validates and answers with what it would store, and stores
    nothing.
  - The reads go out side by side, up to eight at once, and the writes one by one, in order - the C(GET)s of a
    group's objects all come before the group's first C(PATCH), and with O(applysets) the member lists of every
    kind at once. A read that fails stops its group before any of its writes.
  - Request paths come from O(api_table). A kind the table does not name (for example one whose
    CustomResourceDefinition an earlier group of the same run applied) is looked up with one discovery C(GET) of
    its group-version.
  - O(groups) are applied in order, each with its own conflict and wait settings, so that one task applies
    namespaces, then CustomResourceDefinitions waited for until Established.
  - A field that another field manager owns is a conflict. The module fails, naming the object, the fields and
    the managers, unless the group forces conflicts, which moves those fields to O(field_manager).
  - A C(Warning) header of the API server (a deprecated API version, for example) becomes a warning of the task.
  - Used by the C(gpuops.platform.k8s_apply) role; connection options come from the play's C(module_defaults)
    (C(group/gpuops.platform.k8s)) like those of kubernetes.core.
options:
  groups:
    description:
      - The definitions to apply, in groups applied in this order.
    type: list
    elements: dict
    required: true
    suboptions:
      objects:
        description: Complete object definitions (C(apiVersion), C(kind), C(metadata.name), and C(metadata.namespace)
          for a namespaced kind), applied in this order.
        type: list
        elements: dict
        required: true
      force_conflicts:
        description: Take over the fields another field manager owns instead of failing (C(force=true)).
        type: bool
        default: false
      no_log:
        description:
          - The objects hold secrets. The module refuses to apply them unless the task runs with C(no_log), so that
            their contents reach no output (the module's arguments and results are shown at C(-vvv)).
        type: bool
        default: false
      wait:
        description:
          - Wait, outside check mode, until each object is ready, as kubernetes.core.k8s's C(wait) does with its
            own checks; a CustomResourceDefinition until its C(Established) condition is C(True).
          - The answer of the apply is looked at first, so an object ready already costs no further call.
        type: bool
        default: false
  field_manager:
    description: The field manager that owns what this module applies.
    type: str
    default: gpuops-platform
  api_table:
    description:
      - The resources the API server serves, as the C(gpuops.platform.k8s_discovery) module returns them, each
        C(group), C(version), C(kind), C(resource), C(namespaced) and C(preferred).
      - Empty, each group-version that a definition names is discovered with one C(GET) (C(/api/v1) or
        C(/apis/GROUP/VERSION)).
    type: list
    elements: dict
    default: []
  wait_crds:
    description:
      - Names of CustomResourceDefinitions that something else created, such as a Helm chart's C(crds/), to wait
        for until they exist and are C(Established), outside check mode, before the first group is applied; so that
        the objects of their kinds can follow in the same task.
      - One C(GET) each when it is Established already, else read again after a short pause that doubles up to
        O(wait_sleep) seconds, up to O(wait_timeout) each.
    type: list
    elements: str
    default: []
  wait_timeout:
    description: Seconds to wait for each object of a group with O(groups[].wait), and for each of O(wait_crds).
    type: int
    default: 300
  wait_sleep:
    description:
      - The longest pause, in seconds, between two reads of an object that is not ready yet. The first read comes
        0.05 seconds after the apply's answer, and each pause doubles up to this one, so a CRD that is Established a
        moment after it is applied costs no fixed wait.
    type: int
    default: 5
  nodes:
    description:
      - The cluster's Nodes as M(gpuops.platform.k8s_discovery) listed them (its RV(gpuops.platform.k8s_discovery#module:nodes)),
        earlier in the same run. They are the states before of the Nodes that O(groups) apply, so that none is read
        again. A Node applied that is not among them (one that joined since) is read once, as any other object.
      - A Node found there that the apply would leave as it is (this O(field_manager)'s Apply entry in its
        C(managedFields) owns exactly the labels applied, and the Node has their values) is not applied at all. It
        gets no C(PATCH), RV(result.results[].changed=false), and its RV(result.results[].result) is the Node as
        listed. A Node that would change gets its C(PATCH) (in check mode a dry run, shown in diff mode) as before,
        compared and shown as the same cut of the object as listed.
    type: list
    elements: dict
    default: []
  read:
    description:
      - Kinds to list after everything else, each every object of an C(api_version) and C(kind) across namespaces,
        one C(LIST) each; returned in RV(read). A readiness check of something the applies (or a Helm release
        before them) changed, such as the GPU Operator's C(ClusterPolicy), then needs no module run of its own.
      - A kind the API server does not serve is returned with C(served=false), not an error.
    type: list
    elements: dict
    default: []
    suboptions:
      api_version:
        description: The C(apiVersion) of the kind, C(GROUP/VERSION) or C(v1).
        type: str
        required: true
      kind:
        description: The kind.
        type: str
        required: true
  applysets:
    description:
      - ApplySets (KEP-3659) to reconcile in the same run, as C(gpuops.platform.k8s_applyset) does with its C(sets)
        option. As with C(kubectl apply --server-side --applyset --prune), the objects are applied, then each set's
        members that its plan no longer has are pruned and its parent Secret records its group-kinds.
      - The members are listed before the first apply. An object found among them at the apiVersion it is applied
        at takes its state before from that list, with no C(GET) of its own, so a run that applies what it applied
        before reads nothing per object. A group-kind not served at that time (a CRD of O(groups)) is listed after
        the apply.
      - Give it on the last task that applies the sets' objects, since what is applied after it is not seen.
    type: dict
    suboptions:
      namespace:
        description: Namespace of the parent Secrets; created when missing.
        type: str
        required: true
      sets:
        description: The ApplySets, each its parent C(name) and its planned C(objects) (only C(apiVersion), C(kind)
          and C(metadata.name)/C(namespace) are read); reconciled in this order.
        type: list
        elements: dict
        required: true
        suboptions:
          name:
            description: Name of the parent Secret.
            type: str
            required: true
          objects:
            description: The set's planned objects.
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
  releases:
    description:
      - Helm releases to read and decide on first, in the same run, as M(gpuops.platform.helm_releases) does (one
        C(helm list), then the values or history that each decision needs, side by side; helm connects with the
        same settings).
      - When every release is C(unchanged) (deployed at the wanted chart version, with the wanted values), the
        module goes on and applies O(groups) (and O(applysets), O(read)); a no-op then takes one module run.
        Otherwise it applies nothing and returns RV(helm) with RV(applied=false), so that the releases are
        installed, upgraded or recovered first and the objects applied after them.
      - With O(recover=false), a release left pending fails the task, naming the helm command to run by hand.
      - The entries of P(gpuops.platform.k8s_helm_wanted#filter), whose values are compared by digest only.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Release name.
        type: str
        required: true
      namespace:
        description: Release namespace.
        type: str
        required: true
      chart:
        description: Chart name, as C(helm list) prints it before the version.
        type: str
        default: ""
      chart_version:
        description: Wanted chart version.
        type: str
        required: true
      values_digest:
        description: Digest of the wanted values.
        type: str
        required: true
  recover:
    description: With O(releases), recover a release left pending (see M(gpuops.platform.helm_releases)).
    type: bool
    default: true
  binary_path:
    description: The helm binary for O(releases); by default the one on C(PATH).
    type: path
extends_documentation_fragment:
  - gpuops.platform.attributes
  - gpuops.platform.attributes.node
  - kubernetes.core.k8s_auth_options
attributes:
  check_mode:
    support: full
    details: Every C(PATCH) is a dry run (C(dryRun=All)); the server answers with what it would store and stores
      nothing. Nothing is waited for.
  diff_mode:
    support: full
    details: RV(diff) holds a before and after block per object that changes (or would change, in check mode), which
      C(--diff) prints; each object's result carries C(diff) too, the fields that differ, in kubernetes.core.k8s's
      shape. A Secret's values never show, in either.
  idempotent:
    support: full
    details: An apply of the same definitions changes no object the second time; the server keeps their
      C(metadata.resourceVersion).
requirements:
  - kubernetes (Python) >= 24.2.0
seealso:
  - name: Server-Side Apply
    description: The Kubernetes API reference for server-side apply, field managers and conflicts.
    link: https://kubernetes.io/docs/reference/using-api/server-side-apply/
  - module: kubernetes.core.k8s
"""

EXAMPLES = r"""
- name: Apply the namespaces, then the CRDs, waiting until they are Established
  gpuops.platform.k8s_server_side_apply:
    api_table: "{{ gpuops_k8s_api_table | default([]) }}"
    groups:
      - objects: "{{ namespaces }}"
      - objects: "{{ crds }}"
        wait: true

- name: Apply node labels that another tool set first, taking them over
  gpuops.platform.k8s_server_side_apply:
    field_manager: gpuops-platform
    groups:
      - objects:
          - apiVersion: v1
            kind: Node
            metadata:
              name: gpu-a
              labels:
                nvidia.com/device-plugin.config: ts4
        force_conflicts: true
"""

RETURN = r"""
result:
  description: What each apply did.
  returned: always
  type: dict
  contains:
    results:
      description: One entry per definition, in the order applied, as kubernetes.core.k8s returns each one.
      type: list
      elements: dict
      contains:
        changed:
          description: Whether the apply changed the object (in check mode, would change it); a new object counts
            as changed.
          type: bool
        created:
          description:
            - Whether the apply created the object (in check mode, would create it), by the API's answers - the object
              did not exist when read before the apply, or the server answered with another C(metadata.uid) than the
              one read. An object that existed and was patched is not C(created), only C(changed).
          type: bool
        method:
          description: Always C(apply).
          type: str
          sample: apply
        result:
          description: The object as the server answered the apply (in check mode, the dry run's object).
          type: dict
          sample: {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator", "resourceVersion": "42"}}
        diff:
          description: In diff mode, C(before) and C(after), the parts of the object that differ (empty when
            unchanged; C(before) is empty for a new object); a Secret's values hidden as in RV(diff).
          type: dict
          returned: in diff mode
diff:
  description:
    - In diff mode, one entry per object that the apply changed (in check mode, would change), in the order applied;
      none for an unchanged object. ansible-core's callbacks print each as a unified diff under its headers.
    - C(before) and C(after) are the whole object without the server's bookkeeping (C(managedFields),
      C(resourceVersion), C(generation), C(creationTimestamp), C(uid)); C(before) is empty for a new object.
    - A Secret's C(data) and C(stringData) values (and the C(kubectl.kubernetes.io/last-applied-configuration)
      annotation) show as C(<hidden>), or C(<hidden, changed>) where the value changed.
  returned: in diff mode
  type: list
  elements: dict
  sample:
    - before: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: b}, data: {x: "1"}}
      after: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: b}, data: {x: "2"}}
      before_header: ConfigMap b/a
      after_header: ConfigMap b/a
applysets:
  description: With O(applysets), what C(gpuops.platform.k8s_applyset) returns with its C(sets) option (C(changed),
    C(sets), C(pruned), C(kept), C(finalizing)).
  returned: with O(applysets)
  type: dict
  sample: {"changed": false, "sets": [{"name": "gpuops-gpu-tenants", "changed": false, "pruned": [], "kept": []}],
           "pruned": [], "kept": [], "finalizing": []}
read:
  description: One entry per kind of O(read), in that order, listed after the applies (and the pruning).
  returned: always
  type: list
  elements: dict
  contains:
    api_version:
      description: The kind's C(apiVersion), as asked.
      type: str
    kind:
      description: The kind, as asked.
      type: str
    served:
      description: Whether the API server serves the kind.
      type: bool
    resources:
      description: Every object of the kind, each with its C(apiVersion) and C(kind); empty when it is not served.
      type: list
      elements: dict
  sample: [{"api_version": "nvidia.com/v1", "kind": "ClusterPolicy", "served": true,
            "resources": [{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
                           "status": {"state": "ready"}}]}]
applied:
  description: Whether O(groups) were applied; V(false) only when a release of O(releases) must move first.
  returned: always
  type: bool
helm:
  description: With O(releases), their C(plans) and the helm C(commands) run, as M(gpuops.platform.helm_releases)
    returns them; no values and no digest.
  returned: with O(releases)
  type: dict
  sample: {"plans": [{"name": "gpu-operator", "namespace": "gpu-operator", "action": "unchanged"}],
           "commands": [["list", "--all", "--all-namespaces", "--max", "0", "--filter", "^(?:gpu-operator)$", "-o",
                         "json"]]}
warnings:
  description: Warnings the API server sent (C(Warning) headers), each once.
  returned: when the server sent any
  type: list
  elements: str
"""

import json

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import discovery, reconcile, ssa
from ansible_collections.gpuops.platform.plugins.module_utils._k8s.helm_cli import RELEASE_SPEC, HelmModule, checked_state
from ansible_collections.gpuops.platform.plugins.module_utils._k8s.api import Api

try:
    from kubernetes.dynamic.exceptions import DynamicApiError
except ImportError:  # AnsibleK8SModule reports the missing library
    DynamicApiError = Exception


def _warning_values(headers):
    if headers is None:
        return []
    if hasattr(headers, "getlist"):
        return headers.getlist("Warning")
    return [headers.get("Warning")] if hasattr(headers, "get") and headers.get("Warning") else []


def _status(body):
    try:
        return json.loads(body)
    except (TypeError, ValueError):
        return {}


def transport(client):
    """ssa's request callable on kubernetes' DynamicClient.request: raw REST calls, no discovery."""
    def request(method, path, query=None, body=None, content_type=None):
        try:
            resp = client.request(method, path, body=body, query_params=list(query or []),
                                  content_type=content_type or "application/json", serialize=False)
        except DynamicApiError as exc:
            raise ssa.ApiError(exc.status, _status(exc.body), ssa.parse_warnings(_warning_values(exc.headers)),
                               getattr(exc, "reason", None))
        return json.loads(resp.data.decode("utf-8")), ssa.parse_warnings(_warning_values(resp.headers))
    return request


def _releases(module):
    """The helm state of O(releases), read and decided as helm_releases does; a release left pending without
    recovery fails the task."""
    # kubernetes.core's helm pieces over this module: helm's binary, and the same connection as its environment.
    plans, commands, stops = checked_state(HelmModule(module=module._module), module.params["releases"],
                                           module.params["recover"])
    if stops:
        module.fail_json(msg=" ".join(stops), helm={"plans": plans, "commands": commands})
    return {"plans": plans, "commands": commands}


def main():
    argument_spec = dict(
        groups=dict(type="list", elements="dict", required=True, options=dict(
            objects=dict(type="list", elements="dict", required=True),
            no_log=dict(type="bool", default=False),
            force_conflicts=dict(type="bool", default=False),
            wait=dict(type="bool", default=False),
        )),
        field_manager=dict(type="str", default="gpuops-platform"),
        nodes=dict(type="list", elements="dict", default=[]),
        api_table=dict(type="list", elements="dict", default=[]),
        wait_crds=dict(type="list", elements="str", default=[]),
        wait_timeout=dict(type="int", default=300),
        wait_sleep=dict(type="int", default=5),
        read=dict(type="list", elements="dict", default=[], options=dict(
            api_version=dict(type="str", required=True),
            kind=dict(type="str", required=True),
        )),
        applysets=dict(type="dict", options=dict(
            namespace=dict(type="str", required=True),
            sets=dict(type="list", elements="dict", required=True, options=dict(
                name=dict(type="str", required=True),
                objects=dict(type="list", elements="dict", default=[]),
            )),
            prune=dict(type="bool", default=True),
            prune_namespaces_with_foreign_objects=dict(type="bool", default=False),
        )),
    )
    argument_spec.update(AUTH_ARG_SPEC)
    argument_spec.update(releases=dict(type="list", elements="dict", default=[], options=RELEASE_SPEC),
                         recover=dict(type="bool", default=True), binary_path=dict(type="path"))
    module = AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)
    params = module.params
    results = []
    if not module._module.no_log and any(g["no_log"] for g in params["groups"]):
        module.fail_json(msg="groups: a group with no_log: true holds secrets; apply it in a task with no_log: true, "
                             "so that its objects reach no output")
    helm_state = _releases(module) if params["releases"] else None
    if helm_state and [p for p in helm_state["plans"] if p["action"] != "unchanged"]:
        # A release moves: it goes first, and the objects after it (another run of this module).
        module.exit_json(changed=False, applied=False, helm=helm_state, result={"results": []}, read=[])
    sets = params["applysets"]
    pruning = {}
    read = []
    try:
        client = get_api_client(module)
        request = transport(client.client)
        known = prepared = api = None
        if sets:
            api = Api(client, discovery.check_table(params["api_table"]))
            prepared = reconcile.prepare(api, reconcile.sets_of(sets), sets["namespace"])
            known = reconcile.before_states(prepared[1])
        applier = ssa.Applier(request, ssa.Resources(request, params["api_table"]), params["field_manager"],
                              dry_run=module.check_mode, diff=module._diff, wait_timeout=params["wait_timeout"],
                              wait_sleep=params["wait_sleep"], known=known, listed=params["nodes"],
                              view=discovery.node_state)
        applier.wait_established(params["wait_crds"])
        changed, results = applier.apply_groups(params["groups"])
        if sets:
            prepared = reconcile.after_apply(api, prepared, [r["result"] for r in results])
            pruning = reconcile.summary(reconcile.finish(
                api, prepared, prune=sets["prune"], field_manager=params["field_manager"], check_mode=module.check_mode,
                prune_namespaces_with_foreign_objects=sets["prune_namespaces_with_foreign_objects"]), False)
            changed = changed or pruning["changed"]
        read = applier.read(params["read"])
    except ssa.ApplyError as exc:
        module.fail_json(msg=exc.msg, result={"results": exc.results})
    except (reconcile.ApplySetError, discovery.DiscoveryError) as exc:
        module.fail_json(msg=str(exc), result={"results": results})
    except CoreException as exc:
        module.fail_from_exception(exc)
    except Exception as exc:  # the API client raises many types (connection, TLS); all mean the same to the user
        module.fail_json(msg="Server-side apply: could not talk to the API server: %s" % exc,
                         result={"results": results})
    for warning in applier.warnings:
        module.warn(warning)
    extra = {"diff": applier.diffs} if module._diff else {}
    if sets:
        extra["applysets"] = pruning
    if helm_state:
        extra["helm"] = helm_state
    module.exit_json(changed=changed, applied=True, result={"results": results}, read=read, **extra)


if __name__ == "__main__":
    main()
