#!/usr/bin/env bash
# The oldest supported ansible-core (2.17) on a Python it supports as controller:
# the unit tests, the AWX jobs, the module on this host, and the demo playbook.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
PYTHON=$(find_python 3.11 3.12 3.10) || die "ansible-core 2.17 needs Python 3.10-3.12 on the controller."
venv_sync "$ROOT/.venv-compat" "$PYTHON" requirements/compat.txt
export PATH="$ROOT/.venv-compat/bin:$PATH"
ansible --version | sed -n 1p
# Its own pytest folder: the units stage may run at the same time.
python -m pytest -q -p no:cacheprovider --basetemp "$CACHE/compat-pytest" tests/unit
# Every AWX job template as AWX launches it, on the execution environment's
# ansible-core (execution-environment.yml pins this one).
python -m pytest -q -p no:cacheprovider --basetemp "$CACHE/compat-awx" tests/integration/test_awx_jobs.py
ansible localhost -m gpuops.platform.nvml_facts >/dev/null
GPUOPS_RENDER_DIR="$CACHE/compat-render" bash scripts/demo.sh --no-setup
