# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The controller's guards for the JSON and YAML documents it reads. Private to the collection.

Every document the controller reads from outside (recorded facts records,
replay files, MIG config files) or from its own earlier output (the previous
plan.json) goes through here: its path holds no NUL byte, its size and its
nesting depth are checked *before* it is parsed (a document nested
100,000 levels deep would otherwise end the run in a RecursionError), and
each error names the file and the limit. Paths built from outside input (a
file named after an inventory host) stay inside their folder.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
from itertools import accumulate

from ansible_collections.gpuops.platform.plugins.module_utils._common import input_guard
from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as nvml

# Nesting levels: the deepest field of a facts record is about 8 levels down, of plan.json about 10.
MAX_DEPTH = 64
# A recorded facts file or a MIG config is at most a few hundred KiB.
MAX_BYTES = nvml.MAX_REPLAY_BYTES
# plan.json of a fleet of 20,000 nodes is tens of MiB.
MAX_PLAN_BYTES = 512 * 1024 * 1024

_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
# A YAML single-quoted scalar ('' is a quote within it): its brackets are text.
_SINGLE_QUOTED = re.compile(r"'[^']*'")
# How far past the depth limit the brackets of a YAML text may go before it is refused unparsed (text in plain
# scalars may hold brackets too).
YAML_FLOW_SLACK = 4


class _Keep(dict):
    """str.translate's table that keeps brackets and quotes and drops every other character."""

    def __missing__(self, key):
        self[key] = None if chr(key) not in '[]{}"' else key
        return self[key]


_KEEP = _Keep()


class DocumentError(ValueError):
    """A document (or a path to one) the controller refuses to read, with the file, the limit and what to do."""


def refuse_nul(path, what):
    """``path`` as text; raises DocumentError when it holds a NUL byte (no file is named so)."""
    path = path if isinstance(path, str) else str(path)
    if "\0" in path:
        raise DocumentError("%s %r is not a path: it holds a NUL byte" % (what, path))
    return path


def inside(folder, name, suffix, what):
    """``<folder>/<name><suffix>``, refused unless ``name`` is one file name that keeps the path in ``folder``.

    ``what`` says where ``name`` comes from (an inventory host name, for example).
    """
    folder, name = str(folder), str(name)
    if not name or "\0" in name or "/" in name or (os.altsep and os.altsep in name) or name in (".", ".."):
        raise DocumentError("%s %r cannot name a file in %s: it must be one file name, without '/', NUL or "
                            "'..' (rename it in the inventory)" % (what, name, folder))
    base = os.path.normpath(folder)
    path = os.path.normpath(os.path.join(base, name + suffix))
    if os.path.dirname(path) != base:  # a defence in depth: the checks above already keep it there
        raise DocumentError("%s %r would name %s, outside %s" % (what, name, path, folder))
    return path


def _structure(text):
    """The brackets of JSON ``text`` outside its strings, in order (each step in C: 20,000 hosts' plan.json is large)."""
    # Escaped backslashes, then escaped quotes: what is left of the quotes opens and closes the strings.
    text = text.replace("\\\\", "").replace('\\"', "").translate(_KEEP)
    return "".join(text.split('"')[::2])


def json_depth(text):
    """The nesting depth of JSON ``text`` without parsing it (brackets outside strings)."""
    # Each bracket as +1 or -1, summed as it goes: the deepest running sum.
    return max(accumulate(map(_STEP.__getitem__, _structure(text))), default=0)


def depth(value, stop=MAX_DEPTH):
    """The nesting depth of a parsed value (lists and mappings), without recursion; stops past ``stop``.

    A container used in several places (a YAML alias) is walked once.
    """
    return input_guard.shape(value, max_depth=stop)[0]


def _too_deep(what, limit):
    return DocumentError("%s is nested more than %d levels deep, deeper than any such document: it is damaged "
                         "or not one; record or write it again" % (what, limit))


class ExpansionError(DocumentError):
    """A document whose aliases repeat so much that, written out, it would hold more values than allowed."""


def check_shape(value, what, limit=MAX_DEPTH, children=input_guard.data_children, key_of=None):
    """``value`` (parsed data, or YAML nodes with their ``children``): refused when too deep or too large written out.

    ``key_of(value)`` gives ``[(key, child)]`` of the top mapping, to name the key that expands.
    """
    found, values, distinct = input_guard.shape(value, children, max_depth=limit)
    if found > limit:
        raise _too_deep(what, limit)
    if values > input_guard.expansion_budget(distinct):
        sizes = [(input_guard.shape(child, children)[1], key) for key, child in (key_of(value) if key_of else ())]
        raise ExpansionError("%s. Nothing was changed; write the values out, or use fewer aliases of aliases, and "
                             "run again." % input_guard.expansion_message(
                                 what, distinct, max(sizes, key=lambda pair: pair[0])[1] if sizes else None))
    return value


def _top_keys(value):
    return list(value.items()) if isinstance(value, dict) else []


def check_depth(value, what, limit=MAX_DEPTH):
    """``value`` (already parsed, e.g. a fact from Ansible's fact cache); raises DocumentError when too deep,
    or when its shared parts (YAML aliases) would make it too large written out."""
    return check_shape(value, what, limit, key_of=_top_keys)


def unique_keys(what):
    """An ``object_pairs_hook`` for json.loads that refuses a key given twice in one object, naming it and ``what``."""
    return input_guard.unique_keys_hook(what, DocumentError)


def loads_json(text, what, max_depth=MAX_DEPTH):
    """The JSON document in ``text``: its depth checked first; raises DocumentError naming ``what``."""
    if json_depth(text) > max_depth:
        raise _too_deep(what, max_depth)
    try:
        return json.loads(text, object_pairs_hook=unique_keys(what))
    except DocumentError:
        raise
    except ValueError as exc:  # a number too long to convert is a ValueError too
        raise DocumentError("%s is not JSON: %s" % (what, exc))
    except RecursionError:  # the check above counts every bracket: not reached, but never a bare error
        raise _too_deep(what, max_depth)


def read_text(path, what, max_bytes=MAX_BYTES):
    """The UTF-8 text of the file ``path`` (``what`` names it); its size is checked before it is read."""
    path = refuse_nul(path, what)
    try:
        return nvml.read_text_file(path, what, max_bytes)
    except nvml.ReplayError as exc:
        raise DocumentError(str(exc))


def read_json(path, what, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH):
    """``(text, document)`` of the JSON file ``path``, size and depth checked before it is parsed."""
    text = read_text(path, what, max_bytes)
    return text, loads_json(text, "%s %s" % (what, path), max_depth)


def _node_children(node):
    """The nodes inside a composed YAML node (keys and values of a mapping, items of a sequence), None for a scalar."""
    value = node.value
    if isinstance(value, list):
        return [part for item in value for part in (item if isinstance(item, tuple) else (item,))]
    return None


def _node_keys(node):
    value = node.value if isinstance(node.value, list) else []
    return [(key.value, child) for key, child in (item for item in value if isinstance(item, tuple))
            if isinstance(key.value, str)]


def compose_yaml(text, where, max_depth=MAX_DEPTH):
    """The YAML node graph of ``text`` (aliases are the node they name), checked before anything is built from it.

    Its depth and its size written out are counted, each shared node once: a
    kilobyte of aliases of aliases would otherwise build, compare or template
    billions of values. Tags are not read (Ansible's ``!vault`` and ``!unsafe`` are fine here).
    """
    import yaml  # the controller always has PyYAML (ansible-core needs it)

    # PyYAML takes seconds to scan a few thousand nested flow brackets: far more of them than the limit (quoted
    # text aside) is refused at once; the parser's events count the rest exactly.
    if json_depth(_SINGLE_QUOTED.sub("", text)) > YAML_FLOW_SLACK * max_depth:
        raise _too_deep(where, max_depth)
    try:
        # The parser's events, without building anything (it keeps a stack, not Python recursion).
        level = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                level += 1
                if level > max_depth:
                    raise _too_deep(where, max_depth)
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                level -= 1
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise DocumentError("%s is neither JSON nor YAML: %s" % (where, exc))
    if node is not None:
        check_shape(node, where, max_depth, _node_children, _node_keys)
    return node


def read_yaml(path, what, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH):
    """The YAML (or JSON) document in ``path``, size, depth and size written out checked before it is built."""
    import yaml  # the controller always has PyYAML (ansible-core needs it)

    text = read_text(path, what, max_bytes)
    where = "%s %s" % (what, path)
    node = compose_yaml(text, where, max_depth)
    if node is None:
        return None
    try:
        loader = yaml.SafeLoader("")
        try:
            data = loader.construct_document(node)
        finally:
            loader.dispose()
        # An alias can still make a mapping hold itself: that is refused as too deep here.
        return check_depth(data, where, max_depth)
    except yaml.YAMLError as exc:
        raise DocumentError("%s is neither JSON nor YAML: %s" % (where, exc))
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, DocumentError):
            raise
        raise DocumentError("%s cannot be read as YAML: %s" % (where, exc))
