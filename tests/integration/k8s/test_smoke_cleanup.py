"""gpu_smoke_test's cleanup when the namespace outlives its timeout.

Follows ObjectMeta.deletionTimestamp and finalizers in the API reference
(https://kubernetes.io/docs/concepts/overview/working-with-objects/finalizers/):
a deleted namespace stays Terminating while a finalizer holds an object in it.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fake_apiserver import FakeAPIServer
from k8s_support import ROOT

pytestmark = pytest.mark.slow

PLAYBOOK = Path(__file__).with_name("smoke_cleanup.yml")


def cleanup(api, installed_collection, fail_on_error):
    bindir = Path(sys.executable).parent
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               K8S_AUTH_HOST=api.url, K8S_AUTH_API_KEY="t0ken", K8S_AUTH_VALIDATE_CERTS="false",
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(installed_collection), str(ROOT / "collections")]))
    env.pop("K8S_AUTH_KUBECONFIG", None)
    proc = subprocess.run([str(bindir / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-e", "ansible_python_interpreter=%s" % sys.executable,
                           "-e", "gpu_smoke_test_cleanup_timeout=1",
                           "-e", "gpu_smoke_test_fail_on_error=%s" % fail_on_error, str(PLAYBOOK)],
                          cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=300, check=False)
    return proc.returncode, " ".join(proc.stdout.split())


@pytest.mark.parametrize("fail_on_error", [False, True])
def test_a_namespace_held_by_a_finalizer_is_reported_and_fails_only_when_asked(installed_collection, fail_on_error):
    with FakeAPIServer() as api:
        api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-smoke-test"}})
        api.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "held", "namespace": "gpu-smoke-test", "finalizers": ["example.com/hold"]}})
        rc, output = cleanup(api, installed_collection, fail_on_error)
        assert api.get("Namespace", "gpu-smoke-test")["metadata"].get("deletionTimestamp")
    assert "The smoke-test namespace gpu-smoke-test was not removed within 1 s" in output, output[-3000:]
    assert (rc != 0) is fail_on_error, output[-3000:]
