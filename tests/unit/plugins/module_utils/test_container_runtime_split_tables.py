"""containerd configs whose tables are split: a sub-table written after other tables.

TOML allows ``[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gvisor]``
at the end of the file although ``[plugins]`` came first, and install scripts
that append a runtime to config.toml write exactly that.
"""
import os

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import deep_merge
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.containerd import plan_containerd
from container_runtime_helpers import CRI2, CRI3, fixture_text, load_toml, place, runtimes

NVIDIA_BIN = "/usr/bin/nvidia-container-runtime"
CRI = {2: CRI2, 3: CRI3}
BASE = {2: "containerd-1.6-default.toml", 3: "containerd-2.1-default.toml"}


def apply(plan):
    for edit in plan.changed_edits:
        os.makedirs(os.path.dirname(edit.path), exist_ok=True)
        with open(edit.path, "w") as handle:
            handle.write(edit.after)


def strip_nvidia(data, cri):
    """The parsed config without what the NVIDIA edit may add or set."""
    section = data["plugins"][cri]
    section.get("containerd", {}).get("runtimes", {}).pop("nvidia", None)
    section.get("containerd", {}).pop("default_runtime_name", None)
    if not section.get("containerd", True):
        section.pop("containerd")
    section.pop("enable_cdi", None)
    data.pop("imports", None)
    return data


def comment_lines(text):
    return [line.strip() for line in text.splitlines() if line.strip().startswith("#")]


def appended(version, snippet):
    """A default config of ``version`` with ``snippet`` (tables of the CRI plugin) appended at the end."""
    quote = '"' if version == 2 else "'"
    cri = "plugins.%s%s%s" % (quote, CRI[version], quote)
    return fixture_text(BASE[version]) + "\n" + snippet.replace("CRI", cri)


# Split at every level below [plugins]: the runtimes, one runtime, the CRI plugin
# itself, and a config whose CRI tables are only ever implicit.
SPLITS = {
    "another-runtime": (
        "# appended by the gVisor installer\n"
        "[CRI.containerd.runtimes.gvisor]\n"
        '  runtime_type = "io.containerd.runsc.v1"\n'
        "[CRI.containerd.runtimes.gvisor.options]\n"
        '  TypeUrl = "io.containerd.runsc.v1.options"\n'
    ),
    "runc-options-later": None,  # built from the base below: runc.options moved to the end
    "cri-sub-table": (
        "# a registry mirror, appended\n"
        '[CRI.registry.mirrors."docker.io"]\n'
        '  endpoint = ["https://mirror.example.com"]\n'
    ),
    "kata-and-mirror": (
        "[CRI.containerd.runtimes.kata]\n"
        '  runtime_type = "io.containerd.kata.v2"\n'
        "\n[metrics2]\n"
        '  address = ""\n'
        "\n[CRI.containerd.runtimes.kata.options]\n"
        '  ConfigPath = "/opt/kata/configuration.toml"\n'
    ),
}


def split_config(version, kind):
    if kind != "runc-options-later":
        return appended(version, SPLITS[kind])
    # runc's options table cut out of its place and written at the end of the file
    text = fixture_text(BASE[version])
    lines = text.splitlines(True)
    start = next(i for i, line in enumerate(lines) if ".runtimes.runc.options]" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("["))
    return "".join(lines[:start] + lines[end:]) + "\n" + "".join(lines[start:end])


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("kind", sorted(SPLITS))
@pytest.mark.parametrize("mode", ["in_place", "drop_in"])
@pytest.mark.parametrize("set_as_default, enable_cdi", [(False, False), (True, True)])
def test_split_tables_keep_everything_and_settle(tmp_path, version, kind, mode, set_as_default, enable_cdi):
    text = split_config(version, kind)
    original = load_toml(text)
    path = place(tmp_path, "etc/containerd/config.toml", text)
    options = dict(mode=mode, set_as_default=set_as_default, enable_cdi=enable_cdi)
    plan = plan_containerd(path, **options)
    apply(plan)
    main_text = open(path).read()
    main = load_toml(main_text)
    # the main config keeps everything else, comments included
    assert strip_nvidia(main, CRI[version]) == strip_nvidia(load_toml(text), CRI[version])
    assert comment_lines(main_text) == comment_lines(text)
    # what containerd reads has the NVIDIA runtime, copied from runc, beside every other runtime
    effective = load_toml(plan.edits[-1].after)
    if mode == "drop_in" and version == 3:  # containerd 2.x merges the drop-in key by key
        effective = deep_merge(load_toml(main_text), effective)
    rts = runtimes(effective, CRI[version])
    assert set(rts) == set(runtimes(original, CRI[version])) | {"nvidia"}
    runc = runtimes(original, CRI[version])["runc"]
    assert rts["nvidia"]["runtime_type"] == "io.containerd.runc.v2"
    assert rts["nvidia"]["options"] == dict(runc["options"], BinaryName=NVIDIA_BIN)
    cri = effective["plugins"][CRI[version]]
    assert (cri["containerd"].get("default_runtime_name") == "nvidia") is set_as_default
    assert cri.get("enable_cdi", False) is (enable_cdi or original["plugins"][CRI[version]].get("enable_cdi", False))
    # a second run changes nothing
    assert not plan_containerd(path, **options).changed


@pytest.mark.parametrize("mode", ["in_place", "drop_in"])
def test_containerd_16_with_gvisor_appended(tmp_path, mode):
    """The reported case: `containerd config default` output with a gVisor runtime appended."""
    original = fixture_text("containerd-1.6-appended-gvisor.toml")
    path = place(tmp_path, "etc/containerd/config.toml", original)
    plan = plan_containerd(path, mode=mode)
    apply(plan)
    rts = runtimes(load_toml(plan.edits[-1].after), CRI2)
    assert sorted(rts) == ["gvisor", "nvidia", "runc"]
    assert rts["gvisor"] == {
        "runtime_type": "io.containerd.runsc.v1",
        "pod_annotations": ["dev.gvisor.*"],
        "options": {"TypeUrl": "io.containerd.runsc.v1.options", "ConfigPath": "/etc/containerd/runsc.toml"},
    }
    assert rts["nvidia"]["options"] == dict(rts["runc"]["options"], BinaryName=NVIDIA_BIN)
    main = open(path).read()
    if mode == "in_place":
        # the new runtime sits right after runc, indented like it; the appended part is untouched
        header = '\n        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        assert header in main
        assert main.index(".runtimes.runc.options]") < main.index(header) \
            < main.index(".containerd.untrusted_workload_runtime]")
        tail = original[original.index("# gVisor, appended"):]
        assert main.endswith(tail)
        untrusted = '      [plugins."io.containerd.grpc.v1.cri".containerd.untrusted_workload_runtime]'
        added = main[main.index(header):main.index(untrusted)]
        assert main.replace(added, "\n") == original  # nothing else changed
    else:
        assert main.endswith(original[original.index("\noom_score"):])
    assert not plan_containerd(path, mode=mode).changed


@pytest.mark.parametrize("mode", ["in_place", "drop_in"])
def test_containerd_21_with_gvisor_appended(tmp_path, mode):
    original = fixture_text("containerd-2.1-appended-gvisor.toml")
    path = place(tmp_path, "etc/containerd/config.toml", original)
    plan = plan_containerd(path, mode=mode, set_as_default=True)
    apply(plan)
    main = open(path).read()
    assert main.endswith(original[original.index("# gVisor, appended"):])
    assert sorted(runtimes(load_toml(main), CRI3)) == (["gvisor", "nvidia", "runc"] if mode == "in_place"
                                                       else ["gvisor", "runc"])
    drop_in = load_toml(plan.edits[-1].after)
    assert runtimes(drop_in, CRI3)["nvidia"]["options"]["BinaryName"] == NVIDIA_BIN
    assert drop_in["plugins"][CRI3]["containerd"]["default_runtime_name"] == "nvidia"
    assert not plan_containerd(path, mode=mode, set_as_default=True).changed


@pytest.mark.parametrize("mode", ["in_place", "drop_in"])
def test_only_implicit_tables_get_one_header_each(tmp_path, mode):
    """No [CRI] or [containerd] header anywhere: the settings need one, written once, before the runtimes."""
    text = (
        "version = 2\n\n"
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
        '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
        "    SystemdCgroup = true\n\n"
        "[metrics]\n"
        '  address = "127.0.0.1:1338"\n\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gvisor]\n'
        '  runtime_type = "io.containerd.runsc.v1"\n'
    )
    path = place(tmp_path, "etc/containerd/config.toml", text)
    options = dict(mode=mode, set_as_default=True, enable_cdi=True)
    plan = plan_containerd(path, **options)
    apply(plan)
    after = plan.edits[-1].after
    data = load_toml(after)  # a header written twice would not parse
    cri = data["plugins"][CRI2]
    assert cri["enable_cdi"] is True
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert sorted(cri["containerd"]["runtimes"]) == ["gvisor", "nvidia", "runc"]
    assert cri["containerd"]["runtimes"]["nvidia"]["options"] == {"SystemdCgroup": True, "BinaryName": NVIDIA_BIN}
    assert after.count('[plugins."io.containerd.grpc.v1.cri"]\n') == 1
    assert after.count('[plugins."io.containerd.grpc.v1.cri".containerd]\n') == 1
    assert load_toml(open(path).read())["metrics"] == {"address": "127.0.0.1:1338"}
    assert not plan_containerd(path, **options).changed


def test_split_nvidia_runtime_is_corrected_in_its_parts(tmp_path):
    """An NVIDIA runtime whose options were appended later, with a stale binary: fixed where it is written."""
    text = appended(2, (
        "[CRI.containerd.runtimes.nvidia]\n"
        '  runtime_type = "io.containerd.runc.v1"\n'
        "  privileged_without_host_devices = true\n"
        "\n[metrics2]\n"
        '  address = ""\n'
        "\n[CRI.containerd.runtimes.nvidia.options]\n"
        '  BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"\n'
    ))
    path = place(tmp_path, "etc/containerd/config.toml", text)
    plan = plan_containerd(path)
    apply(plan)
    after = open(path).read()
    nvidia = runtimes(load_toml(after), CRI2)["nvidia"]
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["privileged_without_host_devices"] is True
    assert nvidia["options"]["BinaryName"] == NVIDIA_BIN
    assert after.count(".runtimes.nvidia]") == 1 and after.count(".runtimes.nvidia.options]") == 1
    # the options stay in their appended table, after [metrics2]
    assert after.index("[metrics2]") < after.index(".runtimes.nvidia.options]") < after.index(NVIDIA_BIN)
    assert not plan_containerd(path).changed
