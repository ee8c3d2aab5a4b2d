#!/usr/bin/env bash
# Set up everything the demo and the tests need, reusing what is already there:
#   .venv         pinned controller tools on the newest Python (>= 3.12)
#   collections/  kubernetes.core (from the pinned `ansible` wheel) and this
#                 collection, built with `ansible-galaxy collection build`
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

PYTHON=$(find_python 3.14 3.13 3.12) ||
  die "ansible-core 2.20+ needs Python 3.12 or newer on the controller; install python3.12 or newer and run again."
venv_sync "$VENV" "$PYTHON" requirements/dev.txt
export PATH="$VENV/bin:$PATH"

# kubernetes.core comes out of the pinned `ansible` package: Galaxy is unreachable.
ansible_pin=$(grep -E '^ansible==' requirements/collections.txt | cut -d= -f3)
wheel_dir="$CACHE/wheels"
marker="$COLLECTIONS/ansible_collections/kubernetes/core/.from-ansible-$ansible_pin"
if [ ! -f "$marker" ]; then
  log "Installing kubernetes.core from ansible==$ansible_pin"
  mkdir -p "$wheel_dir"
  ls "$wheel_dir"/ansible-"$ansible_pin"-*.whl >/dev/null 2>&1 ||
    python -m pip download -q --no-deps --only-binary=:all: -d "$wheel_dir" "ansible==$ansible_pin"
  rm -rf "$COLLECTIONS/ansible_collections/kubernetes/core"
  mkdir -p "$COLLECTIONS"
  python - "$wheel_dir"/ansible-"$ansible_pin"-*.whl "$COLLECTIONS" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
prefix = "ansible_collections/kubernetes/core/"
with zipfile.ZipFile(wheel) as zf:
    zf.extractall(dest, [n for n in zf.namelist() if n.startswith(prefix)])
PY
  touch "$marker"
fi

log "Building and installing gpuops.platform"
rm -rf build/dist && mkdir -p build/dist
ansible-galaxy collection build --force --output-path build/dist >/dev/null
ansible-galaxy collection install --offline --force -p "$COLLECTIONS" build/dist/gpuops-platform-*.tar.gz >/dev/null
ansible-galaxy collection list -p "$COLLECTIONS" 2>/dev/null | grep -E '^(gpuops|kubernetes)\.' || true
