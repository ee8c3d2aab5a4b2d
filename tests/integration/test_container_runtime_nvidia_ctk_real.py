"""Where nvidia_container_runtime deliberately writes another containerd config than nvidia-ctk: proved
with real containerd 1.7 and 2.1 (scripts/fetch_runtimes.sh; skipped where they cannot be had).

nvidia-ctk's expected file for a config that names no runtime (its TestAddRuntime case "empty
config", the comparison cases ctd-pkg-addruntime-01/-02 and inst-containerd-05) holds only the
NVIDIA runtime, with zero values. containerd 1.7 replaces its built-in runtimes with the ones a
config names, keeps default_runtime_name = "runc", and so refuses to load its CRI plugin. The module
writes runc first; the zero values it leaves out are containerd's own defaults.
"""
import os
import subprocess
import time
from pathlib import Path

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.containerd import plan_containerd
import test_container_runtime_real as real
from container_runtime_helpers import CRI2, CRI3

binary, dump, write = real.binary, real.dump, real.write
real_runtimes = real.real_runtimes  # the real containerd and docker binaries (a fixture)

NVIDIA_BIN = "/usr/bin/nvidia-container-runtime"
# nvidia-ctk's expected output for an empty config, as its TestAddRuntime writes it, for the runtime "nvidia".
NVIDIA_CTK_EXPECTED = """version = {version}
[plugins]
[plugins."{cri}"]
  [plugins."{cri}".containerd]
  [plugins."{cri}".containerd.runtimes]
    [plugins."{cri}".containerd.runtimes.nvidia]
    privileged_without_host_devices = false
    runtime_engine = ""
    runtime_root = ""
    runtime_type = "io.containerd.runc.v2"
    [plugins."{cri}".containerd.runtimes.nvidia.options]
      BinaryName = "{binary}"
"""
CRI_REFUSED = "failed to load plugin io.containerd.grpc.v1.cri"
CRI_STARTED = "Start cri plugin"


def nvidia_ctk_file(tmp_path, version):
    path = tmp_path / "etc/containerd/config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(NVIDIA_CTK_EXPECTED.format(version=version, cri=CRI2 if version == 2 else CRI3, binary=NVIDIA_BIN))
    return path


def module_file(tmp_path, version, mode):
    path = tmp_path / "etc/containerd/config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("version = %d\n" % version)
    write(plan_containerd(str(path), mode=mode, runtime_path=NVIDIA_BIN))
    return path


def cri_plugin_log(containerd, config, tmp_path):
    """containerd's own log of loading its CRI plugin from ``config`` (the daemon is started, then stopped)."""
    if os.geteuid() != 0:
        pytest.skip("starting containerd (to see its CRI plugin load) needs root")
    work = tmp_path / "daemon"
    for name in ("root", "state"):
        (work / name).mkdir(parents=True, exist_ok=True)
    log = work / "log"
    with open(str(log), "w") as out:
        proc = subprocess.Popen([containerd, "--config", str(config), "--root", str(work / "root"), "--state",
                                 str(work / "state"), "--address", str(work / "state/c.sock")],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while time.time() < deadline and proc.poll() is None:
            text = log.read_text()
            if CRI_REFUSED in text or CRI_STARTED in text:
                break
            time.sleep(0.2)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return log.read_text()


def test_containerd_1_7_refuses_nvidia_ctks_expected_file_for_a_config_without_runc(tmp_path, real_runtimes):
    containerd = binary(real_runtimes, "containerd-1.7")
    config = nvidia_ctk_file(tmp_path, 2)
    cri = dump(containerd, config)["plugins"][CRI2]["containerd"]
    assert sorted(cri["runtimes"]) == ["nvidia"] and cri["default_runtime_name"] == "runc"  # runc is gone
    log = cri_plugin_log(containerd, config, tmp_path)
    assert CRI_REFUSED in log and "no corresponding runtime configured" in log, log[-2000:]


@pytest.mark.parametrize("mode", ["in_place", "drop_in"])
def test_containerd_1_7_loads_the_modules_file_for_a_config_without_runc(tmp_path, real_runtimes, mode):
    containerd = binary(real_runtimes, "containerd-1.7")
    config = module_file(tmp_path, 2, mode)
    cri = dump(containerd, config)["plugins"][CRI2]["containerd"]
    assert sorted(cri["runtimes"]) == ["nvidia", "runc"] and cri["default_runtime_name"] == "runc"
    assert cri["runtimes"]["nvidia"]["options"]["BinaryName"] == NVIDIA_BIN
    log = cri_plugin_log(containerd, config, tmp_path)
    assert CRI_STARTED in log and CRI_REFUSED not in log, log[-2000:]


@pytest.mark.parametrize("name, version, cri", [("containerd-1.7", 2, CRI2), ("containerd-2", 3, CRI3)])
def test_the_zero_values_the_module_leaves_out_are_containerds_defaults(tmp_path, real_runtimes, name, version, cri):
    containerd = binary(real_runtimes, name)
    ours = dump(containerd, module_file(tmp_path / "ours", version, "in_place"))
    theirs_path = nvidia_ctk_file(tmp_path / "theirs", version)
    # nvidia-ctk's file with runc added, so that containerd 1.7 keeps it too: only the zero values differ.
    nvidia_header = '    [plugins."%s".containerd.runtimes.nvidia]\n' % cri
    runc = '    [plugins."%s".containerd.runtimes.runc]\n    runtime_type = "io.containerd.runc.v2"\n' % cri
    theirs_path.write_text(theirs_path.read_text().replace(nvidia_header, runc + nvidia_header))
    theirs = dump(containerd, theirs_path)
    assert ours["plugins"][cri]["containerd"]["runtimes"] == theirs["plugins"][cri]["containerd"]["runtimes"]
    assert Path(str(theirs_path)).read_text().count("runtime_engine") == 1  # the zero values were in the file
