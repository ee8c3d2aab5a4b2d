"""Write the variables section of each role's README.md from its meta/argument_specs.yml.

The generated part sits between BEGIN and END markers; everything else in the
README is hand-written and left as it is. A README without markers gets them in
its "## Variables" section, or in a new one before "## Example" (or at the end).

    python scripts/role_readmes.py            # rewrite the stale READMEs
    python scripts/role_readmes.py --check    # exit 1 naming the stale READMEs
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
COMMAND = "python scripts/role_readmes.py"
BEGIN = "<!-- BEGIN: generated from meta/argument_specs.yml by %s, do not edit -->" % COMMAND
END = "<!-- END: generated from meta/argument_specs.yml -->"
# A list or dict default longer than this goes into a YAML block below the table, not into a cell.
INLINE_DEFAULT_MAX = 80

_MARKUP = re.compile(
    r"\b(?:(?P<fn>[CIVOBEM]|RV)\((?P<arg>[^)]*)\)"
    r"|U\((?P<url>[^)]*)\)"
    r"|L\((?P<ltext>[^,)]*),(?P<lurl>[^)]*)\))"
    r"|\bHORIZONTALLINE\b"
)


def code(text: str) -> str:
    """A Markdown code span that survives backticks in the text."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return "%s%s%s%s%s" % (fence, pad, text, pad, fence)


def _plain(text: str) -> str:
    # GitHub would read <role> as an HTML tag and a lone * as emphasis.
    return text.replace("<", "&lt;").replace("*", r"\*")


def markup(text: str) -> str:
    """Ansible doc markup (C(), I(), V(), O(), U(), L(), M(), B(), E(), RV()) as Markdown."""
    out = []
    pos = 0
    for match in _MARKUP.finditer(text):
        out.append(_plain(text[pos:match.start()]))
        pos = match.end()
        fn = match.group("fn")
        if fn in ("C", "V", "O", "E", "M", "RV"):
            out.append(code(match.group("arg")))
        elif fn == "I":
            out.append("*%s*" % _plain(match.group("arg")))
        elif fn == "B":
            out.append("**%s**" % _plain(match.group("arg")))
        elif match.group("url") is not None:
            out.append("<%s>" % match.group("url").strip())
        elif match.group("lurl") is not None:
            out.append("[%s](%s)" % (_plain(match.group("ltext").strip()), match.group("lurl").strip()))
        else:
            out.append("---")
    out.append(_plain(text[pos:]))
    return "".join(out)


def paragraphs(description) -> list:
    if description is None:
        return []
    if isinstance(description, str):
        description = [description]
    return [" ".join(markup(str(p)).split()) for p in description]


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", r"\|")


def render_value(value) -> str:
    """A default or choice as Markdown: a code span of its YAML/JSON form."""
    if isinstance(value, bool):
        return code("true" if value else "false")
    if value is None:
        return code("null")
    if isinstance(value, str):
        return code(value) if value else code('""')
    if isinstance(value, (list, dict)):
        return code(json.dumps(value, sort_keys=False, ensure_ascii=False))
    return code(str(value))


def _type(spec: dict) -> str:
    kind = spec.get("type", "str")
    text = kind
    if spec.get("elements"):
        text = "%s of %s" % (kind, spec["elements"])
    if spec.get("required"):
        text += ", required"
    if spec.get("no_log"):
        text += ", secret (not logged)"
    return text


def _rows(options: dict, prefix: str, long_defaults: list) -> list:
    rows = []
    for name, spec in options.items():
        spec = spec or {}
        full = prefix + name
        if "default" not in spec:
            default = ""
        else:
            shown = render_value(spec["default"])
            if isinstance(spec["default"], (list, dict)) and len(shown) > INLINE_DEFAULT_MAX:
                long_defaults.append((full, spec["default"]))
                default = "see below"
            else:
                default = shown
        text = " ".join(paragraphs(spec.get("description")))
        if spec.get("choices"):
            choices = "Choices: %s." % ", ".join(render_value(c) for c in spec["choices"])
            text = "%s %s" % (text, choices) if text else choices
        rows.append("| %s | %s | %s | %s |" % (cell(code(full)), cell(_type(spec)), cell(default), cell(text)))
        sub = spec.get("options") or spec.get("suboptions")
        if sub:
            nested = full + ("[]." if spec.get("type") == "list" else ".")
            rows.extend(_rows(sub, nested, long_defaults))
    return rows


def options_table(options: dict) -> list:
    if not options:
        return ["No variables."]
    long_defaults: list = []
    lines = ["| variable | type | default | description |", "|---|---|---|---|"]
    lines.extend(_rows(options, "", long_defaults))
    for name, value in long_defaults:
        dumped = yaml.safe_dump({name: value}, default_flow_style=False, sort_keys=False, width=100)
        lines.extend(["", "Default of %s:" % code(name), "", "```yaml", dumped.rstrip("\n"), "```"])
    return lines


def _names(names: list) -> str:
    quoted = [code(n) for n in names]
    if len(quoted) == 1:
        return quoted[0]
    return "%s and %s" % (", ".join(quoted[:-1]), quoted[-1])


def generate(specs: dict) -> str:
    """The generated block's body (without markers) for one role's argument_specs mapping."""
    entries = specs.get("argument_specs") or {}
    main = entries.get("main")
    order = (["main"] if main is not None else []) + [n for n in entries if n != "main"]
    same = [n for n in order if n != "main" and main is not None and entries[n] == main]
    lines: list = []
    for name in order:
        if name in same:
            continue
        spec = entries[name] or {}
        lines.extend(["### Entry point %s" % code(name), ""])
        if spec.get("short_description"):
            lines.extend([markup(" ".join(str(spec["short_description"]).split())), ""])
        for para in paragraphs(spec.get("description")):
            lines.extend([para, ""])
        if name == "main" and same:
            lines.extend(["%s %s %s the same variables as %s." % (
                "Entry points" if len(same) > 1 else "Entry point", _names(same),
                "take" if len(same) > 1 else "takes", code("main")), ""])
        lines.extend(options_table(spec.get("options") or {}))
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def render_readme(current: str, body: str) -> str:
    """The README with its generated block replaced by body (markers added where missing)."""
    block = "%s\n\n%s\n%s" % (BEGIN, body, END)
    start = current.find(BEGIN)
    if start != -1:
        stop = current.find(END, start)
        if stop == -1:
            raise ValueError("BEGIN marker without END marker")
        return current[:start] + block + current[stop + len(END):]
    heading = re.search(r"^## (?:Role )?[Vv]ariables[^\n]*\n", current, re.M)
    if heading:
        at = heading.end()
        return current[:at] + "\n" + block + "\n" + current[at:]
    section = "## Variables\n\n" + block + "\n"
    example = re.search(r"^## Examples?\b", current, re.M)
    if example:
        return current[:example.start()] + section + "\n" + current[example.start():]
    return current.rstrip("\n") + "\n\n" + section


def role_dirs(paths: list) -> list:
    if paths:
        return [Path(p) for p in paths]
    return sorted(p.parent.parent for p in (ROOT / "roles").glob("*/meta/argument_specs.yml"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a README is stale")
    parser.add_argument("roles", nargs="*", help="role directories (default: every role under roles/)")
    args = parser.parse_args(argv)
    stale = []
    for role in role_dirs(args.roles):
        with open(role / "meta" / "argument_specs.yml", encoding="utf-8") as handle:
            specs = yaml.safe_load(handle) or {}
        readme = role / "README.md"
        current = readme.read_text(encoding="utf-8") if readme.exists() else "# %s\n" % role.name
        wanted = render_readme(current, generate(specs))
        if wanted == current:
            continue
        stale.append(readme)
        if not args.check:
            readme.write_text(wanted, encoding="utf-8")
            print("wrote %s" % readme)
    if args.check and stale:
        for readme in stale:
            print("stale: %s" % readme, file=sys.stderr)
        print("%d role README(s) differ from meta/argument_specs.yml; run: %s" % (len(stale), COMMAND),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
