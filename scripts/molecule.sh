#!/usr/bin/env bash
# Molecule scenarios on podman (see molecule/README.md).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
export PATH="$VENV/bin:$PATH"
shopt -s nullglob
scenarios=(molecule/*/molecule.yml)
[ ${#scenarios[@]} -gt 0 ] || { echo "no Molecule scenarios yet"; exit 0; }
molecule test --all
