"""plugin_utils is the layer the filters, actions and lookups call: it never imports one of them back."""
import ast
from pathlib import Path

import pytest

PLUGIN_UTILS = Path(__file__).resolve().parents[4] / "plugins" / "plugin_utils"
UPPER = ("filter", "action", "lookup", "modules", "test")


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name


@pytest.mark.parametrize("path", sorted(PLUGIN_UTILS.glob("*.py")), ids=lambda p: p.name)
def test_plugin_utils_never_imports_a_plugin_above_it(path):
    upward = [m for m in _imports(path) if ".plugins." in m and m.split(".plugins.", 1)[1].split(".")[0] in UPPER]
    assert upward == [], "%s imports %s: move the code it needs into plugin_utils" % (path.name, upward)


def test_the_check_sees_an_upward_import(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text("from ansible_collections.gpuops.platform.plugins.filter import gpu_capacity\n")
    assert list(_imports(bad)) == ["ansible_collections.gpuops.platform.plugins.filter"]
    with pytest.raises(AssertionError, match="imports"):
        test_plugin_utils_never_imports_a_plugin_above_it(bad)
