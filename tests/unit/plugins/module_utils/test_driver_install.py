"""node_packages' core (module_utils/_driver/install.py) against the modelled apt and dnf of the driver tests."""

import sys

import pytest

from fakes.gpu_node import FakeApt, FakeDnf, FakeModule, FakeNode

from ansible_collections.gpuops.platform.plugins.module_utils._driver import install

TOOLKIT = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
           "libnvidia-container1"]
PINNED = ["%s=1.17.8-1" % name for name in TOOLKIT]
DEB_REPO = dict([(name, ["1.17.7-1", "1.17.8-1", "1.18.0-1"]) for name in TOOLKIT], **{"python3-tomlkit": ["0.11.7-1"]})
RPM_REPO = dict((name, ["0:1.17.7-1", "0:1.17.8-1", "0:1.18.0-1"]) for name in TOOLKIT)


class Module(FakeModule):
    _diff = False


@pytest.fixture
def node(tmp_path):
    return FakeNode(tmp_path).os("debian", "12")


def apt(node, **kwargs):
    return FakeApt(node, available=DEB_REPO, tools=("apt-get", "dpkg-query"), **kwargs)


def dnf(node, **kwargs):
    return FakeDnf(node, available=RPM_REPO, tools=("dnf", "rpm"), **kwargs)


def run(runner, check=False, diff=False, **params):
    module = Module(runner, check_mode=check)
    module._diff = diff
    runner.check_mode = check  # the fake raises on any command that changes the host in check mode
    args = dict({"update_cache": False, "allow_downgrade": False}, **params)
    return install.PackageInstaller(module, args).execute()


def changing(runner):
    return [c for c in runner.calls if runner.mutating(c)]


# -- apt ----------------------------------------------------------------------

def test_apt_check_mode_reports_the_simulated_transaction_and_changes_nothing(node):
    fake = apt(node)
    result = run(fake, check=True, name=PINNED + ["python3-tomlkit"], update_cache=True)
    assert result["changed"] and result["check_mode"] and result["manager"] == "apt"
    assert result["plan"] == ["apt-get update", "install %s python3-tomlkit" % " ".join(PINNED)]
    assert sorted((s["name"], s["from"], s["to"]) for s in result["transaction"]) == sorted(
        [(name, None, "1.17.8-1") for name in TOOLKIT] + [("python3-tomlkit", None, "0.11.7-1")])
    assert result["versions"]["python3-tomlkit"] == "0.11.7-1"  # what apt resolved for the bare name
    simulated = fake.commands(["apt-get", "-s", "install"])
    assert len(simulated) == 1 and simulated[0][-5:] == PINNED + ["python3-tomlkit"]
    assert changing(fake) == [] and fake.installed == {} and fake.updates == 0


def test_apt_installs_then_a_second_run_runs_no_apt_get(node):
    fake = apt(node)
    first = run(fake, name=PINNED + ["python3-tomlkit"], allow_downgrade=True)
    assert first["changed"] and first["plan"] == []
    install_calls = fake.commands(["apt-get", "install"])
    assert len(install_calls) == 1
    assert "--allow-downgrades" in install_calls[0] and "--allow-change-held-packages" in install_calls[0]
    assert first["versions"] == dict([(n, "1.17.8-1") for n in TOOLKIT] + [("python3-tomlkit", "0.11.7-1")])
    assert first["previous_versions"] == dict((n, None) for n in TOOLKIT + ["python3-tomlkit"])

    fake.calls = []
    for check in (False, True):
        again = run(fake, check=check, name=PINNED + ["python3-tomlkit"], allow_downgrade=True)
        assert not again["changed"] and again["transaction"] == [] and again["actions"] == []
        assert [c[0] for c in fake.calls] == ["dpkg-query"] * len(fake.calls)  # no apt-get at all


def test_a_bare_name_that_is_installed_is_never_upgraded(node):
    fake = apt(node, installed={"nvidia-container-toolkit": "1.17.7-1"})
    result = run(fake, name=["nvidia-container-toolkit"])
    assert not result["changed"] and fake.installed["nvidia-container-toolkit"] == "1.17.7-1"
    assert fake.commands(["apt-get"]) == []


def test_a_new_pin_changes_held_packages_and_downgrades_only_when_allowed(node):
    held = dict((n, "1.18.0-1") for n in TOOLKIT)
    fake = apt(node, installed=held, held=TOOLKIT)
    with pytest.raises(install.PackageError) as err:
        run(fake, check=True, name=PINNED)
    assert "--allow-downgrades" in str(err.value) and "set allow_downgrade" in str(err.value)
    with pytest.raises(install.PackageError):
        run(fake, name=PINNED)
    assert fake.installed == held and fake.commands(["apt-get", "install"]) == []  # refused in the simulation

    result = run(fake, check=True, name=PINNED, allow_downgrade=True)
    assert sorted((s["name"], s["from"], s["to"]) for s in result["transaction"]) == sorted(
        (n, "1.18.0-1", "1.17.8-1") for n in TOOLKIT)
    result = run(fake, name=PINNED, allow_downgrade=True)
    assert result["changed"] and fake.installed == dict((n, "1.17.8-1") for n in TOOLKIT)
    assert result["previous_versions"] == held


def test_a_version_the_repository_lacks_fails_in_check_mode_too(node):
    fake = apt(node)
    for check in (True, False):
        with pytest.raises(install.PackageError) as err:
            run(fake, check=check, name=["nvidia-container-toolkit=9.9.9-1"])
        assert "apt-get cannot install nvidia-container-toolkit=9.9.9-1" in str(err.value)
        assert "Version '9.9.9-1' for 'nvidia-container-toolkit' was not found" in str(err.value)
    assert fake.installed == {} and fake.commands(["apt-get", "install"]) == []


def test_an_install_that_does_not_land_is_an_error(node, monkeypatch):
    fake = apt(node)
    monkeypatch.setattr(fake, "_install", lambda specs, argv=(), simulate=False: (
        (0, "Inst nvidia-container-toolkit (1.17.8-1 stand-in:stable [amd64])\n", "") if simulate else (0, "", "")))
    with pytest.raises(install.PackageError) as err:
        run(fake, name=["nvidia-container-toolkit=1.17.8-1"])
    assert str(err.value) == ("after apt-get install, nvidia-container-toolkit is at (not installed), "
                              "not 1.17.8-1")


def test_a_failed_apt_get_run_is_reported_with_apts_message(node, monkeypatch):
    fake = apt(node)
    real = fake.answer

    def answer(argv):
        if argv[:2] == ["apt-get", "install"]:
            return 100, "", "E: Sub-process /usr/bin/dpkg returned an error code (1)"
        return real(argv)
    monkeypatch.setattr(fake, "answer", answer)
    with pytest.raises(install.PackageError) as err:
        run(fake, name=["python3-tomlkit"])
    assert "dpkg returned an error code (1)" in str(err.value)


def test_diff_lists_the_versions_before_and_after(node):
    result = run(apt(node, installed={"libnvidia-container1": "1.17.7-1"}), check=True, diff=True,
                 name=["libnvidia-container1=1.17.8-1"])
    assert result["diff"]["before"] == "libnvidia-container1 1.17.7-1\n"
    assert result["diff"]["after"] == "libnvidia-container1 1.17.8-1\n"


def test_simulation_output_is_parsed_as_apt_prints_it():
    out = ("NOTE: This is only a simulation!\n"
           "Inst nvidia-container-toolkit [1.17.8-1] (1.17.7-1 gpuops-standin:stable [amd64]) []\n"
           "Inst python3-tomlkit (0.11.7-1 Debian:12.8/stable [all])\n"
           "Remv nvidia-container-runtime [3.14.0-1]\n"
           "Conf python3-tomlkit (0.11.7-1 Debian:12.8/stable [all])\n")
    assert install.apt_transaction(out) == [
        {"action": "install", "name": "nvidia-container-toolkit", "from": "1.17.8-1", "to": "1.17.7-1"},
        {"action": "install", "name": "python3-tomlkit", "from": None, "to": "0.11.7-1"},
        {"action": "remove", "name": "nvidia-container-runtime", "from": "3.14.0-1", "to": None}]


# -- dnf ----------------------------------------------------------------------

def test_dnf_check_mode_simulates_with_assumeno_then_installs_then_nothing(node):
    fake = dnf(node)
    result = run(fake, check=True, name=PINNED)
    assert result["changed"] and result["manager"] == "dnf"
    assert fake.commands(["dnf", "-q", "--assumeno", "install"]) == [
        ["dnf", "-q", "--assumeno", "install"] + ["%s-1.17.8-1" % n for n in TOOLKIT]]
    assert changing(fake) == [] and fake.installed == {}

    result = run(fake, name=PINNED)
    assert result["changed"] and fake.commands(["dnf", "-y", "install"]) == [
        ["dnf", "-y", "install"] + ["%s-1.17.8-1" % n for n in TOOLKIT]]
    assert result["versions"] == dict((n, "1.17.8-1") for n in TOOLKIT)

    fake.calls = []
    assert not run(fake, name=PINNED)["changed"]
    assert not run(fake, check=True, name=PINNED)["changed"]
    assert [c[0] for c in fake.calls] == ["rpm", "rpm"]


def test_dnf_reports_no_match_from_the_simulation(node):
    fake = dnf(node)
    with pytest.raises(install.PackageError) as err:
        run(fake, check=True, name=["nvidia-container-toolkit=9.9.9-1"])
    assert "dnf cannot install nvidia-container-toolkit-9.9.9-1" in str(err.value)
    assert "Unable to find a match" in str(err.value)


# -- refusals -------------------------------------------------------------------

def test_neither_apt_get_nor_dnf_names_the_interpreter(node):
    fake = FakeApt(node, tools=())
    with pytest.raises(install.PackageError) as err:
        run(fake, name=["python3-tomlkit"])
    assert "neither apt-get" in str(err.value) and sys.executable in str(err.value)
    assert "needs no apt or dnf Python binding" in str(err.value)
    assert fake.calls == []


@pytest.mark.parametrize("names, message", [
    ([], "name is empty"),
    (["-oDebug::pkgProblemResolver=1"], "is not a package name"),
    (["nvidia-container-toolkit=1.17.*"], "is not a package version"),
    (["nvidia-container-toolkit=>=1.17"], "is not a package version"),
    (["python3-tomlkit", "python3-tomlkit=0.11.7-1"], "python3-tomlkit is named twice"),
    (["python3-tomlkit\n"], "a line break"),
    (["python3 tomlkit"], "whitespace"),
])
def test_bad_names_are_refused_before_any_command(node, names, message):
    fake = apt(node)
    with pytest.raises(install.PackageError) as err:
        run(fake, name=names)
    assert message in str(err.value)
    assert fake.calls == []
