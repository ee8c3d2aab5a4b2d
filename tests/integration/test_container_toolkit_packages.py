"""The container_toolkit role's package tasks, for real, with an interpreter that has no python3-apt.

Real apt-get and dpkg install the stand-in toolkit packages (molecule/resources/debs/build.py, the
ones the Molecule scenario uses) from a file: repository into a private root: APT_CONFIG points
apt at its own sources, lists, cache and dpkg status, DPKG_ADMINDIR points dpkg-query and apt-mark
at the same status, and dpkg unpacks under --root. Nothing on the host changes.

The role runs through ansible-playbook with the virtual environment's Python, where no Python of
the machine can import apt_pkg (apt_support.py), as on a minimal image: ansible.builtin.apt fails
there in check mode ("python3-apt must be installed to use check mode").
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from apt_support import CAN_HIDE, without_apt_pkg

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not all(shutil.which(t) for t in ("apt-get", "dpkg", "dpkg-deb", "dpkg-scanpackages")),
                       reason="needs apt and dpkg-dev"),
    pytest.mark.skipif(not CAN_HIDE, reason="hiding apt_pkg from every Python takes root and unshare"),
]

OLD, NEW = "1.17.7-1", "1.17.8-1"
TOOLKIT = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
           "libnvidia-container1"]

PLAY = """
- name: The container toolkit's packages
  hosts: node
  gather_facts: false
  tasks:
    - name: The role's package tasks
      ansible.builtin.include_role:
        name: gpuops.platform.container_toolkit
        tasks_from: packages_debian
    - name: Keep the results
      ansible.builtin.copy:
        dest: "{{ results_file }}"
        content: "{{ {'packages': container_toolkit__packages_result, 'hold': container_toolkit__hold_result} | to_json }}"
        mode: "0600"
      check_mode: false
      changed_when: false
"""


def _standin_repo(out):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "molecule", "resources", "debs"))
    try:
        import build
    finally:
        sys.path.pop(0)
    pkgs = build.toolkit_packages(OLD) + build.toolkit_packages(NEW)
    # Debian main's python3-tomlkit, which the role installs with the toolkit for containerd.
    pkgs.append({"Package": "python3-tomlkit", "Version": "0.11.7-1", "Section": "python",
                 "Description": "Style-preserving TOML library (stand-in)",
                 "files": {"usr/lib/python3/dist-packages/tomlkit/__init__.py": build.regular("")}})
    for pkg in pkgs:
        build.build_deb(pkg, str(out))
    build.write_index(str(out))


@pytest.fixture(scope="module")
def node(tmp_path_factory, repo_root):
    base = tmp_path_factory.mktemp("toolkit-apt")
    repo, root = base / "repo", base / "root"
    repo.mkdir()
    _standin_repo(repo)
    admin = root / "var" / "lib" / "dpkg"
    for sub in ("info", "updates", "triggers"):
        (admin / sub).mkdir(parents=True)
    for name in ("status", "available"):
        (admin / name).write_text("")
    for sub in ("etc/parts", "etc/prefs", "lists/partial", "cache/archives/partial", "state", "log", "tmp"):
        (base / sub).mkdir(parents=True)
    (base / "etc" / "sources.list").write_text("deb [trusted=yes] file:%s ./\n" % repo)
    # Read before the host's apt.conf.d, whose parts this moves away too.
    (base / "apt.conf").write_text("\n".join([
        'Dir::Etc::Parts "%s";' % (base / "etc" / "parts"),
        'Dir::Etc::SourceList "%s";' % (base / "etc" / "sources.list"),
        'Dir::Etc::SourceParts "%s";' % (base / "etc" / "parts"),
        'Dir::Etc::Preferences "%s";' % (base / "etc" / "preferences"),
        'Dir::Etc::PreferencesParts "%s";' % (base / "etc" / "prefs"),
        'Dir::State "%s";' % (base / "state"),
        'Dir::State::Lists "%s";' % (base / "lists"),
        'Dir::State::status "%s";' % (admin / "status"),
        'Dir::Cache "%s";' % (base / "cache"),
        'Dir::Log "%s";' % (base / "log"),
        'Debug::NoLocking "true";',
        'APT::Sandbox::User "root";',
        'DPkg::Options { "--root=%s"; "--log=%s"; };' % (root, base / "log" / "dpkg.log"),
    ]) + "\n")
    env = dict(os.environ, APT_CONFIG=str(base / "apt.conf"), DPKG_ADMINDIR=str(admin), LC_ALL="C.UTF-8")
    subprocess.run(["apt-get", "update", "-q"], env=env, check=True, capture_output=True)
    (base / "play.yml").write_text(PLAY)

    class Node(object):
        def play(self, check=False, **variables):
            results = base / "results.json"
            if results.exists():
                results.unlink()
            inventory = {"all": {"hosts": {"node": {
                "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                "container_toolkit_repo_manage": False, "results_file": str(results)}}}}
            inventory["all"]["hosts"]["node"].update(variables)
            (base / "inventory.json").write_text(json.dumps(inventory))
            run_env = dict(env, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join(
                [str(repo_root / ".cache" / "src"), str(repo_root / "collections")]),
                ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(base / "tmp"), ANSIBLE_RETRY_FILES_ENABLED="0")
            argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i",
                    str(base / "inventory.json"), str(base / "play.yml")] + (["--check"] if check else [])
            proc = subprocess.run(without_apt_pkg(argv), cwd=str(repo_root), env=run_env, capture_output=True,
                                  text=True, timeout=300, check=False)
            recap = [line for line in proc.stdout.splitlines() if line.startswith("node ")]
            found = json.loads(results.read_text()) if results.exists() else None
            return proc, (recap[-1] if recap else ""), found

        def installed(self):
            out = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\n"], env=env,
                                 check=True, capture_output=True, text=True).stdout
            return dict((p[0], (p[1], p[2])) for p in (line.split() for line in out.splitlines()))

    found = Node()
    found.root = root
    return found


def test_no_python_here_can_import_apt_pkg():
    """The premise: neither the module's interpreter nor the system's can import apt_pkg."""
    for python in [sys.executable] + (["/usr/bin/python3"] if os.path.exists("/usr/bin/python3") else []):
        proc = subprocess.run(without_apt_pkg([python, "-c", "import apt_pkg"]), capture_output=True, text=True,
                              check=False)
        assert proc.returncode != 0 and "apt_pkg" in proc.stderr, python


def test_toolkit_install_check_then_real_then_idempotent(node):
    proc, recap, found = node.play(check=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    packages = found["packages"]
    assert packages["changed"] and packages["check_mode"] and packages["manager"] == "apt"
    # apt-get -s resolved it: every package of the pinned set, and the library at the repository's version.
    assert dict((s["name"], s["to"]) for s in packages["transaction"]) == dict(
        [(name, NEW) for name in TOOLKIT] + [("python3-tomlkit", "0.11.7-1")])
    assert packages["plan"] == ["install python3-tomlkit " + " ".join("%s=%s" % (n, NEW) for n in TOOLKIT)]
    assert found["hold"]["changed"]  # none held yet
    assert node.installed() == {}  # check mode changed nothing
    assert not (node.root / "usr").exists()

    proc, recap, found = node.play()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert found["packages"]["changed"] and found["hold"]["changed"]
    installed = node.installed()
    assert installed == dict([(name, (NEW, "hi")) for name in TOOLKIT] + [("python3-tomlkit", ("0.11.7-1", "ii"))])
    assert (node.root / "usr" / "bin" / "nvidia-ctk").exists()

    for check in (False, True):
        proc, recap, found = node.play(check=check)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "changed=0" in recap, proc.stdout
        assert not found["packages"]["changed"] and found["packages"]["transaction"] == []
        assert not found["hold"]["changed"]
    assert node.installed() == installed


def test_a_new_pin_moves_the_held_toolkit_and_check_mode_says_so_first(node):
    """Pinned back to an older toolkit (the role allows the downgrade): simulated, then done, held again."""
    proc, recap, found = node.play(check=True, container_toolkit_version=OLD)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted((s["name"], s["from"], s["to"]) for s in found["packages"]["transaction"]) == sorted(
        (name, NEW, OLD) for name in TOOLKIT)
    assert all(version == NEW for version, dummy in node.installed().values() if version != "0.11.7-1")

    proc, recap, found = node.play(container_toolkit_version=OLD)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert found["packages"]["changed"]
    # apt-get drops the hold of a package it changes; the role's hold task puts it back.
    assert dict((name, node.installed()[name]) for name in TOOLKIT) == dict((name, (OLD, "hi")) for name in TOOLKIT)


def test_a_version_the_repository_lacks_fails_the_check_run_with_apts_reason(node):
    before = node.installed()
    proc, recap, found = node.play(check=True, container_toolkit_version="1.99.0-1")
    assert proc.returncode != 0
    assert "apt-get cannot install" in proc.stdout and "Version '1.99.0-1' for 'nvidia-container-toolkit' was not found" \
        in proc.stdout, proc.stdout
    assert node.installed() == before
