"""The collection as Galaxy and AWX see it: metadata, the built artifact, docs, EE."""
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

VENV_BIN = Path(sys.executable).parent


def _run(args, cwd, **kw):
    return subprocess.run(args, cwd=str(cwd), capture_output=True, text=True, check=False, **kw)


@pytest.fixture(scope="module")
def galaxy(repo_root):
    return yaml.safe_load((repo_root / "galaxy.yml").read_text())


def test_galaxy_metadata(galaxy):
    assert (galaxy["namespace"], galaxy["name"]) == ("gpuops", "platform")
    assert galaxy["license"] == ["Apache-2.0"]
    assert {"infrastructure", "kubernetes", "nvidia", "gpu"} <= set(galaxy["tags"])
    bounds = galaxy["dependencies"]["kubernetes.core"]
    assert ">=" in bounds and "<" in bounds.replace("<=", ""), bounds
    parts = galaxy["version"].split(".")
    assert len(parts) == 3 and all(p.isdigit() for p in parts), galaxy["version"]


def test_requires_ansible(repo_root):
    runtime = yaml.safe_load((repo_root / "meta" / "runtime.yml").read_text())
    assert runtime["requires_ansible"] == ">=2.17.0"


@pytest.fixture(scope="module")
def artifact(tmp_path_factory, repo_root):
    out = tmp_path_factory.mktemp("dist")
    proc = _run([str(VENV_BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(out)], repo_root)
    assert proc.returncode == 0, proc.stderr
    (tarball,) = out.glob("gpuops-platform-*.tar.gz")
    return tarball


def test_artifact_holds_the_collection_and_nothing_else(artifact):
    with tarfile.open(artifact) as tar:
        names = set(tar.getnames())
    for required in ("MANIFEST.json", "FILES.json", "README.md", "meta/runtime.yml", "plugins/modules"):
        assert required in names, required
    for name in names:
        top = name.split("/")[0]
        assert top not in {".venv", ".cache", "build", "collections", "molecule", "inventories", "scripts", ".ci", "requirements", "awx"}, name
        assert "__pycache__" not in name, name


def test_artifact_installs_offline(artifact, tmp_path, repo_root):
    # --force: from the repository root the configured collections/ already has it.
    proc = _run([str(VENV_BIN / "ansible-galaxy"), "collection", "install", "--offline", "--no-deps", "--force",
                 "-p", str(tmp_path), str(artifact)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((tmp_path / "ansible_collections" / "gpuops" / "platform" / "MANIFEST.json").read_text())
    assert manifest["collection_info"]["dependencies"]["kubernetes.core"]


def test_every_module_documents_itself(repo_root):
    """ansible-doc from the repository root finds each module through ansible.cfg."""
    modules = sorted(p.stem for p in (repo_root / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
    assert "nvml_facts" in modules
    proc = _run([str(VENV_BIN / "ansible-doc"), "--json"] + ["gpuops.platform." + m for m in modules], repo_root)
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)
    for module in modules:
        doc = docs["gpuops.platform." + module]
        assert doc["doc"]["short_description"], module
        assert doc["examples"].strip(), module
        assert doc["return"], module
        assert {"check_mode", "diff_mode", "platform"} <= set(doc["doc"].get("attributes", {})), module


def test_every_filter_and_test_documents_itself(repo_root):
    """Each filter's and test's YAML documentation parses and says what it takes and gives (a stray
    ': ' in a plain description line makes ansible-doc drop the plugin from the docs)."""
    for kind in ("filter", "test"):
        folder = repo_root / "plugins" / kind
        names = sorted(p.stem for p in folder.glob("*.yml")) if folder.is_dir() else []
        if kind == "filter":
            assert "k8s_apply_report" in names
        if not names:
            continue
        proc = _run([str(VENV_BIN / "ansible-doc"), "-t", kind, "--json"] + ["gpuops.platform." + n for n in names],
                    repo_root)
        assert proc.returncode == 0, proc.stderr
        docs = json.loads(proc.stdout)
        for name in names:
            doc = docs.get("gpuops.platform." + name)
            assert doc and doc["doc"]["short_description"] and doc["doc"]["description"], (kind, name)
            assert doc["examples"].strip() and doc["return"], (kind, name)


def test_ee_metadata_matches_runtime_requirements(repo_root):
    meta_ee = yaml.safe_load((repo_root / "meta" / "execution-environment.yml").read_text())
    assert (repo_root / meta_ee["dependencies"]["python"]).is_file()
    assert (repo_root / meta_ee["dependencies"]["system"]).is_file()
