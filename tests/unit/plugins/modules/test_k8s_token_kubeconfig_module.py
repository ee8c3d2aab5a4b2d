"""k8s_token_kubeconfig: a private kubeconfig for a bearer token, written and removed in one module run each."""
import os
import stat
import tempfile

import pytest
import yaml

from support.module_args import ExitJson, FailJson, patch_module_args

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import token_kubeconfig
from ansible_collections.gpuops.platform.plugins.modules import k8s_token_kubeconfig

pytestmark = pytest.mark.usefixtures("module_exits")

TOKEN = "tok-3f9a1c"
SERVER = "https://10.0.0.1:6443"


@pytest.fixture(autouse=True)
def tmp(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def run(args, check=False):
    if check:
        args = dict(args, _ansible_check_mode=True)
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as caught:
            k8s_token_kubeconfig.main()
    return caught.type is ExitJson, caught.value.args[0]


def test_the_kubeconfig_is_private_from_the_start_and_holds_the_server_and_token(tmp):
    ok, result = run({"server": SERVER, "api_key": TOKEN})
    assert ok and result["changed"]
    path = result["path"]
    folder = os.path.dirname(path)
    assert os.path.dirname(folder) == str(tmp) and os.path.basename(folder).startswith("gpuops-k8s-")
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with open(path) as handle:
        config = yaml.safe_load(handle)
    assert config["current-context"] == "gpuops"
    assert config["clusters"] == [{"name": "gpuops", "cluster": {"server": SERVER}}]
    assert config["users"] == [{"name": "gpuops", "user": {"token": TOKEN}}]
    assert config["contexts"] == [{"name": "gpuops", "context": {"cluster": "gpuops", "user": "gpuops"}}]
    # The token is no_log: it is in no part of the result.
    assert TOKEN not in repr(result)
    # Each run its own folder.
    again = run({"server": SERVER, "api_key": TOKEN})[1]["path"]
    assert again != path and os.path.exists(path)


def test_removal_takes_the_folder_and_a_second_removal_changes_nothing(tmp):
    path = run({"server": SERVER, "api_key": TOKEN})[1]["path"]
    ok, result = run({"state": "absent", "path": path})
    assert ok and result["changed"] and not os.path.lexists(os.path.dirname(path))
    ok, result = run({"state": "absent", "path": path})
    assert ok and not result["changed"]
    assert os.listdir(str(tmp)) == []


def test_check_mode_writes_and_removes_nothing(tmp):
    ok, result = run({"server": SERVER, "api_key": TOKEN}, check=True)
    assert ok and result["changed"] and result["path"] == "" and os.listdir(str(tmp)) == []
    path = run({"server": SERVER, "api_key": TOKEN})[1]["path"]
    ok, result = run({"state": "absent", "path": path}, check=True)
    assert ok and result["changed"] and os.path.exists(path)


def test_any_path_it_did_not_write_is_refused_and_kept(tmp):
    admin = tmp / "kubernetes"
    admin.mkdir()
    (admin / "admin.conf").write_text("keep")
    (admin / "kubeconfig").write_text("keep")
    path = run({"server": SERVER, "api_key": TOKEN})[1]["path"]
    with open(os.path.join(os.path.dirname(path), "notes"), "w") as handle:
        handle.write("someone else's")
    for foreign, reason in ((str(admin / "admin.conf"), "is not a kubeconfig that this module wrote"),
                            (str(admin / "kubeconfig"), "is not a kubeconfig that this module wrote"),
                            (path, "holds notes besides the kubeconfig"),
                            (os.path.relpath(path), "is not a kubeconfig that this module wrote")):
        ok, result = run({"state": "absent", "path": foreign})
        assert not ok and reason in result["msg"] and "nothing was removed" in result["msg"], result["msg"]
    assert (admin / "admin.conf").read_text() == "keep" and (admin / "kubeconfig").read_text() == "keep"
    assert os.path.exists(path)
    # A NUL byte (AnsibleModule refuses one in any argument first; the core refuses it too, with no OS error).
    with pytest.raises(token_kubeconfig.TokenKubeconfigError, match="is not a kubeconfig that this module wrote"):
        token_kubeconfig.remove(path + "\0")
    assert os.path.exists(path)


@pytest.mark.parametrize("args, message", [
    ({"server": SERVER, "api_key": ""}, "api_key is empty"),
    ({"server": SERVER, "api_key": TOKEN + "\n"}, "api_key holds a NUL byte or a line break"),
    ({"server": SERVER, "api_key": "a\0b"}, "api_key holds a NUL byte or a line break"),
    ({"server": "10.0.0.1:6443", "api_key": TOKEN}, "is no URL"),
    ({"server": " ", "api_key": TOKEN}, "server is empty"),
    ({"api_key": TOKEN}, "missing: server"),
    ({"state": "absent"}, "missing: path"),
])
def test_bad_input_fails_clearly_and_writes_nothing(tmp, args, message):
    ok, result = run(args)
    assert not ok and message in result["msg"], result["msg"]
    assert TOKEN not in result["msg"]
    assert os.listdir(str(tmp)) == []
