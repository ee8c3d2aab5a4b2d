#!/usr/bin/env bash
# Import the collection as Galaxy does, offline, on a tarball built here from
# the working tree: galaxy-importer (its checks and ansible-doc; its ansible-lint
# run is the lint stage's, see galaxy-importer.cfg),
# the flake8 run of Automation Hub's importer, and antsibull-docs' docs lint.
# Fails on any error or warning: galaxy-importer exits 0 on most of them.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

IMPORTER_VENV="$ROOT/.venv-importer"
PYTHON=$(find_python 3.14 3.13 3.12) || die "ansible-core 2.21 needs Python 3.12 or newer; install python3.12 or newer and run again."
venv_sync "$IMPORTER_VENV" "$PYTHON" requirements/importer.txt
export PATH="$IMPORTER_VENV/bin:$PATH"

work=$(mktemp -d "${TMPDIR:-/tmp}/gpuops-importer.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Only the tarball and its dependencies: nothing from ~/.ansible or collections/.
export ANSIBLE_HOME="$work/ansible-home" ANSIBLE_COLLECTIONS_PATH="$work/collections"

ansible-galaxy collection build --output-path "$work/dist" >/dev/null
tarball=$(echo "$work"/dist/gpuops-platform-*.tar.gz)
dest="$work/collections/ansible_collections/gpuops/platform"
mkdir -p "$dest" && tar -xzf "$tarball" -C "$dest"

# The importer's ansible-doc and antsibull-docs (which checks the references
# to kubernetes.core) look for collections, like every ansible-core, on
# sys.path too. Galaxy cannot be reached, so the dependencies that galaxy.yml
# declares are linked from collections/ (the pinned `ansible` wheel's, see
# bootstrap.sh) into the venv's site-packages, where `pip install ansible` puts
# them, once their versions are checked.
site=$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
rm -rf "$site/ansible_collections"
python - "$dest" "$COLLECTIONS" "$site" <<'PY'
import json, os, shutil, sys
from ansible.galaxy.dependency_resolution.versioning import meets_requirements

collection, source, site = sys.argv[1:]
with open(os.path.join(collection, "MANIFEST.json"), encoding="utf-8") as f:
    wanted = [("gpuops.platform", json.load(f))]
done = set()
while wanted:
    owner, manifest = wanted.pop()
    for fqcn, spec in sorted(manifest["collection_info"]["dependencies"].items()):
        namespace, name = fqcn.split(".")
        path = os.path.join(source, "ansible_collections", namespace, name)
        try:
            with open(os.path.join(path, "MANIFEST.json"), encoding="utf-8") as f:
                dep = json.load(f)
        except FileNotFoundError:
            sys.exit(f"{owner} needs {fqcn}, which is not in {source}: run scripts/bootstrap.sh")
        version = dep["collection_info"]["version"]
        if not meets_requirements(version, spec):
            sys.exit(f"{owner} needs {fqcn} {spec}, {source} has {version}")
        print(f"{owner} needs {fqcn} {spec}: {version}")
        if fqcn not in done:
            done.add(fqcn)
            # A copy beside the collection, outside any git work tree: antsibull-docs copies
            # the dependencies it reads docs fragments from with `git ls-files` when their
            # folder is in one, and collections/ is ignored there.
            copy = os.path.join(os.path.dirname(os.path.dirname(collection)), namespace, name)
            shutil.copytree(path, copy, symlinks=True)
            os.makedirs(os.path.join(site, "ansible_collections", namespace), exist_ok=True)
            os.symlink(copy, os.path.join(site, "ansible_collections", namespace, name))
            wanted.append((fqcn, dep))
PY

# The three checks run at the same time: the importer's ansible-doc leaves a
# core idle. Each one's output goes to $work/NAME.out, its exit code to
# $work/NAME.rc, its time to $work/NAME.s.
check() {
  local name=$1 start=$SECONDS rc=0
  shift
  "$@" >"$work/$name.out" 2>&1 || rc=$?
  echo "$rc" >"$work/$name.rc"
  echo $((SECONDS - start)) >"$work/$name.s"
}

importer() {
  mkdir "$work/importer" "$work/ansible-tmp"
  # importer_result.json, which the importer writes to its working folder, is not needed.
  cd "$work/importer" || return
  GALAXY_IMPORTER_CONFIG="$ROOT/scripts/galaxy-importer.cfg" \
    GALAXY_IMPORTER_ANSIBLE_LOCAL_TMP="$work/ansible-tmp" GALAXY_IMPORTER_TMP_ROOT_DIR="$work" \
    python -m galaxy_importer.main "$tarball"
}

# galaxy-importer's own flake8 command (run_flake8), on the Python files only.
importer_flake8() {
  local select ignore length
  read -r select ignore length < <(python -c 'from galaxy_importer import constants as c
print(c.FLAKE8_SELECT_ERRORS, c.FLAKE8_IGNORE_ERRORS, c.FLAKE8_MAX_LINE_LENGTH)')
  cd "$dest" || return
  flake8 --isolated --extend-ignore "$ignore" --select "$select" --max-line-length "$length" plugins
}

# kubernetes.core's k8s_auth_options docs fragment (the modules' connection
# options) names M(community.okd.k8s_auth) in its username option; that one
# reference, to a collection no dependency brings, is kubernetes.core's and
# is let through. Every other finding fails.
docs_lint() {
  local out rc=0
  cd "$dest" || return
  out=$(antsibull-docs lint-collection-docs --plugin-docs --check-extra-docs-refs \
    --validate-collection-refs dependent --disallow-unknown-collection-refs . 2>&1) || rc=$?
  out=$(printf '%s\n' "$out" | grep -Ev '^plugins/modules/[a-z0-9_]+\.py:0:0: DOCUMENTATION -> options -> username -> description\[[0-9]+\]: M\(community\.okd\.k8s_auth\): a reference to the collection community\.okd is not allowed$')
  [ -z "$out" ] || { printf '%s\n' "$out"; return 1; }
  [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ]
}

check importer importer &
check flake8 importer_flake8 &
check antsibull-docs docs_lint &
wait

# report NAME TITLE PATTERN: print NAME's output; fail when its exit code is
# not 0 or a line of its output matches PATTERN (grep -E).
status=0
report() {
  local name=$1 title=$2 pattern=$3 rc
  rc=$(cat "$work/$name.rc")
  log "$title"
  cat "$work/$name.out"
  if [ "$rc" -ne 0 ] || grep -Eq "$pattern" "$work/$name.out"; then
    printf 'FAILED: %s (exit code %s)\n' "$name" "$rc"
    status=1
  fi
  printf -- '--- %s took %ss\n' "$name" "$(cat "$work/$name.s")"
}

# One "Loading <type> <name>" line per plugin, role and playbook: only the rest.
grep -v '^Loading ' "$work/importer.out" >"$work/importer.short" || true
mv "$work/importer.short" "$work/importer.out"
grep -q '^Importer processing completed successfully$' "$work/importer.out" ||
  [ "$(cat "$work/importer.rc")" -ne 0 ] || echo 1 >"$work/importer.rc"
report importer "galaxy-importer $(python -c 'import galaxy_importer; print(galaxy_importer.__version__)') on $(basename "$tarball")" \
  '^(WARNING|ERROR|CRITICAL):'
report flake8 "flake8 $(python -c 'import flake8; print(flake8.__version__)') as galaxy-importer runs it" '.'
# It prints nothing when the docs are clean.
report antsibull-docs "antsibull-docs $(python -c 'import antsibull_docs; print(antsibull_docs.__version__)') lint-collection-docs" '.'

[ "$status" -eq 0 ]
