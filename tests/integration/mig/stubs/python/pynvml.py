"""Stands in for pynvml in the modules that playbooks/mig.yml runs: the fake NVML of the host."""
import os
import sys

del sys.modules[__name__]
import mig_harness  # noqa: E402

mig_harness.import_real_pynvml()
sys.modules[__name__] = mig_harness.open_fake(os.path.basename(sys.argv[0]))
