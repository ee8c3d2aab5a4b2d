# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): layout-keeping TOML reads and edits.
"""A TOML file parsed once, and edited through only the tables an edit needs.

tomlkit keeps comments and layout but reads about 0.2 MB/s; a containerd
config with thousands of unrelated tables (registry mirrors, proxy plugins)
took minutes. :class:`TomlFile` reads the whole file once with the stdlib
parser (``tomllib``, or ``tomli`` before Python 3.11) for its data and to
validate it, and gives tomlkit only the tables on the edited path: every other
table is put back afterwards byte for byte, where it was. What tomlkit gets is
checked against the full parse, and what it writes against the edit; when
anything does not match (or no fast parser is installed) the whole file goes
through tomlkit as before.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import (
    HAS_FAST_TOML,
    ConfigError,
    WriteMismatch,
    check_written,
    dump_toml,
    load_plain,
    parse_toml,
    plain,
)

# Files below this size go through tomlkit whole: it is fast enough and no cut is needed.
SCOPED_MIN_SIZE = 64 * 1024

_KEY = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\\n]|\\.)*"|'[^'\n]*')"""
_HEADER = re.compile(r"^[ \t]*(\[\[?)[ \t]*(%s(?:[ \t]*\.[ \t]*%s)*)[ \t]*(\]\]?)[ \t]*(?:#.*)?\Z" % (_KEY, _KEY))
_KEY_PART = re.compile(_KEY)


class ScopeMismatch(Exception):
    """The cut did not give what the full parse says: use the whole file."""


def _header_path(match):
    """The key path of a header line, or None when a part needs unescaping (then no cut is made)."""
    path = []
    for part in _KEY_PART.findall(match.group(2)):
        if part.startswith('"'):
            if "\\" in part:
                return None
            part = part[1:-1]
        elif part.startswith("'"):
            part = part[1:-1]
        path.append(part)
    return tuple(path)


_HEADER_LINE = re.compile(r"^[ \t]*\[[^\n]*", re.MULTILINE)
OFF = "off"  # a chunk off the edited path


def chunks(text, scope):
    """The file as [(path, is_array, text)]: one chunk per table header, with the lines below it.

    ``path`` is None for the lines before the first header, :data:`OFF` for a
    table neither on the way to ``scope`` nor inside it (the header is not
    parsed: most of a large file is such tables), else the header's key path.
    Every line that looks like a header starts a chunk; a multi-line string or
    array can hold such a line, and the cut made from a wrong chunk then does
    not parse to the data of the whole file, which :meth:`TomlFile.edit` checks.
    """
    scope = tuple(scope)
    found = []  # (start offset, path, is_array)
    # A header on the way to or inside scope names scope[1], or is scope[0] alone: most lines
    # are neither (other plugins), and are told apart without the full header pattern.
    alone = re.compile(r"""[ \t]*\[\[?[ \t]*(?:%s|"%s"|'%s')[ \t]*\]""" % ((re.escape(scope[0]),) * 3)) if scope else None
    for line in _HEADER_LINE.finditer(text):
        raw = line.group(0)
        if len(scope) > 1 and scope[1] not in raw and (scope[0] not in raw or not alone.match(raw)):
            if raw.rstrip().endswith("]") or "#" in raw:
                found.append((line.start(), OFF, raw.lstrip().startswith("[[")))
            continue
        header = _HEADER.match(raw.rstrip("\r"))
        if header is None:
            continue  # a line of a multi-line array
        path = _header_path(header)
        if path is None or len(header.group(1)) != len(header.group(3)):
            raise ScopeMismatch("header %r" % header.group(0))
        found.append((line.start(), path if _related(path, scope) else OFF, header.group(1) == "[["))
    starts = [0] + [start for start, _p, _a in found] + [len(text)]
    result = [(None, False, text[:starts[1]])]
    for index, (start, path, array) in enumerate(found):
        result.append((path, array, text[start:starts[index + 2]]))
    return result


def _related(path, scope):
    """Whether the table at ``path`` is on the way to ``scope`` or inside it."""
    size = min(len(path), len(scope))
    return path[:size] == scope[:size]


def _cut(text, scope):
    """The text tomlkit gets (the chunks on ``scope``), and the rest: {index of the chunk it goes before: text}.

    Tables off the path are left out whole, arrays of tables included: they
    define nothing on the path, so the file means the same with them put back
    before the same chunk (or at the end).
    """
    kept, gaps, gap = [], {}, []
    for path, array, chunk in chunks(text, scope):
        if path is OFF:
            gap.append(chunk)
            continue
        if array:
            raise ScopeMismatch("array of tables on the edited path")
        if gap:
            if not kept[-1].endswith("\n"):
                raise ScopeMismatch("no newline before a table")
            gaps[path] = "".join(gap)
            gap = []
        kept.append(chunk)
    if gap:
        gaps[None] = "".join(gap)
    return "".join(kept), gaps


def cut_view(data, scope):
    """What of ``data`` the cut keeps: the plain keys on the way to ``scope`` and everything inside it."""
    if not scope or not isinstance(data, dict):
        return data
    kept = dict((k, v) for k, v in data.items()
                if not isinstance(v, dict) and not (isinstance(v, list) and v and all(isinstance(x, dict) for x in v)))
    if scope[0] in data:
        kept[scope[0]] = cut_view(data[scope[0]], scope[1:])
    return kept


def with_cut(data, edited, scope):
    """``data`` (the whole file) with what :func:`cut_view` keeps of it replaced by ``edited`` (the edited cut)."""
    if not scope or not isinstance(data, dict) or not isinstance(edited, dict):
        return edited
    kept = cut_view(data, scope)
    result = dict((k, v) for k, v in data.items() if k not in kept or (k == scope[0] and k not in edited))
    for key, value in edited.items():
        result[key] = with_cut(data[key], value, scope[1:]) if key == scope[0] and key in data else value
    return result


def _without_empty_tables(data):
    """``data`` without the tables that hold nothing (after their own empty tables are gone).

    A table defined only by sub-tables off the edited path (``plugins`` in a
    config without a CRI section) is in the full parse but not in the cut;
    it holds nothing the edit reads, so the two mean the same there.
    """
    if not isinstance(data, dict):
        return data
    kept = {}
    for key, value in data.items():
        value = _without_empty_tables(value)
        if not (isinstance(value, dict) and not value):
            kept[key] = value
    return kept


def same_on_scope(sub_data, data, scope):
    """Whether the cut's data is what the full parse has on ``scope`` (tables that hold nothing aside)."""
    return _without_empty_tables(sub_data) == _without_empty_tables(cut_view(data, scope))


class TomlFile(object):
    """One TOML file: ``data`` (the whole file, plain) and :meth:`edit`/:meth:`render` for one edit."""

    def __init__(self, text, path, prefix=""):
        self.before = text
        self.path = path
        self.text = prefix + (text or "")
        self.changed_by_prefix = bool(prefix)
        self.data = load_plain(self.text, path)
        self._gaps = None
        self._scope = None
        self._doc = None
        self._data_at_edit = None

    def edit(self, scope=None, scoped=None):
        """A tomlkit document to edit; only what lies on ``scope`` (a key path) when the file is large."""
        if scoped is None:
            scoped = scope is not None and HAS_FAST_TOML and len(self.text) >= SCOPED_MIN_SIZE
        self._gaps, self._scope = None, None
        if scoped:
            try:
                sub_text, gaps = _cut(self.text, tuple(scope))
                sub_data = load_plain(sub_text, self.path)
            except (ScopeMismatch, ConfigError):
                sub_data = None
            if sub_data is not None and same_on_scope(sub_data, self.data, tuple(scope)):
                self._gaps, self._scope = gaps, tuple(scope)
                self._doc = parse_toml(sub_text, self.path)
                self._data_at_edit = sub_data
                return self._doc
        self._doc = parse_toml(self.text, self.path)
        self._data_at_edit = self.data
        return self._doc

    @property
    def scoped(self):
        return self._gaps is not None

    def render(self):
        """The file's new text: the original when the edit changed nothing it means.

        A layout tomlkit cannot reproduce exactly must not make every run rewrite
        the file and restart the engine, so only a change of data is a change.
        """
        edited = plain(self._doc)
        if edited == self._data_at_edit and not self.changed_by_prefix:
            return self.before
        text = dump_toml(self._doc)
        if not self.scoped:
            return check_written(self.path, text, edited, load_plain)
        if load_plain(text, self.path) != edited:
            raise ScopeMismatch("tomlkit wrote something else")
        # Put the tables left out back before the chunk they came before.
        parts, placed = [], 0
        for path, _array, chunk in chunks(text, self._scope):
            if path in self._gaps and path is not None:
                if parts and not parts[-1].endswith("\n"):
                    parts.append("\n")
                parts.append(self._gaps[path])
                placed += 1
            parts.append(chunk)
        if None in self._gaps:
            if parts and not parts[-1].endswith("\n"):
                parts.append("\n")
            parts.append(self._gaps[None])
            placed += 1
        if placed != len(self._gaps):
            raise ScopeMismatch("a table the tables left out came before is gone")
        try:
            return check_written(self.path, "".join(parts), with_cut(self.data, edited, self._scope), load_plain)
        except WriteMismatch:
            raise ScopeMismatch("the tables put back do not give the whole file")
