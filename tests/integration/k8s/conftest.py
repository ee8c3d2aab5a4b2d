"""Fixtures for the Kubernetes render tests (see k8s_support for the API)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from k8s_support import ROOT


@pytest.fixture(scope="session")
def installed_collection(tmp_path_factory):
    """This checkout built and installed into a temporary collections path, once per session."""
    bindir = Path(sys.executable).parent
    dist = tmp_path_factory.mktemp("dist")
    dest = tmp_path_factory.mktemp("collections")
    env = dict(os.environ, PATH=str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    subprocess.run([str(bindir / "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(dist)],
                   cwd=str(ROOT), env=env, check=True, stdout=subprocess.DEVNULL)
    archive = next(dist.glob("gpuops-platform-*.tar.gz"))
    subprocess.run([str(bindir / "ansible-galaxy"), "collection", "install", "--offline", "--force",
                    "-p", str(dest), str(archive)], cwd=str(ROOT), env=env, check=True, stdout=subprocess.DEVNULL)
    return dest


@pytest.fixture(scope="session")
def render(installed_collection, tmp_path_factory):
    """``render(name, extra_vars=None, nodes=None, expect_failure=False, **kw)`` -> k8s_support.Rendered.

    Runs cluster.yml (or ``playbook=``, see render_cluster) in render mode with
    the installed collection, in a fresh folder per call. Call it from a
    module-scoped fixture, once per configuration.
    """
    from k8s_support import render_cluster

    def _render(name, extra_vars=None, nodes=None, expect_failure=False, **kw):
        return render_cluster(tmp_path_factory.mktemp(name), extra_vars=extra_vars, nodes=nodes,
                              expect_failure=expect_failure, collections_path=installed_collection, **kw)
    return _render


class HelmCalls:
    """The real helm behind a wrapper that logs each invocation's arguments, first on PATH.

    ``env`` is the environment override for render_cluster (``env=``), ``calls()`` the argument lists
    (without the binary) of every helm run so far, ``clear()`` forgets them."""

    def __init__(self, folder, real):
        self.folder, self.log = folder, folder / "calls.log"
        wrapper = folder / "helm"
        # One line per run, the arguments separated by a NUL-free unit separator, written at once (one append:
        # helm runs side by side never mix their lines); then the real helm.
        wrapper.write_text('#!/bin/sh\nus=$(printf "\\037")\nline=\nfor a in "$@"; do line="$line$a$us"; done\n'
                           'printf "%%s\\n" "$line" >> "%s"\nexec "%s" "$@"\n' % (self.log, real))
        wrapper.chmod(0o755)
        self.env = {"PATH": str(folder) + os.pathsep + os.environ.get("PATH", "")}

    def calls(self):
        if not self.log.exists():
            return []
        return [line.rstrip("\n").split("\037")[:-1] for line in self.log.read_text().splitlines()]

    def clear(self):
        if self.log.exists():
            self.log.unlink()


@pytest.fixture
def helm(helm_dir, tmp_path):
    """Helm for the apply tests: the pinned binary (helm_dir), each call logged (HelmCalls)."""
    folder = tmp_path / "helm-wrapper"
    folder.mkdir()
    return HelmCalls(folder, helm_dir / "helm")
