"""Every role README's variables section is what its meta/argument_specs.yml generates."""
import subprocess
import sys

from conftest import ROOT


def test_role_readmes_are_current():
    result = subprocess.run([sys.executable, "scripts/role_readmes.py", "--check"], cwd=ROOT,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_every_role_readme_has_the_generated_block():
    from_specs = sorted(p.parent.parent.name for p in ROOT.glob("roles/*/meta/argument_specs.yml"))
    assert from_specs
    for role in from_specs:
        text = (ROOT / "roles" / role / "README.md").read_text(encoding="utf-8")
        assert "<!-- BEGIN: generated from meta/argument_specs.yml" in text, role
