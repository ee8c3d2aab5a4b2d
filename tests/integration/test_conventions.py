"""Conventions every role follows, so surveys, docs and argument validation agree."""
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
            for inner in _tasks(task.get(section)):
                yield inner


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
