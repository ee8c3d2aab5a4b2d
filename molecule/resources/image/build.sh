#!/usr/bin/env bash
# Build the Debian 12 image the Molecule scenarios run in, without a registry:
# debootstrap bookworm from the Debian mirror, then `podman import` with systemd
# as PID 1. The tag is a hash of this script, so the image is rebuilt only when
# the build inputs change; a second run just prints the existing tag.
#
#   build.sh [CACHE_DIR]   prints the image reference on stdout, logs on stderr
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${1:-$(cd "$here/../../.." && pwd)/.cache/molecule}
repo=localhost/gpuops-molecule-debian12
mirror=${GPUOPS_DEBIAN_MIRROR:-http://deb.debian.org/debian}

# What the scenarios need: systemd as PID 1, Python with python3-apt,
# python3-tomlkit and python3-yaml for the apt, nvidia_container_runtime and
# kubelet_config modules (the image
# has no Debian sources at test time), gnupg and apt-utils for repositories,
# kmod for module checks, and Debian's own containerd for the container
# toolkit scenario.
packages=(
  systemd systemd-sysv dbus
  python3 python3-apt python3-tomlkit python3-yaml
  ca-certificates apt-utils gnupg
  kmod procps
  containerd
)

tag=$(sha256sum "$here/build.sh" | cut -c1-12)
image=$repo:$tag
if podman image exists "$image"; then
  echo "$image"
  exit 0
fi

log() { printf '==> %s\n' "$*" >&2; }
mkdir -p "$cache/debs"
rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
trap 'rm -rf "$rootfs"' EXIT

log "debootstrap bookworm into $rootfs (packages cached in $cache/debs)"
IFS=, debootstrap --variant=minbase --include="${packages[*]}" \
  --cache-dir="$cache/debs" bookworm "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
  { tail -n 40 "$cache/debootstrap.log" >&2; exit 1; }

log "configuring the root file system for a systemd container"
# The scenarios install only from their own local repository: no network
# fetches, and no unrelated Debian updates in the results.
: >"$rootfs/etc/apt/sources.list"
rm -f "$rootfs/etc/apt/sources.list.d/"*
rm -rf "$rootfs/var/lib/apt/lists/"* "$rootfs/var/cache/apt/"*.bin
# systemd makes a fresh machine id at boot.
: >"$rootfs/etc/machine-id"
rm -f "$rootfs/var/lib/dbus/machine-id"
# Units that need hardware or a console, which a container has not.
for unit in getty@tty1.service console-getty.service systemd-remount-fs.service \
  systemd-udevd.service systemd-udev-trigger.service systemd-modules-load.service \
  sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount; do
  ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
done

log "importing $image"
tar -C "$rootfs" --numeric-owner -c . |
  podman import --quiet \
    --change 'CMD ["/lib/systemd/systemd"]' \
    --change 'ENV container=podman' \
    --change 'STOPSIGNAL SIGRTMIN+3' \
    - "$image" >/dev/null
podman tag "$image" "$repo:latest"

# Keep one image: drop those built from older inputs.
podman images --format '{{.Repository}}:{{.Tag}}' --filter "reference=$repo" |
  grep -vxF -e "$image" -e "$repo:latest" | xargs -r podman rmi >/dev/null 2>&1 || true
echo "$image"
