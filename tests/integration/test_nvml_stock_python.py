"""nvml_facts on a node whose Python has no nvidia-ml-py: the controller's binding is sent with the task.

The node here is this machine over the local connection, with a stock interpreter
that cannot import pynvml (/usr/bin/python3, or a bare Python 3.9). This machine
has no NVIDIA driver: NVML is then reached through the real binding, and the reason
is the missing library. With a stand-in libnvidia-ml.so.1 (tests/integration/nvml_stub,
one H200 under load, built with the C compiler) first on LD_LIBRARY_PATH, the same
interpreter reads the GPU, through the module and through playbooks/record_facts.yml.
"""
import ctypes
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

INSTALLED = Path("collections") / "ansible_collections" / "gpuops" / "platform"
SOURCES = ("plugins/modules/nvml_facts.py", "plugins/modules/nvidia_mig.py", "plugins/module_utils/_nvml/collect.py",
           "plugins/module_utils/_nvml/binding.py", "plugins/action/nvml_facts.py", "plugins/action/nvidia_mig.py",
           "plugins/plugin_utils/nvml_binding.py")
CANDIDATES = ("/usr/bin/python3", os.path.expanduser("~/.pyenv/versions/3.9.18/bin/python"),
              shutil.which("python3.9") or "")
CONTROLLER_VERSION = importlib.metadata.version("nvidia-ml-py")


def _stock_pythons():
    """Interpreters here that exist and cannot import pynvml (each once)."""
    found = {}
    for path in CANDIDATES:
        if not path or not os.access(path, os.X_OK):
            continue
        real = os.path.realpath(path)
        probe = subprocess.run([path, "-c", "import sys, importlib.util; "
                                "print('%d.%d' % sys.version_info[:2], importlib.util.find_spec('pynvml') is None)"],
                               capture_output=True, text=True, check=False)
        version, bare = (probe.stdout.split() + ["", ""])[:2]
        if probe.returncode == 0 and bare == "True" and real not in found:
            found[real] = (path, version)
    return sorted(found.values())


STOCK = _stock_pythons()


def _has_driver():
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


# The tests "without a driver" need a machine without one (a GPU host reads its real GPUs there).
needs_no_driver = pytest.mark.skipif(_has_driver(), reason="this machine has libnvidia-ml.so.1")


@pytest.fixture(scope="module", autouse=True)
def installed(repo_root):
    for source in SOURCES:
        copy = repo_root / INSTALLED / source
        if not copy.exists() or copy.read_bytes() != (repo_root / source).read_bytes():
            pytest.fail("the installed collection is missing or older than %s: rebuild it (scripts/bootstrap.sh)" % source)


@pytest.fixture(scope="module")
def stub_library(repo_root, tmp_path_factory):
    """A folder holding the stand-in libnvidia-ml.so.1."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        pytest.skip("no C compiler to build the stand-in libnvidia-ml.so.1")
    folder = tmp_path_factory.mktemp("nvml-stub")
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(folder / "libnvidia-ml.so.1"),
                    str(repo_root / "tests" / "integration" / "nvml_stub" / "libnvidia-ml.c")], check=True)
    return folder


def _env(library=None):
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    env.pop("PYTHONPATH", None)
    if library is not None:
        env["LD_LIBRARY_PATH"] = str(library)
    return env


def nvml_facts(repo_root, python, library=None):
    command = [str(Path(sys.executable).parent / "ansible"), "localhost", "-m", "gpuops.platform.nvml_facts",
               "-e", "ansible_python_interpreter=%s" % python]
    proc = subprocess.run(command, cwd=str(repo_root), env=_env(library), capture_output=True, text=True,
                          check=False, timeout=300)
    match = re.search(r"^localhost \| (\w+) => (\{.*\})\s*$", proc.stdout, re.S | re.M)
    assert proc.returncode == 0 and match, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(match.group(2))


def test_a_stock_python_is_found_here():
    """At least one interpreter to test with; the tests below would otherwise prove nothing."""
    assert STOCK, "no interpreter without pynvml among %s" % ", ".join(c for c in CANDIDATES if c)


@needs_no_driver
@pytest.mark.parametrize("python,version", STOCK)
def test_without_a_driver_the_reason_is_the_library_not_the_binding(repo_root, python, version):
    result = nvml_facts(repo_root, python)
    facts = result["ansible_facts"]["nvidia"]
    assert facts["present"] is False
    assert facts["reason"].startswith("libnvidia-ml.so.1 not found: the NVIDIA driver is not installed"), facts["reason"]
    assert "nvidia-ml-py" not in facts["reason"]
    # NVML was reached through the controller's binding, loaded by the node's Python.
    assert facts["nvml_binding"] == {"source": "controller", "version": CONTROLLER_VERSION}
    # The module's echo of its arguments does not carry the binding's text.
    echoed = ((result.get("invocation") or {}).get("module_args") or {}).get("controller_binding") or {}
    assert len(json.dumps(echoed)) < 500


@pytest.mark.parametrize("python,version", STOCK)
def test_a_stock_python_reads_the_gpu(repo_root, stub_library, python, version):
    facts = nvml_facts(repo_root, python, stub_library)["ansible_facts"]["nvidia"]
    assert facts["present"] is True and facts["reason"] is None, facts["reason"]
    assert facts["nvml_binding"] == {"source": "controller", "version": CONTROLLER_VERSION}
    assert (facts["driver_version"], facts["cuda_driver_version"], facts["gpu_count"]) == ("580.159.04", "13.0", 1)
    gpu = facts["gpus"][0]
    assert gpu["name"] == "NVIDIA H200"
    # Through the real binding's ctypes calls: the throttle mask and the utilisation structure.
    assert gpu["clocks_event_reasons"] == ["sw_power_cap"]
    assert gpu["utilization"] == {"gpu_percent": 97, "memory_percent": 24}
    # Functions the stand-in library lacks are a driver older than the query: null, no error, health ok.
    assert gpu["errors"] == [] and gpu["temperature_c"] is None
    assert facts["health"] == {"status": "ok", "reasons": []}


def test_record_facts_with_a_stock_python(repo_root, stub_library, tmp_path):
    python = STOCK[0][0] if STOCK else pytest.skip("no interpreter without pynvml")
    facts_dir = tmp_path / "facts"
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "gpu_nodes:\n  hosts:\n    node-1:\n      ansible_connection: local\n      ansible_python_interpreter: %s\n"
        "  vars:\n    gpuops_nodes_become: false\n    gpuops_fleet_facts_dir: %s\n" % (python, facts_dir))
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                           "playbooks/record_facts.yml"], cwd=str(repo_root), env=_env(stub_library),
                          capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    record = json.loads((facts_dir / "node-1.json").read_text())
    nvidia = record["nvidia"]
    assert nvidia["present"] is True and nvidia["gpus"][0]["name"] == "NVIDIA H200"
    assert nvidia["nvml_binding"]["source"] == "controller"


@needs_no_driver
@pytest.mark.parametrize("python,version", STOCK)
def test_nvidia_mig_with_a_stock_python_reaches_nvml(repo_root, python, version):
    """nvidia_mig gets the binding the same way: without a driver it names the library, not nvidia-ml-py."""
    config = json.dumps({"config_name": "off", "config": {"version": "v1", "mig-configs": {
        "off": [{"devices": "all", "mig-enabled": False}]}}})
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible"), "localhost", "-m", "gpuops.platform.nvidia_mig",
                           "-a", config, "--check", "-e", "ansible_python_interpreter=%s" % python],
                          cwd=str(repo_root), env=_env(), capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode != 0
    assert "NVML is not available on this node (NVML Shared Library Not Found)" in proc.stdout, proc.stdout[-3000:]
    assert "nvidia-ml-py" not in proc.stdout
