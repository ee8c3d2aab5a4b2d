"""Values in messages: bounded, ASCII, their types in words (never a Python or ansible-core class name)."""
import datetime

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._common import shown as s


class _Tagged(int):
    """Like ansible-core's _AnsibleTaggedInt: a subclass whose name no message may show."""


class _TaggedDate(datetime.date):
    pass


@pytest.mark.parametrize("value, words", [
    (True, "a boolean"), (3, "a whole number"), (_Tagged(3), "a whole number"), (570.19, "a number"),
    ("x", "a string"), (None, "null"), (datetime.date(2026, 1, 2), "a date"), (_TaggedDate(2026, 1, 2), "a date"),
    (datetime.datetime(2026, 1, 2, 3, 4), "a date and time"), ({}, "a mapping"), ([], "a list"), (set(), "a set"),
    (object(), "a value of another kind"),
])
def test_types_are_named_in_words(value, words):
    assert s.type_words(value) == words


def test_a_long_value_is_cut_with_its_length_given():
    text = s.shown("a" * (1024 * 1024))
    assert text == "'%s'... (1048576 characters)" % ("a" * s.MAX_SHOWN)
    assert s.shown("a" * s.MAX_SHOWN) == "'%s'" % ("a" * s.MAX_SHOWN)


def test_a_large_or_deep_value_is_bounded():
    assert len(s.shown(["x" * 1000] * 1000)) < 2 * s.MAX_SHOWN
    assert s.shown(["x" * 1000] * 1000).endswith("... (1000 items)")
    deep = []
    for _level in range(100000):
        deep = [deep]
    assert s.shown(deep) == "[[[[...]]]]"


def test_non_ascii_is_escaped_and_tagged_values_read_as_their_type():
    assert s.shown("h100\u2011a") == "'h100\\u2011a'"
    assert s.shown_name("h100-a") == "h100-a"
    assert s.shown_name("h100\u2011a") == "'h100\\u2011a'"
    assert s.shown_name("a\nb") == "'a\\nb'"
    assert s.shown(_Tagged(7)) == "7" and s.shown(_TaggedDate(2026, 1, 2)) == "2026-01-02"
    assert s.shown({"k": _TaggedDate(2026, 1, 2)}) == "{'k': 2026-01-02}"
