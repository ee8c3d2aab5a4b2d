"""Editing a large containerd config through only its CRI tables (container_runtime_toml)."""
import os

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime import toml_file as toml_cut
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import ConfigError
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.containerd import plan_containerd
from container_runtime_helpers import CRI2, CRI3, FIXTURES, fixture_text, load_toml, place, runtimes

CONTAINERD_FIXTURES = sorted(p.name for p in FIXTURES.glob("containerd-*.toml")) + ["k3s-rewritten.toml"]
CASES = [dict(), dict(set_as_default=True, enable_cdi=True, systemd_cgroup=True)]


def unrelated_tables(count, plugin=CRI2):
    """Tables a real config may hold many of, none on the runtimes' path (some look like headers inside)."""
    return "".join(
        '\n[plugins."io.example.v1.p%d"]\n  address = "/run/p%d.sock"  # [not.a.header]\n'
        "  notes = '''\n[plugins.\"io.example.fake\"]\n'''\n"
        '\n  [plugins."io.example.v1.p%d".options]\n    level = %d\n'
        '\n[[plugins."io.example.v1.p%d".rules]]\n  match = ["a", "b"]\n'
        '\n[plugins."%s".registry.mirrors."r%d.example.com"]\n  endpoint = ["https://r%d.example.com"]\n'
        % (i, i, i, i, i, plugin, i, i) for i in range(count))


def plans(path, **kwargs):
    return (plan_containerd(path, scoped=False, **kwargs), plan_containerd(path, scoped=True, **kwargs))


@pytest.mark.parametrize("name", CONTAINERD_FIXTURES)
@pytest.mark.parametrize("mode", ["in_place", "drop_in"])
@pytest.mark.parametrize("case", CASES, ids=["plain", "default-cdi-cgroup"])
def test_the_cut_writes_what_the_whole_file_edit_writes(tmp_path, name, mode, case):
    path = place(tmp_path, "etc/containerd/config.toml", fixture_text(name))
    whole, cut = plans(path, mode=mode, **case)
    for full_edit, cut_edit in zip(whole.edits, cut.edits):
        assert load_toml(cut_edit.after) == load_toml(full_edit.after)
        if mode == "in_place":  # the same lines but for where a table tomlkit adds goes, and blank lines
            assert sorted(filter(None, cut_edit.after.splitlines())) == \
                sorted(filter(None, full_edit.after.splitlines()))
        # (a version 2 drop-in copies the CRI section; without the tables between its parts
        # it is one table, copied with its layout instead of rebuilt from data)


def scoped_runs(monkeypatch):
    """The ``scoped`` flag of every TomlFile rendered while the test runs."""
    seen = []
    real_render = toml_cut.TomlFile.render

    def render(self):
        seen.append(self.scoped)
        return real_render(self)

    monkeypatch.setattr(toml_cut.TomlFile, "render", render)
    return seen


def test_without_a_fast_parser_the_whole_file_is_edited(tmp_path, monkeypatch):
    monkeypatch.setattr(toml_cut, "SCOPED_MIN_SIZE", 1000)
    monkeypatch.setattr(toml_cut, "HAS_FAST_TOML", False)
    seen = scoped_runs(monkeypatch)
    path = place(tmp_path, "etc/containerd/config.toml", fixture_text("containerd-1.7-kubeadm.toml"))
    assert plan_containerd(path).changed and seen == [False]


@pytest.mark.skipif(not toml_cut.HAS_FAST_TOML, reason="no tomllib or tomli on this Python: the whole file is edited")
@pytest.mark.parametrize("fixture, plugin", [("containerd-1.7-kubeadm.toml", CRI2), ("containerd-2.1-default.toml", CRI3)])
def test_a_large_config_is_cut_and_every_other_table_kept_byte_for_byte(tmp_path, monkeypatch, fixture, plugin):
    monkeypatch.setattr(toml_cut, "SCOPED_MIN_SIZE", 1000)  # large enough: any file but a tiny one
    extra = unrelated_tables(30, plugin)
    original = fixture_text(fixture) + extra
    path = place(tmp_path, "etc/containerd/config.toml", original)
    seen = scoped_runs(monkeypatch)
    plan = plan_containerd(path, set_as_default=True)
    assert seen == [True]  # the fast path was taken
    after = plan.edits[0].after
    assert extra in after  # the tables off the path, unchanged and in their order
    data, before = load_toml(after), load_toml(original)
    assert runtimes(data, plugin)["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert data["plugins"][plugin]["containerd"]["default_runtime_name"] == "nvidia"
    del runtimes(data, plugin)["nvidia"]
    del data["plugins"][plugin]["containerd"]["default_runtime_name"]
    before["plugins"][plugin]["containerd"].pop("default_runtime_name", None)
    assert data == before
    # and the second run changes nothing, returning the file as it is
    place(tmp_path, "etc/containerd/config.toml", after)
    assert plan_containerd(path, set_as_default=True).edits[0].after == after


@pytest.mark.parametrize("trap", [
    # a header-like line in a multi-line string on the edited path
    '\n[plugins."{cri}".containerd.runtimes.runc]\n  notes = """\n[plugins."{cri}".containerd.runtimes.fake]\n"""\n',
    # a multi-line array of arrays on the edited path
    '\n[plugins."{cri}".containerd.runtimes.runc]\n  matrix = [\n[1]\n]\n',
    # an array of tables on the edited path
    '\n[[plugins."{cri}".containerd.hooks]]\n  path = "/x"\n',
])
def test_a_cut_that_does_not_check_out_falls_back_to_the_whole_file(tmp_path, trap):
    text = fixture_text("containerd-1.7-kubeadm.toml").replace(
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]', "[plugins.placeholder_for_trap]")
    text = text.replace('[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]',
                        "[plugins.placeholder_for_trap.options]") if "runtimes.runc]" in trap else \
        fixture_text("containerd-1.7-kubeadm.toml")
    text += unrelated_tables(10) + trap.replace("{cri}", CRI2)
    path = place(tmp_path, "etc/containerd/config.toml", text)
    whole, cut = plans(path, set_as_default=True)
    assert cut.edits[0].after == whole.edits[0].after
    assert load_toml(cut.edits[0].after)  # still valid TOML


def test_bad_toml_anywhere_in_a_large_file_is_reported_before_any_cut(tmp_path):
    text = fixture_text("containerd-1.7-kubeadm.toml") + unrelated_tables(10) + '\n[plugins."io.example.broken"\n'
    path = place(tmp_path, "etc/containerd/config.toml", text)
    with pytest.raises(ConfigError, match="is not valid TOML"):
        plan_containerd(path)


@pytest.mark.parametrize("text, expected", [
    ("a = 1\n[x]\nb = 2\n", [None, toml_cut.OFF]),
    ("[plugins]\n", [None, ("plugins",)]),
    ("[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n", [None, ("plugins", CRI2, "containerd")]),
    ("[ 'plugins' . \"io.containerd.grpc.v1.cri\" ]  # c\n", [None, ("plugins", CRI2)]),
    ("[[plugins.list]]\n", [None, toml_cut.OFF]),
    ("[other.table]\n[plugins.x]\n", [None, toml_cut.OFF, toml_cut.OFF]),
])
def test_chunks(text, expected):
    found = toml_cut.chunks(text, ("plugins", CRI2, "containerd"))
    assert [path for path, _array, _text in found] == expected
    assert "".join(chunk for _p, _a, chunk in found) == text


@pytest.mark.skipif(not toml_cut.HAS_FAST_TOML, reason="no tomllib or tomli on this Python: the whole file is edited")
@pytest.mark.parametrize("mode", ["in_place", "drop_in"])
@pytest.mark.parametrize("version, plugin", [(2, CRI2), (3, CRI3)])
def test_a_large_config_without_a_cri_table_is_cut_not_parsed_whole_by_tomlkit(tmp_path, monkeypatch, mode, version,
                                                                               plugin):
    """Other plugins define ``plugins``, the CRI section is missing: the cut holds no ``plugins`` table.

    That used to count as a cut that does not check out, and the whole file went
    through tomlkit (31 s for 1 MB).
    """
    import tomlkit
    monkeypatch.setattr(toml_cut, "SCOPED_MIN_SIZE", 1000)
    extra = unrelated_tables(30, "io.example.v1.other").replace('[plugins."io.example.v1.other".registry', "[x")
    original = "version = %d\n" % version + extra
    path = place(tmp_path, "etc/containerd/config.toml", original)
    parsed = []
    real_parse = tomlkit.parse
    monkeypatch.setattr(tomlkit, "parse", lambda text: parsed.append(len(text)) or real_parse(text))
    seen = scoped_runs(monkeypatch)
    plan = plan_containerd(path, mode=mode, set_as_default=True)
    assert seen[0] is True  # the main config went through the cut
    assert max(parsed) < len(original) / 4, parsed  # tomlkit never got the whole file
    main_after = plan.edits[0].after
    assert extra in main_after  # every other table kept byte for byte, in its order
    effective = load_toml(plan.edits[-1].after)
    assert runtimes(effective, plugin)["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    before, after = load_toml(original), load_toml(main_after)
    if mode == "in_place":
        del after["plugins"][plugin]
        assert after == before
    # and the second run changes nothing
    for edit in plan.edits:
        os.makedirs(os.path.dirname(edit.path), exist_ok=True)
        with open(edit.path, "w") as handle:
            handle.write(edit.after)
    assert not plan_containerd(path, mode=mode, set_as_default=True).changed
