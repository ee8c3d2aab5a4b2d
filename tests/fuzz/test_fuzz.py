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
