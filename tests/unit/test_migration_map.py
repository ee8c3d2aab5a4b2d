"""docs/migration.md: every variable it maps to exists, and the renamed table agrees with it."""
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpuops.platform.plugins.plugin_utils import variable_check as cv

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "migration.md"
NAME = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)+$")


def rows():
    """(section, source cell, target cell) of every table row."""
    section, out = None, []
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:]
        elif line.startswith("|") and section and not set(line) <= set("|-: "):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if cells[1] != "gpuops.platform":
                out.append((section, cells[0], cells[1]))
    return out


def names(cell):
    return [n for n in re.findall(r"`([^`]+)`", cell) if NAME.match(n)]


def known():
    catalog = cv.load_catalog(str(ROOT))
    return set().union(*catalog["roles"].values()) | catalog["globals"], catalog


def test_the_map_covers_the_three_sources():
    sections = {s for s, _src, _dst in rows()}
    assert sections == {"From `nvidia.nvidia_driver` (NVIDIA/ansible-role-nvidia-driver)", "From DeepOps",
                        "From the GPU Operator's Helm values"}
    assert len(rows()) >= 40


@pytest.mark.parametrize("section, source, target", rows())
def test_every_target_variable_exists(section, source, target):
    defined, _catalog = known()
    targets = names(target)
    assert targets or target == "-", "%s: %s maps to nothing: write '-' for no equivalent" % (section, source)
    missing = [n for n in targets if n not in defined]
    assert not missing, "%s: %s maps to %s, which no argument spec or meta/variables.yml defines" % (
        section, source, missing)


def test_the_renamed_table_sends_old_names_where_the_map_does():
    _defined, catalog = known()
    mapped = {}
    for _section, source, target in rows():
        for old in names(source):
            mapped.setdefault(old, set()).update(names(target))
    renamed = yaml.safe_load((ROOT / "meta" / "variables.yml").read_text())["renamed"]
    foreign = {old: new for old, new in renamed.items() if old in mapped}
    assert len(foreign) >= 15
    for old, new in foreign.items():
        assert new in mapped[old], "%s: renamed to %s, but docs/migration.md maps it to %s" % (old, new, mapped[old])
    # An upstream name left in an inventory fails the plan naming the variable to set.
    (entry,) = cv.unknown_variables(["nvidia_driver_package_version"], catalog)
    line = cv.format_problems([("gpu-a", [entry])], catalog["renamed"])[0]
    assert line.endswith("it was renamed: set nvidia_driver_version instead")


def test_the_readme_has_the_scope_and_migration_sections():
    readme = (ROOT / "README.md").read_text()
    for title in ("## What it does not do", "## Migrating from nvidia.nvidia_driver, DeepOps and the GPU Operator",
                  "### Planning the example offline"):
        assert title in readme, title
    scope = readme.split("## What it does not do", 1)[1].split("\n## ", 1)[0]
    for word in ("Kubespray", "kubeadm", "Slurm", "storage", "firmware", "MOFED"):
        assert word in scope, word
    assert "docs/migration.md" in readme
