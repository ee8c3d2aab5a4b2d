# Shared helpers for the scripts in this folder. Source it; do not run it.
# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables below are used by the scripts that source this file

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
CACHE="$ROOT/.cache"
COLLECTIONS="$ROOT/collections"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 ANSIBLE_NOCOLOR=${ANSIBLE_NOCOLOR:-1}
# Only this checkout's collections: a gpuops.platform or kubernetes.core left in
# ~/.ansible by other work must never shadow the one built here.
export ANSIBLE_HOME="$CACHE/ansible-home" ANSIBLE_COLLECTIONS_PATH="$COLLECTIONS"

log() { printf '\n==> %s\n' "$*"; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# find_python MINOR...: print the first interpreter found for the given
# versions, on PATH or in pyenv's versions folder.
find_python() {
  local v p
  for v in "$@"; do
    # pyenv shims exist for versions that are not selected: check each one runs.
    for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/python"$v" $(command -v "python$v" 2>/dev/null); do
      [ -x "$p" ] && "$p" -c 'import venv' >/dev/null 2>&1 && { echo "$p"; return 0; }
    done
  done
  return 1
}

# apt_ensure PKG...: install the Debian packages that are missing (root only).
apt_ensure() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    die "missing system packages: ${missing[*]}. Install them (e.g. 'sudo apt-get install ${missing[*]}') and run again."
  fi
  log "Installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# venv_sync DIR PYTHON REQUIREMENTS: create DIR and install the pinned
# requirements, skipping the install when nothing changed since the last run.
venv_sync() {
  local dir=$1 python=$2 req=$3 stamp sum f
  local -a files=("$req")
  stamp="$dir/.requirements.sha256"
  # The stamp covers the file and the files it includes with -r.
  while read -r f; do files+=("$(dirname "$req")/$f"); done < <(sed -n 's/^-r[[:space:]]*//p' "$req")
  sum=$(cat "${files[@]}" | sha256sum | cut -d' ' -f1)
  if [ -x "$dir/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$sum" ]; then
    return 0
  fi
  log "Creating $(basename "$dir") with $("$python" --version) from $(basename "$req")"
  rm -rf "$dir"
  "$python" -m venv "$dir"
  "$dir/bin/python" -m pip install -q --upgrade pip
  "$dir/bin/python" -m pip install -q -r "$req"
  echo "$sum" >"$stamp"
}
