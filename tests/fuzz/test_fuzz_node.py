"""Structure-aware inputs for the node's parsers (node_targets.py), under the rule (targets.py).

Derandomized, like the mutation pass of test_fuzz.py: every run tries the same
documents, built in each parser's own shape with any value type at the keys it
reads, nesting thousands of levels deep, and NUL, trailing newlines, Unicode
digits, ``..`` and very large numbers.
"""
import pytest
from hypothesis import HealthCheck, given, settings

import node_targets
import targets

STRUCTURED = settings(max_examples=30, derandomize=True, deadline=None, database=None, print_blob=True,
                      suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("name", sorted(node_targets.STRATEGIES))
def test_documents_in_the_parsers_shape_keep_the_rule(name):
    @STRUCTURED
    @given(node_targets.STRATEGIES[name]())
    def run(data):
        targets.check(name, data)
    run()


@pytest.mark.parametrize("name", sorted(node_targets.STRATEGIES))
def test_every_node_target_has_a_dictionary_with_the_hostile_texts(name):
    path = targets.DICTIONARIES / ("%s.dict" % name)
    text = path.read_text()
    for token in ('"\\x00"', '"570\\x0a"', '"\\xef\\xbc\\x95\\xef\\xbc\\x97\\xef\\xbc\\x90"', '".."', '"1e999"'):
        assert token in text, "%s lacks %s" % (path, token)


def test_the_driver_target_fails_a_unicode_branch_that_reaches_the_plan(monkeypatch):
    """The target itself can fail: a branch of Unicode digits that got through would be a violation."""
    monkeypatch.setattr(node_targets.driver_packages, "_BRANCH", __import__("re").compile(r"\d{3}"))
    with pytest.raises(targets.Violation, match="reached the plan"):
        targets.check("driver_params", "branch: \"\uff15\uff17\uff10\"\n".encode("utf-8"))
