"""Stands in for pynvml in the modules that playbooks/upgrade.yml runs: the fake NVML of the host.

The same fake as the MIG tests (tests/integration/mig/stubs/python/mig_harness.py),
plus what the driver upgrade changes outside NVML: the loaded kernel module version
(``kernel_version`` in the host's state directory) and the installed user-space
library (``lib/libnvidia-ml.so.<version>``), which nvml_facts reads from files.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
del sys.modules[__name__]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
import mig_harness  # noqa: E402

mig_harness.import_real_pynvml()
_STATE = mig_harness.state_dir()
_COLLECTOR = sys.modules.get("ansible_collections.gpuops.platform.plugins.module_utils._nvml.collect")
if _COLLECTOR is not None:
    _COLLECTOR.KERNEL_MODULE_VERSION_PATHS = (os.path.join(_STATE, "kernel_version"),)
    _COLLECTOR.USERSPACE_LIBRARY_GLOBS = (os.path.join(_STATE, "lib", "libnvidia-ml.so.*"),)
sys.modules[__name__] = mig_harness.open_fake(os.path.basename(sys.argv[0]))
