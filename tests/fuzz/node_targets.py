"""Fuzz targets and structure-aware inputs for the node's parsers of outside input.

The containerd, CRI-O and docker configs, ``dcgmi diag -j`` output (targets.py
holds their targets) and nvidia_driver's options (:func:`driver_params`, here).
The strategies build documents in each parser's own shape and put, at any key
the parser reads, a value of any TOML or JSON type, nesting thousands of levels
deep, or one of the texts hand-made input carries (:data:`HOSTILE_TEXTS`: NUL,
a trailing newline, Unicode digits, ``..``, very large numbers). The same texts
are in the targets' libFuzzer dictionaries (dictionaries/<target>.dict).
"""
import json
import re

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from hypothesis import strategies as st

import targets
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.containerd import CRI_PLUGINS
from ansible_collections.gpuops.platform.plugins.module_utils._driver import packages as driver_packages
from ansible_collections.gpuops.platform.plugins.modules import nvidia_driver

HOSTILE_TEXTS = ["\x00", "a\x00b", "/etc/containerd/\x00*.toml", "570\n", "570.172.08\n", " 570", "\r\n",
                 "\uff15\uff17\uff10", "\u0665\u0667\u0660", "570.\u00b9\u2077\u00b2.08", "..", "../../etc/passwd",
                 "/etc/containerd/conf.d/../../x.toml", "", "nvidia", "runc", "io.containerd.runc.v2",
                 "\u2028", "\ud800"]
HOSTILE_NUMBERS = [10 ** 19, -(10 ** 19), 2 ** 63, 10 ** 300, 1e308, -0.0, 4300, 0, -1]
_DEEP = "@@deep@@"  # replaced by a value nested thousands of levels deep, written as text (no encoder recurses so far)

KEYS = st.sampled_from(["", "nvidia", "runc", "options", "version", "..", "\uff15", "a.b", "name"]) | st.text(max_size=6)
SCALARS = (st.booleans() | st.integers() | st.sampled_from(HOSTILE_NUMBERS) | st.floats()
           | st.sampled_from(HOSTILE_TEXTS) | st.text(max_size=8) | st.just(_DEEP))
TOML_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
                           max_leaves=6)
JSON_VALUES = st.recursive(st.none() | SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(KEYS, inner, max_size=3), max_leaves=6)


def _deep(draw, kind):
    levels = draw(st.integers(65, 5000))
    if kind == "toml":
        return "[" * levels + "]" * levels if draw(st.booleans()) else "{a = " * levels + "1" + "}" * levels
    return "[" * levels + "]" * levels if draw(st.booleans()) else '{"a":' * levels + "1" + "}" * levels


def toml_value(value):
    """``value`` as an inline TOML value (strings as JSON writes them: the same escapes)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) < 10 ** 30 else '"%d"' % value  # TOML integers are 64-bit
    if isinstance(value, float):
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(repr(value), repr(value))
    if isinstance(value, str):
        return _DEEP if value == _DEEP else json.dumps(value)
    if isinstance(value, list):
        return "[%s]" % ", ".join(toml_value(v) for v in value)
    return "{%s}" % ", ".join("%s = %s" % (json.dumps(k), toml_value(v)) for k, v in value.items())


def _fill_deep(draw, text, kind):
    quoted = json.dumps(_DEEP)
    for token in (quoted, _DEEP):
        while token in text:
            text = text.replace(token, _deep(draw, kind), 1)
    return text


def _encode(text):
    return text.encode("utf-8", "surrogatepass")


@st.composite
def containerd_config(draw, version):
    """A containerd config of ``version`` with any value at the keys the planner reads."""
    cri = CRI_PLUGINS[version]

    def value():
        return toml_value(draw(TOML_VALUES))

    fields = {
        "version": "version = %s\n" % (draw(st.sampled_from([str(version), value()]))),
        "imports": "imports = %s\n" % draw(st.sampled_from([value(), toml_value(draw(st.lists(
            st.sampled_from(HOSTILE_TEXTS + ["conf.d/*.toml", "/etc/containerd/conf.d/*.toml"]), max_size=3)))])),
        "cri": '[plugins."%s"]\ncdi_spec_dirs = %s\nenable_cdi = %s\n' % (cri, value(), value()),
        "containerd": '[plugins."%s".containerd]\ndefault_runtime_name = %s\n' % (cri, value()),
        "runc": '[plugins."%s".containerd.runtimes.runc]\nruntime_type = %s\n' % (cri, value()),
        "options": '[plugins."%s".containerd.runtimes.runc.options]\nBinaryName = %s\nSystemdCgroup = %s\n'
                   % (cri, value(), value()),
        "other": "[plugins.%s]\n%s = %s\n" % (json.dumps(draw(KEYS)), json.dumps(draw(KEYS)), value()),
        "dotted": "[%s]\nx = 1\n" % ".".join(["a"] * draw(st.integers(1, 300))),
    }
    chosen = draw(st.lists(st.sampled_from(sorted(fields)), min_size=1, max_size=4, unique=True))
    order = ["version", "imports", "cri", "containerd", "runc", "options", "other", "dotted"]
    text = "".join(fields[name] for name in order if name in chosen or name == "version")
    return _encode(_fill_deep(draw, text, "toml"))


@st.composite
def crio_config(draw):

    def value():
        return toml_value(draw(TOML_VALUES))

    main = "[crio.runtime]\ndefault_runtime = %s\n[crio.runtime.runtimes.runc]\nruntime_path = %s\nruntime_type = %s\n" \
        % (value(), value(), value())
    drop_in = "[crio.runtime.runtimes.%s]\nmonitor_path = %s\n" % (json.dumps(draw(KEYS)), value())
    text = main + (targets.SEPARATOR.decode() + drop_in if draw(st.booleans()) else "")
    return _encode(_fill_deep(draw, text, "toml"))


@st.composite
def daemon_json(draw):
    document = {"runtimes": draw(JSON_VALUES | st.just({"runc": {"path": "runc"}})),
                "default-runtime": draw(JSON_VALUES), "features": draw(JSON_VALUES)}
    document = dict((k, v) for k, v in document.items() if draw(st.booleans()))
    document[draw(KEYS)] = draw(JSON_VALUES)
    return _encode(_fill_deep(draw, json.dumps(document, ensure_ascii=draw(st.booleans())), "json"))


@st.composite
def dcgm_output(draw):
    """``dcgmi diag -j`` output in DCGM 3's or 4's shape, any value at any field it has."""

    def value():
        return draw(JSON_VALUES)

    result = {"gpu_ids": draw(st.sampled_from([value(), "0,1", 0, "\uff10"])), "status": value(),
              "warnings": value(), "info": value(), "entity_group": value(), "entity_id": value()}
    test = {"name": value(), "results": draw(st.sampled_from([value(), [result]])), "test_summary": value()}
    category = {"category": value(), "tests": draw(st.sampled_from([value(), [test, None]]))}
    root = {"version": value(), "runtime_error": value(), "Driver Version Detected": value(),
            "test_categories": draw(st.sampled_from([value(), [category]]))}
    document = {draw(st.sampled_from(["DCGM GPU Diagnostic", "DCGM Diagnostic"])): root, "metadata": value()}
    prefix = draw(st.sampled_from(["", "Successfully ran diagnostic for group.\n"]))
    return _encode(prefix + _fill_deep(draw, json.dumps(document, ensure_ascii=draw(st.booleans())), "json"))


DRIVER_OPTIONS = sorted(nvidia_driver.argument_spec())


@st.composite
def driver_options(draw):
    """nvidia_driver options as an inventory sets them (YAML), each of any type, with the hand-made texts."""
    text_values = st.sampled_from(HOSTILE_TEXTS + ["570", "570.172.08", "/opt/NVIDIA-Linux-x86_64-570.172.08.run",
                                                   "https://mirror.example/x/"])
    options = draw(st.dictionaries(st.sampled_from(DRIVER_OPTIONS), text_values | JSON_VALUES, max_size=4))
    options.setdefault("branch", draw(text_values))
    text = yaml.safe_dump(options, allow_unicode=draw(st.booleans()))
    while _DEEP in text:
        levels = draw(st.integers(60, 400))  # PyYAML, as Ansible's loader, stops near 500 levels
        text = text.replace("'%s'" % _DEEP if "'%s'" % _DEEP in text else _DEEP, "[" * levels + "]" * levels, 1)
    return _encode(text)


STRATEGIES = {
    "containerd_v2": lambda: containerd_config(2),
    "containerd_v3": lambda: containerd_config(3),
    "crio": crio_config,
    "docker": daemon_json,
    "dcgm_json": dcgm_output,
    "driver_params": driver_options,
}

# ---------------------------------------------------------------------------
# nvidia_driver's options, as the module reads them
# ---------------------------------------------------------------------------

DEBIAN12 = {"id": "debian", "version": "12", "major": "12"}
_ASCII_BRANCH = re.compile(r"[0-9]{3}")
_ASCII_VERSION = re.compile(r"[0-9]{3}\.[0-9]{1,3}(\.[0-9]{1,3})?")


def driver_params(data):
    """nvidia_driver's options (YAML, as an inventory holds them) through AnsibleModule's checks, then planned."""
    try:
        options = yaml.safe_load(targets._text(data))
    except (yaml.YAMLError, ValueError, RecursionError):
        return None  # Ansible's loader refuses such a file before the module runs
    if not isinstance(options, dict):
        return None
    options = dict((k, v) for k, v in options.items() if k in DRIVER_OPTIONS)
    validated = ArgumentSpecValidator(nvidia_driver.argument_spec()).validate(options)
    if validated.error_messages:
        return validated.error_messages  # AnsibleModule's own refusal, before the module's code
    spec = driver_packages.normalize(validated.validated_parameters, DEBIAN12, "x86_64")
    # What reaches a package name or a pin: ASCII digits only, the whole value.
    if not _ASCII_BRANCH.fullmatch(spec["branch"]):
        raise targets.Violation("branch %r reached the plan" % spec["branch"])
    if spec["version"] is not None and not _ASCII_VERSION.fullmatch(spec["version"]):
        raise targets.Violation("version %r reached the plan" % spec["version"])
    names = driver_packages.packages(spec)
    json.dumps(names)
    return [spec["branch"], spec["version"], names]


targets.TARGETS["driver_params"] = (driver_params, (driver_packages.DriverSpecError,), tuple(DRIVER_OPTIONS),
                                    ["driver/nvidia_driver-params-*.yml"])
