"""k8s_render: the render folder's files written in one step, stale ones pruned, nothing else touched."""
import os
from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.gpuops.platform.plugins.action import k8s_render


def _run(args, check=False, diff=False):
    task = mock.Mock(args=args, async_val=0, check_mode=check, diff=diff)
    action = k8s_render.ActionModule(task, mock.Mock(), mock.Mock(check_mode=check), loader=None, templar=None,
                                     shared_loader_obj=None)
    return action.run(task_vars={})


def _tree(root):
    found = {}
    for folder, dummy, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            with open(path) as handle:
                found[os.path.relpath(path, root)] = handle.read()
    return found


LAYER = [{"path": "manifests.yaml", "content": "---\nkind: ConfigMap\n"},
         {"path": "helm/kueue/release.yaml", "content": "name: kueue\n"},
         {"path": "helm/kueue/values.yaml", "content": "a: 1\n"}]


def test_writes_a_layer_once_then_reports_no_change(tmp_path):
    first = _run({"path": str(tmp_path), "folder": "50-kueue", "files": LAYER})
    assert first["changed"] is True
    assert first["written"] == ["50-kueue/manifests.yaml", "50-kueue/helm/kueue/release.yaml",
                                "50-kueue/helm/kueue/values.yaml"]
    assert _tree(tmp_path) == {"50-kueue/" + f["path"]: f["content"] for f in LAYER}
    assert oct(os.stat(tmp_path / "50-kueue" / "manifests.yaml").st_mode & 0o777) == "0o644"
    again = _run({"path": str(tmp_path), "folder": "50-kueue", "files": LAYER})
    assert again["changed"] is False and again["written"] == [] and again["unchanged"] == 3
    # No temporary file is left beside the rendered ones.
    assert sorted(os.listdir(tmp_path / "50-kueue")) == ["helm", "manifests.yaml"]


def test_only_the_file_that_differs_is_rewritten_and_shown_in_the_diff(tmp_path):
    _run({"path": str(tmp_path), "folder": "50-kueue", "files": LAYER})
    changed = [dict(f) for f in LAYER]
    changed[2]["content"] = "a: 2\n"
    result = _run({"path": str(tmp_path), "folder": "50-kueue", "files": changed}, diff=True)
    assert result["written"] == ["50-kueue/helm/kueue/values.yaml"] and result["unchanged"] == 2
    assert [(d["before"], d["after"]) for d in result["diff"]] == [("a: 1\n", "a: 2\n")]
    assert (tmp_path / "50-kueue/helm/kueue/values.yaml").read_text() == "a: 2\n"


def test_check_mode_reports_and_writes_nothing(tmp_path):
    result = _run({"path": str(tmp_path / "out"), "folder": "50-kueue", "files": LAYER}, check=True)
    assert result["changed"] is True and len(result["written"]) == 3
    assert not (tmp_path / "out").exists()


def test_prune_removes_only_stale_rendered_files(tmp_path):
    _run({"path": str(tmp_path), "folder": "50-kueue", "files": LAYER})
    _run({"path": str(tmp_path), "folder": "60-kuberay", "files": LAYER[:1]})
    (tmp_path / "README.md").write_text("ours")
    (tmp_path / "50-kueue" / "kustomization.yaml").write_text("ours too")
    keep = ["50-kueue/manifests.yaml", "50-kueue/helm/kueue/release.yaml", "50-kueue/helm/kueue/values.yaml"]
    planned = _run({"path": str(tmp_path), "prune": True, "keep": keep}, check=True)
    assert planned["removed"] == ["60-kuberay/manifests.yaml"] and (tmp_path / "60-kuberay/manifests.yaml").exists()
    pruned = _run({"path": str(tmp_path), "prune": True, "keep": keep})
    assert pruned["changed"] is True and pruned["removed"] == ["60-kuberay/manifests.yaml"]
    assert set(_tree(tmp_path)) == set(keep) | {"README.md", "50-kueue/kustomization.yaml"}
    assert _run({"path": str(tmp_path), "prune": True, "keep": keep})["changed"] is False


@pytest.mark.parametrize("entry,problem", [
    ({"path": "../../etc/passwd", "content": "x"}, "is not a rendered file name"),
    ({"path": "helm/../../../escape/values.yaml", "content": "x"}, "is not a rendered file name"),
    ({"path": "helm/../values.yaml", "content": "x"}, "is not a rendered file name"),
    ({"path": "/etc/cron.d/manifests.yaml", "content": "x"}, "is not a rendered file name"),
    ({"path": "notes.txt", "content": "x"}, "is not a rendered file name"),
    ({"path": "manifests.yaml"}, "needs exactly 'path' and 'content'"),
    ({"path": "manifests.yaml", "content": "x", "mode": "0777"}, "needs exactly 'path' and 'content'"),
])
def test_a_path_outside_the_render_layout_is_refused_and_nothing_written(tmp_path, entry, problem):
    with pytest.raises(AnsibleActionFail, match=problem):
        _run({"path": str(tmp_path / "out"), "folder": "50-kueue", "files": [LAYER[0], entry]})
    assert not (tmp_path / "out").exists()


def test_a_directory_where_a_file_belongs_is_refused(tmp_path):
    (tmp_path / "50-kueue" / "manifests.yaml").mkdir(parents=True)
    with pytest.raises(AnsibleActionFail, match="is a directory where a rendered file belongs"):
        _run({"path": str(tmp_path), "folder": "50-kueue", "files": LAYER[:1]})
    (tmp_path / "file").write_text("x")
    with pytest.raises(AnsibleActionFail, match="exists and is not a directory"):
        _run({"path": str(tmp_path / "file"), "folder": "50-kueue", "files": LAYER[:1]})
