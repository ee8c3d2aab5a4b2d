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


def value_depth(value, max_depth=MAX_DEPTH):
    """The nesting depth of parsed data, counted without recursion; stops counting past ``max_depth``."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if depth > max_depth:
            return depth
        stack.extend((child, depth) for child in children)
    return deepest


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
