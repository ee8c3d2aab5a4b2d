#!/usr/bin/env bash
# ansible-test sanity on every target Python 3.9-3.13, with no ignore files.
# ansible-test needs the collection under ansible_collections/<ns>/<name>, so the
# tracked and unignored files are staged there first.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
export PATH="$VENV/bin:$PATH"

[ ! -e tests/sanity ] || ! ls tests/sanity/ignore-*.txt >/dev/null 2>&1 ||
  die "tests/sanity/ignore-*.txt must not exist: fix the finding instead."

# Every target Python must really be there: a missing one would be skipped silently.
pybin="$CACHE/pybin"
rm -rf "$pybin" && mkdir -p "$pybin"
for v in 3.9 3.10 3.11 3.12 3.13; do
  p=$(find_python "$v") || die "python$v not found: ansible-test sanity must cover every target Python 3.9-3.13."
  ln -s "$p" "$pybin/python$v"
done
export PATH="$pybin:$PATH"

# The import test bootstraps pip in each new venv with a downloaded get-pip
# script, which fails offline. Seed ansible-test's cache with a stand-in that
# installs the pinned pip, fetched here as a wheel, by running pip from that
# wheel as get-pip.py does: no index is needed, and no bundled pip is
# installed and then upgraded first (ensurepip made each of the dozen venvs
# take twice as long).
pip_version=$(python - <<'PY'
import re, ansible_test, pathlib
src = pathlib.Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py"
print(re.search(r"pip='([^']+)'", src.read_text()).group(1))
PY
)
pip_wheels="$CACHE/pip-wheels"
ls "$pip_wheels/pip-$pip_version-"*.whl >/dev/null 2>&1 ||
  python -m pip download -q --no-deps --only-binary=:all: -d "$pip_wheels" "pip==$pip_version"
wheels=("$pip_wheels/pip-$pip_version-"*.whl)
pip_wheel=${wheels[0]}
getpip="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
mkdir -p "$(dirname "$getpip")"
# Rewritten on every run: it names this checkout's wheel folder.
cat >"$getpip" <<PY
"""Offline stand-in for get-pip.py, written by gpuops.platform's scripts/sanity.sh."""
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
# pip runs from its wheel (as get-pip.py does) and installs the pinned pip.
sys.exit(subprocess.call([sys.executable, "$pip_wheel/pip", "install", "--no-index", "--find-links", "$pip_wheels"] + args))
PY

# Outside any git work tree: inside one, ansible-test would list files with git
# and find none under an ignored folder.
stage_root=$(mktemp -d "${TMPDIR:-/tmp}/gpuops-sanity.XXXXXX")
trap 'rm -rf "$stage_root"' EXIT
stage="$stage_root/ansible_collections/gpuops/platform"
mkdir -p "$stage"
git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -T - -cf - | tar -xf - -C "$stage"
# kubernetes.core, a dependency (galaxy.yml) whose doc fragments and module_utils
# the modules use, beside it as ansible-galaxy installs it (from bootstrap.sh).
[ -d "$COLLECTIONS/ansible_collections/kubernetes/core" ] || die "kubernetes.core is not in $COLLECTIONS: run scripts/bootstrap.sh"
mkdir -p "$stage_root/ansible_collections/kubernetes"
cp -a "$COLLECTIONS/ansible_collections/kubernetes/core" "$stage_root/ansible_collections/kubernetes/core"
cd "$stage"
ansible-test sanity --venv --requirements --color no "$@"
