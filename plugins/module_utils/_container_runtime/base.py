# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the Plan, errors and file helpers shared by the container runtime planners.
"""Shared core of nvidia_container_runtime: plans, errors and TOML helpers.

The runtime specific planners (containerd, CRI-O, docker) read the current
files, compute the wanted text and return a :class:`Plan`. Nothing here writes
to disk, so the whole edit is testable and check mode gets a real diff.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import errno
import os
import traceback

from ansible_collections.gpuops.platform.plugins.module_utils._common.input_guard import (
    check_document,
    check_toml_value_depth,
)

try:
    import tomlkit
    from tomlkit.container import Container
    from tomlkit.exceptions import TOMLKitError
    from tomlkit.items import AoT, Comment, InlineTable, String, Table, Whitespace
    HAS_TOMLKIT = True
    TOMLKIT_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - exercised on hosts without tomlkit
    HAS_TOMLKIT = False
    TOMLKIT_IMPORT_ERROR = exc

# A fast reader for data only (no layout): the stdlib's, or its backport, when there is one.
try:
    import tomllib as _fast_toml
except ImportError:  # Python < 3.11
    try:
        import tomli as _fast_toml
    except ImportError:
        _fast_toml = None
HAS_FAST_TOML = _fast_toml is not None

NVIDIA_RUNTIME_NAME = "nvidia"
DEFAULT_NVIDIA_RUNTIME_PATH = "/usr/bin/nvidia-container-runtime"
DROP_IN_NAME = "99-nvidia.toml"
# Runtimes whose settings the NVIDIA runtime inherits, in order (after the default runtime).
LOW_LEVEL_RUNTIMES = ("runc", "crun")
WRITTEN_BY = "# The NVIDIA runtime for %s, written by gpuops.platform.nvidia_container_runtime.\n"

DEFAULT_CONFIG_PATHS = {
    "containerd": "/etc/containerd/config.toml",
    "crio": "/etc/crio/crio.conf",
    "docker": "/etc/docker/daemon.json",
}


class ConfigError(Exception):
    """A config cannot be edited safely; the message says what and what to do."""


class LayoutError(ConfigError):
    """A valid TOML file whose layout tomlkit cannot edit (it fails inside tomlkit)."""


# What tomlkit itself raises on layouts it does not handle (out-of-order tables
# below out-of-order tables, and the like), although the TOML is valid.
_TOMLKIT_FAILURES = (AttributeError, KeyError, IndexError, TypeError, ValueError)


def tomlkit_failed(exc):
    """Whether ``exc`` was raised inside tomlkit, not by this collection's code."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and "tomlkit" in frames[-1].filename.replace("\\", "/").split("/")


def layout_error(paths, exc):
    return LayoutError(
        "%s: tomlkit (the library that edits TOML keeping comments and layout) cannot edit how the tables of "
        "this file are laid out (%s: %s). containerd and CRI-O may read it as it is, but nothing was changed; "
        "write every table's sub-tables below it, in one place (`containerd config dump` prints such a "
        "layout), and run again." % (" or ".join(p for p in paths if p), type(exc).__name__, exc))


def guard_tomlkit(function, paths, *args, **kwargs):
    """``function(*args, **kwargs)``; a failure inside tomlkit becomes a LayoutError naming ``paths``."""
    try:
        return function(*args, **kwargs)
    except (TOMLKitError,) + _TOMLKIT_FAILURES as exc:
        if isinstance(exc, ConfigError) or not tomlkit_failed(exc):
            raise
        raise layout_error(paths, exc)


class FileEdit(object):
    """One file the plan touches: its text before (None: absent) and after."""

    def __init__(self, path, before, after):
        self.path = path
        self.before = before
        self.after = after

    @property
    def changed(self):
        return self.before != self.after

    def __repr__(self):
        return "FileEdit(%r, changed=%r)" % (self.path, self.changed)


class Plan(object):
    """What a runtime configuration needs: the files and some facts about them."""

    def __init__(self, runtime, edits, config_version=None, plugin=None, warnings=None):
        self.runtime = runtime
        self.edits = list(edits)
        self.config_version = config_version
        self.plugin = plugin
        self.warnings = list(warnings or [])

    @property
    def changed_edits(self):
        return [edit for edit in self.edits if edit.changed]

    @property
    def changed(self):
        return bool(self.changed_edits)


# No container engine config is this large; a file that is would take minutes and gigabytes to edit.
MAX_CONFIG_BYTES = 64 * 1024 * 1024


def read_text(path):
    """The text of ``path``, or None when it does not exist."""
    if os.path.isdir(path):
        raise ConfigError("%s is a directory, not a config file. Nothing was changed; give the path of the file."
                          % path)
    try:
        size = os.stat(path).st_size
    except (IOError, OSError):
        size = 0
    if size > MAX_CONFIG_BYTES:
        raise ConfigError("%s is %d MiB, larger than the %d MiB a container engine config can be here. Nothing "
                          "was changed; check the file." % (path, size // 1048576, MAX_CONFIG_BYTES // 1048576))
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) == errno.ENOENT:
            return None  # absent, or a link to a file not written yet (written through the link)
        raise ConfigError("cannot read %s: %s. Nothing was changed; fix the file (a dangling or looping link?) "
                          "and run again." % (path, exc))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError("%s is not UTF-8 text (%s); fix or remove the file and run again" % (path, exc))


def require_tomlkit():
    if not HAS_TOMLKIT:
        raise ConfigError("the Python library tomlkit is required to edit TOML configs: %s" % TOMLKIT_IMPORT_ERROR)


def _invalid_toml(path, exc):
    return ConfigError(
        "%s is not valid TOML: %s. Nothing was changed; fix the file (or move it away) and run again." % (path, exc)
    )


def guard_toml(text, path):
    """Refuse a TOML text over the size or nesting limit before any parser sees it (parsers recurse per level).

    Returns the bracket depth found.
    """
    return check_document(text, path, "toml", MAX_CONFIG_BYTES, error=ConfigError)


def _too_deep(path):
    return ConfigError("%s nests tables or arrays too deep for the TOML parser (nesting limit). Nothing was "
                       "changed; check the file." % path)


def parse_toml(text, path):
    """Parse ``text`` (from ``path``) keeping comments and layout."""
    require_tomlkit()
    if HAS_FAST_TOML:
        # tomlkit accepts some invalid TOML (a table declared twice) and fails on it later, inside itself.
        load_plain(text, path)
    else:
        guard_toml(text, path)
    try:
        doc = tomlkit.parse(text or "")
    except RecursionError:
        raise _too_deep(path)
    except (TOMLKitError,) + _TOMLKIT_FAILURES as exc:
        if HAS_FAST_TOML and tomlkit_failed(exc):
            raise layout_error([path], exc)  # valid TOML (checked above) that tomlkit fails on
        if isinstance(exc, (TOMLKitError, ValueError)):
            raise _invalid_toml(path, exc)
        raise
    return doc


def load_plain(text, path):
    """The data of TOML ``text`` as plain Python, with the fastest parser there is; errors name ``path``."""
    depth = guard_toml(text, path)
    if HAS_FAST_TOML:
        try:
            data = _fast_toml.loads(text or "")
        except _fast_toml.TOMLDecodeError as exc:
            raise _invalid_toml(path, exc)
        except RecursionError:
            raise _too_deep(path)
    else:
        try:
            data = plain(parse_toml(text, path))
        except RecursionError:
            raise _too_deep(path)
    # Dotted keys ([a.b.c...]) nest without a bracket: the data's own depth is checked too.
    return check_toml_value_depth(data, text, depth, path, error=ConfigError)


def dump_toml(doc):
    return tomlkit.dumps(doc)


def settled(path, before, after):
    """``after``, or ``before`` itself when both mean the same.

    Only a change of meaning is a change: a layout tomlkit cannot reproduce
    exactly must not make every run rewrite the file and restart the engine.
    """
    if before is None or before == after:
        return after
    if load_plain(before, path) == load_plain(after, path):
        return before
    return after


def plain(value):
    """A tomlkit item as plain Python data (dict, list, str, ...)."""
    if hasattr(value, "unwrap"):
        return value.unwrap()
    if isinstance(value, dict):
        return dict((k, plain(v)) for k, v in value.items())
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def check_tables(data, path, source, label=None):
    """Fail clearly when a value on ``path`` (a key path in plain ``data``) is there but is not a table."""
    node = data
    for depth, key in enumerate(path):
        if not isinstance(node, dict) or key not in node:
            return
        node = node[key]
        if not isinstance(node, dict):
            raise ConfigError(
                "%s: %s must be a table, found %r. Nothing was changed; fix the file and run again."
                % (source, label or ".".join('"%s"' % k if "." in k else k for k in path[:depth + 1]), node))


def lookup(container, path):
    """The value at ``path`` (a list of keys) or None when a key is missing."""
    node = container
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def inherited_runtime(runtimes, default_name, runtime_name):
    """The runtime whose settings the NVIDIA runtime inherits: the default one, then runc, crun.

    Like nvidia-ctk's ``engine.GetLowLevelRuntimes``, used by its containerd and
    CRI-O engines alike, a default whose name starts with ``nvidia``
    (``nvidia-cdi``, ``nvidia-legacy``) is no low-level runtime to copy.
    """
    candidates = [default_name] if default_name and default_name != runtime_name \
        and not str(default_name).startswith("nvidia") else []
    candidates.extend(LOW_LEVEL_RUNTIMES)
    for name in candidates:
        if isinstance((runtimes or {}).get(name), dict):
            return name
    return None


def deep_merge(base, override):
    """Plain dicts merged key by key, ``override`` winning (containerd 2.x import semantics).

    Not dict_transformations.dict_merge: that deep-copies the whole base again at
    every level, and a containerd config can hold thousands of tables. Here only
    the dicts on merged paths are new; neither input is changed, and the values
    shared with them are only read.
    """
    result = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = value
    return result


def _key_indent(table):
    """The indentation of the key/value lines of ``table`` (containerd dumps indent them)."""
    for _key, item in table.value.body:
        if _key is not None and not isinstance(item, (Table, Whitespace, Comment)):
            return item.trivia.indent
    return None


def ensure_table(container, key):
    """The sub-table ``key`` of ``container``, created implicit (no header of its own) when missing."""
    if key in container:
        node = container[key]
        if not isinstance(node, dict):
            raise ConfigError("expected a table at %r but found %r" % (key, plain(node)))
        return node
    # Inside an inline table ({runc = {...}}) only inline tables can be.
    container[key] = tomlkit.inline_table() if isinstance(container, InlineTable) else tomlkit.table(is_super_table=True)
    return container[key]


def _style(doc, path):
    """Header indent, indent step and key offset for a new table at ``path``, like its surroundings.

    ``containerd config default`` indents every table level by two spaces, k3s
    only the keys: the nearest ancestor with a [header] tells which. Below an
    implicit table tomlkit cannot keep indented headers stable across a
    parse/dump cycle, so those stay unindented.
    """
    node, ref, ref_depth = doc, None, 0
    for depth in range(1, len(path)):
        node = _table_at(doc, path[:depth])
        if is_real_table(node):
            ref, ref_depth = node, depth
    if ref is None:
        return "", "", ""
    header = ref.trivia.indent.split("\n")[-1]
    keys = _key_indent(ref)
    step = "  " if header else ""
    offset = keys[len(header):] if keys is not None and keys.startswith(header) else step
    if isinstance(node, Table) and node.is_super_table() and node is not ref and ref_depth < len(path) - 1:
        return "", "", offset
    return header + step * (len(path) - ref_depth), step, offset


def ensure_path(doc, path):
    """The table at ``path``, creating what is missing.

    A missing table that would be indented gets a header of its own, so the
    tables below it keep their indentation (see :func:`_style`).
    """
    node = doc
    for depth in range(1, len(path) + 1):
        key = path[depth - 1]
        if key in node:
            node = ensure_table(node, key)
            continue
        header, _step, _offset = _style(doc, path[:depth])
        if header:
            added = put_at(doc, path[:depth - 1], key, tomlkit.table(is_super_table=False))
            if isinstance(added, Table):
                added.trivia.indent = "\n" + header
        else:
            put_at(doc, path[:depth - 1], key, tomlkit.table(is_super_table=True))
        node = lookup(doc, path[:depth])
    return node


def _body(container):
    return container.value.body if isinstance(container, Table) else container.body


def parts_at(doc, path):
    """The tables written in ``doc`` for the table at ``path``: one, or several when it is split.

    TOML allows ``[a.b.x]`` after ``[c]`` although ``[a.b]`` came before, and
    tools that append to a config write exactly that. tomlkit then offers the
    table as a view over its parts that has no ``add``, may put a new plain
    value under a part whose header is not written, and (tomlkit < 0.12, as in
    Debian 12) is a merged copy below the first level, so writes to it are lost.
    Edits therefore go to one of the tables found here, in the document itself.
    """
    found = [doc]
    for key in path:
        found = [item for node in found for item_key, item in _body(node)
                 if item_key is not None and item_key.key == key and isinstance(item, Table)]
    return found


def _choose(parts, key=None, near=None):
    """The part that holds ``key``, else the one holding ``near``, else the one with its own [header]."""
    for wanted in (key, near):
        for part in parts:
            if wanted is not None and wanted in part:
                return part
    for part in parts:
        if not part.is_super_table():
            return part
    return parts[0] if parts else None


def _table_at(doc, path, key=None, near=None):
    """What to edit for the table at ``path``: the part :func:`_choose` picks, else the value there.

    A part may be empty (so false): only None means there is none, as for an inline table.
    """
    part = _choose(parts_at(doc, path), key, near) if path else doc
    return lookup(doc, path) if part is None else part


def put_at(doc, path, key, value, near=None):
    """Set ``key`` of the table at ``path`` to ``value``; returns the stored item.

    In a split table the value goes into the part that already holds ``key``,
    else the one holding the sibling ``near`` (a new runtime next to the one it
    copies), else the part with the table's own header, so a plain value never
    lands under a header that is not written.
    """
    target = _table_at(doc, path, key, near)
    if isinstance(target, InlineTable) and isinstance(value, (Table, dict)):
        value = _inline(value)  # a [header] table cannot be inside an inline table
    if key in target:
        target[key] = value
    elif isinstance(target, (Table, Container)):
        target.add(key, value)
    else:
        target[key] = value
        return target[key]
    # The item itself: a container hands out booleans as plain bool.
    return (target.value if isinstance(target, Table) else target).item(key)


def _inline(value):
    """``value`` (a table or plain dict) as an inline table, its sub-tables inline too."""
    table = tomlkit.inline_table()
    table.update(plain(value))
    return table


def _styled(old, value):
    """``value`` in the quoting style of ``old`` ('literal' strings stay literal)."""
    if isinstance(old, String) and isinstance(value, str) and old.as_string().startswith("'") \
            and "'" not in value and "\n" not in value:
        return tomlkit.string(value, literal=True)
    return value


def set_value(table, key, value):
    """Set ``table[key]`` only when it differs, keeping the layout of the line.

    A new key is indented like its siblings. Returns True when something changed.
    """
    existed = key in table
    if existed and plain(table[key]) == value:
        return False
    if existed:
        table[key] = _styled(table[key], value)
        return True
    # Siblings' indentation, read before the new key is there to be found.
    indent = _key_indent(table) if isinstance(table, Table) else None
    if indent is None and isinstance(table, Table):  # the first key: one step in from an indented header
        header = table.trivia.indent.split("\n")[-1]
        indent = header + "  " if header else None
    table[key] = value
    if indent and isinstance(table, Table):
        item = table.value.item(key)
        if not isinstance(item, (Table, Whitespace)):
            item.trivia.indent = indent
    return True


def set_value_at(doc, path, key, value):
    """:func:`set_value` on the table at ``path``, in the part of a split table where ``key`` belongs."""
    return set_value(_table_at(doc, path, key), key, value)


def remove_value_at(doc, path, key):
    """Remove ``key`` from the table at ``path`` (from the part of a split table that holds it); True if it was there."""
    target = _table_at(doc, path, key)
    if isinstance(target, dict) and key in target:
        del target[key]
        return True
    return False


def _strip_comments(table):
    """Drop comments from a copied table: they describe the original, not the copy."""
    body = table.value.body
    # Same length, so tomlkit's key index stays valid: a comment line becomes nothing.
    body[:] = [(k, Whitespace("") if isinstance(v, Comment) else v) for k, v in body]
    for _key, item in body:
        if isinstance(item, Whitespace):
            continue
        item.trivia.comment = ""
        item.trivia.comment_ws = ""
        if isinstance(item, Table):
            _strip_comments(item)
    table.trivia.comment = ""
    table.trivia.comment_ws = ""


def copy_table(source):
    """A copy of a tomlkit table with its layout (indentation, blank lines), without comments."""
    dup = copy.deepcopy(source)
    _strip_comments(dup)
    return dup


def add_table(doc, path, key, table, like=None, near=None):
    """Add ``table`` as ``key`` of the table at ``path`` (beside ``near``); its header is indented like ``like``'s."""
    added = put_at(doc, path, key, table, near=near)
    if like is not None and isinstance(added, Table) and isinstance(like, Table):
        added.trivia.indent = like.trivia.indent
    return added


def _add_values(table, data):
    """Add the plain values of ``data`` (no tables) to a fresh ``table``, in time linear in their number.

    tomlkit's ``add`` looks through the whole table for the last value before
    its sub-tables on every call: a 10,000-key options table took a minute.
    The table is fresh and holds no sub-table yet, so each value simply goes
    last, which is what tomlkit's parser does (parsing mode).
    """
    container = table.value
    container.parsing(True)
    try:
        for key, value in data.items():
            if not isinstance(value, dict) and not (isinstance(value, list) and any(isinstance(v, dict) for v in value)):
                table.append(key, value)
    finally:
        container.parsing(False)
    for key, value in data.items():
        if isinstance(value, list) and any(isinstance(v, dict) for v in value):
            table.add(key, value)


def table_from_dict(data, super_table=False):
    """A fresh tomlkit table from plain data, sub-dicts as sub-tables after the keys."""
    table = tomlkit.table(is_super_table=super_table)
    _add_values(table, data)
    for key, value in data.items():
        if isinstance(value, dict):
            table.add(key, table_from_dict(value))
    return table


def _indent_table(table, header, step, key_offset):
    table.trivia.indent = "\n" + header  # a blank line, then the header
    for key, item in table.value.body:
        if key is None or isinstance(item, Whitespace):
            continue
        if isinstance(item, Table):
            _indent_table(item, header + step, step, key_offset)
        else:
            item.trivia.indent = header + key_offset


def add_fresh_table(doc, path, data):
    """Add plain ``data`` as the table at ``path``, indented like the document around it."""
    ensure_path(doc, path[:-1])
    header, step, offset = _style(doc, path)
    added = put_at(doc, path[:-1], path[-1], table_from_dict(data))
    if isinstance(added, Table) and (header or offset):
        _indent_table(added, header, step, offset)
    return added


def _is_dotted(key):
    return key is not None and hasattr(key, "is_dotted") and key.is_dotted()


def _canonical_table(data):
    """Plain ``data`` as [header] tables (a header only where the table holds values of its own)."""
    table = table_from_dict({}, super_table=all(isinstance(v, dict) for v in data.values()) and bool(data))
    _add_values(table, data)
    for key, value in data.items():
        if isinstance(value, dict):
            table.add(key, _canonical_table(value))
    return table


def _is_header_table(item_key, item):
    return isinstance(item, (Table, AoT)) and item_key is not None and not _is_dotted(item_key)


def _refill(container, items):
    """Put ``items`` in ``container`` as tomlkit's parser does (in parsing mode), its own dict view too."""
    dict.clear(container)
    container.__init__(True)
    for item_key, item in items:
        container.append(item_key, item)
    container.parsing(False)


def _rebuild_dotted(owner, key):
    """Write the dotted keys of ``owner`` (the document or a table) that start with ``key`` as [header] tables.

    tomlkit cannot add a table below dotted keys (``a.b.c = 1``): the new
    [header] is written among the dotted lines, and the lines after it then
    belong to the new table. Those dotted lines are taken out and their data
    goes back as tables just before the first [header] table of ``owner``
    (where the dotted lines' part of the file ends); comment lines and every
    other item stay where they were.
    """
    container = owner.value if isinstance(owner, Table) else owner
    kept, data = [], {}
    for item_key, item in list(container.body):
        if item_key is not None and item_key.key == key and _is_dotted(item_key):
            data = deep_merge(data, {key: plain(item)})
        else:
            kept.append((item_key, item))
    if not data:
        return False
    first_table = next((index for index, (item_key, item) in enumerate(kept) if _is_header_table(item_key, item)),
                       len(kept))
    table = _canonical_table(data[key])
    if first_table < len(kept):
        table.trivia.trail = table.trivia.trail or "\n"
    _refill(container, kept[:first_table] + [(tomlkit.key(key), table)] + kept[first_table:])
    if owner is not container:
        dict.__setitem__(owner, key, container.item(key))  # the table's own view of its keys
    return True


def canonical_path(doc, path):
    """Make every table on ``path`` a [header] table (or an inline one) rather than dotted keys.

    Returns True when something was rewritten; what the document means is the
    same. The document is then read again from its own text, so that every
    tomlkit release (older ones keep merged copies of split tables) edits it
    as a file written that way.
    """
    changed = False
    for depth, key in enumerate(path):
        for owner in [doc] if depth == 0 else parts_at(doc, path[:depth]):
            if any(_is_dotted(k) and k.key == key for k, _item in _body(owner)):
                changed = _rebuild_dotted(owner, key) or changed
    if changed:
        _refill(doc, tomlkit.parse(tomlkit.dumps(doc)).body)
    return changed


class WriteMismatch(ConfigError):
    """The text about to be written does not read back as the document meant: an error of this collection."""


_MISSING = object()


def _first_difference(meant, written, where=()):
    """The key path where ``written`` first differs from ``meant``, as text."""
    if isinstance(meant, dict) and isinstance(written, dict):
        for key in list(meant) + [k for k in written if k not in meant]:
            if meant.get(key, _MISSING) != written.get(key, _MISSING):
                return _first_difference(meant.get(key, _MISSING), written.get(key, _MISSING), where + (key,))
    return ".".join(str(part) for part in where) or "(the whole document)"


def check_written(path, text, meant, loader):
    """``text`` when ``loader(text, path)`` gives ``meant`` (the data to be written); else WriteMismatch.

    A writer (tomlkit, or this collection's edit of its document) that produces
    text meaning something else than the edited document would change settings
    nobody asked to change; nothing is written then.
    """
    written = loader(text, path)
    if written != meant:
        raise WriteMismatch(
            "%s: the new text would not mean what was planned (it differs at %s). This is an error of "
            "gpuops.platform, not of the file: nothing was changed. Please report it with the file's layout "
            "(keys and tables, values may be left out)." % (path, _first_difference(meant, written)))
    return text


def dump_checked(doc, path):
    """The text of tomlkit ``doc``, checked to read back as ``doc``'s data (see :func:`check_written`)."""
    return check_written(path, dump_toml(doc), plain(doc), load_plain)


def is_real_table(item):
    """True for a ``[header]`` table (not an inline table or dotted keys we cannot copy as is)."""
    return isinstance(item, Table) and not item.is_super_table()
