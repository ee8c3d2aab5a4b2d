"""No run of cluster.yml prints the bearer token, at any verbosity.

kubernetes.core's action plugins copy the raw task arguments into the result
(shown at -vvv) whenever a module returns no `invocation`, which includes
every module crash (the unreachable server's uncaught MaxRetryError), so
gpuops_k8s_api_key must never be a task argument. These runs use -vvv against
the in-memory API server (success) and against an unreachable address
(failure), in apply and check mode, and look for the token in the output and
in every file the run leaves behind, temporary folders included.
"""

import pytest

from fake_apiserver import FakeAPIServer
from k8s_support import render_cluster, short_tmpdir

pytestmark = pytest.mark.slow

TOKEN = "tok-9f2c6e1d4b7a-secret"
NODES = {"gpu-a": {"facts": "l40s"}}


def run(workdir, host, args, expect_failure, collections):
    with short_tmpdir("gpuops-cred-") as tmp:
        return _run(workdir, tmp, host, args, expect_failure, collections)


def _run(workdir, tmp, host, args, expect_failure, collections):
    result = render_cluster(workdir, extra_vars={
        "gpuops_k8s_render_dir": "",
        "gpuops_k8s_host": host,
        "gpuops_k8s_api_key": TOKEN,
        "gpu_operator_enabled": False, "volcano_enabled": False, "kueue_enabled": False,
        "kuberay_enabled": False, "gpu_smoke_test_enabled": False,
        "gpu_tenants_list": [],
        "gpu_nodes_validate_retries": 1, "gpu_nodes_validate_delay": 0,
    }, nodes=NODES, args=["-vvv"] + list(args), expect_failure=expect_failure, collections_path=collections,
        # Every temporary file of the run (the token's kubeconfig, AnsiballZ
        # payloads, the controller's scratch files) lands in tmp, searched below.
        env={"K8S_AUTH_HOST": None, "K8S_AUTH_KUBECONFIG": None, "TMPDIR": str(tmp),
             "ANSIBLE_LOCAL_TEMP": str(tmp / "local"), "ANSIBLE_REMOTE_TEMP": str(tmp / "remote")})
    assert TOKEN not in result.output
    # extra_vars.json is the test's own input, standing in for a vault.
    leaked = [str(p) for folder in (workdir, tmp) for p in folder.rglob("*")
              if p.is_file() and p.name != "extra_vars.json" and TOKEN.encode() in p.read_bytes()]
    assert leaked == []
    # The token's kubeconfig is gone once the play ends, failed or not.
    assert list(tmp.glob("gpuops-k8s-*")) == []
    return result


@pytest.mark.parametrize("mode", ["apply", "check"])
def test_token_reaches_the_server_and_never_the_log(tmp_path, installed_collection, mode):
    with FakeAPIServer() as api:
        api.add({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a"}, "spec": {"taints": []},
                 "status": {"allocatable": {"nvidia.com/gpu": "1"}}})
        result = run(tmp_path / mode, api.url, ["--check"] if mode == "check" else [], False, installed_collection)
        # Every call carried the token: it went through the private kubeconfig.
        assert api.authorizations == {"Bearer " + TOKEN}
        assert len(api.requests) > 5
        # -vvv shows the module arguments: the kubeconfig path, not the token.
        assert "kubeconfig: " in result.output
        # The objects went out through the collection's server-side apply, its arguments and results shown.
        assert "AnsiballZ_k8s_server_side_apply.py" in result.output


@pytest.mark.parametrize("mode", ["apply", "check"])
def test_unreachable_server_fails_without_printing_the_token(tmp_path, installed_collection, mode):
    result = run(tmp_path / mode, "https://127.0.0.1:9", ["--check"] if mode == "check" else [], True,
                 installed_collection)
    assert "Max retries exceeded" in result.output or "Connection refused" in result.output, result.output[-2000:]


def test_api_key_with_a_kubeconfig_is_refused_before_any_call(tmp_path, installed_collection):
    result = render_cluster(tmp_path, extra_vars={
        "gpuops_k8s_render_dir": "", "gpuops_k8s_host": "https://127.0.0.1:9", "gpuops_k8s_api_key": TOKEN,
        "gpuops_k8s_kubeconfig": "/etc/kubernetes/admin.conf"}, nodes=NODES, args=["-vvv"],
        expect_failure=True, collections_path=installed_collection)
    assert TOKEN not in result.output
    assert "leave gpuops_k8s_kubeconfig and gpuops_k8s_context unset" in " ".join(result.output.split())
    assert "AnsiballZ_k8s_discovery" not in result.output
