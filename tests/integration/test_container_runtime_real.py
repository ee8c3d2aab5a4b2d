"""nvidia_container_runtime output loaded by real containerd 1.7, containerd 2.1 and dockerd.

scripts/fetch_runtimes.sh downloads Debian's packages (trixie, sid) into
.cache/runtimes and unpacks them, never installing anything; a re-run with the
cache in place costs nothing. Where they cannot be had (no apt, no network) the
tests skip and say so; with GPUOPS_REQUIRE_REAL_RUNTIMES=1 they fail instead.
"""
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.containerd import (
    _merge_imported,
    plan_containerd,
)
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.docker import plan_docker
from container_runtime_helpers import CRI2, CRI3, fixture_text, load_toml

ROOT = Path(__file__).resolve().parents[2]
NVIDIA_BIN = "/usr/bin/nvidia-container-runtime"
CRI = {2: CRI2, 3: CRI3}


@pytest.fixture(scope="session")
def real_runtimes():
    """{name: (version, binary)} or {name: reason}, from scripts/fetch_runtimes.sh."""
    try:
        out = subprocess.run(["bash", str(ROOT / "scripts/fetch_runtimes.sh")], capture_output=True, text=True,
                             check=False, timeout=900).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        out = "\n".join("missing %s %s" % (name, exc) for name in ("containerd-1.7", "containerd-2", "docker"))
    found = {}
    for line in out.splitlines():
        parts = line.split(" ", 3)
        if parts[0] == "ok" and len(parts) == 4:
            found[parts[1]] = (parts[2], parts[3])
        elif parts[0] == "missing" and len(parts) >= 2:
            found[parts[1]] = line.split(" ", 2)[-1]
    return found


def binary(real_runtimes, name):
    entry = real_runtimes.get(name, "scripts/fetch_runtimes.sh printed nothing for it")
    if isinstance(entry, tuple):
        return entry[1]
    message = "real %s could not be had (%s); run scripts/fetch_runtimes.sh where apt works" % (name, entry)
    if os.environ.get("GPUOPS_REQUIRE_REAL_RUNTIMES") == "1":
        pytest.fail(message)
    pytest.skip(message)


def write(plan):
    for edit in plan.changed_edits:
        os.makedirs(os.path.dirname(edit.path), exist_ok=True)
        Path(edit.path).write_text(edit.after)


def dump(containerd, config):
    """What containerd really loads from ``config`` (imports merged), as data."""
    result = subprocess.run([containerd, "--config", str(config), "config", "dump"], capture_output=True,
                            check=False, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return load_toml(result.stdout)


def place_config(tmp_path, text):
    path = tmp_path / "etc/containerd/config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace("/etc/containerd/conf.d/", "%s/etc/containerd/conf.d/" % tmp_path))
    return path


# (binary, fixture, config version of the fixture)
CONFIGS = [
    ("containerd-1.7", "containerd-1.7-kubeadm.toml", 2),
    ("containerd-1.7", "containerd-1.6-appended-gvisor.toml", 2),
    ("containerd-2", "containerd-2.1-default.toml", 3),
    ("containerd-2", "containerd-2.2-default-imports.toml", 3),
    ("containerd-2", "containerd-1.7-kubeadm.toml", 2),  # a version 2 config on containerd 2 (Debian)
]


@pytest.mark.parametrize("mode", ["in_place", "drop_in"])
@pytest.mark.parametrize("name, fixture, version", CONFIGS)
def test_containerd_loads_the_nvidia_runtime(real_runtimes, tmp_path, name, fixture, version, mode):
    containerd = binary(real_runtimes, name)
    config = place_config(tmp_path, fixture_text(fixture))
    before = dump(containerd, config)
    plan = plan_containerd(str(config), mode=mode, set_as_default=True, enable_cdi=True)
    write(plan)
    loaded = dump(containerd, config)
    cri = CRI[loaded["version"]]  # containerd 2 migrates a version 2 config to 3 when it loads it
    runtimes = loaded["plugins"][cri]["containerd"]["runtimes"]
    runc = runtimes["runc"]
    nvidia = runtimes["nvidia"]
    assert nvidia["runtime_type"] == runc["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"]["BinaryName"] == NVIDIA_BIN
    assert nvidia["options"]["SystemdCgroup"] == runc["options"]["SystemdCgroup"]
    assert loaded["plugins"][cri]["containerd"]["default_runtime_name"] == "nvidia"
    assert loaded["plugins"][cri]["enable_cdi"] is True
    # every runtime containerd had is still there, as it was
    for rt_name, rt in before["plugins"][cri]["containerd"]["runtimes"].items():
        assert runtimes[rt_name] == rt
    # and a second run changes nothing
    assert not plan_containerd(str(config), mode=mode, set_as_default=True, enable_cdi=True).changed


@pytest.mark.parametrize("name, version", [("containerd-1.7", 2), ("containerd-2", 3)])
@pytest.mark.parametrize("imported", [
    # one key of the CRI section
    '[plugins."{cri}".containerd]\n  default_runtime_name = "crun"\n',
    # a runtime option, deeper down
    '[plugins."{cri}".containerd.runtimes.runc.options]\n  SystemdCgroup = false\n',
    # a top-level key and another plugin
    'oom_score = -999\n[plugins."io.containerd.gc.v1.scheduler"]\n  pause_threshold = 0.5\n',
])
def test_the_import_merge_model_matches_containerd(real_runtimes, tmp_path, name, version, imported):
    """containerd 1.x replaces a whole plugin section on import, 2.x merges key by key: the model must agree."""
    containerd = binary(real_runtimes, name)
    cri = CRI[version]
    # every value differs from containerd's default, so a value the import drops shows
    main = ('version = %d\nimports = ["%s/conf.d/*.toml"]\noom_score = 5\n'
            '[plugins."io.containerd.gc.v1.scheduler"]\n  pause_threshold = 0.3\n  deletion_threshold = 7\n'
            '[plugins."%s"]\n  enable_selinux = true\n'
            '[plugins."%s".containerd]\n  default_runtime_name = "kata"\n'
            '[plugins."%s".containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n'
            '[plugins."%s".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n  NoPivotRoot = true\n'
            % (version, tmp_path, cri, cri, cri, cri))
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "config.toml").write_text(main)
    drop_in = "version = %d\n" % version + imported.replace("{cri}", cri)
    (tmp_path / "conf.d/50-x.toml").write_text(drop_in)
    loaded = dump(containerd, tmp_path / "config.toml")
    model = _merge_imported(version, load_toml(main), load_toml(drop_in))
    for path in (["oom_score"], ["plugins", "io.containerd.gc.v1.scheduler"], ["plugins", cri, "enable_selinux"],
                 ["plugins", cri, "containerd", "default_runtime_name"],
                 ["plugins", cri, "containerd", "runtimes", "runc", "options", "SystemdCgroup"],
                 ["plugins", cri, "containerd", "runtimes", "runc", "options", "NoPivotRoot"]):
        real, ours = loaded, model
        for key in path:
            real, ours = real.get(key, {}), ours.get(key, {}) if isinstance(ours, dict) else {}
        if isinstance(real, dict):  # a section: what the model says must be what containerd has
            real = dict((k, v) for k, v in real.items() if k in ours or not ours)
            ours = dict((k, v) for k, v in ours.items() if k in real)
        elif ours == {}:
            # a key the model says the import removed is containerd's default again, not the main's value
            main_value = load_toml(main)
            for key in path:
                main_value = main_value.get(key, {})
            assert real != main_value, path
            continue
        assert real == ours, path


def _start(containerd, config, log):
    process = subprocess.Popen([containerd, "--config", str(config)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    text = ""
    while time.time() < deadline and process.poll() is None:
        text = Path(log.name).read_text()
        if "successfully booted" in text:
            break
        time.sleep(0.2)
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return Path(log.name).read_text()


@pytest.mark.parametrize("name, fixture", [("containerd-1.7", "containerd-1.7-kubeadm.toml"),
                                           ("containerd-2", "containerd-2.1-default.toml")])
def test_a_containerd_daemon_starts_with_the_nvidia_runtime(real_runtimes, tmp_path, name, fixture):
    """The daemon on a private socket, root and state: its CRI plugin starts with the NVIDIA runtime.

    No container is run (that needs runc and root); the CRI plugin logs the runtime config it loaded.
    """
    containerd = binary(real_runtimes, name)
    private = tmp_path / "d"
    text = fixture_text(fixture)
    text = re.sub(r'(?m)^(\s*)root = "/var/lib/containerd"', r'\1root = "%s/root"' % private, text)
    text = re.sub(r"(?m)^(\s*)root = '/var/lib/containerd'", r"\1root = '%s/root'" % private, text)
    text = re.sub(r"""(?m)^(\s*)state = ["']/run/containerd["']""", r'\1state = "%s/state"' % private, text)
    text = re.sub(r"""(?m)^(\s*)address = ["']/run/containerd/containerd.sock["']""",
                  r'\1address = "%s/c.sock"' % private, text)
    assert str(private) in text and "/run/containerd/containerd.sock" not in text
    config = place_config(tmp_path, text)
    write(plan_containerd(str(config), set_as_default=True))
    with open(str(tmp_path / "containerd.log"), "w") as log:
        output = _start(containerd, config, log)
    if "successfully booted" not in output:
        if os.geteuid() != 0:  # containerd wants root for its snapshotters and cgroups
            pytest.skip("containerd could not start without root here; its log ends:\n" + output[-1500:])
        pytest.fail("containerd did not start:\n" + output[-3000:])
    assert "failed to load plugin" not in output or "cri" not in re.findall(r'failed to load plugin.*', output)[0]
    if name == "containerd-1.7":
        line = re.search(r"Start cri plugin with config (.*)", output).group(1)
        assert "DefaultRuntimeName:nvidia " in line
        assert re.search(r"nvidia:\{Type:io.containerd.runc.v2 .*?BinaryName:%s" % NVIDIA_BIN, line)
    else:
        raw = re.search(r'msg="starting cri plugin" config="((?:[^"\\]|\\.)*)"', output).group(1)
        cri = json.loads(json.loads('"%s"' % raw))["containerd"]
        assert cri["defaultRuntimeName"] == "nvidia"
        assert cri["runtimes"]["nvidia"]["runtimeType"] == "io.containerd.runc.v2"
        assert cri["runtimes"]["nvidia"]["options"]["BinaryName"] == NVIDIA_BIN
        assert cri["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is True


@pytest.mark.parametrize("text", [None, fixture_text("daemon.json")])
def test_dockerd_validates_the_daemon_json(real_runtimes, tmp_path, text):
    dockerd = binary(real_runtimes, "docker")
    path = tmp_path / "daemon.json"
    if text is not None:
        path.write_text(text)
    write(plan_docker(str(path), set_as_default=True, enable_cdi=True))
    # --userland-proxy=false: the proxy binary is not unpacked, and is no part of daemon.json
    result = subprocess.run([dockerd, "--validate", "--userland-proxy=false", "--config-file", str(path)],
                            capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0 and "configuration OK" in result.stdout + result.stderr, result.stderr
    data = json.loads(path.read_text())
    assert data["runtimes"]["nvidia"] == {"path": NVIDIA_BIN, "args": []}
    # and dockerd does refuse what is wrong, so the check above can fail
    path.write_text(path.read_text().replace('"runtimes"', '"runtime"'))
    bad = subprocess.run([dockerd, "--validate", "--userland-proxy=false", "--config-file", str(path)],
                         capture_output=True, text=True, check=False, timeout=60)
    assert bad.returncode != 0 and "don't match any configuration option" in bad.stderr


# Valid layouts tomlkit does not edit as a plain document: tables out of order and
# runtimes as inline tables (tests/fuzz/corpus). containerd reads them; the edit must too.
LAYOUTS = ROOT / "tests" / "fuzz" / "corpus"


@pytest.mark.parametrize("name, corpus_file", [
    ("containerd-1.7", "containerd_v2/another-plugins-table-inside-the-cri-section.toml"),
    ("containerd-1.7", "containerd_v2/super-table-after-its-sub-tables.toml"),
    ("containerd-1.7", "containerd_v2/runtimes-as-inline-table.toml"),
    ("containerd-2", "containerd_v3/runtimes-as-inline-table.toml"),
    ("containerd-2", "containerd_v3/sub-tables-before-their-super-tables.toml"),
])
def test_containerd_loads_the_nvidia_runtime_from_unusual_layouts(real_runtimes, tmp_path, name, corpus_file):
    containerd = binary(real_runtimes, name)
    text = (LAYOUTS / corpus_file).read_text()
    config = place_config(tmp_path, text)
    before = dump(containerd, config)
    plan = plan_containerd(str(config), mode="in_place", set_as_default=True)
    write(plan)
    after_text = config.read_text()
    loaded = dump(containerd, config)
    cri = CRI[loaded["version"]]
    runtimes = loaded["plugins"][cri]["containerd"]["runtimes"]
    assert runtimes["nvidia"]["options"]["BinaryName"] == NVIDIA_BIN
    assert loaded["plugins"][cri]["containerd"]["default_runtime_name"] == "nvidia"
    for rt_name, rt in before["plugins"][cri]["containerd"]["runtimes"].items():
        assert runtimes[rt_name] == rt
    # Nothing else containerd reads changed, and every line of the file but the two the edit owns
    # (the default runtime, the inline runtimes table) is still there, in order.
    for data in (before, loaded):
        data["plugins"].pop(cri)
    assert loaded == before
    kept = iter(after_text.splitlines())
    owned = ("default_runtime_name", "runtimes = {")
    assert all(any(line == new for new in kept) for line in text.splitlines()
               if not line.strip().startswith(owned)), after_text
    assert not plan_containerd(str(config), mode="in_place", set_as_default=True).changed


@pytest.mark.parametrize("name, corpus_file", [
    ("containerd-1.7", "containerd_v2/cri-as-root-level-dotted-keys.toml"),
    ("containerd-2", "containerd_v3/cri-as-root-level-dotted-keys.toml"),
    ("containerd-2", "containerd_v3/cri-as-dotted-keys-under-plugins.toml"),
])
def test_containerd_loads_the_nvidia_runtime_from_dotted_keys(real_runtimes, tmp_path, name, corpus_file):
    """CRI settings written as dotted keys: what containerd loads keeps every setting (runc's SystemdCgroup)."""
    containerd = binary(real_runtimes, name)
    config = place_config(tmp_path, (LAYOUTS / corpus_file).read_text())
    before = dump(containerd, config)
    write(plan_containerd(str(config), mode="in_place"))
    loaded = dump(containerd, config)
    cri = CRI[loaded["version"]]
    runtimes = loaded["plugins"][cri]["containerd"]["runtimes"]
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"]["BinaryName"] == NVIDIA_BIN
    assert "plugins" not in runtimes["nvidia"]["options"]
    runtimes.pop("nvidia")
    assert loaded == before
    assert not plan_containerd(str(config), mode="in_place").changed
