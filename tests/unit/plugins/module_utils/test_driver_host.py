"""Host probes over a fake /proc, /sys and /etc tree."""

import os

import pytest

from fakes.gpu_node import FakeNode

from ansible_collections.gpuops.platform.plugins.module_utils._driver import host as driver_host


@pytest.fixture
def node(tmp_path):
    return FakeNode(tmp_path)


@pytest.mark.parametrize("flavor", ["open", "proprietary"])
def test_loaded_version_and_flavor_from_proc(node, flavor):
    node.loaded_driver("570.172.08", flavor)
    assert driver_host.loaded_module_version(node.root) == "570.172.08"
    assert driver_host.loaded_module_flavor(node.root) == flavor


def test_sys_module_version_is_the_fallback(node):
    node.write("sys/module/nvidia/version", "575.57.08\n")
    assert driver_host.loaded_module_version(node.root) == "575.57.08"


def test_nothing_loaded(node):
    node.modules("ext4", "nvme")
    assert driver_host.loaded_module_version(node.root) is None
    assert driver_host.loaded_module_flavor(node.root) is None
    assert driver_host.nouveau_loaded(node.root) is False


def test_nouveau_from_proc_modules(node):
    node.modules("drm", "nouveau", "ttm")
    assert driver_host.nouveau_loaded(node.root) is True


@pytest.mark.parametrize("enabled", [True, False])
def test_secure_boot_from_efivars(node, enabled):
    node.secure_boot(enabled)
    assert driver_host.secure_boot(node.root) is enabled


def test_secure_boot_unknown_on_legacy_boot(node):
    assert driver_host.secure_boot(node.root) is None


def test_secure_boot_off_on_efi_without_the_variable(node):
    node.efi_without_secure_boot_var()
    assert driver_host.secure_boot(node.root) is False


def test_secure_boot_truncated_variable_is_unknown(node):
    node.write(driver_host.SECURE_BOOT_VAR, b"\x07\x00", binary=True)
    assert driver_host.secure_boot(node.root) is None


def test_pci_scan_finds_gpus_and_nvswitches_only(node):
    node.hgx_h100()
    node.pci("0000:c1:00.1", "0x10de", "0x22ba", "0x040300")  # NVIDIA HDMI audio: neither
    node.pci("0000:c1:00.0", "0x10de", "0x2684", "0x030000")  # a VGA-class GPU (RTX 4090)
    scan = driver_host.pci_scan(node.root)
    assert len(scan["gpus"]) == 9
    assert len(scan["nvswitches"]) == 4
    assert scan["gpus"][0] == {"bus_id": "0000:18:00.0", "device_id": "0x2330", "class": "0x030200"}
    assert {s["device_id"] for s in scan["nvswitches"]} == {"0x22a3"}
    assert "0000:c1:00.1" not in [g["bus_id"] for g in scan["gpus"]]


def test_pci_scan_without_sysfs(node):
    assert driver_host.pci_scan(node.root) == {"gpus": [], "nvswitches": []}


@pytest.mark.parametrize("distro,version,expect", [
    ("debian", "12", ("debian", "12", "12")),
    ("ubuntu", "24.04", ("ubuntu", "24.04", "24")),
    ("rocky", "8.10", ("rocky", "8.10", "8")),
    ("rhel", "9.4", ("rhel", "9.4", "9")),
])
def test_distro_info(node, distro, version, expect):
    node.os(distro, version)
    info = driver_host.distro_info(node.root)
    assert (info["id"], info["version"], info["major"]) == expect


def test_os_release_falls_back_to_usr_lib(node):
    node.write("usr/lib/os-release", 'ID=debian\nVERSION_ID="12"\n')
    assert driver_host.distro_info(node.root)["id"] == "debian"


def test_kernel_headers(node):
    node.headers("6.1.0-37-amd64")
    assert driver_host.kernel_headers_present("6.1.0-37-amd64", node.root)
    assert not driver_host.kernel_headers_present("6.1.0-38-amd64", node.root)


def test_probe_gathers_everything(node, monkeypatch):
    monkeypatch.setattr(driver_host, "kernel_release", lambda: "6.1.0-37-amd64")
    monkeypatch.setattr(driver_host, "machine_arch", lambda: "aarch64")
    node.os("ubuntu", "22.04").modules("nouveau").secure_boot(True).headers("6.1.0-37-amd64").hgx_h100()
    facts = driver_host.probe(node.root)
    assert facts["arch"] == "aarch64" and facts["kernel"] == "6.1.0-37-amd64"
    assert facts["kernel_headers_present"] and facts["nouveau_loaded"] and facts["secure_boot"]
    assert facts["loaded_version"] is None
    assert (len(facts["gpus"]), len(facts["nvswitches"])) == (8, 4)


def test_free_space_one_entry_per_filesystem(node):
    os.makedirs(os.path.join(node.root, "var"))
    result = driver_host.free_space_mib(["/", "/var", "/missing"], node.root)
    assert [r["path"] for r in result] == ["/"]  # /var is on the same filesystem; /missing is skipped
    assert result[0]["free_mib"] > 0
