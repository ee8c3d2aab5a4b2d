"""Write the shared release options into every add-on role's argument specs.

The options are defined once, in roles/k8s_apply/meta/release_options.yml.
An add-on role is one whose defaults/main.yml sets <role>_manage_release; its
meta/argument_specs.yml gets those options (description and type from the
shared file, default from the role's defaults) in its main entry point, which
plan and apply share.

    python scripts/release_specs.py          # rewrite the specs that differ
    python scripts/release_specs.py --check  # exit 1, naming them, if any differ
"""
import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / "roles" / "k8s_apply" / "meta" / "release_options.yml"
HEADER = ("---\n# The release options (<role>_enabled ... <role>_layer_order) are written by\n"
          "# scripts/release_specs.py from roles/k8s_apply/meta/release_options.yml: edit them there.\n")


class _Dumper(yaml.SafeDumper):
    """Block style, no sorting, main/plan/apply as one anchored spec."""

    def ignore_aliases(self, data):
        return not isinstance(data, dict) or "options" not in data

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def _str(dumper, value):
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def addon_roles(root=None):
    """Roles whose defaults set <role>_manage_release, sorted."""
    root = root or ROOT
    out = []
    for base in sorted((root / "roles").iterdir()):
        defaults = base / "defaults" / "main.yml"
        if defaults.is_file() and (base.name + "_manage_release") in (yaml.safe_load(defaults.read_text()) or {}):
            out.append(base.name)
    return out


def shared_options(role, defaults):
    """The shared options with <role> and <default> filled in for one role."""
    out = {}
    for key, spec in yaml.safe_load(SHARED.read_text()).items():
        name = key.replace("<role>", role)
        if name not in defaults:
            raise SystemExit("%s: defaults/main.yml lacks %s (roles/k8s_apply/meta/release_options.yml)" % (role, name))
        default = defaults[name]
        filled = {"type": spec["type"], "default": default}
        filled["description"] = spec["description"].replace("<role>", role).replace("<default>", str(default))
        out[name] = filled
    return out


def expected_specs(role):
    """The role's argument specs with the shared options in place (a dict)."""
    base = ROOT / "roles" / role
    defaults = yaml.safe_load((base / "defaults" / "main.yml").read_text()) or {}
    specs = yaml.safe_load((base / "meta" / "argument_specs.yml").read_text())
    entries = specs["argument_specs"]
    main = entries["main"]
    shared = shared_options(role, defaults)
    options = {}
    # Shared options first, in the shared order; then the role's own, in theirs.
    options.update(shared)
    for name, spec in (main.get("options") or {}).items():
        if name not in shared:
            options[name] = spec
    old_main, main = main, dict(main, options=options)
    # plan, apply and any other entry point that shares main's spec (an alias in the file) get the new one.
    entries = {name: (main if name in ("main", "plan", "apply") or spec == old_main else spec)
               for name, spec in entries.items()}
    return {"argument_specs": entries}


def dump(role, specs):
    text = yaml.dump(specs, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120, allow_unicode=True)
    return HEADER + text.replace("&id001", "&%s_spec" % role).replace("*id001", "*%s_spec" % role)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a spec is stale")
    args = parser.parse_args(argv)
    stale = []
    for role in addon_roles():
        path = ROOT / "roles" / role / "meta" / "argument_specs.yml"
        want = dump(role, expected_specs(role))
        if path.read_text() != want:
            stale.append(str(path.relative_to(ROOT)))
            if not args.check:
                path.write_text(want)
    if stale and args.check:
        print("stale release options (run python scripts/release_specs.py):\n  " + "\n  ".join(stale))
        return 1
    for name in stale:
        print("wrote " + name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
