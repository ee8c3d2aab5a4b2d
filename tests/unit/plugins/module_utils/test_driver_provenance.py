"""Driver provenance through a fake root: how the driver got there, and the one decision planner and module share.

A driver that packages did not install (NVIDIA's runfile, a driver container or mount, a libnvidia-ml.so.1 no
package owns) is kept when it is the wanted one (no package, no file, no reboot) and refused otherwise, before any
change, naming what was found and the ways forward; packages never go over it, on apt and dnf alike. The fleet
planner, fed the record gpu_node_preflight makes (through record_facts' record), gives the same answer word for
word as the nvidia_driver module on the same node.
"""
import json
import os

import pytest

from fakes.gpu_node import FakeApt, FakeDnf, FakeModule, FakeNode

from ansible_collections.gpuops.platform.plugins.module_utils._driver import converge as dc
from ansible_collections.gpuops.platform.plugins.module_utils._driver import decision
from ansible_collections.gpuops.platform.plugins.module_utils._driver import host as driver_host
from ansible_collections.gpuops.platform.plugins.module_utils._driver import provenance
from ansible_collections.gpuops.platform.plugins.module_utils._node import preflight as node_preflight
from ansible_collections.gpuops.platform.plugins.plugin_utils import driver_action, fleet_plan, recorded_facts

KERNEL = "6.8.0-45-generic"
FOUND = "580.159.04"
KINDS = {"runfile": "runfile", "runfile-log": "runfile", "container": "container", "unknown": "unknown"}
PARAMS = dict(state="present", branch=None, version=None, open=True, source="cuda", mirror_url=None,
              mirror_gpgkey=None, mirror_trusted=False, mirror_suite="/", mirror_components=[], runfile=None,
              fabricmanager="auto", nvswitch_count=0, dcgm=False, dcgm_package=None, install_prerequisites=True,
              blacklist_nouveau=True, regenerate_initramfs=True, block_unattended_upgrades=True, update_cache=None,
              mok_signing_key=None, mok_certificate=None, allow_downgrade=False)
PREFLIGHT = dict(require_gpu=False, require_supported_os=False, require_kernel_headers=False, allow_secure_boot=True,
                 min_free_mib=0, disk_paths=["/"], expected_nvswitches=None, expected_driver=None,
                 fail_on_nouveau=False, fail_on_other_driver=False)
# (wanted version, wanted branch, kept?): the version found, its branch; another version, another branch.
WANTED = [(FOUND, None, True), ("", "580", True), ("580.126.20", None, False), ("", "570", False),
          ("595.91.07", None, False)]
APT_REPO = {"nvidia-open-580": ["580.126.20-1", "580.159.04-1"], "nvidia-open-570": ["570.172.08-1"],
            "nvidia-open-595": ["595.91.07-1"], "linux-headers-%s" % KERNEL: ["6.8.0-45.45"], "dkms": ["3.0.11-1"]}
RPM_REPO = dict((name, ["3:580.126.20-1.el9", "3:580.159.04-1.el9", "3:570.172.08-1.el9"])
                for name in ["nvidia-driver", "nvidia-driver-cuda", "kmod-nvidia-open-dkms", "nvidia-persistenced"])


@pytest.fixture
def node(tmp_path, monkeypatch):
    monkeypatch.setattr(driver_host, "kernel_release", lambda: KERNEL)
    monkeypatch.setattr(driver_host, "machine_arch", lambda: "x86_64")
    return FakeNode(tmp_path / "root").os("ubuntu", "24.04").modules("ext4")


def _files(node):
    return sorted(os.path.join(d, f) for d, _dirs, files in os.walk(node.root) for f in files)


def _settings(version, branch):
    return dict(driver_action.DRIVER_DEFAULTS, nvidia_driver_version=version,
                nvidia_driver_branch=branch or driver_action.DRIVER_DEFAULTS["nvidia_driver_branch"])


def _module(node, runner, version, branch, check=False, **params):
    """``(result, refusal)`` of the nvidia_driver module's core on the node."""
    runner.check_mode = check
    params = dict(PARAMS, version=version or None, branch=branch, **params)
    try:
        return dc.Converger(FakeModule(runner, check_mode=check), params, root=node.root).execute(), None
    except dc.DriverError as exc:
        return None, str(exc)


def _planner(node, version, branch):
    """``(decision, errors)`` of the planner on the preflight record of the same node."""
    found = node_preflight.run(PREFLIGHT, node.root)
    facts = {"present": True, "gpus": [], "driver_version": FOUND, "kernel_module_version": FOUND,
             "driver_provenance": found["driver_provenance"]}
    return driver_action.driver_action(_settings(version, branch), facts)


# --- the record --------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_foreign_kind_is_recorded_with_its_version_and_evidence(node, kind):
    node.foreign_driver(kind, FOUND)
    record = node_preflight.run(PREFLIGHT, node.root)["driver_provenance"]
    assert (record["kind"], record["version"], record["packages"]) == (KINDS[kind], FOUND, [])
    assert record["evidence"] == {
        "runfile": ["/usr/bin/nvidia-uninstall", "/var/lib/dkms/nvidia/%s (no package)" % FOUND,
                    "/var/log/nvidia-installer.log"],
        "runfile-log": ["/var/log/nvidia-installer.log"],
        "container": ["/run/nvidia/driver"],
        "unknown": ["/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 (no package)"]}[kind]


@pytest.mark.parametrize("packages, origin", [
    ({"nvidia-driver-580-server-open": "580.126.20-0ubuntu0.24.04.1", "libnvidia-compute-580-server": "580.126.20-0ubuntu0.24.04.1",
      "linux-modules-nvidia-580-server-open-%s" % KERNEL: "6.8.0-45.45+1"}, "distro"),
    ({"nvidia-open-580": "580.126.20-1", "nvidia-driver-580-open": "580.126.20-0ubuntu1",
      "libnvidia-compute-580": "580.126.20-0ubuntu1"}, "cuda"),
])
def test_packages_are_recorded_from_dpkgs_status_with_names_and_versions(node, packages, origin):
    stanzas = ["Package: %s\nStatus: install ok installed\nVersion: %s\n" % item for item in sorted(packages.items())]
    stanzas.append("Package: nvidia-settings\nStatus: install ok installed\nVersion: 510.47.03-1\n")  # not the driver
    stanzas.append("Package: nvidia-open-570\nStatus: deinstall ok config-files\nVersion: 570.172.08-1\n")  # removed
    node.write("var/lib/dpkg/status", "\n".join(stanzas))
    node.foreign_driver("unknown", "580.126.20")  # the library is there: the packages own it
    record = node_preflight.run(PREFLIGHT, node.root)["driver_provenance"]
    assert (record["kind"], record["version"], record["origin"]) == ("packages", "580.126.20", origin)
    assert [p["name"] for p in record["packages"]] == sorted(packages)


def test_no_driver_and_a_module_alone_are_none(node):
    assert node_preflight.run(PREFLIGHT, node.root)["driver_provenance"]["kind"] == "none"
    node.loaded_driver(FOUND)  # packages removed, the reboot still due
    assert provenance.probe(node.root, {}, "deb", FOUND)["kind"] == "none"


# --- kept, refused, never overwritten: the module ----------------------------------------------

@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("version, branch, kept", WANTED)
@pytest.mark.parametrize("family", ["deb", "rpm"])
def test_the_module_keeps_a_matching_foreign_driver_and_refuses_any_other_before_any_change(node, kind, version, branch,
                                                                                            kept, family):
    if family == "rpm":
        node.os("rhel", "9.4")
    node.foreign_driver(kind, FOUND)
    before = _files(node)
    runner = FakeApt(node, available=APT_REPO) if family == "deb" else FakeDnf(node, available=RPM_REPO)
    result, refusal = _module(node, runner, version, branch)
    # Never overwritten by packages: nothing that changes the node ran, no file was written.
    assert [c for c in runner.calls if runner.mutating(c)] == [] and _files(node) == before
    if kept:
        assert refusal is None and not result["changed"] and result["actions"] == [] and result["diff"] == []
        assert not result["reboot_required"] and result["installed_version"] == FOUND and result["services"] == []
        assert result["kept"].startswith("driver %s %s" % (FOUND, decision.KIND_WORDS[KINDS[kind]]))
        assert result["kept"].endswith(": kept, no package installed")
        assert result["driver_provenance"]["kind"] == KINDS[kind]
    else:
        assert result is None
        assert refusal.startswith("driver %s %s (" % (FOUND, decision.KIND_WORDS[KINDS[kind]]))
        assert "is not the wanted %s, and packages are never installed over it: nothing was changed" % (
            version or "branch %s" % branch) in refusal
        assert 'pin the driver it has (nvidia_driver_version: "%s")' % FOUND in refusal
        assert decision.REMOVE_HINTS[KINDS[kind]] in refusal and "gpuops_driver_source: operator" in refusal


def test_check_mode_gives_the_same_answer(node):
    node.foreign_driver("runfile", FOUND)
    apt = FakeApt(node, available=APT_REPO)
    result, _refusal = _module(node, apt, "", "580", check=True)
    assert result["kept"] and result["plan"] == [] and not result["changed"]
    assert _module(node, apt, "", "570", check=True)[1].startswith("driver %s installed by NVIDIA's runfile" % FOUND)


def test_consent_to_downgrade_does_not_put_packages_over_a_foreign_driver(node):
    node.foreign_driver("container", FOUND)
    apt = FakeApt(node, available=APT_REPO)
    result, refusal = _module(node, apt, "570.172.08", None, allow_downgrade=True)
    assert result is None and "packages are never installed over it" in refusal
    assert apt.commands(["apt-get", "install"]) == []


def test_a_packaged_driver_is_upgraded_as_before(node):
    node.foreign_driver("unknown", "580.126.20")
    apt = FakeApt(node, available=APT_REPO, installed={"nvidia-open-580": "580.126.20-1"})
    result, refusal = _module(node, apt, FOUND, None, install_prerequisites=False, source="mirror",
                              mirror_url="file:/srv/nvidia-mirror", mirror_trusted=True)
    assert refusal is None and result["driver_provenance"]["kind"] == "packages" and result["kept"] is None
    assert apt.installed["nvidia-open-580"] == "580.159.04-1"


# --- planner and module agree -----------------------------------------------------------------

@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("version, branch, kept", WANTED)
def test_the_planner_gives_the_modules_answer_word_for_word(node, kind, version, branch, kept):
    node.foreign_driver(kind, FOUND)
    result, refusal = _module(node, FakeApt(node, available=APT_REPO), version, branch)
    planned, errors = _planner(node, version, branch)
    if kept:
        assert errors == [] and planned["action"] == "none" and not planned["reboot_required"]
        assert planned["reasons"] == [result["kept"]] and planned["foreign"] == KINDS[kind]
    else:
        assert planned["action"] == "invalid" and errors == [refusal]


def test_the_recorded_real_h200_keeps_its_driver_and_refuses_an_older_pin(node, tmp_path, shared_reference):
    """The real H200's facts (driver 580.159.04, no package) with preflight's record of such a node, through
    record_facts' record and the fleet planner: kept on the default branch, an older pin refused as the module does."""
    real = json.loads((shared_reference / "real-gpu" / "h200-nvml-facts.json").read_text())
    node.foreign_driver("unknown", real["nvidia"]["driver_version"])
    preflight = node_preflight.run(PREFLIGHT, node.root)
    record = recorded_facts.make_record("h200", real["nvidia"], preflight, real["recorded_at"], "1.0.0")
    facts_dir = tmp_path / "facts"
    facts_dir.mkdir()
    (facts_dir / "h200.json").write_text(json.dumps(record))
    assert recorded_facts.read_file(str(facts_dir / "h200.json"))["node"]["driver_provenance"]["kind"] == "unknown"
    plan = fleet_plan.plan_fleet([("h200", {})], str(facts_dir))
    host = plan["hosts"]["h200"]
    assert host["valid"] and host["driver"]["action"] == "none" and not host["driver"]["reboot_required"]
    assert host["driver"]["reasons"][0].endswith("is the wanted branch 580: kept, no package installed")
    pinned = fleet_plan.plan_fleet([("h200", {"nvidia_driver_version": "570.172.08",
                                              "nvidia_driver_allow_downgrade": True})], str(facts_dir))
    _result, refusal = _module(node, FakeApt(node, available=APT_REPO), "570.172.08", None, allow_downgrade=True)
    assert not pinned["valid"] and pinned["hosts"]["h200"]["errors"] == [refusal]


@pytest.mark.parametrize("version, branch, kept", WANTED)
def test_the_roles_replayed_plan_and_the_rollout_give_the_same_answer(node, version, branch, kept):
    """nodes.yml (nvidia_driver_replay_plan) and upgrade.yml (gpu_upgrade_plan) read the record's provenance too."""
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpuops.platform.plugins.filter import fleet as fleet_filter
    from ansible_collections.gpuops.platform.plugins.filter import gpu_upgrade
    node.foreign_driver("container", FOUND)
    _result, refusal = _module(node, FakeApt(node, available=APT_REPO), version, branch)
    found = node_preflight.run(PREFLIGHT, node.root)["driver_provenance"]
    facts = {"present": True, "gpus": [], "driver_version": FOUND, "kernel_module_version": FOUND}
    wanted_branch = branch or driver_action.DRIVER_DEFAULTS["nvidia_driver_branch"]
    replayed = fleet_filter.nvidia_driver_replay_plan(facts, "present", version, wanted_branch, provenance=found)
    if kept:
        assert replayed["actions"] == [] and not replayed["reboot_required"] and "kept" in replayed["kept"]
        assert gpu_upgrade.gpu_upgrade_plan(facts, version, wanted_branch, provenance=found)["step"] == "skip"
    else:
        assert replayed["failed"] and replayed["msg"] == refusal
        with pytest.raises(AnsibleFilterError) as caught:
            gpu_upgrade.gpu_upgrade_plan(facts, version, wanted_branch, provenance=found)
        assert refusal in str(caught.value)


def test_preflight_warns_of_a_foreign_driver(node):
    node.foreign_driver("runfile", FOUND)
    warnings = node_preflight.run(PREFLIGHT, node.root)["warnings_list"]
    assert ("driver %s is installed by NVIDIA's runfile installer (/usr/bin/nvidia-uninstall, /var/lib/dkms/nvidia/%s "
            "(no package), /var/log/nvidia-installer.log): the nvidia_driver role keeps it when it is the wanted one and "
            "never installs packages over it" % (FOUND, FOUND)) in warnings
