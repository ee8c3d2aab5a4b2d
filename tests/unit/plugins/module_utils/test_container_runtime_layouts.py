"""One config, many TOML layouts: the edit means the same whatever the layout, and a write is what was planned.

TOML writes the same data as [header] tables, dotted keys under a table,
dotted keys at the root, or inline tables. tomlkit edits each layout
differently; what containerd (or CRI-O) reads after the edit must not depend
on which one the operator used. And whatever tomlkit writes is read back
before it is written: a text that means something else is refused.
"""
import json
import re
import time
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tomlkit
from tomlkit import container as tomlkit_container

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime import base, docker, toml_file
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import ConfigError, WriteMismatch
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.containerd import plan_containerd
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.crio import plan_crio
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.docker import plan_docker
from container_runtime_helpers import CRI2, CRI3, load_toml

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BINARY = "/usr/bin/nvidia-container-runtime"
CONFIG = "/etc/containerd/config.toml"

# How a table is written: its own [header], dotted keys in its parent, or an inline table.
HEADER, DOTTED, INLINE = "header", "dotted", "inline"


def _key(name):
    return name if re.match(r"^[A-Za-z0-9_-]+$", name) else json.dumps(name)


def _value(value):
    return tomlkit.item(value).as_string()


def _inline(data):
    return "{%s}" % ", ".join("%s = %s" % (_key(k), _inline(v) if isinstance(v, dict) else _value(v))
                              for k, v in data.items())


def render(data, style):
    """``data`` as TOML, each table written as ``style(path)`` says (a header only where TOML allows one)."""
    lines, headers = [], []
    _body(data, (), (), style, lines, headers)
    return "\n".join(lines + headers) + "\n"


def _body(data, table_path, rel, style, lines, headers):
    """The lines of the table at ``table_path`` for ``data`` (at ``rel`` below it), and its sub-tables' headers."""
    for key, value in data.items():
        path = table_path + rel + (key,)
        if not isinstance(value, dict):
            lines.append("%s = %s" % (".".join(_key(k) for k in rel + (key,)), _value(value)))
            continue
        wanted = style(path)
        if not value or wanted == INLINE or (wanted == HEADER and rel):
            # an empty table is no dotted key; no [header] inside dotted keys
            lines.append("%s = %s" % (".".join(_key(k) for k in rel + (key,)), _inline(value)))
        elif wanted == DOTTED:
            _body(value, table_path, rel + (key,), style, lines, headers)
        else:
            sub_lines = ["[%s]" % ".".join(_key(k) for k in path)]
            sub_headers = []
            _body(value, path, (), style, sub_lines, sub_headers)
            headers.extend(["", ] + sub_lines + sub_headers)


LAYOUTS = {
    "tables": lambda path: HEADER,
    "root_dotted": lambda path: DOTTED,
    "dotted_under_table": lambda path: HEADER if len(path) == 1 else DOTTED,
    "inline": lambda path: HEADER if len(path) < 4 else INLINE,
    "dotted_then_inline": lambda path: DOTTED if len(path) < 5 else INLINE,
}

keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-", min_size=1, max_size=8)
scalars = st.one_of(st.booleans(), st.integers(min_value=-2 ** 31, max_value=2 ** 31),
                    st.text(alphabet="abcXYZ ./-_\"'\\", max_size=12),
                    st.lists(st.text(alphabet="abc/._-", max_size=6), max_size=3))
flat_tables = st.dictionaries(keys, scalars, max_size=4)
runc_options = st.dictionaries(st.sampled_from(["SystemdCgroup", "NoPivotRoot", "Root", "IoUid", "BinaryName"]),
                               scalars, max_size=4)


@st.composite
def containerd_configs(draw, version):
    cri = CRI2 if version == 2 else CRI3
    runc = {"runtime_type": "io.containerd.runc.v2"}
    options = draw(runc_options)
    if options or draw(st.booleans()):
        runc["options"] = options
    runtimes = {"runc": runc}
    for name, table in draw(st.dictionaries(keys.filter(lambda k: k not in ("runc", "nvidia")),
                                            flat_tables.map(lambda t: dict(t, runtime_type="io.containerd.kata.v2")),
                                            max_size=2)).items():
        runtimes[name] = table
    containerd = {"runtimes": runtimes}
    if draw(st.booleans()):
        containerd["default_runtime_name"] = "runc"
    settings_ = draw(flat_tables)
    cri_section = dict(((k, v) for k, v in settings_.items() if k not in ("containerd", "cdi_spec_dirs")),
                       containerd=containerd)
    plugins = dict((("io.containerd.%s.v1" % name), table)
                   for name, table in draw(st.dictionaries(keys, flat_tables, max_size=2)).items())
    plugins[cri] = cri_section
    top = dict((k, v) for k, v in draw(flat_tables).items() if k not in ("version", "imports", "plugins"))
    return dict(top, version=version, plugins=plugins)


def layout_style(name, choices):
    """A named layout, or ``mixed``: each table's style drawn (``choices`` cycles through the tables)."""
    if name != "mixed":
        return LAYOUTS[name]
    drawn = {}

    def style(path):
        if path not in drawn:
            drawn[path] = choices[len(drawn) % len(choices)]
        return drawn[path]
    return style


def planned(text, version, **options):
    files = {CONFIG: text}
    plan = plan_containerd(CONFIG, reader=files.get, globber=lambda pattern: [], config_version=version, **options)
    return plan, dict((edit.path, edit.after) for edit in plan.edits)


@SETTINGS
@given(version=st.sampled_from([2, 3]), data=st.data(),
       layout=st.sampled_from(sorted(LAYOUTS) + ["mixed"]),
       choices=st.lists(st.sampled_from([HEADER, DOTTED, INLINE]), min_size=1, max_size=6),
       mode=st.sampled_from(["in_place", "drop_in"]), set_as_default=st.booleans(), enable_cdi=st.booleans(),
       systemd_cgroup=st.sampled_from([None, True]), cut=st.booleans())
def test_containerd_edit_means_the_same_in_every_layout(version, data, layout, choices, mode, set_as_default,
                                                        enable_cdi, systemd_cgroup, cut):
    """``cut``: the main config is edited through its CRI tables only, as a large one is (toml_file.TomlFile)."""
    with mock.patch.object(toml_file, "SCOPED_MIN_SIZE", 0 if cut else toml_file.SCOPED_MIN_SIZE):
        _check_layout(version, data, layout, choices, mode, set_as_default, enable_cdi, systemd_cgroup)


def _check_layout(version, data, layout, choices, mode, set_as_default, enable_cdi, systemd_cgroup):
    config = data.draw(containerd_configs(version))
    plain_text = render(config, LAYOUTS["tables"])
    text = render(config, layout_style(layout, choices))
    assert load_toml(text) == load_toml(plain_text) == config  # the same document, another layout
    options = dict(mode=mode, set_as_default=set_as_default, enable_cdi=enable_cdi, systemd_cgroup=systemd_cgroup)
    _plan, expected = planned(plain_text, version, **options)
    plan, got = planned(text, version, **options)
    assert sorted(got) == sorted(expected)
    for path in expected:
        assert load_toml(got[path]) == load_toml(expected[path]), path
    # every setting of the operator is still there, and the NVIDIA runtime inherits runc's options
    cri = CRI2 if version == 2 else CRI3
    main = load_toml(got[CONFIG])
    assert main["plugins"][cri]["containerd"]["runtimes"]["runc"] == config["plugins"][cri]["containerd"]["runtimes"]["runc"]
    effective = load_toml(plan.edits[-1].after)
    nvidia = effective["plugins"][cri]["containerd"]["runtimes"]["nvidia"]
    wanted = dict(config["plugins"][cri]["containerd"]["runtimes"]["runc"].get("options", {}), BinaryName=BINARY)
    if systemd_cgroup is not None:
        wanted["SystemdCgroup"] = systemd_cgroup
    assert nvidia["options"] == wanted
    # a second run finds nothing to do
    files = dict(got)
    again = plan_containerd(CONFIG, reader=files.get, globber=lambda pattern: [CONFIG.replace("config.toml", "conf.d/99-nvidia.toml")]
                            if mode == "drop_in" else [], config_version=version, **options)
    assert not again.changed


ROOT_DOTTED = """version = {version}
# runc with the systemd cgroup driver
plugins."{cri}".containerd.runtimes.runc.runtime_type = "io.containerd.runc.v2"
plugins."{cri}".containerd.runtimes.runc.options.SystemdCgroup = true  # kubelet uses systemd
plugins."{cri}".sandbox_image = "registry.k8s.io/pause:3.10"

[plugins."io.containerd.grpc.v1.cri".registry]
config_path = "/etc/containerd/certs.d"
"""


@pytest.mark.parametrize("version", [2, 3])
def test_root_level_dotted_keys_keep_every_setting(version):
    """The reported case: runc kept SystemdCgroup, nvidia got no junk ``plugins`` key, and a second run is a no-op."""
    cri = CRI2 if version == 2 else CRI3
    text = ROOT_DOTTED.format(version=version, cri=cri).replace("io.containerd.grpc.v1.cri", cri)
    plan, files = planned(text, version)
    after = load_toml(files[CONFIG])
    runtimes = after["plugins"][cri]["containerd"]["runtimes"]
    assert runtimes["runc"] == {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": True}}
    assert runtimes["nvidia"] == {"runtime_type": "io.containerd.runc.v2",
                                  "options": {"SystemdCgroup": True, "BinaryName": BINARY}}
    assert after["plugins"][cri]["sandbox_image"] == "registry.k8s.io/pause:3.10"
    assert after["plugins"][cri]["registry"] == {"config_path": "/etc/containerd/certs.d"}
    assert "# runc with the systemd cgroup driver" in files[CONFIG]
    assert plan.changed
    assert not planned(files[CONFIG], version)[0].changed


def test_crio_drop_in_with_dotted_keys_is_edited_in_place():
    drop_in = "/etc/crio/crio.conf.d/99-nvidia.toml"
    files = {drop_in: 'crio.runtime.runtimes.nvidia.monitor_path = "/usr/libexec/crio/conmon"\n'
                      'crio.metrics.enable_metrics = true\n'}
    plan = plan_crio("/etc/crio/crio.conf", reader=files.get, globber=lambda pattern: [])
    after = load_toml(plan.edits[0].after)
    assert after["crio"]["metrics"] == {"enable_metrics": True}
    assert after["crio"]["runtime"]["runtimes"]["nvidia"] == {
        "monitor_path": "/usr/libexec/crio/conmon", "runtime_path": BINARY, "runtime_type": "oci"}


def _broken_dump(doc):
    """tomlkit writing a text that means something else (a setting lost)."""
    return tomlkit.dumps(doc).replace("SystemdCgroup = true", "")


@pytest.mark.parametrize("mode", ["in_place", "drop_in"])
def test_a_text_that_reads_back_differently_is_not_planned(monkeypatch, mode):
    monkeypatch.setattr(base, "dump_toml", _broken_dump)
    monkeypatch.setattr(toml_file, "dump_toml", _broken_dump)
    text = render(load_toml(ROOT_DOTTED.format(version=2, cri=CRI2)), LAYOUTS["tables"])
    with pytest.raises(WriteMismatch) as caught:
        planned(text, 2, mode=mode)
    message = str(caught.value)
    assert "would not mean what was planned" in message and "SystemdCgroup" in message
    assert "nothing was changed" in message
    assert isinstance(caught.value, ConfigError)  # the module fails with it before anything is written


def test_crio_drop_in_that_reads_back_differently_is_not_planned(monkeypatch):
    monkeypatch.setattr(base, "dump_toml", lambda doc: tomlkit.dumps(doc).replace("runtime_type", "runtime_typ"))
    with pytest.raises(WriteMismatch, match="99-nvidia.toml"):
        plan_crio("/etc/crio/crio.conf", reader={}.get, globber=lambda pattern: [])


def test_docker_json_that_reads_back_differently_is_not_planned(monkeypatch):
    class LosingJson(object):
        @staticmethod
        def dumps(data, **kwargs):
            data = dict(data)
            data.pop("log-driver", None)
            return json.dumps(data, **kwargs)

        loads = staticmethod(json.loads)

    monkeypatch.setattr(docker, "json", LosingJson)
    files = {"/etc/docker/daemon.json": '{"log-driver": "journald"}'}
    with pytest.raises(WriteMismatch, match="log-driver"):
        plan_docker("/etc/docker/daemon.json", reader=files.get)


def _scanned_items(monkeypatch):
    """Count the table items tomlkit looks through to place each new value (its quadratic path)."""
    seen = [0]
    original = getattr(tomlkit_container.Container, "_get_last_index_before_table", None)
    if original is None:
        return seen

    def counting(self):
        seen[0] += len(self._body)
        return original(self)
    monkeypatch.setattr(tomlkit_container.Container, "_get_last_index_before_table", counting)
    return seen


def test_a_10000_key_inline_options_table_is_planned_in_linear_time(monkeypatch):
    count = 10000
    options = ", ".join("Opt%d = %d" % (index, index) for index in range(count))
    text = ('version = 2\n[plugins."%s".containerd.runtimes]\n'
            'runc = {runtime_type = "io.containerd.runc.v2", options = {%s}}\n' % (CRI2, options))
    scanned = _scanned_items(monkeypatch)
    started = time.process_time()
    plan, files = planned(text, 2)
    spent = time.process_time() - started
    nvidia = load_toml(files[CONFIG])["plugins"][CRI2]["containerd"]["runtimes"]["nvidia"]
    assert len(nvidia["options"]) == count + 1
    # Placing each key by scanning the table made it 10,000 * 10,000 / 2 items (40 CPU s).
    assert scanned[0] < 10 * count
    assert spent < 20, "planning took %.1f CPU s; well under 2 s is expected" % spent
