# shellcheck shell=bash
# Run through ansible.builtin.script with executable: /bin/bash.
# Print what a node role may change, one line per item, sorted: every file
# under the system paths with size, mtime, mode and link target, and every
# running service with its main PID and start time. Two listings that differ
# mean something was written or (re)started.
set -euo pipefail
paths=()
for p in /etc /usr /opt /boot /var/lib/dpkg /var/lib/apt /var/lib/dkms /run/cdi; do
  [ -e "$p" ] && paths+=("$p")
done
find "${paths[@]}" -xdev \( -type f -o -type l \) -printf 'file %p %s %T@ %m %l\n' | LC_ALL=C sort
mapfile -t running < <(systemctl list-units --type=service --state=running --no-legend --plain | awk '{print $1}')
for unit in "${running[@]}"; do
  printf 'service %s %s\n' "$unit" \
    "$(systemctl show -p MainPID -p ExecMainStartTimestampMonotonic --value "$unit" | tr '\n' ' ')"
done | LC_ALL=C sort
