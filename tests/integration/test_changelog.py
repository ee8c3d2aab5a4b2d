"""CHANGELOG.rst is what changelogs/changelog.yaml generates, and fragments follow antsibull-changelog's conventions."""
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT

FRAGMENTS = sorted((ROOT / "changelogs" / "fragments").glob("*.y*ml"))
# antsibull-changelog lists new modules, plugins and roles from their version_added.
NEW_OBJECT = re.compile(r"^[`\w., ]+ - new (module|role|action|filter|plugin|lookup)\b", re.I)


def test_changelog_rst_is_generated_from_changelog_yaml(tmp_path):
    (tmp_path / "changelogs").mkdir()
    shutil.copy(ROOT / "galaxy.yml", tmp_path)
    for name in ("config.yaml", "changelog.yaml"):
        shutil.copy(ROOT / "changelogs" / name, tmp_path / "changelogs")
    result = subprocess.run([sys.executable, "-m", "antsibull_changelog", "generate"], cwd=tmp_path,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "CHANGELOG.rst").read_text(encoding="utf-8") == (ROOT / "CHANGELOG.rst").read_text(
        encoding="utf-8"), "CHANGELOG.rst is stale: run the release command in CONTRIBUTING.md"


def test_release_is_the_galaxy_version():
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text(encoding="utf-8"))["version"]
    changes = yaml.safe_load((ROOT / "changelogs" / "changelog.yaml").read_text(encoding="utf-8"))
    assert version in changes["releases"]


@pytest.mark.parametrize("fragment", FRAGMENTS, ids=[f.name for f in FRAGMENTS])
def test_fragment_announces_no_new_module_or_role(fragment):
    sections = yaml.safe_load(fragment.read_text(encoding="utf-8")) or {}
    for section, entries in sections.items():
        for entry in entries if isinstance(entries, list) else []:
            assert not NEW_OBJECT.match(entry), (
                "%s (%s): new modules, plugins and roles are listed from their version_added, not by a fragment: %s"
                % (fragment.name, section, entry[:80]))
