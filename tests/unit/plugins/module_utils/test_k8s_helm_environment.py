"""helm's environment in the collection's helm modules (helm_cli.HelmModule): the kubeconfig read where it is, the
other connection settings as helm's own HELM_KUBE* variables, never a copy of a credential in a file of $TMPDIR."""
import tempfile
from unittest import mock

import pytest
import yaml
from ansible.module_utils import basic
from ansible_collections.kubernetes.core.plugins.module_utils.helm_args_common import HELM_AUTH_ARG_SPEC

from support.module_args import patch_module_args

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import helm_cli

TOKEN = "env-token-5e21"


def environment(tmp_path, helm_version="3.18.0", **params):
    """The environment a HelmModule built with ``params`` gives helm, and the files written to $TMPDIR meanwhile."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(parents=True)
    version = 'version.BuildInfo{Version:"v%s", GitCommit:"x"}' % helm_version
    with patch_module_args(params), mock.patch.object(tempfile, "tempdir", str(tmpdir)), \
            mock.patch.object(basic.AnsibleModule, "run_command", return_value=(0, version, "")), \
            mock.patch.object(basic.AnsibleModule, "get_bin_path", return_value="/usr/local/bin/helm"):
        module = helm_cli.HelmModule(argument_spec=dict(HELM_AUTH_ARG_SPEC), supports_check_mode=True)
        env = dict(module.env_update)
        written = sorted(p.read_text() for p in tmpdir.iterdir())
        hidden = set(module.no_log_values)
    return env, written, hidden


@pytest.fixture
def kubeconfig(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "t",
                                    "clusters": [{"name": "t", "cluster": {"server": "https://10.0.0.1:6443"}}],
                                    "users": [{"name": "t", "user": {"token": TOKEN}}],
                                    "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
    return path


def test_a_kubeconfig_file_is_given_to_helm_where_it_is_and_nothing_is_written(tmp_path, kubeconfig):
    env, written, hidden = environment(tmp_path, kubeconfig=str(kubeconfig), context="t", ca_cert="/etc/ca.pem",
                                       validate_certs=False)
    assert env == {"KUBECONFIG": str(kubeconfig), "HELM_KUBECONTEXT": "t", "HELM_KUBECAFILE": "/etc/ca.pem",
                   "HELM_KUBEINSECURE_SKIP_TLS_VERIFY": "true"}
    assert written == []
    # As kubernetes.core does: the kubeconfig's token is never shown, whatever helm prints.
    assert TOKEN in hidden


def test_without_a_kubeconfig_only_the_settings_given_are_set(tmp_path):
    env, written, hidden = environment(tmp_path, host="https://10.0.0.1:6443")
    assert env == {"HELM_KUBEAPISERVER": "https://10.0.0.1:6443"} and written == []
    env, written, hidden = environment(tmp_path / "b", kubeconfig=str(tmp_path / "missing"))
    # A kubeconfig that cannot be read is helm's to report, naming it.
    assert env == {"KUBECONFIG": str(tmp_path / "missing")} and written == []


def test_an_inline_kubeconfig_or_an_old_helm_keeps_kubernetes_cores_way(tmp_path, kubeconfig):
    # A kubeconfig given as a dict has no file: kubernetes.core writes one, as before.
    env, written, hidden = environment(tmp_path, kubeconfig=yaml.safe_load(kubeconfig.read_text()))
    assert env["KUBECONFIG"].startswith(str(tmp_path / "tmp")) and len(written) == 1
    # helm before 3.10 has no HELM_KUBEINSECURE_SKIP_TLS_VERIFY: kubernetes.core's rewritten kubeconfig.
    env, written, hidden = environment(tmp_path / "old", helm_version="3.9.0", kubeconfig=str(kubeconfig),
                                       validate_certs=False)
    assert "HELM_KUBEINSECURE_SKIP_TLS_VERIFY" not in env and len(written) == 1
