"""Helpers for the container runtime tests: fixtures on a temporary root, independent TOML reads."""
import os
from pathlib import Path

try:  # an independent parser where there is one, so tests do not trust tomlkit twice
    import tomllib as _toml

    def load_toml(text):
        return _toml.loads(text)
except ImportError:  # Python < 3.11
    import tomlkit as _toml

    def load_toml(text):
        return _toml.parse(text).unwrap()

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "container_runtime"
CRI2 = "io.containerd.grpc.v1.cri"
CRI3 = "io.containerd.cri.v1.runtime"


def fixture_text(name):
    return (FIXTURES / name).read_text()


def place(root, rel, text):
    """Write ``text`` at ``root/rel``; imports of /etc/containerd/conf.d point under root too."""
    path = Path(root) / rel.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace("/etc/containerd/conf.d/", "%s/etc/containerd/conf.d/" % root))
    return str(path)


def runtimes(data, plugin):
    return data["plugins"][plugin]["containerd"]["runtimes"]


def snapshot(root):
    """Every file under ``root`` with its bytes and mtime: proof that nothing was written."""
    result = {}
    for dirpath, _dirs, files in os.walk(str(root)):
        for name in files:
            path = os.path.join(dirpath, name)
            result[path] = (Path(path).read_bytes(), os.stat(path).st_mtime_ns)
    return result
