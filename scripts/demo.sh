#!/usr/bin/env bash
# The main job: set up, then plan the recorded fleet of inventories/demo (a DGX
# A100, four HGX H100, an H200 with MIG, four time-sliced L40S) from the NVML
# fixtures in tests/fixtures/nvml, render its Kubernetes layer with the capacity
# of that fleet, and write the fleet page. No GPU, no cluster, no change to this
# machine, and nothing read from outside the repository.
#   GPUOPS_FLEET_DIR   where plan.json and index.html go (build/fleet)
#   GPUOPS_RENDER_DIR  where the Kubernetes manifests go (build/rendered)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
if [ "${1:-}" != --no-setup ]; then
  bash scripts/bootstrap.sh
  export PATH="$VENV/bin:$PATH"
fi
fleet_dir=${GPUOPS_FLEET_DIR:-$ROOT/build/fleet}
render_dir=${GPUOPS_RENDER_DIR:-$ROOT/build/rendered}
log "Planning the demo fleet (inventories/demo) and rendering its Kubernetes layer"
# One run, so the Kubernetes layer sees the facts the planner published.
ansible-playbook -i inventories/demo/hosts.yml playbooks/plan_fleet.yml playbooks/cluster.yml --check \
  -e "gpuops_fleet_report_dir=$fleet_dir" -e "gpuops_k8s_render_dir=$render_dir"

log "Summary"
python - "$fleet_dir" "$render_dir" <<'PY'
import json, os, sys
fleet, render = sys.argv[1:]
with open(os.path.join(fleet, "plan.json")) as handle:
    s = json.load(handle)["summary"]
print("fleet:      %d hosts, %d GPUs (%s)" % (s["hosts"], s["gpus"], ", ".join(
    "%d x %s" % (n, m) for m, n in sorted(s["gpus_by_model"].items()))))
print("driver:     %d node(s) change, %d reboot (%s)" % (
    len(s["driver_changes"]), len(s["reboot"]), ", ".join(s["reboot"]) or "none"))
print("MIG:        %d node(s) change, invalid layouts: %s" % (len(s["mig_changes"]), ", ".join(s["invalid_mig"]) or "none"))
print("health:     %d unhealthy GPU(s); invalid plans: %s" % (s["unhealthy_gpus"], ", ".join(s["hosts_invalid"]) or "none"))
shared = s.get("shared") or {}
print("capacity:   %s" % ", ".join("%s %d%s" % (r, n, " (%d of them %s replicas of %d %s)" % (
    shared[r]["replicas"], shared[r]["mode"], shared[r]["devices"], "GPUs" if r.startswith("nvidia.com/gpu") else "devices")
    if r in shared else "")
    for r, n in sorted(s["capacity"].items())))
print("kubernetes: %s" % render)
print("page:       %s" % os.path.join(fleet, "index.html"))
PY
