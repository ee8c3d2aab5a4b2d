# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): values shown in messages.
"""How a message shows a value it refuses: bounded, in ASCII, its type in words.

A refused value may be a megabyte of text, nested many levels deep, hold
lookalike letters or control characters, or be one of ansible-core's tagged
types (``_AnsibleTaggedInt``, ``_AnsibleTaggedDate``). Messages show it with
:func:`shown` (at most :data:`MAX_SHOWN` characters, the full length given
when cut, every non-ASCII character escaped), a name with :func:`shown_name`
and its type with :func:`type_words` ("a date", "a boolean"), never a Python
class name. Pure Python 3.9, no dependency: modules and controller plugins
share it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import reprlib
from collections.abc import Mapping, Set

# The longest value a message shows whole.
MAX_SHOWN = 200

# Most specific first: a bool is an int, a datetime a date.
_WORDS = (
    (bool, "a boolean"), (int, "a whole number"), (float, "a number"), (str, "a string"), (bytes, "bytes"),
    (datetime.datetime, "a date and time"), (datetime.date, "a date"), (datetime.time, "a time"),
    (Mapping, "a mapping"), (list, "a list"), (tuple, "a list"), (Set, "a set"),
)
_NATIVE = (bool, int, float, str, bytes, list, tuple, dict, set, frozenset)


def type_words(value):
    """The kind of ``value`` in words ("a string", "a number", "a date", "null"): no class name, tagged or not."""
    if value is None:
        return "null"
    for kind, words in _WORDS:
        if isinstance(value, kind):
            return words
    return "a value of another kind"


def _native(value):
    """``value`` as its plain Python type (ansible-core's tagged str, int, list... are subclasses)."""
    for kind in _NATIVE:
        if isinstance(value, kind):
            if value.__class__ is kind:  # already plain: no copy
                return value
            try:
                return kind(value)
            except (TypeError, ValueError):
                return value
    return value


class _Bounded(reprlib.Repr):
    """reprlib's bounded repr, reading tagged values as their plain type."""

    def __init__(self, limit):
        reprlib.Repr.__init__(self)
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict, self.maxset = 3, 10, 10, 10, 10
        self.maxfrozenset, self.maxstring, self.maxother, self.maxlong = 10, limit, limit, limit

    def repr1(self, x, level):
        x = _native(x)
        if isinstance(x, (datetime.date, datetime.time)):
            return x.isoformat()
        return reprlib.Repr.repr1(self, x, level)


def _ascii(text):
    """``text`` with every character outside printable ASCII escaped (``\\u0430`` for a Cyrillic a)."""
    return "".join(c if " " <= c <= "~" else c.encode("unicode_escape").decode("ascii") for c in text)


def shown(value, limit=MAX_SHOWN):
    """``value`` as a message shows it: its repr in ASCII, at most ``limit`` characters; a longer one is cut,
    with the value's length given (``'aaaa...' (1048576 characters)``)."""
    value = _native(value)
    if isinstance(value, str):
        if len(value) <= limit:
            return _ascii(repr(value))
        return "%s... (%d characters)" % (_ascii(repr(value[:limit])), len(value))
    text = _ascii(_Bounded(limit).repr(value))
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, (list, tuple, Mapping, Set, bytes)) else None
    return "%s... (%s)" % (text[:limit], "%d items" % size if size is not None and not isinstance(value, bytes)
                           else "%d bytes" % size if size is not None else "cut")


def shown_name(name, limit=MAX_SHOWN):
    """A name (a host, a profile, a key) as text, unquoted when it is printable ASCII, else escaped and quoted
    (a lookalike ``h100\\u2011a`` is not mistaken for ``h100-a``); cut like :func:`shown`."""
    name = _native(name)
    if isinstance(name, str) and len(name) <= limit and all(" " < c <= "~" for c in name):
        return name
    return shown(name, limit)
