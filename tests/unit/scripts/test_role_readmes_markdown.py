"""scripts/role_readmes.py: argument specs to the generated README block."""
import importlib.util

import pytest
import yaml

from conftest import ROOT

_SPEC = importlib.util.spec_from_file_location("role_readmes", ROOT / "scripts" / "role_readmes.py")
role_readmes = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(role_readmes)


@pytest.mark.parametrize("text, markdown", [
    ("C(gpu_nodes)", "`gpu_nodes`"),
    ("I(emphasis)", "*emphasis*"),
    ("V(NoSchedule)", "`NoSchedule`"),
    ("O(gpu_health_cordon)", "`gpu_health_cordon`"),
    ("O(foo=bar)", "`foo=bar`"),
    ("M(gpuops.platform.nvml_facts)", "`gpuops.platform.nvml_facts`"),
    ("B(never)", "**never**"),
    ("U(https://example.com/x)", "<https://example.com/x>"),
    ("L(the guide, https://example.com/g)", "[the guide](https://example.com/g)"),
    ("a C(x) and C(y) b", "a `x` and `y` b"),
    ("C(has `tick`)", "`` has `tick` ``"),
    ("<role>_ names", "&lt;role>_ names"),
    ("gpuops_* variables", r"gpuops_\* variables"),
    ("ABC(x) and LC(y)", "ABC(x) and LC(y)"),
])
def test_markup(text, markdown):
    assert role_readmes.markup(text) == markdown


@pytest.mark.parametrize("value, shown", [
    ("", '`""`'),
    ("gpu_nodes", "`gpu_nodes`"),
    ([], "`[]`"),
    ({}, "`{}`"),
    (["/"], '`["/"]`'),
    ({"a": 1, "b": [True]}, '`{"a": 1, "b": [true]}`'),
    (True, "`true`"),
    (False, "`false`"),
    (0, "`0`"),
    (1.5, "`1.5`"),
    (None, "`null`"),
])
def test_render_value(value, shown):
    assert role_readmes.render_value(value) == shown


def _table_row(text, name):
    rows = [line for line in text.splitlines() if line.startswith("| `%s` |" % name)]
    assert len(rows) == 1, text
    return [c.strip() for c in rows[0].strip("|").split(" | ")]


def test_option_rows():
    specs = yaml.safe_load("""
argument_specs:
  main:
    short_description: The C(demo) role
    options:
      demo_needed:
        type: str
        required: true
        description: Must be set.
      demo_unset:
        type: bool
        description: [No default., "Second paragraph with a | bar."]
      demo_empty:
        type: str
        default: ""
        description: Empty string.
      demo_list:
        type: list
        elements: str
        default: []
        description: Empty list.
      demo_mode:
        type: str
        default: fast
        choices: [fast, slow]
        description: Mode.
      demo_secret:
        type: str
        no_log: true
        default: ""
        description: Password.
      demo_items:
        type: list
        elements: dict
        default: [{name: a}]
        description: Items.
        options:
          name:
            type: str
            required: true
            description: Item name.
""")
    text = role_readmes.generate(specs)
    assert _table_row(text, "demo_needed") == ["`demo_needed`", "str, required", "", "Must be set."]
    assert _table_row(text, "demo_unset") == [
        "`demo_unset`", "bool", "", r"No default. Second paragraph with a \| bar."]
    assert _table_row(text, "demo_empty")[2] == '`""`'
    assert _table_row(text, "demo_list")[1:3] == ["list of str", "`[]`"]
    assert _table_row(text, "demo_mode")[3] == "Mode. Choices: `fast`, `slow`."
    assert _table_row(text, "demo_secret")[1] == "str, secret (not logged)"
    assert _table_row(text, "demo_items")[1:3] == ["list of dict", '`[{"name": "a"}]`']
    assert _table_row(text, "demo_items[].name")[1:4] == ["str, required", "", "Item name."]
    assert "The `demo` role" in text
    assert "None" not in text and "null" not in text


def test_long_default_goes_below_the_table():
    value = [{"xid": n, "severity": "critical"} for n in range(10)]
    specs = {"argument_specs": {"main": {"options": {"demo_xids": {
        "type": "list", "elements": "dict", "default": value, "description": "XIDs."}}}}}
    text = role_readmes.generate(specs)
    assert _table_row(text, "demo_xids")[2] == "see below"
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert yaml.safe_load(block) == {"demo_xids": value}


def test_entry_points_that_share_main():
    main = {"short_description": "Main", "options": {"demo_a": {"type": "int", "default": 1, "description": "A."}}}
    other = {"short_description": "Other", "options": {"demo_b": {"type": "int", "default": 2, "description": "B."}}}
    text = role_readmes.generate({"argument_specs": {
        "main": main, "plan": main, "apply": dict(main), "report": other}})
    assert "Entry points `plan` and `apply` take the same variables as `main`." in text
    assert "### Entry point `plan`" not in text
    assert "### Entry point `report`" in text
    assert text.index("### Entry point `main`") < text.index("### Entry point `report`")
    assert _table_row(text, "demo_b")[2] == "`2`"

    one = role_readmes.generate({"argument_specs": {"main": main, "facts": main}})
    assert "Entry point `facts` takes the same variables as `main`." in one


def test_entry_point_without_options():
    text = role_readmes.generate({"argument_specs": {"main": {"short_description": "Nothing"}}})
    assert "No variables." in text


def test_render_readme_keeps_hand_written_parts():
    body = "generated\n"
    original = "# role\n\nIntro.\n\n## Variables\n\n%s\nold\n%s\n\nAfter.\n" % (
        role_readmes.BEGIN, role_readmes.END)
    new = role_readmes.render_readme(original, body)
    assert new == "# role\n\nIntro.\n\n## Variables\n\n%s\n\ngenerated\n\n%s\n\nAfter.\n" % (
        role_readmes.BEGIN, role_readmes.END)
    assert role_readmes.render_readme(new, body) == new


def test_render_readme_adds_a_section_before_the_example():
    new = role_readmes.render_readme("# role\n\nIntro.\n\n## Example\n\nx\n", "generated\n")
    assert new.index("## Variables") < new.index(role_readmes.BEGIN) < new.index("## Example")
    assert new.startswith("# role\n\nIntro.\n\n")
    assert new.endswith("## Example\n\nx\n")


def test_render_readme_refuses_a_begin_without_end():
    with pytest.raises(ValueError):
        role_readmes.render_readme("# r\n%s\nno end\n" % role_readmes.BEGIN, "x\n")


def _role(tmp_path, readme):
    role = tmp_path / "demo"
    (role / "meta").mkdir(parents=True)
    (role / "meta" / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n      demo_a:\n        type: int\n        default: 1\n"
        "        description: A.\n")
    (role / "README.md").write_text(readme)
    return role


def test_check_names_the_stale_readme_and_the_command(tmp_path, capsys):
    role = _role(tmp_path, "# demo\n")
    assert role_readmes.main(["--check", str(role)]) == 1
    err = capsys.readouterr().err
    assert str(role / "README.md") in err
    assert role_readmes.COMMAND in err
    assert (role / "README.md").read_text() == "# demo\n"

    assert role_readmes.main([str(role)]) == 0
    assert "| `demo_a` | int | `1` | A. |" in (role / "README.md").read_text()
    assert role_readmes.main(["--check", str(role)]) == 0
    mtime = (role / "README.md").stat().st_mtime_ns
    assert role_readmes.main([str(role)]) == 0
    assert (role / "README.md").stat().st_mtime_ns == mtime
