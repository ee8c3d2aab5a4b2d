"""Property-based tests: the edits keep all unrelated content and are idempotent."""
import json
import os
import tempfile

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.containerd import plan_containerd
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.crio import plan_crio
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.docker import plan_docker
from container_runtime_helpers import CRI2, CRI3, load_toml

import tomlkit

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-", min_size=1, max_size=10)
scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-2 ** 31, max_value=2 ** 31),
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=20),
    st.lists(st.text(alphabet="abc/._-", max_size=8), max_size=3),
)
flat_tables = st.dictionaries(keys, scalars, max_size=5)
# A runtime as containerd reads it: ``options`` is a table (containerd refuses any other value,
# and so does plan_containerd), the other keys are free.
runtime_tables = st.builds(
    lambda values, options: dict(values, **options),
    st.dictionaries(keys.filter(lambda key: key != "options"), scalars, max_size=5),
    st.fixed_dictionaries({}, optional={"options": flat_tables}))
comments = st.lists(st.text(alphabet="abcdefghij #.,-", max_size=30), max_size=3)


def split_table(header, values):
    """``[header]`` with ``values``, as text to append after the other tables of a config;
    a table among them follows as ``[header.key]``."""
    body = tomlkit.document()
    for key, value in values.items():
        if not isinstance(value, dict):
            body[key] = value
    text = "\n[%s]\n%s" % (header, tomlkit.dumps(body))
    for key, value in values.items():
        if isinstance(value, dict):
            text += split_table("%s.%s" % (header, key), value)
    return text


def containerd_text(version, runc_options, top_level, other_plugins, other_runtimes, cri_settings, notes,
                    split=()):
    """A config as an operator might write it: comments, other plugins and runtimes, random settings.

    ``split`` names what is written at the end of the file, after other tables,
    as install scripts that append to config.toml do: "runtimes" (the other
    runtimes), "runc_options" (runc's options table).
    """
    cri = CRI2 if version == 2 else CRI3
    doc = tomlkit.document()
    for note in notes:
        doc.add(tomlkit.comment(note))
    doc["version"] = version
    for key, value in top_level.items():
        if key not in ("version", "imports", "plugins", "timeouts"):
            doc[key] = value
    plugins = tomlkit.table()
    for name, settings_ in other_plugins.items():
        plugins["io.containerd.%s.v1" % name] = settings_
    cri_table = tomlkit.table()
    for key, value in cri_settings.items():
        if key not in ("containerd", "enable_cdi", "cdi_spec_dirs"):
            cri_table[key] = value
    runtimes = tomlkit.table()
    runc = tomlkit.table()
    runc["runtime_type"] = "io.containerd.runc.v2"
    options = tomlkit.table()
    for key, value in runc_options.items():
        options[key] = value
    if "runc_options" not in split:
        runc["options"] = options
    runtimes["runc"] = runc
    others = dict((name, settings_) for name, settings_ in other_runtimes.items()
                  if name not in ("runc", "nvidia", "crun"))
    if "runtimes" not in split:
        for name, settings_ in others.items():
            runtimes[name] = settings_
    cri_table["containerd"] = {"runtimes": runtimes}
    plugins[cri] = cri_table
    doc["plugins"] = plugins
    text = tomlkit.dumps(doc)
    if split:
        # another table in between, so what follows is out of order for sure
        text += '\n[timeouts]\n"io.containerd.timeout.shim.cleanup" = "5s"\n'
    prefix = 'plugins."%s".containerd.runtimes' % cri
    if "runtimes" in split:
        for name, settings_ in others.items():
            text += split_table("%s.%s" % (prefix, name), settings_)
    if "runc_options" in split:
        text += split_table("%s.runc.options" % prefix, runc_options)
    return text


def test_generated_runtimes_are_ones_containerd_accepts():
    """containerd decodes a runtime's ``options`` into a table and refuses a config where it is
    anything else, as plan_containerd does; the generator must not make such a config."""
    with pytest.raises(NoSuchExample):
        find(runtime_tables, lambda table: "options" in table and not isinstance(table["options"], dict),
             settings=settings(max_examples=2000, derandomize=True, database=None))


def strip_nvidia(data, cri):
    data = json.loads(json.dumps(data))
    section = data["plugins"][cri]
    section["containerd"]["runtimes"].pop("nvidia", None)
    section["containerd"].pop("default_runtime_name", None)
    section.pop("enable_cdi", None)
    data.pop("imports", None)
    return data


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


@SETTINGS
@given(version=st.sampled_from([2, 3]),
       runc_options=st.dictionaries(st.sampled_from(["SystemdCgroup", "NoPivotRoot", "Root", "IoUid", "ShimCgroup"]),
                                    scalars, max_size=4),
       top_level=flat_tables, other_plugins=st.dictionaries(keys, flat_tables, max_size=3),
       other_runtimes=st.dictionaries(keys, runtime_tables, max_size=2), cri_settings=flat_tables,
       notes=comments, mode=st.sampled_from(["in_place", "drop_in"]),
       set_as_default=st.booleans(), enable_cdi=st.booleans(),
       split=st.sets(st.sampled_from(["runtimes", "runc_options"])))
def test_containerd_edit_keeps_unrelated_content_and_is_idempotent(
        version, runc_options, top_level, other_plugins, other_runtimes, cri_settings, notes, mode,
        set_as_default, enable_cdi, split):
    text = containerd_text(version, runc_options, top_level, other_plugins, other_runtimes, cri_settings, notes,
                           split)
    if "runc_options" in split:  # the generator really splits: runc's options come after another table
        assert text.index("[timeouts]") < text.index(".runc.options]")
    cri = CRI2 if version == 2 else CRI3
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "config.toml")
        write(path, text)
        options = dict(mode=mode, set_as_default=set_as_default, enable_cdi=enable_cdi)
        plan = plan_containerd(path, **options)
        for edit in plan.changed_edits:
            write(edit.path, edit.after)
        main = load_toml(open(path).read())
        # unrelated content is all there, comments included
        assert strip_nvidia(main, cri) == strip_nvidia(load_toml(text), cri)
        comment_lines = [line for line in text.splitlines() if line.lstrip().startswith("#")]
        assert len(comment_lines) == len(notes)
        assert [line for line in open(path).read().splitlines() if line in comment_lines] == comment_lines
        # the runtime containerd will see inherits runc's options
        effective = load_toml(plan.edits[-1].after)
        nvidia = effective["plugins"][cri]["containerd"]["runtimes"]["nvidia"]
        assert nvidia["options"] == dict(runc_options, BinaryName="/usr/bin/nvidia-container-runtime")
        assert nvidia["runtime_type"] == "io.containerd.runc.v2"
        if version == 2 and mode == "drop_in":
            # the whole CRI section travels with the drop-in
            assert strip_nvidia(effective, cri)["plugins"][cri] == strip_nvidia(main, cri)["plugins"][cri]
        # running again changes nothing
        assert not plan_containerd(path, **options).changed


@SETTINGS
@given(data=st.dictionaries(keys, st.one_of(scalars, flat_tables), max_size=8),
       runtimes=st.dictionaries(keys, st.fixed_dictionaries({"path": st.text(max_size=10)}), max_size=3),
       indent=st.sampled_from([2, 4, "\t"]), set_as_default=st.booleans(), enable_cdi=st.booleans())
def test_docker_edit_keeps_other_keys_and_is_idempotent(data, runtimes, indent, set_as_default, enable_cdi):
    data.pop("features", None)
    data.pop("default-runtime", None)
    data["runtimes"] = runtimes
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "daemon.json")
        write(path, json.dumps(data, indent=indent))
        plan = plan_docker(path, set_as_default=set_as_default, enable_cdi=enable_cdi)
        result = json.loads(plan.edits[0].after)
        for key, value in data.items():
            if key != "runtimes":
                assert result[key] == value
        for name, value in runtimes.items():
            if name != "nvidia":
                assert result["runtimes"][name] == value
        write(path, plan.edits[0].after)
        assert not plan_docker(path, set_as_default=set_as_default, enable_cdi=enable_cdi).changed


@SETTINGS
@given(settings_=flat_tables, notes=comments, set_as_default=st.booleans())
def test_crio_drop_in_keeps_what_is_there_and_is_idempotent(settings_, notes, set_as_default):
    doc = tomlkit.document()
    for note in notes:
        doc.add(tomlkit.comment(note))
    doc["crio"] = {"metrics": dict(settings_)}
    with tempfile.TemporaryDirectory() as root:
        config = os.path.join(root, "crio.conf")
        drop_in = os.path.join(root, "crio.conf.d", "99-nvidia.toml")
        write(drop_in, tomlkit.dumps(doc))
        plan = plan_crio(config, set_as_default=set_as_default)
        after = load_toml(plan.edits[0].after)
        assert after["crio"]["metrics"] == load_toml(tomlkit.dumps(doc))["crio"]["metrics"]
        write(drop_in, plan.edits[0].after)
        assert not plan_crio(config, set_as_default=set_as_default).changed
