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

# The import test bootstraps pip with a downloaded get-pip script, which fails
# offline: seed ansible-test's cache with a stand-in that uses ensurepip.
pip_version=$(python - <<'PY'
import re, ansible_test, pathlib
src = pathlib.Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py"
print(re.search(r"pip='([^']+)'", src.read_text()).group(1))
PY
)
getpip="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
if [ ! -f "$getpip" ]; then
  mkdir -p "$(dirname "$getpip")"
  cat >"$getpip" <<'PY'
"""Offline stand-in for get-pip.py: bootstrap pip from ensurepip, then install what was asked."""
import ensurepip
import subprocess
import sys

ensurepip.bootstrap(upgrade=True)
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install"] + args))
PY
fi

# Outside any git work tree: inside one, ansible-test would list files with git
# and find none under an ignored folder.
stage_root=$(mktemp -d "${TMPDIR:-/tmp}/gpuops-sanity.XXXXXX")
trap 'rm -rf "$stage_root"' EXIT
stage="$stage_root/ansible_collections/gpuops/platform"
mkdir -p "$stage"
git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -T - -cf - | tar -xf - -C "$stage"
cd "$stage"
ansible-test sanity --venv --requirements --color no "$@"
