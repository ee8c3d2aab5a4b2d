"""Helm releases installed, left alone and upgraded through gpuops.platform.k8s_apply with the real pinned helm against
the in-memory API server (it stores helm's release Secrets, sent as protobuf, and the chart's objects), one layer at a
time (one_layer.yml); helm runs behind a wrapper that logs each call (conftest.py, HelmCalls).

What a person sees: no warning or deprecation notice on a first apply, a no-op or an upgrade, and a release that a
killed helm left pending-install or pending-upgrade recovered by the next run, each step one helm command."""
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from fake_apiserver import FakeAPIServer
from k8s_support import render_cluster

pytestmark = pytest.mark.slow

TOKEN = "helm-apply-token-4e0a"
PLAY = Path(__file__).resolve().parent / "one_layer.yml"
NODES = {"gpu-a": {"facts": "hgx-h100"}}
NS = "demo-ns"
CHART = """apiVersion: v2
name: demo
version: %s
"""
# A ConfigMap, and with hang: true a Pod that never gets Ready here (no kubelet): `helm --wait` waits for it until
# it is killed.
TEMPLATES = {
    "settings.yaml": """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  greeting: {{ .Values.greeting | quote }}
  chart: {{ .Chart.Version | quote }}
""",
    "hang.yaml": """{{- if .Values.hang }}
apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-never-ready
spec:
  containers:
    - name: idle
      image: registry.k8s.io/pause:3.10
{{- end }}
""",
}


def chart(root, version):
    folder = root / ("demo-%s" % version)
    (folder / "templates").mkdir(parents=True, exist_ok=True)
    (folder / "Chart.yaml").write_text(CHART % version)
    (folder / "values.yaml").write_text("greeting: hello\nhang: false\n")
    for name, text in TEMPLATES.items():
        (folder / "templates" / name).write_text(text)
    return folder


def release(path, version, greeting="hi"):
    return {"name": "demo", "namespace": NS, "chart_path": str(path), "version": version,
            "values": {"greeting": greeting}, "wait_timeout": "60s"}


def apply(tmp_path, api, name, helm, releases, collections, args=()):
    extra = {"gpuops_k8s_render_dir": "", "gpuops_k8s_host": api.url, "gpuops_k8s_api_key": TOKEN,
             "test_layer_objects": [{"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "layer-object", "namespace": NS}, "data": {"a": "1"}}],
             "test_layer_releases": releases}
    return render_cluster(tmp_path / name, extra_vars=extra, nodes=NODES, playbook=str(PLAY), args=args,
                          env=dict({"K8S_AUTH_HOST": None, "K8S_AUTH_KUBECONFIG": None}, **helm.env),
                          collections_path=collections)


def noise(output):
    """Warning and deprecation lines of a run."""
    return [line for line in output.splitlines() if re.search(r"\[WARNING\]|\[DEPRECATION WARNING\]|deprecat", line, re.I)]


def verbs(helm):
    return [c[0] if c[0] != "get" else "get " + c[1] for c in helm.calls()]


def status(api, revision):
    secret = api.get("Secret", "sh.helm.release.v1.demo.v%d" % revision, NS)
    return secret["metadata"]["labels"]["status"] if secret else None


def test_first_apply_no_op_and_upgrade_print_no_warning_and_run_one_helm_command_each(tmp_path, helm, installed_collection):
    charts = tmp_path / "charts"
    one, two = chart(charts, "0.1.0"), chart(charts, "0.2.0")
    with FakeAPIServer() as api:
        api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        first = apply(tmp_path, api, "first", helm, [release(one, "0.1.0")], installed_collection)
        assert noise(first.output) == [], noise(first.output)
        assert verbs(helm) == ["list", "upgrade"]
        assert api.get("ConfigMap", "demo-settings", NS)["data"] == {"greeting": "hi", "chart": "0.1.0"}
        assert status(api, 1) == "deployed"
        assert TOKEN not in first.output and not [c for c in helm.calls() if TOKEN in " ".join(c)]

        helm.clear()
        again = apply(tmp_path, api, "again", helm, [release(one, "0.1.0")], installed_collection)
        assert noise(again.output) == [], noise(again.output)
        assert verbs(helm) == ["list", "get values"]
        assert status(api, 2) is None

        helm.clear()
        upgraded = apply(tmp_path, api, "upgrade", helm, [release(two, "0.2.0")], installed_collection, args=["--diff"])
        assert noise(upgraded.output) == [], noise(upgraded.output)
        # A new chart version is planned first (helm_chart_upgrades: the new chart's CRDs, both charts' values, the
        # release's values, the deployed chart's CRDs), then one upgrade.
        assert verbs(helm) == ["list", "template", "show", "get all", "get values", "get all", "upgrade"]
        assert api.get("ConfigMap", "demo-settings", NS)["data"] == {"greeting": "hi", "chart": "0.2.0"}
        assert (status(api, 1), status(api, 2)) == ("superseded", "deployed")
        # The diff of the upgrade: the release's status and chart version, never its values.
        assert "Helm release %s/demo" % NS in upgraded.output and "0.2.0" in upgraded.output


def killed(helm_binary, api, kubeconfig, path, revision_status):
    """Run `helm upgrade --install --wait` with a Pod that never gets Ready, and kill -9 helm once it stored the
    release as pending (the state an interrupted run leaves)."""
    env = dict(os.environ, KUBECONFIG=str(kubeconfig), HOME=str(kubeconfig.parent))
    proc = subprocess.Popen([str(helm_binary), "upgrade", "--install", "demo", str(path), "--namespace", NS, "--wait",
                             "--timeout", "5m", "--set", "hang=true"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = [o for (gv, plural, ns, name), o in list(api.objects.items())
                     if plural == "secrets" and name.startswith("sh.helm.release.v1.demo.")
                     and o["metadata"]["labels"].get("status") == revision_status]
            if found and api.get("Pod", "demo-never-ready", NS) is not None:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("helm never left the release %s" % revision_status)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_killed_install_and_a_killed_upgrade_are_recovered_by_the_next_run(tmp_path, helm, helm_dir, installed_collection):
    one = chart(tmp_path / "charts", "0.1.0")
    kubeconfig = tmp_path / "kubeconfig"
    with FakeAPIServer() as api:
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "t",
            "clusters": [{"name": "t", "cluster": {"server": api.url}}], "users": [{"name": "t", "user": {"token": TOKEN}}],
            "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
        api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        # kill -9 during the first install: pending-install, never deployed. The run uninstalls it, then installs.
        killed(helm_dir / "helm", api, kubeconfig, one, "pending-install")
        recovered = apply(tmp_path, api, "after-install", helm, [release(one, "0.1.0")], installed_collection)
        assert noise(recovered.output) == [], noise(recovered.output)
        assert verbs(helm) == ["list", "history", "uninstall", "upgrade"]
        assert "pending-install at revision 1 and never deployed: uninstalled" in " ".join(recovered.output.split())
        assert status(api, 1) == "deployed" and api.get("Pod", "demo-never-ready", NS) is None

        # kill -9 during an upgrade: pending-upgrade at revision 2, revision 1 deployed. The run rolls back to 1,
        # then upgrades.
        killed(helm_dir / "helm", api, kubeconfig, one, "pending-upgrade")
        helm.clear()
        recovered = apply(tmp_path, api, "after-upgrade", helm, [release(one, "0.1.0", greeting="again")], installed_collection)
        assert noise(recovered.output) == [], noise(recovered.output)
        assert verbs(helm) == ["list", "history", "rollback", "upgrade"]
        assert "pending-upgrade at revision 2: rolled back to revision 1" in " ".join(recovered.output.split())
        # Revision 3 is the rollback, 4 the upgrade; the interrupted revision 2 stays as helm left it.
        assert [status(api, r) for r in (1, 2, 3, 4)] == ["superseded", "pending-upgrade", "superseded", "deployed"]
        assert api.get("ConfigMap", "demo-settings", NS)["data"]["greeting"] == "again"
        assert api.get("Pod", "demo-never-ready", NS) is None
        assert json.dumps(api.get("ConfigMap", "layer-object", NS)["data"]) == '{"a": "1"}'
