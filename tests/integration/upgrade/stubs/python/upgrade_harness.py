"""Node doubles of the upgrade tests: the real pynvml for the doubles' own code, and the reboot.

``import_real_pynvml`` must come first in a double that unpickles a node: the
fakes import pynvml, and the stub beside this file would otherwise open the
node's fake NVML (and save its old state over the change at exit).

``reboot`` is the fake-reboot command: the installed driver's kernel module is loaded (NVML works again), every unit
comes back up, and the boot id changes so ansible.builtin.reboot sees a reboot.
With ``lose_gpu`` in the node's flags.json, the last GPU does not come back.
"""
import json
import os
import pickle
import sys
import uuid

STUB_DIRS = ("upgrade/stubs/python", "mig/stubs/python")


def import_real_pynvml():
    if "pynvml" not in sys.modules:
        saved = list(sys.path)
        sys.path[:] = [p for p in sys.path if not any(os.path.abspath(p or ".").endswith(d) for d in STUB_DIRS)]
        try:
            import pynvml  # noqa: F401
        finally:
            sys.path[:] = saved
    return sys.modules["pynvml"]


def reboot(argv):
    import_real_pynvml()
    import mig_harness
    state = mig_harness.state_dir()
    with open(os.path.join(state, "node.pickle"), "rb") as handle:
        node = pickle.load(handle)
    flags = {}
    if os.path.exists(os.path.join(state, "flags.json")):
        with open(os.path.join(state, "flags.json")) as handle:
            flags = json.load(handle)
    node.init_error = None
    node.kernel_module_version = node.driver_version
    if flags.get("lose_gpu"):
        node.gpus = node.gpus[:-1]
    with open(os.path.join(state, "node.pickle"), "wb") as handle:
        pickle.dump(node, handle)
    with open(os.path.join(state, "kernel_version"), "w") as handle:
        handle.write(node.driver_version + "\n")
    with open(os.path.join(state, "boot_id"), "w") as handle:
        handle.write(str(uuid.uuid4()) + "\n")
    units = mig_harness.load_units()
    for unit in units.values():
        unit["active"] = True
    mig_harness.save_units(units)
    mig_harness.event("reboot", args=argv)
    return 0
