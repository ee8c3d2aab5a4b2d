"""docs/migration.md: every variable it maps to exists, and the renamed table agrees with it."""
import functools
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
        assert set(cv.targets(new)) <= mapped[old], "%s: renamed to %s, but docs/migration.md maps it to %s" % (
            old, new, mapped[old])
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


@functools.lru_cache(maxsize=None)
def spec_options():
    """What an inventory may set: every role's argument spec options and the platform-wide variables, never a
    role's defaults or vars (where its internal ``<role>__x`` names live)."""
    out = set()
    for path in (ROOT / "roles").glob("*/meta/argument_specs.yml"):
        for entry in (yaml.safe_load(path.read_text()).get("argument_specs") or {}).values():
            out.update((entry or {}).get("options") or {})
    return out | set(yaml.safe_load((ROOT / "meta" / "variables.yml").read_text())["variables"])


def foreign_rows():
    """(old name, its targets) of every nvidia.nvidia_driver and DeepOps name the map sends to a variable here."""
    defined, _catalog = known()
    out = {}
    for section, source, target in rows():
        if section == "From the GPU Operator's Helm values" or not names(target):
            continue
        for old in names(source):
            if old not in defined:  # a name that exists here too (gpu_operator_namespace) is simply read
                out.setdefault(old, set()).update(names(target))
    return sorted(out.items())


def test_the_map_covers_deepops_gpu_operator_names():
    old = dict(foreign_rows())
    for name in ("gpu_operator_enable_dcgm", "gpu_operator_registry_password", "gpu_operator_preinstalled_nvidia_software",
                 "gpu_operator_driver_version", "gpu_operator_enable_driver", "gpu_operator_enable_toolkit",
                 "gpu_operator_enable_migmanager", "gpu_operator_helm_repo", "gpu_operator_driver_registry",
                 "deepops_gpu_operator_enabled", "k8s_gpu_mig_strategy"):
        assert name in old, name


@pytest.mark.parametrize("old, targets", foreign_rows())
def test_each_migrated_name_is_sent_to_its_real_target(old, targets):
    """The checker's hint is exactly the map's target, an option of a role's argument specs (or a platform-wide
    variable), never the closest-looking name: gpu_operator_enable_dcgm is not gpu_operator_enabled."""
    _defined, catalog = known()
    options = spec_options()
    assert not [t for t in targets if t not in options or "__" in t], "%s: maps to %s, not all of them options" % (
        old, sorted(targets))
    assert old in catalog["renamed"], "%s is mapped by docs/migration.md but missing from meta/variables.yml renamed" % old
    assert set(cv.targets(catalog["renamed"][old])) == targets
    (entry,) = cv.unknown_variables([old], catalog)
    line = cv.format_problems([("gpu-a", [entry])], catalog["renamed"])[0]
    assert line.startswith(old + " (host gpu-a): no such variable in ")
    assert line.endswith("it was renamed: set %s instead" % " and ".join(cv.targets(catalog["renamed"][old])))


@pytest.mark.parametrize("old, wrong", [
    ("gpu_operator_enable_dcgm", "gpu_operator_enabled"),
    ("gpu_operator_registry_password", "gpu_operator__registry_values"),
    ("gpu_operator_driver_version", "gpu_operator_chart_version"),
])
def test_the_hints_that_misled_are_gone(old, wrong):
    _defined, catalog = known()
    (entry,) = cv.unknown_variables([old], catalog)
    line = cv.format_problems([("gpu-a", [entry])], catalog["renamed"])[0]
    assert wrong not in line.split("; ", 1)[1], line


@pytest.mark.parametrize("variable, deepops", [
    ("gpu_operator_release_name", "nvidia-gpu-operator"),
    ("gpu_operator_namespace", "gpu-operator-resources"),
])
def test_the_map_says_where_deepops_defaults_differ(variable, deepops):
    """DeepOps' release lives under another name and namespace: the row says so, with this collection's own
    default read from the role's argument specs (a changed default fails here until the map follows)."""
    spec = yaml.safe_load((ROOT / "roles" / "gpu_operator" / "meta" / "argument_specs.yml").read_text())
    ours = spec["argument_specs"]["main"]["options"][variable]["default"]
    assert ours != deepops
    (note,) = [line for line in DOC.read_text().splitlines() if line.startswith("| `%s` | `%s` |" % (variable, variable))]
    assert "Defaults differ" in note and "`%s`" % deepops in note and "`%s`" % ours in note, note
    assert "%s: %s" % (variable, deepops) in note, "the row says what to set to keep DeepOps' release"
