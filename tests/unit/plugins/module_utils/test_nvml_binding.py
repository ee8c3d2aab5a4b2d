"""The NVML binding of the node modules: the node's own, else the controller's copy, else why there is none."""
import base64
import hashlib
import sys
import types
import zlib
from unittest import mock

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.gpuops.platform.plugins.action import nvidia_mig as mig_action
from ansible_collections.gpuops.platform.plugins.action import nvml_facts as facts_action
from ansible_collections.gpuops.platform.plugins.module_utils._nvml import binding
from ansible_collections.gpuops.platform.plugins.plugin_utils import nvml_binding

MISSING_LIBRARY = "libnvidia-ml-gpuops-test-missing.so.1"
A_LIBRARY = "libc.so.6"   # loads on every Linux test machine: stands for an installed driver


def payload_of(text, version="13.615.71", sha256=None):
    data = text.encode("utf-8")
    return {"version": version, "sha256": sha256 or hashlib.sha256(data).hexdigest(),
            "source": base64.b64encode(zlib.compress(data)).decode("ascii")}


@pytest.fixture
def modules():
    """Whatever a test puts in sys.modules["pynvml"] is undone after it."""
    had, before = "pynvml" in sys.modules, sys.modules.get("pynvml")
    yield sys.modules
    if had:
        sys.modules["pynvml"] = before
    else:
        sys.modules.pop("pynvml", None)


@pytest.fixture
def fresh_cache(monkeypatch):
    monkeypatch.setattr(nvml_binding, "_CACHE", {})


# ---------------------------------------------------------------------------
# Node side: module_utils/_nvml/binding.py
# ---------------------------------------------------------------------------

def test_the_nodes_own_binding_comes_first(modules):
    own = types.ModuleType("pynvml")
    nvml, info, reason = binding.resolve(own, payload_of("raise SystemExit('never loaded')"))
    assert nvml is own and reason is None
    assert info["source"] == "node"


def test_the_controllers_copy_is_loaded_in_memory(modules, fresh_cache):
    payload, why = nvml_binding.controller_payload()
    assert why is None and payload["version"] != "unknown"
    nvml, info, reason = binding.resolve(None, payload, library=MISSING_LIBRARY)
    assert reason is None and info == {"source": "controller", "version": payload["version"]}
    assert nvml is not sys.modules.get("ansible_collections") and nvml.__name__ == "pynvml"
    assert hasattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons") and hasattr(nvml, "NVMLError_LibraryNotFound")
    assert "from the controller" in nvml.__spec__.origin


def test_a_copy_that_loads_is_what_the_module_gets(modules):
    nvml, info, reason = binding.resolve(None, payload_of("import sys\nSELF = sys.modules[__name__]\nANSWER = 42\n"))
    assert reason is None and nvml.ANSWER == 42 and nvml.SELF is nvml and sys.modules["pynvml"] is nvml


@pytest.mark.parametrize("payload,message", [
    ({"version": "13.615.71", "sha256": "0" * 64}, "must be a mapping with the strings version, sha256, source"),
    ("text", "must be a mapping"),
    ({"version": "1", "sha256": "0" * 64, "source": "not base64!"}, "is not zlib-compressed base64 text"),
    ({"version": "1", "sha256": "0" * 64, "source": base64.b64encode(b"plain").decode()},
     "is not zlib-compressed base64 text"),
    (payload_of("ANSWER = 42\n", sha256="0" * 64), "does not match its sha256"),
])
def test_a_damaged_copy_is_refused_clearly(modules, payload, message):
    with pytest.raises(binding.BindingError, match=message):
        binding.load_payload(payload)


def test_a_copy_that_fails_to_load_leaves_sys_modules_as_it_was(modules):
    before = sys.modules.get("pynvml")
    with pytest.raises(binding.BindingError, match=r"nvidia-ml-py 13.615.71 does not load on Python 3\.\d+: "
                                                   r"SyntaxError"):
        binding.load_payload(payload_of("def broken(:\n"))
    assert sys.modules.get("pynvml") is before


def test_without_a_binding_a_missing_library_is_the_reason(modules):
    nvml, info, reason = binding.resolve(None, None, library=MISSING_LIBRARY)
    assert nvml is None and info is None
    assert reason.startswith("%s not found: the NVIDIA driver is not installed" % MISSING_LIBRARY)


def test_without_a_binding_but_with_the_library_the_binding_is_the_reason(modules):
    _nvml, _info, reason = binding.resolve(None, None, library=A_LIBRARY)
    assert "cannot import pynvml and the controller sent no nvidia-ml-py" in reason
    assert sys.executable in reason and "requirements/collection.txt" in reason


def test_a_damaged_copy_is_named_in_the_reason(modules):
    _nvml, _info, reason = binding.resolve(None, payload_of("X = 1\n", sha256="0" * 64), library=A_LIBRARY)
    assert "does not match its sha256" in reason


# ---------------------------------------------------------------------------
# Controller side: plugin_utils/nvml_binding.py
# ---------------------------------------------------------------------------

def test_the_payload_is_the_controllers_file_and_read_once(fresh_cache):
    import pynvml

    payload, why = nvml_binding.controller_payload()
    with open(pynvml.__file__, "rb") as handle:
        source = handle.read()
    assert why is None
    assert zlib.decompress(base64.b64decode(payload["source"])) == source
    assert payload["sha256"] == hashlib.sha256(source).hexdigest()
    assert len(payload["source"]) < len(source) / 3   # compressed: about 70 KiB for 330 KiB
    assert nvml_binding.controller_payload()[0] is payload


@pytest.mark.parametrize("spec,message", [
    (None, "the controller's Python has no nvidia-ml-py"),
    (types.SimpleNamespace(origin="/x/site-packages/pynvml/__init__.py"), "is not nvidia-ml-py's single pynvml.py"),
    (types.SimpleNamespace(origin=None), "is not nvidia-ml-py's single pynvml.py"),
    (types.SimpleNamespace(origin="/nonexistent/pynvml.py"), "cannot read the controller's /nonexistent/pynvml.py"),
])
def test_no_payload_says_why(fresh_cache, spec, message):
    payload, why = nvml_binding.controller_payload(find_spec=lambda name: spec)
    assert payload is None and message in why


def test_a_file_without_metadata_has_an_unknown_version(fresh_cache, tmp_path):
    path = tmp_path / "pynvml.py"
    path.write_text("X = 1\n")

    def no_metadata(name):
        raise LookupError(name)

    payload, _why = nvml_binding.controller_payload(find_spec=lambda name: types.SimpleNamespace(origin=str(path)),
                                                    version_of=no_metadata)
    assert payload["version"] == "unknown"


def test_the_echo_of_the_arguments_leaves_the_text_out():
    result = {"invocation": {"module_args": {"controller_binding": {"version": "1", "sha256": "a", "source": "x" * 70000}}}}
    echoed = nvml_binding.shorten(result)["invocation"]["module_args"]["controller_binding"]
    assert echoed == {"version": "1", "sha256": "a", "source": "(70000 characters)"}
    assert nvml_binding.shorten({"changed": False}) == {"changed": False}


# ---------------------------------------------------------------------------
# The action plugins
# ---------------------------------------------------------------------------

def _action(plugin, args):
    task = mock.Mock(args=args, async_val=0, check_mode=True, diff=False, resolved_action="gpuops.platform.x")
    action = plugin.ActionModule(task, mock.Mock(), mock.Mock(check_mode=True), loader=None, templar=None,
                                 shared_loader_obj=None)
    action._execute_module = mock.Mock(return_value={"changed": False})
    return action


@pytest.mark.parametrize("plugin,args", [(facts_action, {}), (mig_action, {"config_name": "all-disabled"})])
def test_the_binding_goes_with_a_live_run(fresh_cache, plugin, args):
    action = _action(plugin, dict(args))
    assert action.run(task_vars={})["changed"] is False
    sent = action._execute_module.call_args.kwargs
    assert sent["module_name"] == "gpuops.platform.x"
    assert sent["module_args"]["controller_binding"] == nvml_binding.controller_payload()[0]
    assert {k: v for k, v in sent["module_args"].items() if k != "controller_binding"} == args


@pytest.mark.parametrize("plugin,args", [
    (facts_action, {"replay_file": "/r/node.json"}),
    (mig_action, {"config_name": "x", "facts_file": "/r/node.json"}),
    (mig_action, {"config_name": "x", "facts": {"present": False}}),
])
def test_nothing_is_sent_where_no_nvml_is_read(fresh_cache, plugin, args):
    action = _action(plugin, dict(args))
    action.run(task_vars={})
    assert action._execute_module.call_args.kwargs["module_args"] == args


def test_no_binding_on_the_controller_runs_the_module_without(monkeypatch):
    monkeypatch.setattr(nvml_binding, "_CACHE", {"payload": (None, "the controller's Python has no nvidia-ml-py")})
    action = _action(facts_action, {})
    action.run(task_vars={})
    assert action._execute_module.call_args.kwargs["module_args"] == {}


def test_a_task_that_sets_the_binding_is_refused():
    action = _action(facts_action, {"controller_binding": {"version": "1"}})
    with pytest.raises(AnsibleActionFail, match="controller_binding is set by the collection's action plugin"):
        action.run(task_vars={})
    action._execute_module.assert_not_called()
