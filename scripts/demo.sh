#!/usr/bin/env bash
# The main job on the embedded default: set up, then run site.yml against
# inventories/local with --check. The node layer gathers facts and prints its
# plan without changing this machine; the Kubernetes layer renders manifests into
# build/rendered (or $GPUOPS_RENDER_DIR) instead of applying them.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
if [ "${1:-}" != --no-setup ]; then
  bash scripts/bootstrap.sh
  export PATH="$VENV/bin:$PATH"
fi
render_dir=${GPUOPS_RENDER_DIR:-$ROOT/build/rendered}
log "Running playbooks/site.yml against inventories/local (render dir: $render_dir)"
ansible-playbook -i inventories/local/hosts.yml playbooks/site.yml --check -e "gpuops_k8s_render_dir=$render_dir"
