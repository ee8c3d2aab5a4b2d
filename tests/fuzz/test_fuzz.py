"""Every parser of outside input under the rule (tests/fuzz/targets.py): the suite's short, deterministic pass.

Two parts, on every run:

* the regression corpus (tests/fuzz/corpus/<target>/), every input a fuzzer
  ever broke a parser with, replayed as it is;
* a derandomized Hypothesis pass per target that mutates its seeds (fixtures,
  upstream reference files, the corpus): bytes flipped, cut, repeated and
  spliced, and for JSON and YAML seeds a value of the document replaced by
  another of any type.

The long, coverage-guided run is ``make fuzz`` (tests/fuzz/run_atheris.py).
"""
import json

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    for _ in range(draw(st.integers(1, 4))):
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


_ANY = st.recursive(st.none() | st.booleans() | st.integers(-2, 2 ** 40) | st.floats(allow_nan=False)
                    | st.text(max_size=12) | st.sampled_from(["0,1,2,3", "enabled", "1g.10gb", "completed", ""]),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=6)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, prefix + (index,))


@st.composite
def value_mutation(draw, document):
    """``document`` with one value (anywhere in it) replaced by a value of any type, or a key dropped."""
    paths = list(_paths(document))[1:]
    if not paths:
        return draw(_ANY)
    path = draw(st.sampled_from(paths))
    doc = json.loads(json.dumps(document))
    node = doc
    for key in path[:-1]:
        node = node[key]
    if isinstance(node, dict) and draw(st.booleans()) and draw(st.booleans()):
        del node[path[-1]]
    else:
        node[path[-1]] = draw(_ANY)
    return doc


def _structured(name):
    """The seeds of ``name`` that are JSON or YAML documents, loaded (with how to write them back)."""
    out = []
    for seed in _seeds(name):
        try:
            out.append((json.loads(seed), lambda d: json.dumps(d).encode()))
            continue
        except ValueError:
            pass
        if name in ("mig_parted", "inventory_variables"):
            try:
                doc = yaml.safe_load(seed)
            except yaml.YAMLError:
                continue
            if isinstance(doc, (dict, list)):
                out.append((json.loads(json.dumps(doc, default=str)), lambda d: yaml.safe_dump(d).encode()))
    return out


@st.composite
def fuzz_input(draw, name):
    structured = _structured(name)
    if structured and draw(st.booleans()):
        document, dump = draw(st.sampled_from(structured))
        for _ in range(draw(st.integers(1, 3))):
            document = draw(value_mutation(document))
        return dump(document)
    seeds = _seeds(name)
    seed = draw(st.sampled_from(seeds))
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
