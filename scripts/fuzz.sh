#!/usr/bin/env bash
# The long, coverage-guided fuzz run (nightly): every target of tests/fuzz/targets.py
# for FUZZ_SECONDS (600) each with atheris, in .venv-fuzz. Fails when any input
# broke the rule; each one is kept in $FUZZ_DIR/<target>/crash-* with a .txt
# saying how (timeout-*, oom-*: libFuzzer's own limits, 10 s and 2 GiB an input).
# Pick targets with FUZZ_TARGETS="containerd_v2 crio".
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

FUZZ_VENV="$ROOT/.venv-fuzz"
PYTHON=$(find_python 3.13 3.12) || die "atheris 3.1 needs Python 3.12 or 3.13; install one of them and run again."
venv_sync "$FUZZ_VENV" "$PYTHON" requirements/fuzz.txt || die "cannot set up .venv-fuzz"
seconds=${FUZZ_SECONDS:-600}
out=${FUZZ_DIR:-$ROOT/tests/output/fuzz}
targets=${FUZZ_TARGETS:-$("$FUZZ_VENV/bin/python" -c 'import sys; sys.path.insert(0, "tests/fuzz"); import targets; print(" ".join(targets.TARGETS))')}
failed=()
for target in $targets; do
  log "fuzz: $target for ${seconds}s"
  rm -rf "${out:?}/$target" && mkdir -p "$out/$target"
  (cd tests/fuzz && "$FUZZ_VENV/bin/python" run_atheris.py "$target" "$out/$target" -max_total_time="$seconds" \
    >"$out/$target.log" 2>&1)
  tail -n 2 "$out/$target.log" | grep -E '^(#|Done)' || true
  # crash-*: an input broke the rule (with a .txt); timeout-*, oom-*: libFuzzer stopped a slow or huge run.
  if compgen -G "$out/$target/crash-*" >/dev/null || compgen -G "$out/$target/timeout-*" >/dev/null ||
    compgen -G "$out/$target/oom-*" >/dev/null; then
    failed+=("$target")
    cat "$out/$target"/crash-*.txt 2>/dev/null
  fi
done
echo
[ ${#failed[@]} -eq 0 ] || die "inputs that break the rule, in $out: ${failed[*]}"
echo "fuzz: no input broke the rule ($seconds s per target)"
