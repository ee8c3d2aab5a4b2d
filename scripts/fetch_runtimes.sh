#!/usr/bin/env bash
# Real container engines for the tests, never installed: containerd 1.7 and
# docker.io (Debian trixie) and containerd 2.x (Debian sid) are downloaded with
# `apt-get download` from a private sources list and unpacked with `dpkg-deb -x`
# into .cache/runtimes/<name>/. Re-runs with everything in place do nothing.
#
#   scripts/fetch_runtimes.sh            # fetch what is missing
#   RUNTIMES_CACHE=/some/dir scripts/fetch_runtimes.sh
#
# Prints one line per engine: "ok NAME VERSION PATH" or "missing NAME REASON".
# The exit code is 0 even when nothing could be fetched: the tests skip with the
# reason printed here.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

DEST=${RUNTIMES_CACHE:-$CACHE/runtimes}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
ARCH=$(dpkg --print-architecture 2>/dev/null || echo amd64)

# name suite package binary-in-package
ENGINES=(
  "containerd-1.7 trixie containerd usr/bin/containerd"
  "containerd-2 sid containerd usr/bin/containerd"
  "docker trixie docker.io usr/sbin/dockerd"
)

fetch() {
  local name=$1 suite=$2 package=$3 binary=$4 target="$DEST/$1" work version
  if [ -x "$target/root/$binary" ] && [ -s "$target/VERSION" ]; then
    echo "ok $name $(cat "$target/VERSION") $target/root/$binary"
    return 0
  fi
  if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
    echo "missing $name apt-get/dpkg-deb not available"
    return 0
  fi
  work=$(mktemp -d) || return 0
  mkdir -p "$work/lists/partial" "$work/archives/partial"
  echo "deb $MIRROR $suite main" >"$work/sources.list"
  # The host's keyrings verify the suite; nothing of the host's apt state is touched.
  local apt=(apt-get -qq -o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work" -o "Dir::Cache::archives=$work/archives"
    -o "APT::Architecture=$ARCH" -o Debug::NoLocking=1)
  if ! timeout 300 "${apt[@]}" update >"$work/log" 2>&1; then
    echo "missing $name apt-get update of $suite failed: $(tail -n 1 "$work/log")"
    rm -rf "$work"; return 0
  fi
  if ! (cd "$work" && timeout 300 "${apt[@]}" download "$package" >>"$work/log" 2>&1); then
    echo "missing $name apt-get download $package ($suite) failed: $(tail -n 1 "$work/log")"
    rm -rf "$work"; return 0
  fi
  rm -rf "$target"; mkdir -p "$target/root"
  dpkg-deb -x "$work"/"${package}"_*.deb "$target/root" \
    && version=$(dpkg-deb -f "$work"/"${package}"_*.deb Version) \
    && echo "$version" >"$target/VERSION"
  rm -rf "$work"
  if [ -x "$target/root/$binary" ]; then
    echo "ok $name $version $target/root/$binary"
  else
    echo "missing $name $binary not found in $package"
  fi
}

mkdir -p "$DEST"
for engine in "${ENGINES[@]}"; do
  # shellcheck disable=SC2086  # the fields are split on purpose
  fetch $engine
done
