"""Run a command where no Python can import apt_pkg, as on a minimal Debian or Ubuntu image.

As root, in a private mount namespace (unshare -m), /dev/null is bound over every apt_pkg
extension of the machine's Pythons: ansible.builtin.apt cannot respawn itself with another
interpreter either. Nothing outside that namespace sees it.
"""

import glob
import os
import shutil

PATTERNS = ("/usr/lib/python3/dist-packages/apt_pkg*.so", "/usr/lib/python3*/*-packages/apt_pkg*.so",
            "/usr/local/lib/python3*/*-packages/apt_pkg*.so")
APT_PKG = sorted(set(path for pattern in PATTERNS for path in glob.glob(pattern)))
# Where there is no apt_pkg at all, nothing needs hiding.
CAN_HIDE = not APT_PKG or (os.geteuid() == 0 and bool(shutil.which("unshare")))


def without_apt_pkg(argv):
    """``argv`` wrapped so that it runs where no Python can import apt_pkg (needs CAN_HIDE)."""
    if not APT_PKG:
        return list(argv)
    script = 'for f in %s; do mount --bind /dev/null "$f" || exit 97; done; exec "$@"' % " ".join(APT_PKG)
    return ["unshare", "-m", "sh", "-c", script, "without-apt-pkg"] + list(argv)
