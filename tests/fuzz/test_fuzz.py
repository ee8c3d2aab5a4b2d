"""Every parser of outside input under the rule (tests/fuzz/targets.py): the suite's short, deterministic pass.

Two parts, on every run:

* the regression corpus (tests/fuzz/corpus/<target>/), every input a fuzzer
  ever broke a parser with, replayed as it is;
* a derandomized Hypothesis pass per target that mutates its seeds (fixtures,
  upstream reference files, the corpus): bytes flipped, cut, repeated and
  spliced, or by structure (tests/fuzz/mutations.py): a value of a JSON or
  YAML document replaced by one of any type, a TOML table moved out of order.

The long, coverage-guided run is ``make fuzz`` (tests/fuzz/run_atheris.py).
"""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mutations
import targets

# A fixed budget: derandomized, so every run tries the same inputs.
EXAMPLES = 40
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None, print_blob=True,
                suppress_health_check=list(HealthCheck))


def _corpus_cases():
    cases = []
    for name in sorted(targets.TARGETS):
        folder = targets.CORPUS / name
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            cases.append(pytest.param(name, path, id="%s/%s" % (name, path.name)))
    return cases


@pytest.mark.parametrize("name, path", _corpus_cases())
def test_the_regression_corpus_keeps_the_rule(name, path):
    targets.check(name, path.read_bytes())


def test_every_target_has_seeds_and_a_regression_corpus():
    for name in targets.TARGETS:
        assert len(targets.seeds(name)) > len(targets.corpus(name)), "%s: no seed from fixtures or reference" % name
        assert targets.corpus(name), "%s: no regression corpus" % name


def test_the_rule_fails_a_foreign_exception():
    """The rule itself can fail: an exception that is not the parser's own is a violation."""
    def broken(data):
        return {}["missing"]
    targets.TARGETS["_broken"] = (broken, (ValueError,), (), [])
    try:
        with pytest.raises(targets.Violation, match="KeyError"):
            targets.check("_broken", b"x")
    finally:
        del targets.TARGETS["_broken"]


def test_the_rule_fails_a_message_that_does_not_name_the_input():
    def vague(data):
        raise ValueError("invalid literal for int() with base 10: 'x'")
    targets.TARGETS["_vague"] = (vague, (ValueError,), ("config.toml",), [])
    try:
        with pytest.raises(targets.Violation, match="does not name the input"):
            targets.check("_vague", b"x")
    finally:
        del targets.TARGETS["_vague"]


# ---------------------------------------------------------------------------
# Mutations of the seeds
# ---------------------------------------------------------------------------

_SEEDS = {}


def _seeds(name):
    if name not in _SEEDS:
        _SEEDS[name] = targets.seeds(name)
    return _SEEDS[name]


_TOKENS = [b"[", b"]", b"{", b"}", b'"', b"'", b"=", b",", b".", b"\n", b"#", b"null", b"true", b"0", b"-1",
           b"1e999", b"nan", b"\xff", b"\x00", b" ", b":", b"- ", b"&a", b"*a", b"[[", b"]]", b"%%"]


@st.composite
def byte_mutation(draw, seed):
    data = bytearray(seed)
    for dummy in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["insert", "delete", "replace", "repeat"]))
        size = draw(st.integers(1, 64))
        if kind == "insert":
            data[at:at] = draw(st.sampled_from(_TOKENS) | st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[at:at + size]
        elif kind == "replace" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif kind == "repeat":
            data[at:at] = bytes(data[at:at + size]) * draw(st.integers(2, 4))
    return bytes(data)


@st.composite
def fuzz_input(draw, name):
    seeds = _seeds(name)
    seed = draw(st.sampled_from(seeds))
    if draw(st.booleans()):  # by structure: a document's values, a TOML file's table order
        mutated = mutations.mutate(seed, draw(st.randoms(use_true_random=False)), draw(st.integers(1, 3)))
        if mutated is not None:
            return mutated
    if draw(st.integers(0, 5)) == 0:  # splice two seeds: a main config and a drop-in, two documents
        seed = seed + targets.SEPARATOR + draw(st.sampled_from(seeds))
    return draw(byte_mutation(seed))


@pytest.mark.parametrize("name", sorted(targets.TARGETS))
def test_mutated_seeds_keep_the_rule(name):
    @FUZZ
    @given(fuzz_input(name))
    def run(data):
        targets.check(name, data)
    run()


# ---------------------------------------------------------------------------
# Structure-aware inputs for the controller's documents: recorded facts records, plan.json, the planner's
# inventory values. Any JSON or YAML value type at any key, nesting to thousands of levels, and the texts
# hand-made inputs carry (NUL, a trailing newline, Unicode digits, "..", numbers too large for any field).
# ---------------------------------------------------------------------------

import json  # noqa: E402

import yaml  # noqa: E402

_DEEP = "@@deep@@"
_KEYS = st.sampled_from(["", "nvidia", "node", "format", "gpus", "version", "hosts", "diff", "summary", "\0",
                         "recorded_at", "..", "５"]) | st.text(max_size=6)
_SCALARS = (st.none() | st.booleans() | st.integers() | st.sampled_from(targets.HOSTILE_NUMBERS)
            | st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(targets.HOSTILE_TEXTS)
            | st.text(max_size=8) | st.just(_DEEP))
HOSTILE_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                              | st.dictionaries(_KEYS, inner, max_size=3), max_leaves=8)


def _deep_json(draw):
    """A value nested ``levels`` deep, as JSON text (no encoder recurses that far)."""
    levels = draw(st.integers(60, 5000))
    if draw(st.booleans()):
        return "[" * levels + "]" * levels
    return '{"a":' * levels + "1" + "}" * levels


def _replace(document, path, value):
    if not path:
        return value
    node = document
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return document


@st.composite
def hostile_json(draw, documents):
    """One of ``documents`` with one to three values (or the whole) replaced by any value, as JSON text."""
    document = json.loads(json.dumps(draw(st.sampled_from(documents))))
    for dummy in range(draw(st.integers(1, 3))):
        paths = list(mutations._paths(document))
        document = _replace(document, draw(st.sampled_from(paths)), draw(HOSTILE_VALUES))
    text = json.dumps(document, ensure_ascii=draw(st.booleans()))
    while '"%s"' % _DEEP in text:
        text = text.replace('"%s"' % _DEEP, _deep_json(draw), 1)
    return text.encode("utf-8", "surrogatepass")


_PLANNER_VARIABLES = ["inventory_hostname", "gpuops_nvml_replay_file", "gpuops_fleet_facts_dir", "gpuops_upgrade_serial",
                      "nvidia_driver_branch", "nvidia_driver_version", "nvidia_driver_state", "nvidia_driver_fabricmanager",
                      "mig_config_name", "mig_config", "mig_config_file", "gpu_nodes_node_name", "gpu_nodes_host_labels",
                      "gpu_nodes_device_plugin_config", "gpu_nodes_dra"]


@st.composite
def hostile_variables(draw):
    """The planner's inventory values of one host (and its inventory name), each of any type, as YAML."""
    variables = draw(st.dictionaries(st.sampled_from(_PLANNER_VARIABLES), HOSTILE_VALUES, max_size=4))
    text = yaml.safe_dump(variables, allow_unicode=draw(st.booleans()))
    for token in ("'%s'" % _DEEP, _DEEP):
        while token in text:
            # A flow sequence nested that deep. PyYAML itself (as Ansible's inventory loader) stops near 500
            # levels, and slowly: deeper never reaches the planner.
            levels = draw(st.integers(60, 450))
            text = text.replace(token, "[" * levels + "]" * levels, 1)
    return text.encode("utf-8", "surrogatepass")


def _records():
    return [targets._good_record(), json.loads(targets.seeds("recorded_facts")[0])]


@pytest.mark.parametrize("name, strategy", [
    ("recorded_facts", lambda: hostile_json(_records())),
    ("plan_json", lambda: hostile_json([targets._fresh_plan(), json.loads(targets.seeds("plan_json")[0])])),
    ("planner_inputs", hostile_variables),
])
def test_hostile_structures_keep_the_rule(name, strategy):
    @FUZZ
    @given(strategy())
    def run(data):
        targets.check(name, data)
    run()


def test_the_plan_seed_is_a_plan_of_this_schema():
    """The seed plan.json mutates from a valid plan: were it refused, the fuzzing would never reach the diff."""
    from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_schema

    for data in targets.seeds("plan_json")[:1]:
        fleet_schema.check(json.loads(data))


def _dictionary_entries(path):
    """The byte strings of a libFuzzer dictionary (name="value" lines, \\xNN escapes)."""
    import re

    entries = []
    for line in open(path).read().splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r'[A-Za-z0-9_]+="((?:[^"\\]|\\x[0-9a-f]{2})*)"', line)
        assert match, "%s: not a dictionary entry: %r" % (path, line)
        entries.append(re.sub(r"\\x([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), match.group(1)).encode("latin-1"))
    return entries


@pytest.mark.parametrize("name", ["recorded_facts", "fleet_facts", "plan_json", "planner_inputs", "inventory_variables"])
def test_the_controller_targets_dictionaries_hold_the_hostile_tokens(name):
    entries = _dictionary_entries(targets.dictionary(name))
    for token in (b"\x00", b"570\n", "５７０".encode(), "٥٧٠".encode(), b"..", b"1e999"):
        assert token in entries, "%s.dict lacks %r" % (name, token)
    assert all(len(e) <= 64 for e in entries)  # libFuzzer's longest dictionary word
