# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): limits on outside input, checked before parsing.
"""One guard per kind of outside input, run on the raw text before a parser sees it.

Python's JSON and TOML parsers (and tomlkit) recurse once per level of
nesting, so a file with a few thousand ``[`` ends in ``RecursionError`` (or
later, in a deep copy), and a file of many megabytes takes minutes. Each
guard checks the size and the bracket depth of the text with one cheap scan
that skips strings (and TOML comments), and raises the caller's own error
type with a message naming the file and the limit. Pure Python 3.9, no
dependency.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from itertools import accumulate, repeat

from ansible_collections.gpuops.platform.plugins.module_utils._common.shown import shown, type_words

# No config or tool output this collection reads nests deeper than a handful of levels.
MAX_DEPTH = 64

# Strings (and TOML comments) are skipped: a bracket inside them is no nesting.
_JSON_SKIP = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_TOML_SKIP = re.compile(
    r'"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""'  # multi-line basic string
    r"|'''[^']*(?:'(?!'')[^']*)*'''"  # multi-line literal string
    r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"'  # basic string
    r"|'[^'\n]*'"  # literal string
    r"|#[^\n]*",  # comment
    re.DOTALL,
)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


class InputLimitError(ValueError):
    """Outside input over a limit; callers raise their own error type with the same message."""


def _describe_size(size):
    if size >= 1024 * 1024:
        return "%d MiB" % (size // (1024 * 1024))
    return "%d KiB" % (size // 1024) if size >= 1024 else "%d bytes" % size


def bracket_depth(text, kind):
    """The deepest nesting of ``[``/``{`` in ``text`` (``kind`` json or toml), strings and comments skipped.

    The count is over the text as written, so it is cheap (regular expressions
    and C loops) and never recurses; an unbalanced text is the parser's to refuse.
    """
    if not text:
        return 0
    opening = text.count("[") + text.count("{")
    if opening <= 1:
        return opening
    skip = _JSON_SKIP if kind == "json" else _TOML_SKIP
    brackets = _NOT_BRACKET.sub("", skip.sub("", text))
    if not brackets:
        return 0
    return max(0, *accumulate(map(_STEP.__getitem__, brackets)))


FILE_ADVICE = "Nothing was changed; check the file."
FIX_ADVICE = "Nothing was changed; fix the file and run again."


def check_document(text, source, kind, max_bytes, max_depth=MAX_DEPTH, error=InputLimitError, what=None,
                   advice=FILE_ADVICE):
    """Refuse ``text`` (the raw content of ``source``) over ``max_bytes`` or nested deeper than ``max_depth``.

    ``kind`` is ``json`` or ``toml``; ``error`` the caller's exception type;
    ``what`` how the message names the document (default: ``source``);
    ``advice`` what the message ends with. Returns the bracket depth found.
    """
    if text is None:
        return 0
    what = what or source
    size = len(text.encode("utf-8", "surrogatepass")) if len(text) * 4 > max_bytes else len(text)
    if size > max_bytes:
        raise error("%s is %s, more than the %s a %s document may be here (size limit). %s"
                    % (what, _describe_size(size), _describe_size(max_bytes), kind.upper(), advice))
    depth = bracket_depth(text, kind)
    if depth > max_depth:
        raise error("%s nests %s %d levels deep, deeper than the %d levels a %s document may nest here (nesting "
                    "limit). %s" % (what, "arrays or objects" if kind == "json" else "arrays or inline tables", depth,
                                    max_depth, kind.upper(), advice))
    return depth


def toml_depth_bound(text, bracket_depth):
    """How deep the data of TOML ``text`` can nest at most, without parsing it.

    A header adds at most two levels per key part (an array of tables and its
    table), a dotted key one per part, brackets and braces one each; a part is
    one more than the dots of its line (dots in strings only make the bound larger).
    """
    if not text:
        return bracket_depth
    dots = max(map(str.count, text.split("\n"), repeat("."))) if "." in text else 0
    return 3 * (dots + 1) + bracket_depth


# A value that holds itself (through a YAML alias, or an object built so) has no depth: it is this deep.
ENDLESS = float("inf")


def data_children(value):
    """The values inside parsed data (mapping values, list items), or None for a scalar."""
    if isinstance(value, dict):
        return value.values()
    if isinstance(value, (list, tuple)):
        return value
    return None


def shape(root, children=data_children, max_depth=None, max_values=None):
    """``(depth, values, distinct)`` of a tree whose containers may be shared (YAML aliases): counted, not expanded.

    ``depth``: the nesting depth; ``values``: how many values (containers and
    scalars) it holds written out, each shared container as often as it is
    used; ``distinct``: the same with each shared container counted once.
    ``children(node)`` lists a container's children (None for a scalar).
    Each container is walked once, whatever the number of references to it,
    without recursion. A container that holds itself gives :data:`ENDLESS`.
    The walk stops early once ``depth`` passes ``max_depth`` or ``values``
    passes ``max_values`` (the numbers returned are then lower bounds).
    """
    kids = children(root)
    if kids is None:
        return 0, 1, 1
    # Most documents share nothing: one pass in pre-order, as for a tree. The first container met a second
    # time (an alias, or a container holding itself) sends the count to the walk that remembers each one.
    seen = set()
    deepest, values = 0, 1
    todo = [(root, kids, 1)]
    while todo:
        node, kids, level = todo.pop()
        if id(node) in seen:
            return _shared_shape(root, children, max_depth, max_values)
        seen.add(id(node))
        if level > deepest:
            deepest = level
            if max_depth is not None and deepest > max_depth:
                return deepest, values, values
        values += len(kids)
        for child in kids:
            grandchildren = children(child)
            if grandchildren is not None:
                todo.append((child, grandchildren, level + 1))
    return deepest, values, values


def _shared_shape(root, children, max_depth, max_values):
    """:func:`shape` of a tree with shared containers: each walked once, in post-order, its counts remembered."""
    kids = children(root)
    done = {}  # id(container) -> (depth, values); scalars are never in it
    walking = set()  # the containers on the current path
    stack = [(root, kids, False)]
    distinct = 0
    while stack:
        node, kids, finished = stack.pop()
        key = id(node)
        if finished:
            deepest, values = 0, 1
            for child in kids:
                child_depth, child_values = done.get(id(child), (0, 1))
                if child_depth > deepest:
                    deepest = child_depth
                values += child_values
                distinct += child_depth == 0
            distinct += 1
            done[key] = (deepest + 1, values)
            walking.discard(key)
            if (max_depth is not None and deepest + 1 > max_depth) or (max_values is not None and values > max_values):
                return deepest + 1, values, distinct
            continue
        if key in done:
            continue
        if key in walking:
            return ENDLESS, ENDLESS, distinct
        walking.add(key)
        stack.append((node, kids, True))
        for child in kids:
            grandchildren = children(child)
            if grandchildren is not None and id(child) not in done:
                stack.append((child, grandchildren, False))
    depth, values = done[id(root)]
    return depth, values, distinct


# A document may hold, written out (each alias replaced by what it names), this many values, or this many times
# the values it really has, whichever is more: only aliases of aliases ("billion laughs") go past that.
EXPANSION_FLOOR = 100000
EXPANSION_RATIO = 10


def expansion_budget(distinct):
    """How many values a document that has ``distinct`` values may hold written out."""
    return max(EXPANSION_FLOOR, EXPANSION_RATIO * distinct)


def expansion_message(source, distinct, key=None):
    """The refusal of ``source``, whose aliases expand past :func:`expansion_budget` (under ``key``, when known)."""
    return ("%s repeats itself through YAML aliases%s: written out it would hold more than %d values (it has %d), "
            "more than any such document holds, so it is not read" % (
                source, " (under %s)" % shown_key(key) if key is not None else "", expansion_budget(distinct), distinct))


def check_value_shape(value, source, max_depth=MAX_DEPTH, error=InputLimitError, advice=FILE_ADVICE):
    """Refuse parsed data (aliases shared, as PyYAML builds them) too deep, or too large written out."""
    depth, values, distinct = shape(value, max_depth=max_depth)
    if depth > max_depth:
        raise error("%s nests mappings or lists more than %d levels deep (nesting limit), or holds itself. %s"
                    % (source, max_depth, advice))
    if values > expansion_budget(distinct):
        raise error("%s. %s" % (expansion_message(source, distinct), advice))
    return value


def shown_key(key):
    """A key for a message: cut past 80 characters (its length given), non-ASCII escaped."""
    key = key if isinstance(key, str) else repr(key)
    text = key if len(key) <= 80 else "%s... (%d characters)" % (key[:80], len(key))
    return ascii(text)


def unique_keys_hook(source, error=InputLimitError, advice=FIX_ADVICE):
    """A ``json.loads`` ``object_pairs_hook`` that refuses an object giving a key twice, naming the key and ``source``.

    JSON leaves a repeated key to the reader, and Python's keeps the last one:
    a facts file whose second ``"uncorrectable"`` hides the first reads as a
    healthy GPU.
    """
    def hook(pairs):
        result = dict(pairs)
        if len(result) != len(pairs):
            seen = set()
            for key, _value in pairs:
                if key in seen:
                    raise error("%s gives the key %s twice in one object; JSON readers differ on which one counts, "
                                "so it is not read. %s" % (source, shown_key(key), advice))
                seen.add(key)
        return result
    return hook


def value_depth(value, max_depth=MAX_DEPTH):
    """The nesting depth of parsed data, counted without recursion (each shared container once); stops past ``max_depth``."""
    return shape(value, max_depth=max_depth)[0]


def check_toml_value_depth(value, text, bracket_depth, source, max_depth=MAX_DEPTH, error=InputLimitError,
                           advice=FILE_ADVICE):
    """:func:`check_value_depth` of TOML data, walked only when its text could nest deeper than ``max_depth``."""
    if toml_depth_bound(text, bracket_depth) > max_depth:
        check_value_depth(value, source, max_depth, error, advice)
    return value


def check_value_depth(value, source, max_depth=MAX_DEPTH, error=InputLimitError, advice=FILE_ADVICE):
    """Refuse parsed data nested deeper than ``max_depth`` (TOML dotted keys nest without brackets)."""
    depth = value_depth(value, max_depth)
    if depth > max_depth:
        raise error("%s nests tables or arrays more than %d levels deep (nesting limit; dotted keys count). %s"
                    % (source, max_depth, advice))
    return value


def _path_text(path):
    """``plugins."io.containerd.grpc.v1.cri".cdi_spec_dirs[0]``: keys other than bare keys quoted, indexes in brackets."""
    out = []
    for part in path:
        if isinstance(part, int):
            out.append("[%d]" % part)
            continue
        key = part if _BARE_KEY.match(part) else '"%s"' % part
        out.append("." + key if out else key)
    return "".join(out)


def check_type(value, types, path, source, error=InputLimitError, expected=None, advice=FIX_ADVICE):
    """``value`` when it is exactly one of ``types`` (a bool is no int), else ``error`` naming the field's path.

    ``path`` is the field's key path (a list of keys and list indexes), ``source`` the file.
    """
    types = types if isinstance(types, tuple) else (types,)
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        names = expected or " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
        # By isinstance, most specific first: a tagged int (ansible-core's _AnsibleTaggedInt) is an integer.
        found = next((words for kind, words in _TYPE_ORDER if isinstance(value, kind)), None) or type_words(value)
        raise error("%s: %s must be %s, found %s %s. %s"
                    % (source, _path_text(path), names, found, shown(value, 80), advice))
    return value


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "a boolean (true or false)",
               list: "a list", dict: "a table/object", type(None): "null"}
_TYPE_ORDER = tuple((kind, _TYPE_NAMES[kind]) for kind in (bool, int, float, str, list, dict, type(None)))


def check_path_text(value, field, source, error=InputLimitError, advice=FIX_ADVICE):
    """Refuse a path from outside input that holds a NUL byte (the OS cannot take it)."""
    if isinstance(value, str) and "\x00" in value:
        raise error("%s: %s %r holds a NUL byte, which no path can hold. %s" % (source, field, value, advice))
    return value
