"""Node doubles for running playbooks/mig.yml end to end without GPUs or a cluster.

One directory per host holds ``node.pickle`` (the fake NVML hardware model, see
tests/unit/fakes) and ``units.json`` (systemd units: active or not, and whether they
hold the GPUs). The stubs write every effect, in order, to ``events.jsonl`` beside
them: the fake ``pynvml`` (NVML calls of a module and the MIG mutations they made),
``systemctl`` (stop/start), ``nvidia-smi`` (GPU reset) and the ``kubernetes.core``
modules (drain, label, uncordon). MIG_FAKE_STATE points at the host's directory.
"""
import atexit
import json
import os
import pickle
import sys


def import_real_pynvml():
    """The real binding, not the stub beside this file (the fake uses its constants and errors)."""
    if "pynvml" in sys.modules:
        return sys.modules["pynvml"]
    here = os.path.dirname(os.path.abspath(__file__))
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import pynvml
    finally:
        sys.path[:] = saved
    return pynvml


def _harness_class():
    from fakes.fake_pynvml_mig import FakeMigNvml

    class HarnessNvml(FakeMigNvml):
        """The fake NVML of one module run; GPU resets come from the nvidia-smi stub as marker files."""

        def _apply_resets(self):
            for gpu in self.node.gpus:
                marker = os.path.join(state_dir(), "reset-%d" % gpu.index)
                if os.path.exists(marker):
                    os.remove(marker)
                    self.clients[gpu.index] = []
                    self.reset_gpu(gpu.index)

        def nvmlDeviceGetHandleByIndex(self, index):
            self._apply_resets()
            return super(HarnessNvml, self).nvmlDeviceGetHandleByIndex(index)

    return HarnessNvml


def state_dir():
    return os.environ["MIG_FAKE_STATE"]


def event(kind, **data):
    data["event"] = kind
    with open(os.path.join(os.environ.get("MIG_EVENTS_DIR", state_dir()), "events.jsonl"), "a") as handle:
        handle.write(json.dumps(data, sort_keys=True) + "\n")


def load_units():
    with open(os.path.join(state_dir(), "units.json")) as handle:
        return json.load(handle)


def save_units(units):
    with open(os.path.join(state_dir(), "units.json"), "w") as handle:
        json.dump(units, handle)


def open_fake(caller):
    """A FakeMigNvml on the host's saved model; saved back, with its mutations logged, at exit."""
    import_real_pynvml()
    with open(os.path.join(state_dir(), "node.pickle"), "rb") as handle:
        node = pickle.load(handle)
    fake = _harness_class()(node)
    holders = [name for name, unit in load_units().items() if unit["active"] and unit.get("holds_gpus")]
    for gpu in node.gpus:
        fake.clients[gpu.index] = list(holders)
    event("nvml", module=caller)

    def save():
        for entry in fake.log:
            event("mig", change=list(entry))
        with open(os.path.join(state_dir(), "node.pickle"), "wb") as handle:
            pickle.dump(node, handle)
    atexit.register(save)
    return fake


def systemctl(argv):
    """The part of systemctl that ansible.builtin.systemd_service uses."""
    args = [a.strip("'") for a in argv if not a.startswith("--")]
    units = load_units()
    if not args or args[0] in ("daemon-reload", "daemon-reexec"):
        return 0
    verb, name = args[0], (args[1] if len(args) > 1 else "")
    unit = units.get(name)
    if verb == "show":
        if unit is None:
            print("Id=%s.service\nLoadState=not-found\nActiveState=inactive\nSubState=dead" % name)
        else:
            state = "active" if unit["active"] else "inactive"
            print("Id=%s.service\nLoadState=loaded\nActiveState=%s\nSubState=%s\nUnitFileState=enabled"
                  % (name, state, "running" if unit["active"] else "dead"))
        return 0
    if unit is None:
        sys.stderr.write("Unit %s.service not found.\n" % name)
        return 5
    if verb == "is-active":
        print("active" if unit["active"] else "inactive")
        return 0 if unit["active"] else 3
    if verb == "is-enabled":
        print("enabled")
        return 0
    if verb in ("start", "stop", "restart"):
        unit["active"] = verb != "stop"
        save_units(units)
        event(verb, unit=name)
        return 0
    sys.stderr.write("systemctl stub: unsupported %s\n" % " ".join(argv))
    return 1


def nvidia_smi(argv):
    """``nvidia-smi --gpu-reset -i <uuid or index>``: refused while a unit or process holds the GPU.

    The reset itself happens in the module's own fake (a marker file), which holds the
    live state of the run that called us.
    """
    if "--gpu-reset" not in argv or "-i" not in argv:
        sys.stderr.write("nvidia-smi stub: unsupported %s\n" % " ".join(argv))
        return 2
    target = argv[argv.index("-i") + 1]
    import_real_pynvml()
    with open(os.path.join(state_dir(), "node.pickle"), "rb") as handle:
        node = pickle.load(handle)
    holders = [name for name, unit in load_units().items() if unit["active"] and unit.get("holds_gpus")]
    for gpu in node.gpus:
        if target in (gpu.uuid, str(gpu.index)):
            if holders or gpu.processes:
                print("GPU %s is currently in use by another process.\n\n1 device is currently being used by one "
                      "or more other processes (e.g., Fabric Manager, CUDA application, graphics application such "
                      "as an X server, or a monitoring application such as another instance of nvidia-smi)."
                      % gpu.pci_bus_id)
                return 255
            open(os.path.join(state_dir(), "reset-%d" % gpu.index), "w").close()
            print("GPU %s was successfully reset." % gpu.pci_bus_id)
            return 0
    print("No devices were found")
    return 6
