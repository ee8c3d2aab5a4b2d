"""Conventions every role follows, so surveys, docs and argument validation agree."""
import re

import pytest
import yaml

from conftest import ROOT

ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir()) if (ROOT / "roles").is_dir() else []


def _load(path):
    return yaml.safe_load(path.read_text()) if path.is_file() else None


@pytest.mark.parametrize("role", ROLES)
def test_role_has_docs_and_argument_specs(role):
    base = ROOT / "roles" / role
    assert (base / "README.md").is_file(), "%s has no README.md" % role
    specs = _load(base / "meta" / "argument_specs.yml")
    assert specs and "main" in specs["argument_specs"], "%s has no meta/argument_specs.yml main entry" % role


@pytest.mark.parametrize("role", ROLES)
def test_role_has_galaxy_metadata(role):
    """Galaxy's importer reads each role's description from meta/main.yml."""
    meta = _load(ROOT / "roles" / role / "meta" / "main.yml")
    assert meta, "%s has no meta/main.yml" % role
    info = meta["galaxy_info"]
    assert info["description"] and info["license"] == "Apache-2.0", role
    assert info["min_ansible_version"] == "2.17" and info["platforms"], role
    assert meta.get("dependencies") == [], role


@pytest.mark.parametrize("role", ROLES)
def test_role_variables_are_prefixed_and_specified(role):
    base = ROOT / "roles" / role
    defaults = _load(base / "defaults" / "main.yml") or {}
    options = (_load(base / "meta" / "argument_specs.yml") or {}).get("argument_specs", {}).get("main", {}).get("options", {}) or {}
    unprefixed = [k for k in defaults if not k.startswith(role + "_")]
    assert unprefixed == [], "%s: defaults must start with %s_" % (role, role)
    # A role may also document the platform-wide gpuops_* settings it reads.
    foreign = [k for k in options if not k.startswith((role + "_", "gpuops_"))]
    assert foreign == [], "%s: options must start with %s_ or gpuops_" % (role, role)
    # A data-only add-on (no tasks, so no vars/main.yml of its own) keeps the private values
    # that k8s_addons and k8s_apply read in its defaults; they are not options.
    private = {role + "__helm_values", role + "__wait_crds", role + "__refuse"} if not (base / "tasks").is_dir() else set()
    undocumented = sorted(set(defaults) - set(options) - private)
    assert undocumented == [], "%s: defaults missing from argument_specs" % role
    assert not private & set(options), "%s: private values are not options" % role


# The one definition of the Kubernetes API connection, and the module defaults that pass it on.
CONNECTION_FILE = "vars/k8s_connection.yml"
CONNECTION_DEFAULTS = dict((group, "{{ gpuops_k8s_connection }}") for group in (
    "group/gpuops.platform.k8s", "group/kubernetes.core.k8s", "group/kubernetes.core.helm"))
CONNECTION_KEYS = ("kubeconfig", "context", "host", "ca_cert", "validate_certs")


def _is_api_action(key):
    return key.startswith(("kubernetes.core.", "gpuops.platform.k8s_"))


def _tasks(tasks):
    """Every task of a task list, blocks opened."""
    for task in tasks or []:
        yield task
        for section in ("block", "rescue", "always"):
            yield from _tasks(task.get(section))


def _included_roles(tasks):
    """The (role, task file) pairs of this collection that the tasks include or import."""
    names = set()
    for task in _tasks(tasks):
        for key in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
            if isinstance(task.get(key), dict) and task[key]["name"].startswith("gpuops.platform."):
                names.add((task[key]["name"].split(".")[-1], task[key].get("tasks_from", "main") + ".yml"))
    return names


def _task_files(role, name, seen):
    """The tasks of one task file of a role and of the role's task files it includes, each once."""
    if (role, name) in seen or "{" in name:
        return []
    seen.add((role, name))
    tasks = list(_tasks(_load(ROOT / "roles" / role / "tasks" / name)))
    for task in list(tasks):
        for key in ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks"):
            if key in task:
                target = task[key]["file"] if isinstance(task[key], dict) else task[key]
                tasks += _task_files(role, target, seen)
    return tasks


def _talks_to_the_api(entries, seen=None):
    """Whether any of these (role, task file) entry points calls the API, directly or through another role."""
    seen = set() if seen is None else seen
    for role, name in sorted(entries):
        tasks = _task_files(role, name, seen)
        if any(_is_api_action(k) for t in tasks for k in t) or _talks_to_the_api(_included_roles(tasks), seen):
            return True
    return False


PLAYS = [(path.name, play) for path in sorted((ROOT / "playbooks").glob("*.yml"))
         for play in _load(path) if "import_playbook" not in play and "ansible.builtin.import_playbook" not in play]


@pytest.mark.parametrize("playbook,play", PLAYS, ids=["%s: %s" % (p, play["name"]) for p, play in PLAYS])
def test_every_play_that_talks_to_the_api_uses_the_one_connection(playbook, play):
    tasks = [t for section in ("pre_tasks", "tasks", "post_tasks") for t in play.get(section) or []]
    roles = {((r["role"] if isinstance(r, dict) else r).split(".")[-1], "main.yml") for r in play.get("roles") or []}
    roles |= _included_roles(tasks)
    api = _talks_to_the_api(roles) or any(_is_api_action(k) for t in _tasks(tasks) for k in t)
    if api:
        assert CONNECTION_FILE in (play.get("vars_files") or []), "%s: %s must load %s" % (playbook, play["name"], CONNECTION_FILE)
        assert play.get("module_defaults") == CONNECTION_DEFAULTS, "%s: %s" % (playbook, play["name"])
    else:
        assert "module_defaults" not in play, "%s: %s talks to no API" % (playbook, play["name"])


def test_the_connection_is_defined_once():
    defined = _load(ROOT / "playbooks" / CONNECTION_FILE)["gpuops_k8s_connection"]
    assert sorted(defined) == sorted(CONNECTION_KEYS)
    assert "api_key" not in defined     # the token goes through a private kubeconfig, never a task argument
    runtime = _load(ROOT / "meta" / "runtime.yml")
    assert "k8s_applyset" in runtime["action_groups"]["k8s"]
    copies = [path.name for path in (ROOT / "playbooks").glob("*.yml")
              if "gpuops_k8s_kubeconfig" in path.read_text() or "gpuops_k8s_ca_cert" in path.read_text()]
    assert copies == [], "the connection is defined again in %s" % copies
    assert any(name for name, play in PLAYS if play.get("module_defaults"))


# Roles orchestrate and Python decides: a Jinja expression in role YAML stays short, and has no side effect.
JINJA_MAX_LINES = 5
ROLE_YAML = sorted(p for role in ROLES for folder in ("tasks", "vars")
                   for p in (ROOT / "roles" / role / folder).rglob("*.yml"))


def _scalars(node):
    if isinstance(node, yaml.ScalarNode):
        yield node
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _scalars(item)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield from _scalars(key)
            yield from _scalars(value)


def jinja_programs(text):
    """(line, source lines) of each Jinja expression longer than JINJA_MAX_LINES, and the lines of each `set _ =`."""
    long_ones = []
    for document in yaml.compose_all(text, Loader=yaml.SafeLoader):
        for scalar in _scalars(document) if document is not None else []:
            if "{{" not in scalar.value and "{%" not in scalar.value:
                continue
            source = text[scalar.start_mark.index:scalar.end_mark.index].rstrip()
            # A block scalar's first line holds only its indicator (> or |).
            lines = source.count("\n") + 1 - (1 if scalar.style in (">", "|") else 0)
            if lines > JINJA_MAX_LINES:
                long_ones.append((scalar.start_mark.line + 1, lines))
    side_effects = [n + 1 for n, line in enumerate(text.splitlines()) if re.search(r"\{%-?\s*set\s+_\s*=", line)]
    return long_ones, side_effects


def test_the_program_check_finds_long_expressions_and_side_effects():
    def task(inner_lines):
        return "- name: x\n  ansible.builtin.debug:\n    msg: >-\n      {{ a\n" + "         b\n" * inner_lines + "         c }}\n"

    assert jinja_programs(task(3)) == ([], [])             # 5 lines
    assert jinja_programs(task(4)) == ([(3, 6)], [])       # 6 lines, the scalar starting at its indicator
    effect = "x: >-\n  {%- set out = [] -%}\n  {%- set _ = out.append(1) -%}\n  {{ out }}\n"
    assert jinja_programs(effect) == ([], [3])


@pytest.mark.parametrize("path", ROLE_YAML, ids=[str(p.relative_to(ROOT)) for p in ROLE_YAML])
def test_role_yaml_holds_no_jinja_program(path):
    long_ones, side_effects = jinja_programs(path.read_text())
    assert long_ones == [], "%s: Jinja expressions longer than %d lines at (line, lines) %s: move the logic into " \
        "plugins/plugin_utils behind a filter" % (path.relative_to(ROOT), JINJA_MAX_LINES, long_ones)
    assert side_effects == [], "%s: `set _ =` side effects at lines %s" % (path.relative_to(ROOT), side_effects)


def test_drain_lives_in_one_role():
    """Every role takes a node out and brings it back through gpuops.platform.node_maintenance."""
    callers = sorted(str(p.relative_to(ROOT)) for role in ROLES if role != "node_maintenance"
                     for p in (ROOT / "roles" / role).rglob("*.yml") if "kubernetes.core.k8s_drain" in p.read_text())
    assert callers == [], "k8s_drain outside roles/node_maintenance: %s" % callers
    users = sorted({p.parts[-3] for p in (ROOT / "roles").glob("*/tasks/*.yml")
                    if "name: gpuops.platform.node_maintenance" in p.read_text()})
    assert users == ["gpu_upgrade", "kubelet_tuning", "mig"]
