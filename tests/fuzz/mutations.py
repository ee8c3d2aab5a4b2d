"""Structure-aware mutations of seeds, driven by a ``random.Random``.

Byte flips rarely turn a JSON or YAML document into another valid one, or a
TOML file into a valid file with its tables in another order, and those are
the inputs that reach the parsers' deeper code. Both engines use these: the
Hypothesis pass draws the ``Random`` (derandomized), atheris seeds it from
libFuzzer's custom-mutator seed.
"""
import json
import re

import yaml

# Values of every type, and the texts the parsers give meaning to.
VALUES = [None, True, False, 0, -1, 7, 2 ** 40, 1.5, "", "x", "0,1,2,3,4,5,6,7", "0;1", "\u00b2", "completed",
          "enabled", "disabled", "1g.10gb", "nan", "all", "0x233010DE", [], {}, [1], [None], {"a": 1}, {"": None}]
_HEADER = re.compile(rb"^[ \t]*\[", re.MULTILINE)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, prefix + (index,))


def mutate_document(document, rng):
    """A copy of ``document`` with one value replaced (by any type, or another part of it), or a key dropped."""
    paths = list(_paths(document))[1:]
    if not paths:
        return rng.choice(VALUES)
    doc = json.loads(json.dumps(document, default=str))
    path = rng.choice(paths)
    node = doc
    for key in path[:-1]:
        node = node[key]
    choice = rng.random()
    if isinstance(node, dict) and choice < 0.15:
        del node[path[-1]]
    elif isinstance(node, list) and choice < 0.3:
        node.insert(path[-1], json.loads(json.dumps(node[path[-1]])))  # a repeated item
    elif choice < 0.45:
        other = doc
        for key in rng.choice(paths)[:-1]:
            other = other[key]
        node[path[-1]] = json.loads(json.dumps(other))  # another part of the document (maybe itself)
    else:
        node[path[-1]] = json.loads(json.dumps(rng.choice(VALUES)))
    return doc


def _load(data):
    """(document, how to write it back) of JSON or YAML ``data``, or None."""
    try:
        return json.loads(data), lambda d: json.dumps(d).encode()
    except RecursionError:
        return None  # nested too deep to mutate by structure (the corpus holds such documents): bytes only
    except ValueError:
        pass
    try:
        doc = yaml.safe_load(data)
    except (yaml.YAMLError, ValueError, RecursionError):
        return None
    if not isinstance(doc, (dict, list)) or _expands(doc):
        return None  # aliases of aliases (the corpus holds such documents): written out they fill the memory
    return json.loads(json.dumps(doc, default=str)), lambda d: yaml.safe_dump(d).encode()


def _expands(doc):
    """Whether ``doc`` (as PyYAML built it, aliases shared) holds more values written out than the collection reads."""
    # The collection is on the path once targets is imported (tests/conftest.py): here, at the first mutation.
    from ansible_collections.gpuops.platform.plugins.module_utils._common import input_guard

    _depth, values, distinct = input_guard.shape(doc)
    return values > input_guard.expansion_budget(distinct)


def move_table(data, rng):
    """TOML ``data`` with one [table] (its header and lines) moved elsewhere: valid TOML, tables out of order."""
    starts = [m.start() for m in _HEADER.finditer(data)]
    if len(starts) < 2:
        return None
    bounds = starts + [len(data)]
    chunks = [data[:starts[0]]] + [data[bounds[i]:bounds[i + 1]] for i in range(len(starts))]
    chunks = [c if c.endswith(b"\n") else c + b"\n" for c in chunks]
    moved = chunks.pop(rng.randrange(1, len(chunks)))
    chunks.insert(rng.randrange(1, len(chunks) + 1), moved)
    return b"".join(chunks)


def mutate(data, rng, times=1):
    """``data`` mutated by structure (a document's values, a TOML file's table order), or None if it has none."""
    loaded = _load(data)
    for dummy in range(times):
        if loaded is not None:
            document, dump = loaded
            try:
                loaded = (mutate_document(document, rng), dump)
            except RecursionError:
                return None  # parsed, but too deep to walk (the corpus holds such documents): bytes only
        else:
            data = move_table(data, rng)
            if data is None:
                return None
    return loaded[1](loaded[0]) if loaded is not None else data
