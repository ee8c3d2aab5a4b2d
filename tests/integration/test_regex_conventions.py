"""One rule for the regular expressions of plugins/ and roles/ that validate strings from outside.

A pattern matches the whole string: ``re.fullmatch`` or ``\\Z``, never a bare
``$`` (which also matches before a trailing newline, so "570\\n" passes
``^[0-9]{3}$``); and its digits are ASCII: ``[0-9]`` or ``re.ASCII``, never
``\\d`` alone (which takes "５７０" and "٥٧٠"). Jinja's ``match`` test anchors only
at the start, so a role's pattern ends in ``\\Z`` too.

This scans every pattern it can see: the literal first argument of ``re.*``
calls, module-level pattern constants (a string starting with ``^``), and the
patterns of Jinja's match/search/regex tests and regex_* filters in the roles'
and plugins' YAML. A pattern that only searches, splits or rewrites (it decides
nothing about the input's validity) may keep a ``$`` through ALLOWED, with why.
"""
import ast
import functools
import re

import pytest

from conftest import ROOT

RE_FUNCTIONS = {"compile", "match", "search", "fullmatch", "sub", "subn", "split", "findall", "finditer"}

# (file, pattern): why the pattern may break the rule. Only for patterns that do not validate.
ALLOWED = {
    ("roles/container_toolkit/vars/main.yml", "$"):
        "appends the version to the collection's own package names (regex_replace); validates nothing",
    ("roles/k8s_addons/vars/main.yml", "$"):
        "appends _enabled to the collection's own role names (regex_replace); validates nothing",
    ("plugins/module_utils/_k8s/upgrade.py", r"(?m)^---[ \t]*$"):
        "splits helm template's output into its documents at line ends (multiline); validates nothing",
    ("plugins/module_utils/_k8s/upgrade.py", r"(?m)^# Source: ([^\n]+)$"):
        "finds the Source line helm heads each document with (multiline search); validates nothing",
    ("plugins/module_utils/_k8s/upgrade.py", r"(?m)^kind:\s*CustomResourceDefinition\s*$"):
        "finds a CRD's kind line in a rendered document (multiline search); validates nothing",
}

_JINJA_PATTERN = re.compile(
    r"""(?:\bis\s+(?:not\s+)?(?:match|search|regex)\s*\(\s*"""
    r"""|\b(?:select|reject|selectattr|rejectattr)\s*\([^()]*?['"](?:match|search|regex)['"]\s*,\s*"""
    r"""|\bregex_(?:search|replace|findall)\s*\(\s*"""
    r"""|\bmap\s*\(\s*['"]regex_(?:search|replace|findall)['"]\s*,\s*)"""
    r"""(?P<quote>['"])(?P<pattern>.*?)(?<!\\)(?P=quote)""")


def rule_breaks(pattern, ascii_flag=False):
    """What in ``pattern`` breaks the rule: a ``$`` anchor, ``\\d``/``\\D`` without re.ASCII."""
    found = []
    escaped = in_class = False
    for char in pattern:
        if escaped:
            if char in "dD" and not ascii_flag:
                found.append("\\%s matches non-ASCII digits: use [0-9] or re.ASCII" % char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            found.append("$ also matches before a trailing newline: use \\Z or re.fullmatch")
    return sorted(set(found))


def _flags_ascii(call):
    rest = [ast.unparse(a) for a in call.args[1:]] + [ast.unparse(k.value) for k in call.keywords]
    return any(re.search(r"\bre\.(ASCII|A)\b", text) for text in rest)


def python_patterns(path):
    """(line, pattern, ascii) of every pattern literal in a Python file."""
    tree = ast.parse(path.read_text(), str(path))
    for node in sorted(ast.walk(tree), key=lambda n: getattr(n, "lineno", 0)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RE_FUNCTIONS
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.lineno, node.args[0].value, _flags_ascii(node)
        elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
              and node.value.value.startswith("^") and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets)):
            yield node.lineno, node.value.value, False


def yaml_patterns(path):
    """(line, pattern, False) of every pattern of a Jinja regex test or filter in a YAML or template file."""
    text = path.read_text()
    for match in _JINJA_PATTERN.finditer(text):
        yield text.count("\n", 0, match.start()) + 1, match.group("pattern"), False


@functools.lru_cache(maxsize=None)
def all_patterns():
    """``(file, line, pattern, ascii)`` of every pattern of plugins/ and roles/ (read once per run)."""
    return tuple(_scan())


def _scan():
    for folder in ("plugins", "roles"):
        for path in sorted((ROOT / folder).rglob("*")):
            if not path.is_file():
                continue
            if path.suffix == ".py":
                found = python_patterns(path)
            elif path.suffix in (".yml", ".yaml", ".j2"):
                found = yaml_patterns(path)
            else:
                continue
            for line, pattern, ascii_flag in found:
                yield str(path.relative_to(ROOT)), line, pattern, ascii_flag


def test_no_pattern_breaks_the_rule():
    broken = []
    for name, line, pattern, ascii_flag in all_patterns():
        problems = rule_breaks(pattern, ascii_flag)
        if problems and (name, pattern) not in ALLOWED:
            broken.append("%s:%d %r: %s" % (name, line, pattern, "; ".join(problems)))
    assert broken == [], "patterns that validate outside strings must match all of it, in ASCII digits:\n" + \
        "\n".join(broken)


def test_every_allowed_pattern_is_still_there():
    """An entry of the allow-lists whose pattern is gone is removed, so none outlives its reason."""
    seen = set((name, pattern) for name, _line, pattern, _ascii in all_patterns())
    stale = sorted(set(ALLOWED) - seen)
    assert stale == []
    assert all(reason.strip() for reason in ALLOWED.values())


@pytest.mark.parametrize("pattern, ascii_flag, broken", [
    (r"^[0-9]{3}$", False, True),
    (r"^[0-9]{3}\Z", False, False),
    (r"^\d{3}\Z", False, True),
    (r"^\d{3}\Z", True, False),
    (r"^[$]\Z", False, False),        # a dollar sign in a class is a character
    (r"^\$[0-9]+\Z", False, False),   # and escaped
    (r"^\\d\Z", False, False),        # an escaped backslash, then d
    (r"(\D+)", False, True),
])
def test_the_rule_finds_what_it_says(pattern, ascii_flag, broken):
    assert bool(rule_breaks(pattern, ascii_flag)) is broken
    # What the rule guards against, in Python's own terms.
    if pattern == r"^[0-9]{3}$":
        assert re.match(pattern, "570\n") and not re.match(r"^[0-9]{3}\Z", "570\n")
    if pattern == r"^\d{3}\Z":
        assert re.match(pattern, "５７０") and not re.match(pattern, "５７０", re.ASCII)


def test_the_scan_sees_python_calls_constants_and_jinja_tests(tmp_path):
    source = tmp_path / "x.py"
    source.write_text('import re\nA = re.compile(r"^a$", re.ASCII)\nB = r"^\\d\\Z"\nre.sub(r"x$", "", y)\n')
    assert [(line, pattern) for line, pattern, _a in python_patterns(source)] == [(2, "^a$"), (3, "^\\d\\Z"), (4, "x$")]
    assert [a for _l, _p, a in python_patterns(source)] == [True, False, False]
    role = tmp_path / "main.yml"
    role.write_text("ok: >-\n  {{ a is match('^[0-9]+$') and b | reject('match', '^x$') | list\n"
                    "     and c | selectattr('k', 'search', 'y$') and d | regex_search('z$') }}\n")
    assert [p for _l, p, _a in yaml_patterns(role)] == ["^[0-9]+$", "^x$", "y$", "z$"]
