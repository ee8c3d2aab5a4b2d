"""playbooks/health.yml against the in-memory API server, from recorded facts in every health state.

Each GPU node's facts are a recorded nvml_facts fixture, replayed by the real
module (gpuops_nvml_replay_file); the warning and critical states are the same
recording with one fault injected and the health recomputed by the collector
(plugins/module_utils/_nvml/collect.py finish()), so the states are the module's own.
"""
import copy
import json

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as nvml
from fake_apiserver import FakeAPIServer
from k8s_support import load_facts, render_cluster

pytestmark = pytest.mark.slow

LABEL = "gpuops.io/gpu-health"
REASONS = "gpuops.io/gpu-health-reasons"
CORDONED = "gpuops.io/gpu-health-cordoned"
OURS = {"key": "gpuops.io/gpu-unhealthy", "value": "true", "effect": "NoSchedule"}
FOREIGN = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
TOKEN = "health-token-5d2e"


def facts(name, fault=None):
    data = copy.deepcopy(load_facts(name))
    if fault:
        fault(data["gpus"])
        for gpu in data["gpus"]:
            gpu.pop("health", None)
        data["health"] = {"status": "ok", "reasons": []}
        nvml.finish(data)
    return data


def ecc_errors(gpus):
    gpus[3]["ecc"]["volatile_uncorrectable"] = 2


def remap_pending(gpus):
    gpus[1]["remapped_rows"]["pending"] = True


STATES = {
    "ok": lambda: facts("hgx-h100"),
    "warning": lambda: facts("hgx-h100", remap_pending),
    "critical": lambda: facts("hgx-h100", ecc_errors),
    "no-gpu": lambda: facts("no-gpu"),
}


def node(name, taints=(), unschedulable=False, labels=None, annotations=None):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict({"kubernetes.io/hostname": name}, **(labels or {})),
                         "annotations": dict(annotations or {})},
            "spec": dict({"taints": [dict(t) for t in taints]}, **({"unschedulable": True} if unschedulable else {}))}


class Fleet(object):
    def __init__(self, tmp_path, api, collections):
        self.tmp_path, self.api, self.collections = tmp_path, api, collections
        self.states = {}
        self.runs = 0

    def state(self, host, state):
        self.states[host] = state
        (self.tmp_path / ("%s.json" % host)).write_text(json.dumps({"ansible_facts": {"nvidia": STATES[state]()}}))

    def run(self, args=(), **extra):
        self.runs += 1
        nodes = dict((h, {"vars": {"gpuops_nvml_replay_file": str(self.tmp_path / ("%s.json" % h)),
                                   "gpu_health_become": False}}) for h in self.states)
        evars = dict({"gpuops_k8s_render_dir": "", "gpuops_k8s_host": self.api.url if self.api else "",
                      "gpuops_k8s_api_key": TOKEN,
                      "gpu_health_cordon": True}, **extra)
        # -vvv: the token must reach the server through the private kubeconfig, never the log.
        result = render_cluster(self.tmp_path / ("run%d" % self.runs), extra_vars=evars, nodes=nodes,
                                playbook="playbooks/health.yml", env={"K8S_AUTH_HOST": None, "K8S_AUTH_KUBECONFIG": None},
                                args=("-vvv",) + tuple(args), collections_path=self.collections)
        assert TOKEN not in result.output
        if self.api and self.api.requests:
            assert self.api.authorizations == {"Bearer " + TOKEN}
        return result


def recap(result, host="localhost"):
    return [line for line in result.output.splitlines() if line.startswith(host + " ")][-1]


def test_health_labels_taints_and_lifts_only_its_own(tmp_path, installed_collection):
    with FakeAPIServer() as api:
        # gpu-ok recovered: still carries our taint and our cordon from an earlier run.
        api.add(node("gpu-ok", taints=[OURS, FOREIGN], unschedulable=True,
                     labels={LABEL: "critical"}, annotations={REASONS: "GPU 3: old", CORDONED: "true"}))
        api.add(node("gpu-warn", taints=[FOREIGN]))
        # gpu-crit was cordoned by someone else: the role taints it but does not claim the cordon.
        api.add(node("gpu-crit", taints=[FOREIGN, NOT_READY]))
        api.add(node("gpu-crit2"))
        api.add(node("cpu-1", taints=[NOT_READY]))
        fleet = Fleet(tmp_path, api, installed_collection)
        for host, state in (("gpu-ok", "ok"), ("gpu-warn", "warning"), ("gpu-crit", "critical"),
                            ("gpu-crit2", "critical"), ("cpu-1", "no-gpu"), ("gpu-gone", "ok")):
            fleet.state(host, state)
        before = copy.deepcopy(api.objects)

        # --check: the plan is reported as changes, nothing is written.
        check = fleet.run(args=["--check"])
        assert api.writes() == [] and api.objects == before
        out = " ".join(check.output.split())
        assert "gpu-crit: critical (GPU 3: 2 uncorrectable ECC errors since the driver loaded); would change: " \
               "label gpuops.io/gpu-health=critical (was unset), annotation gpuops.io/gpu-health-reasons set, " \
               "taint gpuops.io/gpu-unhealthy=true:NoSchedule, cordon" in out
        assert "gpu-gone: left alone: not a Kubernetes node" in out
        assert "cpu-1: left alone: no NVIDIA GPU in its recorded facts" in out
        assert "changed=1" in recap(check)

        fleet.run()
        ok, warn, crit = api.get("Node", "gpu-ok"), api.get("Node", "gpu-warn"), api.get("Node", "gpu-crit")
        assert ok["metadata"]["labels"][LABEL] == "ok"
        assert ok["spec"]["taints"] == [FOREIGN]                  # ours removed, the foreign one kept
        assert "unschedulable" not in ok["spec"]                  # our cordon lifted
        assert REASONS not in ok["metadata"]["annotations"] and CORDONED not in ok["metadata"]["annotations"]
        assert warn["metadata"]["labels"][LABEL] == "warning"
        assert warn["metadata"]["annotations"][REASONS] == "GPU 1: a row remap is pending: reset the GPU to apply it"
        assert warn["spec"]["taints"] == [FOREIGN]                # warning: no taint
        assert crit["metadata"]["labels"][LABEL] == "critical"
        assert crit["spec"]["taints"] == [FOREIGN, NOT_READY, OURS]
        assert crit["spec"]["unschedulable"] is True and crit["metadata"]["annotations"][CORDONED] == "true"
        assert crit["metadata"]["labels"]["kubernetes.io/hostname"] == "gpu-crit"
        assert api.get("Node", "cpu-1") == before[("v1", "nodes", "", "cpu-1")]
        # One list of the nodes, one merge patch per changed node, nothing else.
        patched = sorted(r[1].rsplit("/", 1)[-1] for r in api.writes())
        assert patched == ["gpu-crit", "gpu-crit2", "gpu-ok", "gpu-warn"]
        assert all("merge-patch" in r[3] for r in api.writes())

        # A second run changes nothing.
        writes = len(api.writes())
        second = fleet.run()
        assert len(api.writes()) == writes and "changed=0" in recap(second)

        # gpu-crit heals: our taint and cordon go, the foreign taints stay.
        fleet.state("gpu-crit", "ok")
        fleet.run()
        crit = api.get("Node", "gpu-crit")
        assert crit["spec"]["taints"] == [FOREIGN, NOT_READY]
        assert "unschedulable" not in crit["spec"] and CORDONED not in crit["metadata"]["annotations"]
        assert crit["metadata"]["labels"][LABEL] == "ok" and REASONS not in crit["metadata"]["annotations"]
        assert api.get("Node", "gpu-crit2")["spec"]["taints"] == [OURS]


def test_render_mode_reports_without_api_calls(tmp_path, installed_collection):
    fleet = Fleet(tmp_path, None, installed_collection)
    fleet.state("gpu-crit", "critical")
    # render_cluster points kubernetes.core at an unreachable server: any API call fails the run.
    result = render_cluster(tmp_path / "render", nodes={"gpu-crit": {"vars": {
        "gpuops_nvml_replay_file": str(tmp_path / "gpu-crit.json"), "gpu_health_become": False}}},
        extra_vars={"gpu_health_taint_effect": "NoExecute"}, playbook="playbooks/health.yml",
        collections_path=installed_collection)
    out = " ".join(result.output.split())
    assert "gpu-crit: critical (GPU 3: 2 uncorrectable ECC errors since the driver loaded); would change: " \
           "label gpuops.io/gpu-health=critical (was unset), annotation gpuops.io/gpu-health-reasons set, " \
           "taint gpuops.io/gpu-unhealthy=true:NoExecute" in out
