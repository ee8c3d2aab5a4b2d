"""Package and repository logic of nvidia_driver, for every distro, arch and source."""

import re

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._driver import packages as pk

DISTROS = {
    "ubuntu2204": {"id": "ubuntu", "version": "22.04", "major": "22"},
    "ubuntu2404": {"id": "ubuntu", "version": "24.04", "major": "24"},
    "debian12": {"id": "debian", "version": "12", "major": "12"},
    "rhel8": {"id": "rhel", "version": "8.10", "major": "8"},
    "rhel9": {"id": "rhel", "version": "9.4", "major": "9"},
    "rocky9": {"id": "rocky", "version": "9.5", "major": "9"},
    "alma8": {"id": "almalinux", "version": "8.10", "major": "8"},
}
REPO_DIR = {"ubuntu2204": "ubuntu2204", "ubuntu2404": "ubuntu2404", "debian12": "debian12",
            "rhel8": "rhel8", "rhel9": "rhel9", "rocky9": "rhel9", "alma8": "rhel8"}


def spec(distro="debian12", arch="x86_64", **params):
    params.setdefault("branch", "570")
    return pk.normalize(params, DISTROS[distro], arch)


# -- repositories -------------------------------------------------------------

@pytest.mark.parametrize("distro", sorted(DISTROS))
@pytest.mark.parametrize("arch,repo_arch", [("x86_64", "x86_64"), ("aarch64", "sbsa")])
def test_cuda_repo_url_per_distro_and_arch(distro, arch, repo_arch):
    repo = pk.repository(spec(distro, arch))
    url = "https://developer.download.nvidia.com/compute/cuda/repos/%s/%s/" % (REPO_DIR[distro], repo_arch)
    assert repo["repo_url"] == url
    if DISTROS[distro]["id"] in ("ubuntu", "debian"):
        # NVIDIA's own keyring package writes the source list; the module converges on the same file name.
        assert repo["kind"] == "apt-keyring"
        assert repo["url"] == url + "cuda-keyring_1.1-1_all.deb"
        assert repo["list_path"] == "/etc/apt/sources.list.d/cuda-%s-%s.list" % (REPO_DIR[distro], repo_arch)
    else:
        assert repo["kind"] == "dnf"
        assert repo["path"] == "/etc/yum.repos.d/cuda-%s.repo" % REPO_DIR[distro]
        assert "baseurl=%s\n" % url.rstrip("/") in repo["content"]
        assert "gpgkey=%sD42D0685.pub\n" % url in repo["content"]
        assert "gpgcheck=1" in repo["content"]


def test_apt_mirror_with_key_is_signed_by_it():
    repo = pk.repository(spec(source="mirror", mirror_url="https://repo.example/nvidia/debian12/x86_64/",
                              mirror_gpgkey="/etc/pki/mirror.asc"))
    assert repo["path"] == "/etc/apt/sources.list.d/gpuops-nvidia-mirror.list"
    assert ("deb [signed-by=/etc/apt/keyrings/gpuops-nvidia-mirror.asc] "
            "https://repo.example/nvidia/debian12/x86_64/ /\n") in repo["content"]
    assert repo["key_source"] == "/etc/pki/mirror.asc"


def test_apt_file_mirror_trusted_flat():
    repo = pk.repository(spec(source="mirror", mirror_url="file:/srv/nvidia-mirror", mirror_trusted=True))
    assert "deb [trusted=yes] file:/srv/nvidia-mirror /\n" in repo["content"]
    assert repo["key_path"] is None


def test_apt_mirror_with_suite_and_components():
    repo = pk.repository(spec("ubuntu2404", source="mirror", mirror_url="http://m/ubuntu", mirror_suite="noble",
                              mirror_components=["restricted", "multiverse"]))
    assert "deb http://m/ubuntu noble restricted multiverse\n" in repo["content"]


@pytest.mark.parametrize("trusted,key,expect", [
    (False, "https://m/key.pub", "gpgcheck=1\ngpgkey=https://m/key.pub\n"),
    (False, "/etc/pki/mirror.asc", "gpgcheck=1\ngpgkey=file:///etc/pki/mirror.asc\n"),
    (True, "https://m/key.pub", "gpgcheck=0\n"),
    (True, None, "gpgcheck=0\n"),
])
def test_dnf_mirror(trusted, key, expect):
    repo = pk.repository(spec("rhel9", source="mirror", mirror_url="https://m/rhel9/x86_64",
                              mirror_trusted=trusted, mirror_gpgkey=key))
    assert repo["path"] == "/etc/yum.repos.d/gpuops-nvidia-mirror.repo"
    assert "baseurl=https://m/rhel9/x86_64\n" in repo["content"]
    assert repo["content"].endswith(expect)


@pytest.mark.parametrize("source", ["distro", "runfile"])
def test_no_repository_for_distro_and_runfile(source):
    extra = {"runfile": "/opt/NVIDIA-Linux-x86_64-570.172.08.run"} if source == "runfile" else {}
    assert pk.repository(spec("ubuntu2404", source=source, **extra)) is None


# -- package sets ----------------------------------------------------------------

@pytest.mark.parametrize("distro", ["ubuntu2204", "ubuntu2404", "debian12"])
@pytest.mark.parametrize("is_open,primary", [(True, "nvidia-open-570"), (False, "cuda-drivers-570")])
def test_cuda_repo_debian_family_packages(distro, is_open, primary):
    plan = pk.packages(spec(distro, open=is_open))
    assert plan["primary"] == primary
    assert plan["driver"] == [primary]
    assert plan["extra"] == []
    assert plan["module_stream"] is None


@pytest.mark.parametrize("branch,fm,dcgm", [
    ("550", "nvidia-fabricmanager-550", "datacenter-gpu-manager-4-cuda12"),
    ("570", "nvidia-fabricmanager-570", "datacenter-gpu-manager-4-cuda12"),
    ("580", "nvidia-fabricmanager", "datacenter-gpu-manager-4-cuda13"),
])
def test_fabricmanager_and_dcgm_follow_the_branch(branch, fm, dcgm):
    plan = pk.packages(spec(branch=branch), fabricmanager=True, dcgm=True)
    assert plan["extra"] == [fm, dcgm]


def test_dcgm_package_override():
    assert pk.packages(spec(), dcgm=True, dcgm_name="datacenter-gpu-manager")["extra"] == ["datacenter-gpu-manager"]


@pytest.mark.parametrize("is_open,name", [(True, "nvidia-driver-570-server-open"), (False, "nvidia-driver-570-server")])
def test_ubuntu_archive_packages(is_open, name):
    plan = pk.packages(spec("ubuntu2204", source="distro", open=is_open), fabricmanager=True)
    assert plan["driver"] == [name]
    assert plan["extra"] == ["nvidia-fabricmanager-570"]


@pytest.mark.parametrize("is_open,kmod", [(True, "nvidia-open-kernel-dkms"), (False, "nvidia-kernel-dkms")])
def test_debian_non_free_packages(is_open, kmod):
    plan = pk.packages(spec("debian12", source="distro", branch="535", open=is_open))
    assert plan["driver"] == ["nvidia-driver", kmod]
    assert plan["primary"] == "nvidia-driver"


def test_debian_non_free_has_no_fabricmanager():
    with pytest.raises(pk.DriverSpecError, match="Debian does not ship"):
        pk.packages(spec("debian12", source="distro", branch="535"), fabricmanager=True)


@pytest.mark.parametrize("distro", ["rhel8", "rhel9", "rocky9", "alma8"])
@pytest.mark.parametrize("is_open,stream,kmod", [(True, "570-open", "kmod-nvidia-open-dkms"),
                                                 (False, "570-dkms", "kmod-nvidia-latest-dkms")])
def test_rhel_family_module_stream_and_packages(distro, is_open, stream, kmod):
    plan = pk.packages(spec(distro, open=is_open), fabricmanager=True)
    assert plan["module_stream"] == stream
    assert plan["driver"] == ["nvidia-driver", "nvidia-driver-cuda", kmod, "nvidia-persistenced"]
    assert plan["extra"] == ["nvidia-fabric-manager"]


def test_runfile_has_no_packages():
    plan = pk.packages(spec(source="runfile", runfile="/opt/NVIDIA-Linux-x86_64-570.172.08.run"))
    assert plan["driver"] == [] and plan["primary"] is None


@pytest.mark.parametrize("distro,expect", [
    ("debian12", ["linux-headers-6.1.0-37-amd64", "dkms"]),
    ("ubuntu2404", ["linux-headers-6.1.0-37-amd64", "dkms"]),
    ("rhel9", ["kernel-devel-6.1.0-37-amd64", "dkms", "python3-dnf-plugin-versionlock"]),
])
def test_prerequisites_match_the_running_kernel(distro, expect):
    assert pk.prerequisites(spec(distro), "6.1.0-37-amd64") == expect


# -- versions, pins and holds ------------------------------------------------------

def test_version_implies_branch():
    s = spec(branch=None, version="570.172.08")
    assert (s["branch"], s["version"]) == ("570", "570.172.08")


def test_two_part_versions_are_accepted():
    assert spec(branch=None, version="575.51")["branch"] == "575"


@pytest.mark.parametrize("madison,version,expect", [
    ("nvidia-open-570 | 570.172.08-1 | file:/srv Packages\nnvidia-open-570 | 570.158.01-1 | file:/srv Packages\n",
     "570.158.01", "570.158.01-1"),
    ("nvidia-open-570 | 570.172.08-0ubuntu1 | https://x Packages\n", "570.172.08", "570.172.08-0ubuntu1"),
    ("nvidia-open-570 | 570.172.08-1 | file:/srv Packages\n", "570.17", None),
    ("", "570.172.08", None),
])
def test_pick_apt_version(madison, version, expect):
    assert pk.pick_apt_version(madison, "nvidia-open-570", version) == expect


def _pin_regex(text):
    return re.search(r"^Package: /(.*)/$", text, re.MULTILINE).group(1)


def test_apt_pin_on_version_and_on_branch():
    pin = pk.apt_pin(spec(branch=None, version="570.172.08"))
    assert "Pin: version 570.172.08-*\n" in pin and "Pin-Priority: 1001\n" in pin
    assert "Pin: version 570.*\n" in pk.apt_pin(spec())
    regex = re.compile(_pin_regex(pin))
    for name in ["nvidia-open-570", "cuda-drivers-570", "nvidia-driver", "nvidia-kernel-open-dkms", "libcuda1",
                 "nvidia-fabricmanager-570", "libnvidia-ml1", "firmware-nvidia-gsp", "nvidia-persistenced"]:
        assert regex.match(name), name
    for name in ["datacenter-gpu-manager-4-cuda12", "cuda-toolkit-12-8", "linux-headers-amd64"]:
        assert not regex.match(name), name


def test_holds_take_every_driver_package_at_the_version_only():
    installed = {
        "nvidia-open-570": "570.172.08-1", "nvidia-driver": "570.172.08-1", "libcuda1": "570.172.08-1",
        "nvidia-kernel-open-dkms": "570.172.08-1", "nvidia-fabricmanager-570": "570.172.08-1",
        "libnvidia-container1": "1.17.8-1", "nvidia-container-toolkit": "1.17.8-1",
        "datacenter-gpu-manager-4-cuda12": "1:4.2.3-1", "nvidia-driver-old-leftover": "550.54.15-1",
        "bash": "5.2.15-2",
    }
    assert pk.hold_selection(installed, "570.172.08", "deb") == [
        "libcuda1", "nvidia-driver", "nvidia-fabricmanager-570", "nvidia-kernel-open-dkms", "nvidia-open-570"]


def test_removal_set_never_takes_the_container_toolkit():
    installed = {"nvidia-open-570": "1", "libnvidia-container1": "1", "nvidia-container-toolkit": "1",
                 "libnvidia-compute-570": "1"}
    assert pk.driver_packages_installed(installed, "deb") == ["libnvidia-compute-570", "nvidia-open-570"]


@pytest.mark.parametrize("installed,family,expect", [
    ({"nvidia-open-570": "570.172.08-1", "libcuda1": "570.158.01-1"}, "deb", "570.172.08"),
    ({"nvidia-open-550": "550.163.01-1", "libcuda1": "550.163.01-1", "nvidia-driver": "550.163.01-1",
      "nvidia-container-toolkit": "1.17.8-1", "libnvidia-container1": "1.17.8-1"}, "deb", "550.163.01"),
    ({"nvidia-container-toolkit": "1.17.8-1", "bash": "5.2.15-2"}, "deb", None),
    # Debian's libxnvctrl0 (from nvidia-settings) comes with desktop tools, without any driver.
    ({"libxnvctrl0": "525.85.05-3~deb12u1", "nvidia-settings": "525.85.05-1"}, "deb", None),
    ({"nvidia-driver": ("3", "570.172.08", "1.el9")}, "rpm", "570.172.08"),
    ({"kmod-nvidia-open-dkms": ("3", "550.163.01", "1.el9")}, "rpm", "550.163.01"),
])
def test_installed_driver_version(installed, family, expect):
    primary = "nvidia-open-570" if family == "deb" else "nvidia-driver"
    assert pk.installed_driver_version(installed, primary, family) == expect


def test_other_branch_metas_are_removed_on_a_branch_switch():
    installed = {"nvidia-open-550": "550.163.01-1", "nvidia-fabricmanager-550": "550.163.01-1",
                 "nvidia-open-570": "570.172.08-1", "nvidia-driver": "570.172.08-1",
                 "nvidia-driver-535-server-open": "535.247.01-0ubuntu1"}
    assert pk.other_branch_metas(installed, spec()) == [
        "nvidia-driver-535-server-open", "nvidia-fabricmanager-550", "nvidia-open-550"]
    assert pk.other_branch_metas(installed, spec("rhel9")) == []
    # Same branch, other kernel module flavor.
    assert pk.other_branch_metas({"nvidia-open-570": "1", "cuda-drivers-570": "1"}, spec(open=False)) == [
        "nvidia-open-570"]
    assert pk.other_branch_metas({"nvidia-open-570": "1", "cuda-drivers-570": "1"}, spec()) == ["cuda-drivers-570"]


def test_versionlock_lines_and_block_merge_keep_other_entries():
    nevra = {"nvidia-driver": ("3", "570.172.08", "1.el9"), "kmod-nvidia-open-dkms": ("3", "570.172.08", "1.el9"),
             "libnvidia-container1": ("0", "1.17.8", "1"), "bash": ("0", "5.1.8", "9.el9")}
    lines = pk.versionlock_block(nevra, "570.172.08")
    assert lines == ["kmod-nvidia-open-dkms-3:570.172.08-1.el9.*", "nvidia-driver-3:570.172.08-1.el9.*"]
    existing = "# other tool\nkernel-0:5.14.0-427.el9.*\n"
    merged = pk.merge_block(existing, lines)
    assert merged.startswith(existing)
    assert pk.merge_block(merged, lines) == merged                     # idempotent
    assert pk.merge_block(merged, []) == existing                      # removal keeps the rest
    assert pk.merge_block(merged, ["x-0:1-1.*"]).count("BEGIN") == 1   # replaced, not appended


def test_set_ini_option_adds_section_or_replaces_key():
    text = "[commands]\napply_updates = yes\n\n[base]\n# keep me\nexcludepkgs = foo\ndebuglevel = 1\n"
    out = pk.set_ini_option(text, "base", "excludepkgs", "nvidia-*")
    assert out == "[commands]\napply_updates = yes\n\n[base]\n# keep me\nexcludepkgs = nvidia-*\ndebuglevel = 1\n"
    assert pk.set_ini_option(out, "base", "excludepkgs", "nvidia-*") == out
    assert pk.set_ini_option("[commands]\nx = 1\n", "base", "k", "v") == "[commands]\nx = 1\n[base]\nk = v\n"


def test_unattended_upgrades_blacklist_is_a_python_regex_sparing_the_toolkit():
    text = pk.unattended_upgrades_blacklist()
    pattern = re.search(r'"(.*)";', text).group(1)
    assert re.match(pattern, "nvidia-open-570") and re.match(pattern, "libnvidia-compute-570")
    assert not re.match(pattern, "libnvidia-container1")
    assert not re.match(pattern, "nvidia-container-toolkit")


@pytest.mark.parametrize("is_open,branch,flag", [(True, "570", "-m=kernel-open"), (False, "570", "-m=kernel"),
                                                 (False, "550", None)])
def test_runfile_command(is_open, branch, flag):
    path = "/opt/NVIDIA-Linux-x86_64-%s.100.01.run" % branch
    argv = pk.runfile_command(spec(source="runfile", runfile=path, open=is_open, branch=None))
    assert argv[:4] == ["sh", path, "--silent", "--dkms"]
    assert argv[4:] == ([flag] if flag else [])


def test_reboot_when_the_loaded_flavor_is_not_the_installed_one():
    required, reasons = pk.reboot_decision("570.172.08", "570.172.08", False, True, "proprietary", True)
    assert required and reasons == ["the loaded kernel module is proprietary, the installed one is open"]
    assert pk.reboot_decision("570.172.08", "570.172.08", False, True, "open", True) == (False, [])


@pytest.mark.parametrize("installed,loaded,nouveau,gpu,expect", [
    ("570.172.08", "570.172.08", False, True, False),
    ("570.172.08", "570.158.01", False, True, True),
    ("570.172.08", None, False, True, True),
    ("570.172.08", None, False, False, False),   # a container or a GPU-less host: nothing to load
    ("570.172.08", "570.172.08", True, True, True),
    (None, None, True, False, True),
])
def test_reboot_decision(installed, loaded, nouveau, gpu, expect):
    required, reasons = pk.reboot_decision(installed, loaded, nouveau, gpu)
    assert required is expect
    assert bool(reasons) is expect
    if loaded and installed and loaded != installed:
        assert loaded in reasons[0] and installed in reasons[0]


# -- bad input -----------------------------------------------------------------------

@pytest.mark.parametrize("distro,params,message", [
    ({"id": "sles", "version": "15.5", "major": "15", "pretty_name": "SLES 15 SP5"}, {"branch": "570"},
     "unsupported distribution 'SLES 15 SP5'"),
    ({"id": "ubuntu", "version": "20.04", "major": "20"}, {"branch": "570"}, "unsupported ubuntu release '20.04'"),
    ({"id": "debian", "version": "11", "major": "11"}, {"branch": "570"}, "unsupported debian release"),
    (DISTROS["debian12"], {"version": "570.172"}, None),
    (DISTROS["debian12"], {"version": "570"}, "is not a driver version"),
    (DISTROS["debian12"], {"version": "latest"}, "is not a driver version"),
    (DISTROS["debian12"], {"version": "570.172.08", "branch": "575"}, "is not on branch 575"),
    (DISTROS["debian12"], {"branch": "r570"}, "is not a driver branch"),
    (DISTROS["debian12"], {}, "set branch"),
    (DISTROS["debian12"], {"branch": "570", "source": "mirror"}, "needs mirror_url"),
    (DISTROS["debian12"], {"branch": "570", "source": "runfile"}, "needs runfile"),
    (DISTROS["debian12"], {"source": "runfile", "runfile": "/opt/driver.run"}, "cannot tell the driver version"),
    (DISTROS["debian12"], {"source": "runfile", "runfile": "/opt/NVIDIA-Linux-aarch64-570.172.08.run"},
     "is for aarch64"),
    (DISTROS["rhel9"], {"branch": "570", "source": "distro"}, "source=distro is for Ubuntu and Debian"),
    (DISTROS["debian12"], {"branch": "570", "source": "ppa"}, "source must be one of"),
])
def test_bad_input_is_refused_with_a_clear_message(distro, params, message):
    if message is None:
        assert pk.normalize(params, distro, "x86_64")["version"] == params["version"]
        return
    with pytest.raises(pk.DriverSpecError, match=re.escape(message)):
        pk.normalize(params, distro, "x86_64")


def test_unsupported_arch():
    with pytest.raises(pk.DriverSpecError, match="unsupported architecture 'ppc64le'"):
        pk.normalize({"branch": "570"}, DISTROS["rhel9"], "ppc64le")
