"""One fuzz target per parser of outside input, and the rule every one of them asserts.

A target takes the raw bytes an operator's file, a tool's output or an
inventory could hold, feeds them to the parser the way the module, filter or
action plugin does, and returns what the parser returned. :func:`check` runs a
target under **the rule**: the parser returns a result, or raises the
collection's own error type with a message that names the input and says what
is wrong with it; any other exception, a run of more than
:data:`TIME_LIMIT_S` on an input under :data:`SIZE_LIMIT` bytes, or an output
far larger than the input (a memory blow-up) is a failure.

Used by tests/fuzz/test_fuzz.py (the suite's short, deterministic pass and the
regression corpus) and tests/fuzz/run_atheris.py (the long coverage-guided run).
"""
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"


# The collection from this checkout, as for every test (tests/conftest.py sets up the path); the
# atheris runner is no pytest run, so it is imported here too.
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))
import conftest  # noqa: E402  pylint: disable=wrong-import-position

SHARED, FIXTURES = conftest.SHARED, conftest.FIXTURES

import yaml  # noqa: E402
from ansible.errors import AnsibleError  # noqa: E402

from ansible_collections.gpuops.platform.plugins.plugin_utils import variable_check as check_variables  # noqa: E402
from ansible_collections.gpuops.platform.plugins.filter import nccl_test  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime import base as cr_base  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime import containerd  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime import crio  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime import docker  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._mig import config as mig_config  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._mig import module as mig_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._mig import plan as mig_plan  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._mig.model import MigError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._node import dcgm_diag  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as nvml  # noqa: E402
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan  # noqa: E402

TIME_LIMIT_S = 5.0
SIZE_LIMIT = 64 * 1024
# Input size times this (plus a floor) is the most a result may weigh as JSON: more is a blow-up.
GROWTH_LIMIT = 200
SEPARATOR = b"\n%%\n"  # splits an input into two files where a parser reads two

CONTAINERD = "/etc/containerd/config.toml"
CONTAINERD_DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"
CRIO = "/etc/crio/crio.conf"
CRIO_DROP_IN = "/etc/crio/crio.conf.d/99-nvidia.toml"
DOCKER = "/etc/docker/daemon.json"
NVIDIA = "/usr/bin/nvidia-container-runtime"


class Violation(AssertionError):
    """A target broke the rule: the message says how, for which input."""


def _text(data):
    return data.decode("utf-8", "replace")


def _reader(files):
    def read(path):
        if path not in files:
            return None
        return files[path]
    return read


def _globber(files):
    import fnmatch

    def glob(pattern):
        return sorted(p for p in files if fnmatch.fnmatchcase(p, pattern) and files[p] is not None)
    return glob


def _flags(data):
    """Options picked from the input itself, so one input always runs the same way."""
    value = sum(data[:64]) if data else 0
    return {"set_as_default": bool(value & 1), "enable_cdi": bool(value & 2)}


def _containerd_mode(data):
    """in_place or drop_in, from the input itself like :func:`_flags`."""
    return "drop_in" if (sum(data[:64]) if data else 0) & 4 else "in_place"


# ---------------------------------------------------------------------------
# Container runtimes
# ---------------------------------------------------------------------------

def _nvidia_in(data, version):
    runtimes = cr_base.lookup(data, ["plugins", containerd.CRI_PLUGINS[version], "containerd", "runtimes"])
    return (runtimes or {}).get("nvidia")


def _containerd(data, version):
    main, _sep, drop_in = data.partition(SEPARATOR)
    files = {CONTAINERD: _text(main), CONTAINERD_DROP_IN: _text(drop_in) if _sep else None}
    mode = _containerd_mode(data)
    plan = containerd.plan_containerd(CONTAINERD, mode=mode, config_version=version, runtime_path=NVIDIA,
                                      reader=_reader(files), globber=_globber(files), **_flags(data))
    # What was written must parse, and give containerd the NVIDIA runtime.
    written = dict(files)
    written.update((edit.path, edit.after) for edit in plan.edits)
    loaded = dict((path, cr_base.load_plain(text, path)) for path, text in written.items() if text is not None)
    effective = loaded[CONTAINERD]
    if mode == "drop_in":
        effective = containerd._merge_imported(plan.config_version, effective, loaded[CONTAINERD_DROP_IN])
    nvidia = _nvidia_in(effective, plan.config_version)
    if not isinstance(nvidia, dict) or (nvidia.get("options") or {}).get("BinaryName") != NVIDIA:
        raise Violation("%s mode: the written config does not give containerd the NVIDIA runtime: %r" % (mode, nvidia))
    return [(edit.path, edit.after) for edit in plan.edits]


def containerd_v2(data):
    return _containerd(data, 2)


def containerd_v3(data):
    return _containerd(data, 3)


def crio_config(data):
    main, _sep, drop_in = data.partition(SEPARATOR)
    files = {CRIO: _text(main), CRIO_DROP_IN: _text(drop_in) if _sep else None}
    # As the module calls it: a failure inside tomlkit is a LayoutError naming the files.
    plan = cr_base.guard_tomlkit(crio.plan_crio, (CRIO, CRIO_DROP_IN), CRIO, runtime_path=NVIDIA,
                                 set_as_default=_flags(data)["set_as_default"], reader=_reader(files),
                                 globber=_globber(files))
    after = cr_base.load_plain(plan.edits[0].after, CRIO_DROP_IN)
    runtime = cr_base.lookup(after, ["crio", "runtime", "runtimes", "nvidia"])
    if not isinstance(runtime, dict) or runtime.get("runtime_path") != NVIDIA:
        raise Violation("the written drop-in does not give CRI-O the NVIDIA runtime: %r" % (runtime,))
    return [(edit.path, edit.after) for edit in plan.edits]


def docker_daemon_json(data):
    files = {DOCKER: _text(data)}
    plan = docker.plan_docker(DOCKER, runtime_path=NVIDIA, reader=_reader(files), **_flags(data))
    after = json.loads(plan.edits[0].after)
    if after["runtimes"]["nvidia"]["path"] != NVIDIA:
        raise Violation("the written daemon.json does not name the NVIDIA runtime")
    return plan.edits[0].after


# ---------------------------------------------------------------------------
# MIG and recorded facts
# ---------------------------------------------------------------------------

_SCRATCH = []


def _scratch_file(name, data):
    """A file holding ``data`` (one directory per process, reused)."""
    if not _SCRATCH:
        _SCRATCH.append(tempfile.mkdtemp(prefix="gpuops-fuzz-"))
    path = os.path.join(_SCRATCH[0], name)
    with open(path, "wb") as handle:
        handle.write(data)
    return path


_FACTS = {}


def _fixture_facts(name):
    if name not in _FACTS:
        _FACTS[name] = nvml.validate_replay(json.loads((FIXTURES / "nvml" / name).read_text()), name)
    return _FACTS[name]


def mig_parted_config(data):
    """A mig-parted file as nvidia_mig reads it, every config selected and planned for an H100 and H200 node."""
    path = _scratch_file("mig-config.yaml", data)
    document = mig_module.read_document(path, "config_file")
    parsed = mig_config.parse(document)
    plans = []
    for name in sorted(set(parsed) | set(parsed.invalid)):
        try:
            entries = mig_config.select(parsed, name)
        except mig_config.MigConfigError as exc:
            plans.append(exc.problems)
            continue
        for facts in ("hgx-h100.json", "h200-mig.json"):
            result = mig_plan.plan(_fixture_facts(facts), entries, name)
            plans.append([result["valid"], mig_plan.diff(result)])
    return plans


_MIG_ENTRIES = {}


def _reference_entries():
    """NVIDIA's all-balanced and all-disabled configs, to plan replayed facts against."""
    if not _MIG_ENTRIES:
        doc = yaml.safe_load((SHARED / "reference" / "mig-parted" / "examples-config.yaml").read_text())
        parsed = mig_config.parse(doc)
        for name in ("all-disabled", "all-balanced", "all-1g.10gb"):
            if name in parsed:
                _MIG_ENTRIES[name] = parsed[name]
    return _MIG_ENTRIES


def nvml_replay(data):
    """Recorded nvml_facts as nvidia_mig and nvml_facts replay them, then planned and reported."""
    path = _scratch_file("facts.json", data)
    facts = nvml.load_replay(path, "facts_file")
    out = [nvml.gpu_health(gpu) for gpu in facts.get("gpus") or []]
    for name, entries in sorted(_reference_entries().items()):
        result = mig_plan.plan(facts, entries, name)
        out.append([result["valid"], mig_plan.diff(result), result["k8s_resources"]])
    return out


_MIG_DOCUMENT = {}


def _hostvars(replay_file):
    """A host of the fleet: NVIDIA's all-balanced config inline, facts from ``replay_file``."""
    if not _MIG_DOCUMENT:
        doc = yaml.safe_load((SHARED / "reference" / "mig-parted" / "gpu-operator-default-mig-parted-config.yaml")
                             .read_text())
        _MIG_DOCUMENT.update(version="v1", **{"mig-configs": {"all-balanced": doc["mig-configs"]["all-balanced"]}})
    return {"mig_config_name": "all-balanced", "mig_config": _MIG_DOCUMENT, "gpuops_nvml_replay_file": replay_file}


def fleet_facts(data):
    """One host's recorded facts file, planned by the fleet planner beside a good host."""
    path = _scratch_file("host-a.json", data)
    good = str(FIXTURES / "nvml" / "hgx-h100.json")
    hosts = [("host-a", _hostvars(path)), ("host-b", _hostvars(good))]
    planner = fleet_plan._MigPlanner(fleet_plan._read_yaml)
    bad = fleet_plan.plan_host("host-a", fleet_plan.host_settings(hosts[0][1], "host-a"), path, planner, {},
                               "mixed", "", {})
    plan = fleet_plan.plan_fleet(hosts, None, mig_strategy="mixed")
    if not plan["hosts"]["host-b"]["valid"]:
        raise Violation("one host's facts stopped another host from being planned: %s"
                        % "; ".join(plan["hosts"]["host-b"]["errors"])[:1000])
    if not bad["valid"] and not bad["errors"]:
        raise Violation("host-a is invalid without an error that says why")
    json.dumps(plan)  # the report is written as JSON
    return [bad, plan["summary"]]


# ---------------------------------------------------------------------------
# Tool output and inventory values
# ---------------------------------------------------------------------------

def dcgm_json(data):
    parsed = dcgm_diag.parse(_text(data))
    return [parsed, dcgm_diag.failures(parsed), dcgm_diag.health(parsed, level=2)]


def nccl_log(data):
    result = nccl_test.nccl_test_result(_text(data), min_busbw_gbps=10)
    if not isinstance(result["passed"], bool) or not isinstance(result["detail"], str):
        raise Violation("nccl_test_result returned %r" % result)
    json.dumps(result, allow_nan=False)
    return result


def inventory_variables(data):
    """Host variables (YAML, as in host_vars/) through the unknown and renamed variable checks, then planned."""
    try:
        variables = yaml.safe_load(_text(data))
    except (yaml.YAMLError, ValueError, RecursionError):
        return None  # Ansible's inventory loader refuses such a file before any check runs
    if not isinstance(variables, dict):
        return None  # not host variables: the inventory loader refuses it too
    catalog = check_variables.load_catalog(str(ROOT))
    problems = check_variables.unknown_variables(list(variables), catalog)
    lines = check_variables.format_problems([("host-a", problems)], catalog["renamed"])
    for name, _role, _close, _known in problems:
        if not any(name in line for line in lines):
            raise Violation("the report does not name the variable %r" % name)
    # The values the fleet planner reads from the inventory (driver, MIG, labels, node name): one host's
    # values are that host's errors, never the plan's end.
    hostvars = dict((str(k), v) for k, v in variables.items())
    hostvars.setdefault("gpuops_nvml_replay_file", str(FIXTURES / "nvml" / "hgx-h100.json"))
    good = _hostvars(str(FIXTURES / "nvml" / "hgx-h100.json"))
    plan = fleet_plan.plan_fleet([("host-a", hostvars), ("host-b", good)], None, mig_strategy="mixed")
    if not plan["hosts"]["host-b"]["valid"]:
        raise Violation("one host's variables stopped another host from being planned: %s"
                        % "; ".join(plan["hosts"]["host-b"]["errors"])[:1000])
    json.dumps(plan)
    return [lines, plan["hosts"]["host-a"]["errors"]]


# ---------------------------------------------------------------------------
# The rule
# ---------------------------------------------------------------------------

# name: (target, error types, texts of which the message must hold one: the input it is about, seed globs)
TARGETS = {
    "containerd_v2": (containerd_v2, (cr_base.ConfigError,), (CONTAINERD, CONTAINERD_DROP_IN),
                      ["container_runtime/containerd-1.*.toml", "container_runtime/k3s-rewritten.toml"]),
    "containerd_v3": (containerd_v3, (cr_base.ConfigError,), (CONTAINERD, CONTAINERD_DROP_IN),
                      ["container_runtime/containerd-2.*.toml"]),
    "crio": (crio_config, (cr_base.ConfigError,), (CRIO, CRIO_DROP_IN), ["container_runtime/crio.conf"]),
    "docker": (docker_daemon_json, (cr_base.ConfigError,), (DOCKER,), ["container_runtime/daemon.json"]),
    "mig_parted": (mig_parted_config, (MigError,), ("config_file", "config '", "top-level key", "mig-configs", "'version'"),
                   ["@mig-parted/*.yaml"]),
    "nvml_replay": (nvml_replay, (nvml.ReplayError,), ("facts_file",), ["nvml/*.json", "hardware/*/*.json"]),
    "fleet_facts": (fleet_facts, (), (), ["nvml/*.json", "hardware/*/*.json"]),
    "dcgm_json": (dcgm_json, (dcgm_diag.DcgmDiagError,), ("dcgmi", "diagnostic", "test"), ["dcgm/*"]),
    "nccl_log": (nccl_log, (), (), ["nccl-tests/*.log"]),
    "inventory_variables": (inventory_variables, (AnsibleError,), (), ["@@inventories/example/**/*.yml"]),
}


# ---------------------------------------------------------------------------
# Controller documents: recorded facts records, plan.json, the planner's inventory values
# ---------------------------------------------------------------------------

from ansible_collections.gpuops.platform.plugins.action import fleet_plan as fleet_plan_action  # noqa: E402
from ansible_collections.gpuops.platform.plugins.plugin_utils import documents  # noqa: E402
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_schema, fleet_views  # noqa: E402
from ansible_collections.gpuops.platform.plugins.plugin_utils import recorded_facts  # noqa: E402

# What hand-made inputs carry that a parser must not take for something else: a NUL byte, a trailing newline,
# non-ASCII digits, a path out of its folder, numbers too large for any field.
HOSTILE_TEXTS = ["\0", "a\0b", "570\n", "570.172.08\n", "\n", "５７０", "٥٧٠", "５７０.172.08", "²", "..", "../escape",
                 "a/../../b", "/", "1e999", "NaN", "-Infinity", "9" * 400]
HOSTILE_NUMBERS = [10 ** 400, -(10 ** 30), 2 ** 63, 1e308, float("inf"), float("nan"), -0.0]


def _good_record():
    return recorded_facts.make_record("gpu-a", _fixture_facts("hgx-h100.json"), {"kernel": "6.8.0-45-generic"},
                                      "2026-11-25T17:00:00Z", "0.1.0")


def recorded_facts_file(data):
    """A host's record in gpuops_fleet_facts_dir, recorded over (check mode), then loaded as every playbook does."""
    path = _scratch_file("gpu-a.json", data)
    notes = []
    state = recorded_facts.write(path, _good_record(), check_mode=True, notes=notes)
    if state not in ("written", "unchanged") or (notes and state != "written"):
        raise Violation("recording over the file said %r with notes %r" % (state, notes))
    if any(os.path.basename(path) not in note for note in notes if "existing record" in note):
        raise Violation("a note on the old record does not name its file: %r" % notes)
    loaded = recorded_facts.load({"gpuops_fleet_facts_dir": os.path.dirname(path)}, "gpu-a")[1]
    json.dumps(loaded, default=str)
    return [state, loaded]


_PLAN = {}


def _fresh_plan():
    """A small plan of this checkout's planner (two hosts), made once and copied."""
    if not _PLAN:
        hosts = [("gpu-a", {"gpuops_nvml_replay_file": str(FIXTURES / "nvml" / "l40s.json")}),
                 ("gpu-b", {"gpuops_nvml_replay_file": str(FIXTURES / "nvml" / "hgx-h100.json"),
                            "nvidia_driver_version": "570.195.03"})]
        plan = fleet_plan.plan_fleet(hosts, None)
        _PLAN["plan"] = fleet_views.enrich(plan, ["gpu-a", "gpu-b"], {}, now=1795626000)
    return json.loads(json.dumps(_PLAN["plan"]))


def plan_json(data):
    """An old plan.json: in the report folder (the diff of the next plan), and given as previous_plan."""
    path = _scratch_file("plan.json", data)
    text, _kept, _same = fleet_plan_action._with_diff(_fresh_plan(), path, None)
    written = json.loads(text)  # the planner's own output is JSON, with a diff or the problem that kept it from one
    fleet_schema.check(written, "the written plan.json")
    diff = written["diff"]
    if diff["previous"] is None and data.strip() and not diff.get("problem"):
        raise Violation("a previous plan.json gave no diff and no problem: %r" % diff)
    previous = fleet_schema.load(path, "previous_plan %s" % path)
    return fleet_views.diff(previous, _fresh_plan(), path)


def planner_inputs(data):
    """One host's inventory values (YAML) and its inventory name, planned beside a good host, then its facts' age
    read, its waves made and its record's path built: one host's values are its own errors, never the plan's end."""
    try:
        variables = yaml.safe_load(_text(data))
    except (yaml.YAMLError, ValueError, RecursionError):
        return None  # the inventory loader refuses such a file first
    if not isinstance(variables, dict):
        return None
    hostvars = dict((str(k), v) for k, v in variables.items())
    name = hostvars.pop("inventory_hostname", "host-a")
    name = name if isinstance(name, str) and name != "host-b" else "host-a"
    folder = os.path.dirname(_scratch_file("host-b.json", (FIXTURES / "nvml" / "l40s.json").read_bytes()))
    if name == "host-a":
        hostvars.setdefault("gpuops_nvml_replay_file", str(FIXTURES / "nvml" / "hgx-h100.json"))
    good = _hostvars(str(FIXTURES / "nvml" / "hgx-h100.json"))
    plan = fleet_plan.plan_fleet([(name, hostvars), ("host-b", good)], folder, mig_strategy="mixed")
    if not plan["hosts"]["host-b"]["valid"]:
        raise Violation("one host's values stopped another host from being planned: %s"
                        % "; ".join(plan["hosts"]["host-b"]["errors"])[:1000])
    fleet_views.enrich(plan, [name, "host-b"], {}, serial=hostvars.get("gpuops_upgrade_serial", 1))
    json.dumps(plan, allow_nan=False)  # plan.json is strict JSON: no NaN from a recording time
    try:
        path = recorded_facts.record_path(folder, name)
    except documents.DocumentError as exc:
        if repr(name) not in str(exc):
            raise Violation("the refusal of a host name does not name it: %s" % exc)
    else:
        if os.path.dirname(path) != os.path.normpath(folder):
            raise Violation("host %r has its record at %s, outside %s" % (name, path, folder))
    return [plan["hosts"][name]["errors"], plan["summary"]]


# The controller's documents.
TARGETS.update({
    "recorded_facts": (recorded_facts_file, (recorded_facts.RecordedFactsError,), ("recorded facts file",),
                       ["nvml/*.json", "hardware/*/nvml_facts.json"]),
    "plan_json": (plan_json, (fleet_schema.FleetPlanDataError,), ("previous_plan",), ["fleet/plan-*.json"]),
    "planner_inputs": (planner_inputs, (fleet_schema.FleetPlanDataError,), ("gpuops_upgrade_serial",),
                       ["@@inventories/example/**/*.yml"]),
})


def seeds(name):
    """The seed inputs of a target: its fixtures, upstream reference files and regression corpus, sorted."""
    found = []
    for pattern in TARGETS[name][3]:
        if pattern.startswith("@@"):
            base, pattern = ROOT, pattern[2:]
        elif pattern.startswith("@"):
            base, pattern = SHARED / "reference", pattern[1:]
        else:
            base = FIXTURES
        found.extend(p for p in base.glob(pattern) if p.is_file() and p.stat().st_size < SIZE_LIMIT
                     and p.suffix not in (".md", ".py"))
    data = [p.read_bytes() for p in sorted(found)]
    return data + corpus(name)


DICTIONARIES = Path(__file__).resolve().parent / "dictionaries"


def dictionary(name):
    """The libFuzzer dictionary of a target (dictionaries/<target>.dict), or None."""
    path = DICTIONARIES / ("%s.dict" % name)
    return str(path) if path.is_file() else None


def corpus(name):
    folder = CORPUS / name
    return [p.read_bytes() for p in sorted(folder.iterdir())] if folder.is_dir() else []


def _size(value):
    return len(json.dumps(value, default=str))


def check(name, data):
    """Run target ``name`` on ``data`` under the rule; returns the result (or the error), raises Violation."""
    target, errors, names, _seeds = TARGETS[name]
    start = time.process_time()  # CPU time: a machine busy with other work is no slow parser
    try:
        result = target(data)
    except Violation:
        raise
    except errors as exc:
        result = exc
        message = str(exc)
        if names and not any(n in message for n in names):
            raise Violation("%s: the %s message does not name the input (%s): %s"
                            % (name, type(exc).__name__, " or ".join(names), message))
        said = message
        for named in names:
            said = said.replace(named, " ")
        if len(said.split()) < 3:  # "must be v1, got 7" says it; a bare name or value does not
            raise Violation("%s: the message says nothing about what is wrong: %r" % (name, message))
    except RecursionError as exc:
        raise Violation("%s: RecursionError (%s) on a %d byte input" % (name, exc, len(data)))
    except Exception as exc:
        raise Violation("%s: %s: %s" % (name, type(exc).__name__, exc)) from exc
    elapsed = time.process_time() - start
    if len(data) < SIZE_LIMIT and elapsed > TIME_LIMIT_S:
        raise Violation("%s: %.1f s of CPU on a %d byte input (the limit is %.0f s)" % (name, elapsed, len(data), TIME_LIMIT_S))
    if not isinstance(result, Exception) and _size(result) > GROWTH_LIMIT * len(data) + 1024 * 1024:
        raise Violation("%s: a %d byte input gave a %d byte result" % (name, len(data), _size(result)))
    return result


# The node's module options (nvidia_driver) and the structure-aware inputs of the node's parsers.
import node_targets  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
