"""nvidia_driver's check-and-converge core against modelled apt and dnf."""

import os

import pytest

from fakes.gpu_node import FakeApt, FakeDnf, FakeModule, FakeNode

from ansible_collections.gpuops.platform.plugins.module_utils._driver import converge as dc
from ansible_collections.gpuops.platform.plugins.module_utils._driver import host as driver_host

KERNEL = "6.1.0-37-amd64"
PARAMS = dict(state="present", branch=None, version=None, open=True, source="cuda", mirror_url=None,
              mirror_gpgkey=None, mirror_trusted=False, mirror_suite="/", mirror_components=[], runfile=None,
              fabricmanager="auto", nvswitch_count=0, dcgm=False, dcgm_package=None, install_prerequisites=True,
              blacklist_nouveau=True, regenerate_initramfs=True, block_unattended_upgrades=True, update_cache=None,
              mok_signing_key=None, mok_certificate=None)
MIRROR = dict(source="mirror", mirror_url="file:/srv/nvidia-mirror", mirror_trusted=True)
VERSIONS = ["570.158.01-1", "570.172.08-1", "575.57.08-1"]


def debian_repo():
    """What a mirror of NVIDIA's debian12 repo offers: metas per branch, unversioned-name driver packages."""
    def per_branch(branch):
        return [v for v in VERSIONS if v.startswith(branch)]

    return {
        "nvidia-open-570": per_branch("570"), "cuda-drivers-570": per_branch("570"),
        "nvidia-open-575": per_branch("575"),
        "nvidia-driver": VERSIONS, "nvidia-kernel-open-dkms": VERSIONS, "nvidia-kernel-dkms": VERSIONS,
        "libcuda1": VERSIONS, "nvidia-persistenced": VERSIONS,
        "nvidia-fabricmanager-570": per_branch("570"),
        "datacenter-gpu-manager-4-cuda12": ["1:4.2.3-1"],
        "linux-headers-%s" % KERNEL: ["6.1.137-1"], "dkms": ["3.0.10-8+deb12u1"],
    }


@pytest.fixture
def node(tmp_path, monkeypatch):
    monkeypatch.setattr(driver_host, "kernel_release", lambda: KERNEL)
    monkeypatch.setattr(driver_host, "machine_arch", lambda: "x86_64")
    n = FakeNode(tmp_path).os("debian", "12").modules("ext4")
    n.headers(KERNEL)
    return n


def make_apt(node, **kwargs):
    apt = FakeApt(node, available=debian_repo(), **kwargs)
    deps = ["nvidia-driver", "nvidia-kernel-open-dkms", "libcuda1", "nvidia-persistenced"]
    apt.depends = {"nvidia-open-570": deps, "nvidia-open-575": deps,
                   "cuda-drivers-570": ["nvidia-driver", "nvidia-kernel-dkms", "libcuda1", "nvidia-persistenced"]}
    return apt


def converge(node, runner, check=False, **params):
    module = FakeModule(runner, check_mode=check)
    runner.check_mode = check
    return dc.Converger(module, dict(PARAMS, **params), root=node.root).execute()


def mutating_calls(runner):
    return [c for c in runner.calls if runner.mutating(c)]


# -- Debian 12 from a file: mirror (the Molecule layout) ----------------------------

def test_mirror_install_pins_holds_then_changes_nothing(node):
    apt = make_apt(node)
    first = converge(node, apt, version="570.158.01", install_prerequisites=False, **MIRROR)
    assert first["changed"] and first["packages_changed"]
    assert first["previous_version"] is None and first["installed_version"] == "570.158.01"
    assert apt.commands(["apt-get", "update"]) == [["apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=600"]]
    install = list(apt.commands(["apt-get", "install"]))
    assert len(install) == 1 and install[0][-1] == "nvidia-open-570=570.158.01-1"
    assert apt.installed["nvidia-driver"] == "570.158.01-1"
    assert apt.held == {"nvidia-open-570", "nvidia-driver", "nvidia-kernel-open-dkms", "libcuda1",
                        "nvidia-persistenced"}
    assert node.read("/etc/apt/sources.list.d/gpuops-nvidia-mirror.list").endswith(
        "deb [trusted=yes] file:/srv/nvidia-mirror /\n")
    assert "Pin: version 570.158.01-*" in node.read("/etc/apt/preferences.d/gpuops-nvidia-driver")
    assert "Unattended-Upgrade::Package-Blacklist" in node.read("/etc/apt/apt.conf.d/51gpuops-nvidia-driver")
    assert "blacklist nouveau" in node.read("/etc/modprobe.d/gpuops-blacklist-nouveau.conf")
    assert apt.commands(["update-initramfs", "-u"]) == [["update-initramfs", "-u"]]
    assert first["services"] == ["nvidia-persistenced"] and not first["fabricmanager"]
    assert {d["after_header"] for d in first["diff"]} >= {"/etc/apt/preferences.d/gpuops-nvidia-driver",
                                                          "/etc/modprobe.d/gpuops-blacklist-nouveau.conf"}

    apt.calls = []
    second = converge(node, apt, version="570.158.01", install_prerequisites=False, **MIRROR)
    assert not second["changed"]
    assert second["actions"] == [] and second["diff"] == []
    assert mutating_calls(apt) == []
    assert second["installed_version"] == "570.158.01"


def test_check_mode_plans_and_runs_nothing_that_changes(node):
    apt = make_apt(node)
    result = converge(node, apt, check=True, version="570.172.08", install_prerequisites=True, **MIRROR)
    assert result["changed"] and result["check_mode"]
    assert result["plan"] == result["actions"]
    assert result["plan"] == [
        "write /etc/modprobe.d/gpuops-blacklist-nouveau.conf",
        "regenerate the initramfs (update-initramfs -u)",
        "write /etc/apt/sources.list.d/gpuops-nvidia-mirror.list",
        "write /etc/apt/preferences.d/gpuops-nvidia-driver",
        "write /etc/apt/apt.conf.d/51gpuops-nvidia-driver",
        "apt-get update",
        "install linux-headers-%s dkms" % KERNEL,
        "install nvidia-open-570=570.172.08-1",
        "hold the driver packages at 570.172.08",
    ]
    assert mutating_calls(apt) == []  # the fake also raises on any
    for path in ["etc/modprobe.d", "etc/apt"]:
        assert not os.path.exists(os.path.join(node.root, path))
    assert apt.installed == {}
    assert {d["after_header"] for d in result["diff"]} == {
        "/etc/modprobe.d/gpuops-blacklist-nouveau.conf", "/etc/apt/sources.list.d/gpuops-nvidia-mirror.list",
        "/etc/apt/preferences.d/gpuops-nvidia-driver", "/etc/apt/apt.conf.d/51gpuops-nvidia-driver"}


def test_check_mode_before_the_repository_is_known_plans_a_version_pattern(node):
    apt = FakeApt(node, check_mode=True)  # empty package lists: the mirror is not configured yet
    result = converge(node, apt, check=True, version="570.172.08", install_prerequisites=False, **MIRROR)
    assert "install nvidia-open-570=570.172.08-*" in result["plan"]
    assert result["installed_version"] == "570.172.08"
    assert mutating_calls(apt) == []


def test_check_mode_after_converge_is_a_no_op(node):
    apt = make_apt(node)
    converge(node, apt, version="570.172.08", install_prerequisites=False, **MIRROR)
    result = converge(node, apt, check=True, version="570.172.08", install_prerequisites=False, **MIRROR)
    assert not result["changed"] and result["plan"] == []


def test_upgrade_to_an_exact_version_unholds_installs_and_holds_again(node):
    apt = make_apt(node)
    converge(node, apt, version="570.158.01", install_prerequisites=False, **MIRROR)
    apt.calls = []
    result = converge(node, apt, version="570.172.08", install_prerequisites=False, **MIRROR)
    assert result["previous_version"] == "570.158.01" and result["installed_version"] == "570.172.08"
    order = [c[:2] for c in mutating_calls(apt)]
    assert order == [["apt-mark", "unhold"], ["apt-get", "install"], ["apt-mark", "hold"]]
    assert apt.installed["libcuda1"] == "570.172.08-1" and "libcuda1" in apt.held
    pin_diff = [d for d in result["diff"] if d["after_header"].endswith("gpuops-nvidia-driver")][0]
    assert "570.158.01" in pin_diff["before"] and "570.172.08" in pin_diff["after"]
    # The blacklist did not change, so the initramfs was left alone.
    assert apt.commands(["update-initramfs"]) == []


def test_latest_stays_on_the_branch_and_refreshes_lists(node):
    apt = make_apt(node)
    converge(node, apt, version="570.158.01", install_prerequisites=False, **MIRROR)
    apt.calls = []
    result = converge(node, apt, branch="570", state="latest", install_prerequisites=False, **MIRROR)
    assert len(apt.commands(["apt-get", "update"])) == 1
    assert result["installed_version"] == "570.172.08"  # 575.57.08 is newer, but another branch
    assert apt.installed["nvidia-driver"] == "570.172.08-1"
    again = converge(node, apt, branch="570", state="latest", install_prerequisites=False, **MIRROR)
    assert not again["changed"]


def test_present_on_a_branch_keeps_an_older_version_of_it(node):
    apt = make_apt(node)
    converge(node, apt, version="570.158.01", install_prerequisites=False, **MIRROR)
    result = converge(node, apt, branch="570", install_prerequisites=False, **MIRROR)
    assert result["installed_version"] == "570.158.01"
    # Only the pin widens from the version to the branch.
    assert result["actions"] == ["write /etc/apt/preferences.d/gpuops-nvidia-driver"]
    assert result["changed"] and not result["packages_changed"]


def test_branch_switch_removes_the_old_branch_meta(node):
    apt = make_apt(node)
    converge(node, apt, version="570.172.08", install_prerequisites=False, **MIRROR)
    result = converge(node, apt, version="575.57.08", install_prerequisites=False, **MIRROR)
    install = apt.commands(["apt-get", "install"])[-1]
    assert "nvidia-open-575=575.57.08-1" in install and "nvidia-open-570-" in install
    assert "nvidia-open-570" not in apt.installed
    assert result["previous_version"] == "570.172.08"  # from the other branch's packages
    assert result["installed_version"] == "575.57.08"
    assert result["packages_changed"]


def test_proprietary_modules_and_dcgm(node):
    apt = make_apt(node)
    result = converge(node, apt, version="570.172.08", open=False, dcgm=True, install_prerequisites=False, **MIRROR)
    install = apt.commands(["apt-get", "install"])[-1]
    assert install[-2:] == ["cuda-drivers-570=570.172.08-1", "datacenter-gpu-manager-4-cuda12"]
    assert "nvidia-kernel-dkms" in apt.installed and "nvidia-kernel-open-dkms" not in apt.installed
    assert "datacenter-gpu-manager-4-cuda12" not in result["held_packages"]
    # Services whose unit the packages did not install are left out, with a warning.
    assert result["services"] == ["nvidia-persistenced"]
    assert "nvidia-dcgm.service is not installed: it was not enabled" in result["warnings_list"]
    node.write("usr/lib/systemd/system/nvidia-dcgm.service", "[Service]\n")
    again = converge(node, apt, version="570.172.08", open=False, dcgm=True, install_prerequisites=False, **MIRROR)
    assert again["services"] == ["nvidia-persistenced", "nvidia-dcgm"] and not again["changed"]


def test_nvswitches_bring_fabricmanager_at_the_driver_version(node):
    node.hgx_h100()
    apt = make_apt(node)
    result = converge(node, apt, branch="570", install_prerequisites=False, **MIRROR)
    install = apt.commands(["apt-get", "install"])[-1]
    assert "nvidia-fabricmanager-570=570.172.08-1" in install and "nvidia-open-570=570.172.08-1" in install
    assert result["fabricmanager"] and result["services"] == ["nvidia-persistenced", "nvidia-fabricmanager"]
    assert "nvidia-fabricmanager-570" in apt.held
    assert result["gpu_count"] == 8 and result["nvswitch_count"] == 4


def test_fabricmanager_forced_off(node):
    node.hgx_h100()
    result = converge(node, make_apt(node), branch="570", fabricmanager="false", install_prerequisites=False,
                      **MIRROR)
    assert not result["fabricmanager"] and result["services"] == ["nvidia-persistenced"]


def test_prerequisites_are_installed_when_missing(node):
    apt = make_apt(node)
    converge(node, apt, branch="570", **MIRROR)
    assert apt.commands(["apt-get", "install"])[0][-2:] == ["linux-headers-%s" % KERNEL, "dkms"]
    apt.calls = []
    converge(node, apt, branch="570", **MIRROR)
    assert mutating_calls(apt) == []


def test_version_missing_from_the_repository_fails_before_installing(node):
    apt = make_apt(node)
    with pytest.raises(dc.DriverError, match=r"nvidia-open-570 570\.999\.01 is not in the configured repositories"):
        converge(node, apt, version="570.999.01", install_prerequisites=False, **MIRROR)
    assert apt.commands(["apt-get", "install"]) == []
    assert apt.installed == {}


# -- nouveau, initramfs, reboot, Secure Boot ------------------------------------------------

def test_initramfs_only_when_the_blacklist_changes(node):
    apt = make_apt(node)
    node.write("etc/modprobe.d/gpuops-blacklist-nouveau.conf", "blacklist nouveau\n")  # someone else's content
    converge(node, apt, branch="570", install_prerequisites=False, **MIRROR)
    assert len(apt.commands(["update-initramfs", "-u"])) == 1
    converge(node, apt, branch="570", install_prerequisites=False, **MIRROR)
    assert len(apt.commands(["update-initramfs", "-u"])) == 1


def test_missing_initramfs_tool_is_a_warning(node):
    apt = make_apt(node, tools=())
    result = converge(node, apt, branch="570", install_prerequisites=False, **MIRROR)
    assert apt.commands(["update-initramfs"]) == []
    assert "update-initramfs not found: the initramfs was not regenerated" in result["warnings_list"]


def test_reboot_when_the_loaded_module_is_older(node):
    node.hgx_h100().loaded_driver("570.158.01")
    apt = make_apt(node)
    result = converge(node, apt, version="570.172.08", install_prerequisites=False, **MIRROR)
    assert result["reboot_required"]
    assert result["reboot_reasons"] == ["loaded kernel module 570.158.01 differs from installed driver 570.172.08"]
    assert result["loaded_version"] == "570.158.01"


def test_reboot_when_nouveau_is_loaded(node):
    node.modules("nouveau")
    result = converge(node, make_apt(node), branch="570", install_prerequisites=False, **MIRROR)
    assert result["reboot_required"] and result["reboot_reasons"] == ["nouveau is loaded"]


def test_no_reboot_when_the_loaded_module_matches(node):
    node.hgx_h100().loaded_driver("570.172.08")
    result = converge(node, make_apt(node), branch="570", install_prerequisites=False, **MIRROR)
    assert not result["reboot_required"] and result["reboot_reasons"] == []


def test_secure_boot_without_mok_warns_and_with_mok_configures_dkms(node):
    node.secure_boot(True)
    apt = make_apt(node)
    result = converge(node, apt, branch="570", install_prerequisites=False, **MIRROR)
    assert result["secure_boot"] is True
    assert any("Secure Boot is enabled" in w for w in result["warnings_list"])
    node.write("var/lib/mok/MOK.priv", "key")
    node.write("var/lib/mok/MOK.der", "cert")
    result = converge(node, apt, branch="570", install_prerequisites=False, mok_signing_key="/var/lib/mok/MOK.priv",
                      mok_certificate="/var/lib/mok/MOK.der", **MIRROR)
    assert not any("Secure Boot" in w for w in result["warnings_list"])
    assert result["secure_boot"] is True
    conf = node.read("/etc/dkms/framework.conf.d/gpuops-mok.conf")
    assert "mok_signing_key=/var/lib/mok/MOK.priv\n" in conf and "mok_certificate=/var/lib/mok/MOK.der\n" in conf


# -- CUDA repo, distro packages ----------------------------------------------------------

def test_cuda_repo_through_nvidias_keyring_package(node, monkeypatch):
    downloads = []

    def download(self, url):
        downloads.append(url)
        path = os.path.join(node.root, "cuda-keyring_1.1-1_all.deb")
        with open(path, "w") as handle:
            handle.write("deb")
        return path

    monkeypatch.setattr(dc.Converger, "download", download)
    apt = make_apt(node)
    converge(node, apt, branch="570", install_prerequisites=False)
    assert downloads == ["https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
                         "cuda-keyring_1.1-1_all.deb"]
    assert apt.installed["cuda-keyring"] == "1.1-1"
    apt.calls = []
    result = converge(node, apt, branch="570", install_prerequisites=False)
    assert len(downloads) == 1 and not result["changed"]
    assert len(apt.commands(["dpkg-query"])) == 1  # one package query per no-op run


def test_ubuntu_archive_server_packages(node):
    node.os("ubuntu", "24.04")
    apt = FakeApt(node, available={"nvidia-driver-570-server-open": ["570.172.08-0ubuntu0.24.04.1"]})
    result = converge(node, apt, version="570.172.08", source="distro", install_prerequisites=False)
    assert apt.commands(["apt-get", "install"])[-1][-1] == "nvidia-driver-570-server-open=570.172.08-0ubuntu0.24.04.1"
    assert result["installed_version"] == "570.172.08"
    assert not os.path.exists(os.path.join(node.root, "etc/apt/sources.list.d"))


def test_debian_non_free_on_another_branch_is_refused_before_installing(node):
    apt = FakeApt(node, available={"nvidia-driver": ["535.247.01-1"], "nvidia-open-kernel-dkms": ["535.247.01-1"]})
    with pytest.raises(dc.DriverError, match="the repositories offer nvidia-driver 535.247.01, not branch 570"):
        converge(node, apt, branch="570", source="distro", install_prerequisites=False)
    assert apt.commands(["apt-get", "install"]) == []
    result = converge(node, apt, branch="535", source="distro", install_prerequisites=False)
    assert apt.commands(["apt-get", "install"])[-1][-2:] == ["nvidia-driver=535.247.01-1",
                                                             "nvidia-open-kernel-dkms=535.247.01-1"]
    assert result["installed_version"] == "535.247.01"


def test_unknown_package_is_refused_after_one_refresh(node):
    apt = FakeApt(node, available={})
    with pytest.raises(dc.DriverError, match="nvidia-open-570 is not available from the configured repositories"):
        converge(node, apt, branch="570", install_prerequisites=False, **MIRROR)
    assert apt.updates == 1  # the new mirror; no second refresh
    assert apt.commands(["apt-get", "install"]) == []


# -- RHEL family ----------------------------------------------------------------------

def rhel_repo(version="570.172.08"):
    evr = ["3:570.158.01-1.el9", "3:570.172.08-1.el9"]
    return {name: evr for name in ["nvidia-driver", "nvidia-driver-cuda", "kmod-nvidia-open-dkms",
                                   "kmod-nvidia-latest-dkms", "nvidia-persistenced", "nvidia-fabric-manager"]}


@pytest.fixture
def rhel(node):
    node.os("rhel", "9.4")
    return node


def test_rhel_stream_install_and_versionlock_then_no_change(rhel):
    dnf = FakeDnf(rhel, available=rhel_repo())
    rhel.write("etc/dnf/plugins/versionlock.list", "kernel-0:5.14.0-427.el9.*\n")
    rhel.write("etc/dnf/automatic.conf", "[commands]\napply_updates = yes\n")
    result = converge(rhel, dnf, version="570.158.01", install_prerequisites=False)
    assert ["dnf", "-y", "module", "enable", "nvidia-driver:570-open"] in dnf.calls
    assert ["dnf", "-y", "install", "nvidia-driver-570.158.01", "nvidia-driver-cuda-570.158.01",
            "kmod-nvidia-open-dkms-570.158.01", "nvidia-persistenced-570.158.01"] in dnf.calls
    assert result["installed_version"] == "570.158.01"
    lock = rhel.read("/etc/dnf/plugins/versionlock.list")
    assert lock.startswith("kernel-0:5.14.0-427.el9.*\n")
    assert "nvidia-driver-3:570.158.01-1.el9.*" in lock and "kmod-nvidia-open-dkms-3:570.158.01-1.el9.*" in lock
    assert "excludepkgs = nvidia-*" in rhel.read("/etc/dnf/automatic.conf")
    assert ["dracut", "-f"] in dnf.calls
    dnf.calls = []
    again = converge(rhel, dnf, version="570.158.01", install_prerequisites=False)
    assert not again["changed"] and mutating_calls(dnf) == []


def test_rhel_upgrade_drops_our_locks_first_and_switches_stream(rhel):
    dnf = FakeDnf(rhel, available=rhel_repo())
    converge(rhel, dnf, version="570.158.01", install_prerequisites=False)
    dnf.calls = []
    result = converge(rhel, dnf, version="570.172.08", open=False, install_prerequisites=False)
    assert ["dnf", "-y", "module", "reset", "nvidia-driver"] in dnf.calls
    assert ["dnf", "-y", "module", "enable", "nvidia-driver:570-dkms"] in dnf.calls
    assert result["installed_version"] == "570.172.08"
    assert "nvidia-driver-3:570.172.08-1.el9.*" in rhel.read("/etc/dnf/plugins/versionlock.list")
    assert "570.158.01" not in rhel.read("/etc/dnf/plugins/versionlock.list")


def test_rhel_branch_brings_fabric_manager_at_the_driver_version(rhel):
    rhel.hgx_h100()
    dnf = FakeDnf(rhel, available=rhel_repo())
    result = converge(rhel, dnf, branch="570", install_prerequisites=False)
    install = dnf.commands(["dnf", "-y", "install"])[-1]
    assert "nvidia-fabric-manager-570.172.08" in install and "nvidia-driver-570.172.08" in install
    assert result["services"] == ["nvidia-persistenced", "nvidia-fabricmanager"]


def test_rhel_check_mode(rhel):
    dnf = FakeDnf(rhel, available=rhel_repo(), check_mode=True)
    result = converge(rhel, dnf, check=True, branch="570", install_prerequisites=True)
    assert "dnf -y module enable nvidia-driver:570-open" in result["plan"]
    assert "versionlock the driver packages at 570.172.08" in result["plan"]
    assert not os.path.exists(os.path.join(rhel.root, "etc/yum.repos.d"))


# -- runfile, absent, bad input -----------------------------------------------------------

class RunfileApt(FakeApt):
    def answer(self, argv):
        if argv[0] == "sh":
            os.makedirs(os.path.join(self.node.root, "var/lib/dkms/nvidia/570.172.08"))
            return 0, "", ""
        return FakeApt.answer(self, argv)


def test_runfile_install_once(node):
    runfile = node.write("opt/NVIDIA-Linux-x86_64-570.172.08.run", "#!/bin/sh\n")
    apt = RunfileApt(node)
    result = converge(node, apt, source="runfile", runfile=runfile[len(node.root):], install_prerequisites=False)
    assert apt.commands(["sh"]) == [["sh", runfile[len(node.root):], "--silent", "--dkms", "-m=kernel-open"]]
    assert result["installed_version"] == "570.172.08"
    assert result["services"] == []  # the runfile ships no systemd unit for nvidia-persistenced
    assert "nvidia-persistenced.service is not installed: it was not enabled" in result["warnings_list"]
    again = converge(node, apt, source="runfile", runfile=runfile[len(node.root):], install_prerequisites=False)
    assert not again["changed"] and len(apt.commands(["sh"])) == 1


def test_runfile_on_an_nvswitch_node_warns_about_fabric_manager(node):
    node.hgx_h100()
    runfile = node.write("opt/NVIDIA-Linux-x86_64-570.172.08.run", "#!/bin/sh\n")[len(node.root):]
    result = converge(node, RunfileApt(node), source="runfile", runfile=runfile, install_prerequisites=False)
    assert not result["fabricmanager"]
    assert any("a runfile does not install" in w for w in result["warnings_list"])


def test_runfile_refused_over_a_packaged_driver(node):
    node.write("opt/NVIDIA-Linux-x86_64-570.172.08.run", "#!/bin/sh\n")
    apt = FakeApt(node, installed={"nvidia-open-570": "570.158.01-1"})
    with pytest.raises(dc.DriverError, match="a packaged NVIDIA driver is installed"):
        converge(node, apt, source="runfile", runfile="/opt/NVIDIA-Linux-x86_64-570.172.08.run")
    assert mutating_calls(apt) == []


def test_runfile_missing_is_a_clear_error_and_no_change(node):
    apt = make_apt(node)
    with pytest.raises(dc.DriverError, match="runfile /opt/NVIDIA-Linux-x86_64-570.172.08.run does not exist"):
        converge(node, apt, source="runfile", runfile="/opt/NVIDIA-Linux-x86_64-570.172.08.run")
    assert apt.calls == []


@pytest.mark.parametrize("params,message", [
    (dict(version="57.1.2"), "is not a driver version"),
    (dict(version="570.172.08", branch="575"), "is not on branch 575"),
    (dict(branch="570", source="mirror"), "needs mirror_url"),
])
def test_bad_input_changes_nothing(node, params, message):
    apt = make_apt(node)
    with pytest.raises(dc.DriverError, match=message):
        converge(node, apt, **params)
    assert apt.calls == []
    assert not os.path.exists(os.path.join(node.root, "etc/modprobe.d"))


def test_unknown_distro_changes_nothing(node):
    node.os("sles", "15.5")
    apt = make_apt(node)
    with pytest.raises(dc.DriverError, match="unsupported distribution 'SUSE Linux Enterprise Server 15 SP5'"):
        converge(node, apt, branch="570")
    assert apt.calls == []


def test_missing_mok_key_is_a_clear_error_and_no_change(node):
    apt = make_apt(node)
    with pytest.raises(dc.DriverError, match="mok_signing_key /var/lib/mok/MOK.priv does not exist on the node"):
        converge(node, apt, branch="570", mok_signing_key="/var/lib/mok/MOK.priv",
                 mok_certificate="/var/lib/mok/MOK.der", **MIRROR)
    assert apt.calls == []


def test_absent_removes_driver_and_our_files_keeps_the_toolkit(node):
    node.loaded_driver("570.172.08")
    apt = make_apt(node)
    converge(node, apt, version="570.172.08", install_prerequisites=False, **MIRROR)
    apt.installed["nvidia-container-toolkit"] = "1.17.8-1"
    apt.installed["libnvidia-container1"] = "1.17.8-1"
    result = converge(node, apt, state="absent", branch="570", **MIRROR)
    assert "nvidia-driver" not in apt.installed and "nvidia-open-570" not in apt.installed
    assert apt.installed["nvidia-container-toolkit"] == "1.17.8-1" and "libnvidia-container1" in apt.installed
    for path in ["etc/apt/preferences.d/gpuops-nvidia-driver", "etc/apt/apt.conf.d/51gpuops-nvidia-driver",
                 "etc/modprobe.d/gpuops-blacklist-nouveau.conf"]:
        assert not os.path.exists(os.path.join(node.root, path))
    assert result["reboot_required"] and "still loaded" in result["reboot_reasons"][0]
    assert result["services"] == []
    assert not converge(node, apt, state="absent", branch="570", **MIRROR)["changed"]


def test_version_sort_key_takes_ascii_digits_only():
    from ansible_collections.gpuops.platform.plugins.module_utils._driver import converge as cv
    # "\u00b2".isdigit() is true, int("\u00b2") raises: a superscript must sort as no number, not crash.
    assert cv._vtuple("570.\u00b2.1") == (570, 0, 1)
    assert cv._vtuple("570.\uff11.1") == (570, 0, 1)
    assert cv._vtuple("570.172.08-1") == (570, 172, 8, 1)


# -- downgrades only with consent (allow_downgrade) -------------------------------------

def _snapshot(node):
    return sorted(os.path.join(d, f) for d, _dirs, files in os.walk(node.root) for f in files)


@pytest.mark.parametrize("check", [False, True])
def test_an_older_version_is_refused_before_anything_changes_unless_allowed(node, check):
    apt = make_apt(node)
    converge(node, apt, version="570.172.08", install_prerequisites=False, **MIRROR)
    apt.calls, before, installed = [], _snapshot(node), dict(apt.installed)
    apt.check_mode = check
    with pytest.raises(dc.DriverError) as caught:
        converge(node, apt, check=check, version="570.158.01", install_prerequisites=False, **MIRROR)
    assert str(caught.value).startswith("driver 570.172.08 is installed and the wanted 570.158.01 is older")
    assert "allow_downgrade" in str(caught.value)
    assert mutating_calls(apt) == [] and _snapshot(node) == before and apt.installed == installed


def test_a_downgrade_with_consent_passes_allow_downgrades_to_apt_and_only_then(node):
    apt = make_apt(node)
    first = converge(node, apt, version="570.172.08", install_prerequisites=False, **MIRROR)
    assert all("--allow-downgrades" not in c for c in apt.commands(["apt-get", "install"]))
    assert first["installed_version"] == "570.172.08"
    apt.calls = []
    result = converge(node, apt, version="570.158.01", allow_downgrade=True, install_prerequisites=False, **MIRROR)
    (install,) = apt.commands(["apt-get", "install"])
    assert "--allow-downgrades" in install and install[-1] == "nvidia-open-570=570.158.01-1"
    assert result["installed_version"] == "570.158.01" and result["previous_version"] == "570.172.08"
    assert "downgrade to nvidia-open-570=570.158.01-1" in result["actions"]


def test_an_older_branch_is_a_downgrade_too(node):
    apt = make_apt(node)
    converge(node, apt, branch="575", install_prerequisites=False, **MIRROR)
    apt.calls = []
    with pytest.raises(dc.DriverError, match="driver 575.57.08 is installed and the wanted branch 570 is older"):
        converge(node, apt, branch="570", install_prerequisites=False, **MIRROR)
    assert mutating_calls(apt) == []


def test_rhel_downgrade_only_with_consent(rhel):
    dnf = FakeDnf(rhel, available=rhel_repo())
    converge(rhel, dnf, version="570.172.08", install_prerequisites=False)
    dnf.calls = []
    with pytest.raises(dc.DriverError, match="driver 570.172.08 is installed and the wanted 570.158.01 is older"):
        converge(rhel, dnf, version="570.158.01", install_prerequisites=False)
    assert mutating_calls(dnf) == []
    result = converge(rhel, dnf, version="570.158.01", allow_downgrade=True, install_prerequisites=False)
    assert dnf.commands(["dnf", "-y", "downgrade"]) and result["installed_version"] == "570.158.01"


# -- Ubuntu, source=distro: Canonical's signed precompiled modules, DKMS only without them ---------

UBUNTU_KERNEL = "6.8.0-45-generic"


def _ubuntu_archive(precompiled):
    available = {"nvidia-driver-580-server-open": ["580.126.20-0ubuntu0.24.04.1"],
                 "linux-headers-%s" % UBUNTU_KERNEL: ["6.8.0-45.45"], "dkms": ["3.0.11-1ubuntu13"]}
    if precompiled:
        available["linux-modules-nvidia-580-server-open-generic"] = ["6.8.0-45.45+1"]
        available["linux-modules-nvidia-580-server-open-%s" % UBUNTU_KERNEL] = ["6.8.0-45.45+1"]
    return available


@pytest.mark.parametrize("check", [False, True])
def test_ubuntu_distro_installs_the_signed_precompiled_modules_of_the_running_kernel(node, monkeypatch, check):
    monkeypatch.setattr(driver_host, "kernel_release", lambda: UBUNTU_KERNEL)
    node.os("ubuntu", "24.04").secure_boot(True)
    apt = FakeApt(node, available=_ubuntu_archive(True))
    result = converge(node, apt, check=check, branch="580", source="distro")
    chosen = "Canonical's signed precompiled modules for kernel %s (linux-modules-nvidia-580-server-open-%s): " \
             "no DKMS build, no MOK" % (UBUNTU_KERNEL, UBUNTU_KERNEL)
    assert result["kernel_modules"] == {"kind": "precompiled", "reason": chosen, "packages": [
        "linux-modules-nvidia-580-server-open-generic", "linux-modules-nvidia-580-server-open-%s" % UBUNTU_KERNEL]}
    # The plan says which: the install line names the modules and why; no headers, no DKMS.
    (line,) = [a for a in result["actions"] if a.startswith("install ")]
    assert line == ("install nvidia-driver-580-server-open=580.126.20-0ubuntu0.24.04.1 "
                    "linux-modules-nvidia-580-server-open-generic linux-modules-nvidia-580-server-open-%s "
                    "(kernel modules: %s)" % (UBUNTU_KERNEL, chosen))
    assert not [w for w in result["warnings_list"] if "Secure Boot" in w]
    if not check:
        assert "dkms" not in apt.installed and "linux-headers-%s" % UBUNTU_KERNEL not in apt.installed
        assert apt.installed["linux-modules-nvidia-580-server-open-%s" % UBUNTU_KERNEL] == "6.8.0-45.45+1"
        apt.calls = []
        again = converge(node, apt, branch="580", source="distro")
        assert not again["changed"] and mutating_calls(apt) == []


def test_ubuntu_distro_falls_back_to_dkms_only_without_precompiled_modules(node, monkeypatch):
    monkeypatch.setattr(driver_host, "kernel_release", lambda: UBUNTU_KERNEL)
    node.os("ubuntu", "24.04")
    apt = FakeApt(node, available=_ubuntu_archive(False))
    result = converge(node, apt, branch="580", source="distro")
    assert result["kernel_modules"] == {"kind": "dkms", "packages": [], "reason": "DKMS build: "
                                        "linux-modules-nvidia-580-server-open-%s is not in the apt cache" % UBUNTU_KERNEL}
    assert "install linux-headers-%s dkms" % UBUNTU_KERNEL in result["actions"]
    assert [a for a in result["actions"] if a.startswith("install nvidia-driver")][0].endswith(
        "(kernel modules: %s)" % result["kernel_modules"]["reason"])
    assert not [n for n in apt.installed if n.startswith("linux-modules-nvidia")]


@pytest.mark.parametrize("kernel, is_open, names", [
    ("6.8.0-45-generic", True, ("linux-modules-nvidia-570-server-open-generic",
                                "linux-modules-nvidia-570-server-open-6.8.0-45-generic")),
    ("6.8.0-1015-aws", False, ("linux-modules-nvidia-570-server-aws", "linux-modules-nvidia-570-server-6.8.0-1015-aws")),
    ("6.18.44-fc-v657-gpu", True, None),   # no Ubuntu ABI: nothing to look for
])
def test_precompiled_module_names_follow_the_kernel_flavour(kernel, is_open, names):
    from ansible_collections.gpuops.platform.plugins.module_utils._driver import packages as pk
    spec = {"source": "distro", "distro": "ubuntu", "branch": "570", "open": is_open}
    assert pk.precompiled_modules(spec, kernel) == names
    assert pk.precompiled_modules(dict(spec, source="cuda"), kernel) is None
    assert pk.precompiled_modules(dict(spec, distro="debian"), kernel) is None
