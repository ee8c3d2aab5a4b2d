"""gpuops.platform.helm_releases with the real helm against the in-memory API server.

Releases in every state are seeded into Helm's storage (fake_apiserver's
add_helm_revision); the module asks helm, through the play's module_defaults
for its action group, with the API token only in a kubeconfig. helm runs
behind a wrapper that logs each call (conftest.py, HelmCalls)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fake_apiserver import FakeAPIServer

pytestmark = pytest.mark.slow

TOKEN = "helm-token-31d9"
MARKER = "values-marker-a1f0"
VALUES = {"driver": {"enabled": False}, "secretish": MARKER}
PLAY = """---
- name: Ask helm
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/gpuops.platform.k8s:
      kubeconfig: "{{ test_kubeconfig }}"
  tasks:
    - name: Read and decide
      gpuops.platform.helm_releases:
        releases: "{{ test_releases | gpuops.platform.k8s_helm_wanted }}"
        recover: "{{ test_recover }}"
      register: test_read

    - name: Keep the plans
      ansible.builtin.copy:
        content: "{{ test_read.plans | to_json }}"
        dest: "{{ test_out }}"
      check_mode: false
"""


def release(name, namespace=None, version="1.2.0", values=None):
    return {"name": name, "namespace": namespace or name, "chart": "demo", "version": version,
            "repo_url": "https://charts.example/demo", "values": VALUES if values is None else values}


def revision(api, rel, number, status, version=None, values=None):
    api.add_helm_revision({
        "name": rel["name"], "namespace": rel["namespace"], "version": number,
        "info": {"status": status, "description": "", "first_deployed": "", "last_deployed": ""},
        "chart": {"metadata": {"name": rel["chart"], "version": version or rel["version"]}},
        "config": rel["values"] if values is None else values, "manifest": ""})


WANTED = [release("as-wanted"), release("other-values"), release("old-chart"), release("never-deployed"),
          release("mid-upgrade"), release("absent"), release("failed")]


def seed(api):
    by_name = dict((r["name"], r) for r in WANTED)
    for rel in WANTED + [dict(release("absent"), namespace="lab")]:
        api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": rel["namespace"]}})
    revision(api, by_name["as-wanted"], 1, "superseded", version="1.0.0")
    revision(api, by_name["as-wanted"], 2, "deployed")
    revision(api, by_name["other-values"], 1, "deployed", values={"driver": {"enabled": True}})
    revision(api, by_name["old-chart"], 1, "deployed", version="1.1.0")
    revision(api, by_name["never-deployed"], 1, "pending-install")
    revision(api, by_name["mid-upgrade"], 1, "superseded", version="1.0.0")
    revision(api, by_name["mid-upgrade"], 2, "deployed", version="1.1.0")
    revision(api, by_name["mid-upgrade"], 3, "pending-upgrade")
    revision(api, by_name["failed"], 1, "failed")
    # Someone else's release named like one of ours, in another namespace, left pending: not ours.
    revision(api, dict(release("absent"), namespace="lab"), 1, "pending-install")


def ask(tmp_path, api, helm, collections, recover=True, args=(), server=None, releases=None):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": server or api.url}}],
        "users": [{"name": "t", "user": {"token": TOKEN}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
    (tmp_path / "play.yml").write_text(PLAY)
    out = tmp_path / "plans.json"
    if out.exists():
        out.unlink()
    (tmp_path / "vars.json").write_text(json.dumps({
        "test_kubeconfig": str(kubeconfig), "test_releases": WANTED if releases is None else releases,
        "test_recover": recover, "test_out": str(out)}))
    bindir = Path(sys.executable).parent
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(collections), str(Path(__file__).resolve().parents[3] / "collections")]),
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, HOME=str(tmp_path))
    env["PATH"] = str(bindir) + os.pathsep + helm.env["PATH"]
    for name in ("K8S_AUTH_HOST", "K8S_AUTH_KUBECONFIG", "K8S_AUTH_API_KEY"):
        env.pop(name, None)
    proc = subprocess.run([str(bindir / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(tmp_path / "play.yml"),
                           "-e", "@%s" % (tmp_path / "vars.json")] + list(args),
                          env=env, capture_output=True, text=True, check=False, timeout=300)
    plans = json.loads(out.read_text()) if out.exists() else None
    return proc.returncode, proc.stdout + proc.stderr, plans


def test_one_list_then_only_what_each_decision_needs_in_check_mode_too(tmp_path, installed_collection, helm):
    with FakeAPIServer() as api:
        seed(api)
        before = {k: dict(o) for k, o in api.objects.items()}
        rc, output, plans = ask(tmp_path, api, helm, installed_collection, args=["--check", "-vvv"])
        assert rc == 0, output[-4000:]
        got = dict((p["name"], (p["namespace"], p["state"], p["revision"], p["recover"], p["rollback_to"], p["action"]))
                   for p in plans)
        assert got == {
            "as-wanted": ("as-wanted", "deployed", 2, "", 0, "unchanged"),
            "other-values": ("other-values", "deployed", 1, "", 0, "upgrade"),
            "old-chart": ("old-chart", "deployed", 1, "", 0, "upgrade"),
            "never-deployed": ("never-deployed", "pending-install", 1, "uninstall", 0, "install"),
            "mid-upgrade": ("mid-upgrade", "pending-upgrade", 3, "rollback", 2, "upgrade"),
            "absent": ("absent", "", 0, "", 0, "install"),
            "failed": ("failed", "failed", 1, "", 0, "upgrade"),
        }
        assert [p["name"] for p in plans] == [r["name"] for r in WANTED]
        # One list; then, side by side (in any order), the values only of the two deployed at the wanted chart and
        # the history only of the pending two.
        where = ["--namespace", "%s", "-o", "json"]
        calls = helm.calls()
        assert calls[0] == ["list", "--all", "--all-namespaces", "--max", "0", "--filter",
                            "^(?:absent|as\\-wanted|failed|mid\\-upgrade|never\\-deployed|old\\-chart|other\\-values)$",
                            "-o", "json"]
        assert sorted(calls[1:]) == sorted([
            ["get", "values", "as-wanted"] + [w.replace("%s", "as-wanted") for w in where],
            ["get", "values", "other-values"] + [w.replace("%s", "other-values") for w in where],
            ["history", "never-deployed"] + [w.replace("%s", "never-deployed") for w in where],
            ["history", "mid-upgrade"] + [w.replace("%s", "mid-upgrade") for w in where]])
        # Reading is all it does, in check mode as in a run. The server's URL is only in the kubeconfig that
        # module_defaults gave (client-go sends the token over TLS only, so this plain-HTTP server sees none).
        assert api.objects == before and not api.writes()
        assert any(r[1] == "/api/v1/secrets" for r in api.requests)
        # The values never show, not even in the result as -vvv prints it; neither does the token.
        assert "chart 1.2.0 and values already deployed" in output
        assert MARKER not in output and TOKEN not in output


def test_without_recovery_a_pending_release_fails_naming_the_command(tmp_path, installed_collection, helm):
    with FakeAPIServer() as api:
        seed(api)
        rc, output, plans = ask(tmp_path, api, helm, installed_collection, recover=False)
        assert rc != 0 and plans is None
        flat = " ".join(output.split())
        assert "Helm release never-deployed in namespace never-deployed is pending-install (revision 1)" in flat
        assert "`helm uninstall never-deployed --namespace never-deployed`" in flat
        assert "`helm rollback mid-upgrade 2 --namespace mid-upgrade`" in flat
        calls = [c[0] for c in helm.calls()]
        assert calls[0] == "list" and sorted(calls[1:]) == ["get", "get", "history", "history"]
        assert MARKER not in output


def test_no_release_runs_no_helm_and_helm_failing_is_named(tmp_path, installed_collection, helm):
    with FakeAPIServer() as api:
        rc, output, plans = ask(tmp_path, api, helm, installed_collection, releases=[])
        assert rc == 0 and plans == [] and helm.calls() == []
        rc, output, plans = ask(tmp_path, api, helm, installed_collection, server="http://127.0.0.1:9")
        assert rc != 0
        flat = " ".join(output.split())
        assert "`helm list --all --all-namespaces --max 0 --filter" in flat and "failed (exit 1)" in flat, flat[-3000:]
        assert TOKEN not in output


def test_a_bad_release_name_is_refused_before_helm_runs(tmp_path, installed_collection, helm):
    with FakeAPIServer() as api:
        rc, output, plans = ask(tmp_path, api, helm, installed_collection,
                                releases=[release("ok"), dict(release("x"), name="bad|name")])
        assert rc != 0 and helm.calls() == []
        assert "Helm release name 'bad|name' is invalid" in " ".join(output.split())
