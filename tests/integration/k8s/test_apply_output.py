"""What a person sees of an apply through gpuops.platform.k8s_apply: `--check --diff` prints a before/after block per
object that would change and none for an unchanged one (ansible-core's default callback prints a task's ``diff``
list, one unified diff per entry under its headers), and nothing of a Secret's values or the API token.

The apply goes to the in-memory API server (fake_apiserver), one layer at a time (one_layer.yml)."""
import re
from pathlib import Path

import pytest

from fake_apiserver import FakeAPIServer
from k8s_support import render_cluster

pytestmark = pytest.mark.slow

TOKEN = "diff-token-77b1"
PLAY = Path(__file__).resolve().parent / "one_layer.yml"
NS = "diff-check"
SECRET_VALUE = "c2VjcmV0LXZhbHVlLTkz"  # base64 of secret-value-93
NODES = {"gpu-a": {"facts": "hgx-h100"}}


def cm(name, **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": data}


def apply(tmp_path, api, name, objects, collections, args=(), releases=None, env=None):
    extra = {"gpuops_k8s_render_dir": "", "gpuops_k8s_host": api.url, "gpuops_k8s_api_key": TOKEN,
             "test_layer_objects": objects, "test_layer_releases": releases or []}
    return render_cluster(tmp_path / name, extra_vars=extra, nodes=NODES, playbook=str(PLAY), args=args,
                          env=dict({"K8S_AUTH_HOST": None, "K8S_AUTH_KUBECONFIG": None}, **(env or {})),
                          collections_path=collections)


def blocks(output):
    """The headers of the diff blocks printed: [(before header, after header)]."""
    return re.findall(r"^--- before: (.*)\n\+\+\+ after: (.*)$", output, re.M)


def test_check_diff_prints_a_block_per_changed_object_and_none_for_an_unchanged_one(tmp_path, installed_collection):
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    with FakeAPIServer() as api:
        first = apply(tmp_path, api, "first", [namespace, cm("same", a="1"), cm("changing", a="1")], installed_collection)
        assert TOKEN not in first.output
        before = {k: dict(o) for k, o in api.objects.items()}

        checked = apply(tmp_path, api, "check", [namespace, cm("same", a="1"), cm("changing", a="2"), cm("new", b="1")],
                        installed_collection, args=["--check", "--diff"])
        assert api.objects == before, "--check wrote to the cluster"
        shown = blocks(checked.output)
        assert sorted(shown) == [
            ("ConfigMap %s/changing" % NS, "ConfigMap %s/changing (dry run)" % NS),
            ("ConfigMap %s/new (absent)" % NS, "ConfigMap %s/new (dry run)" % NS)], checked.output[-4000:]
        # The changed field, as a unified diff of the objects; no bookkeeping of the server.
        assert re.search(r"""^-\s+["']?a["']?: ["']?1["']?,?$""", checked.output, re.M), checked.output[-4000:]
        assert re.search(r"""^\+\s+["']?a["']?: ["']?2["']?,?$""", checked.output, re.M)
        assert "managedFields" not in checked.output and "resourceVersion" not in checked.output
        assert TOKEN not in checked.output

        # Without --diff, no block.
        quiet = apply(tmp_path, api, "quiet", [namespace, cm("same", a="1"), cm("changing", a="2")], installed_collection,
                      args=["--check"])
        assert blocks(quiet.output) == []


def test_a_layer_with_a_secret_shows_no_value_in_check_diff(tmp_path, installed_collection):
    """A layer that holds a Secret hides its output (no_log): neither its values nor the diff's reach the log; the
    plain objects' task still shows its diff."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": NS},
              "data": {"token": SECRET_VALUE}}
    with FakeAPIServer() as api:
        checked = apply(tmp_path, api, "check", [namespace, secret, cm("plain", a="1")], installed_collection,
                        args=["--check", "--diff"])
        assert SECRET_VALUE not in checked.output and "secret-value-93" not in checked.output
        assert TOKEN not in checked.output
        # -v prints each task's result and each loop item whole: the layer's checks and its planned calls too.
        verbose = apply(tmp_path, api, "verbose", [namespace, secret, cm("plain", a="1")], installed_collection,
                        args=["--check", "--diff", "-v"])
        assert SECRET_VALUE not in verbose.output and "secret-value-93" not in verbose.output
        assert TOKEN not in verbose.output
        # -vvv too: the layers' plan (gpuops.platform.k8s_layers_plan) holds the Secret, and its result is hidden.
        louder = apply(tmp_path, api, "louder", [namespace, secret, cm("plain", a="1")], installed_collection,
                       args=["--check", "-vvv"])
        assert "Check the layers and build their objects" in louder.output
        assert SECRET_VALUE not in louder.output and "secret-value-93" not in louder.output
        assert TOKEN not in louder.output
        assert "--- before: Namespace %s (absent)" % NS in checked.output
