"""Hostile structure in container engine configs: nesting, wrong types, NUL bytes in paths.

Each case used to reach the operator as a bare Python message (maximum
recursion depth exceeded, unhashable type: 'list', embedded null character);
now the module fails with a message naming the file and the field or limit,
in check mode and for real, and changes nothing.
"""
import pytest

import test_nvidia_container_runtime_hostile as hostile

CRI2, refused = hostile.CRI2, hostile.refused
config = hostile.config  # the module's config file (a fixture)

pytestmark = pytest.mark.usefixtures("module_exits")

CRI3 = "io.containerd.cri.v1.runtime"
DEEP_TOML = "a = " + "[" * 5000 + "\n"


@pytest.mark.parametrize("mode", ["in_place", "drop_in"])
@pytest.mark.parametrize("text", [DEEP_TOML, "version = 2\n" + DEEP_TOML,
                                  "version = 2\n[%s]\nx = 1\n" % ".".join(["a"] * 200)],
                         ids=["brackets", "brackets-after-version", "dotted-header"])
def test_a_containerd_config_nested_thousands_deep(tmp_path, config, mode, text):
    config.write_text(text)
    refused(tmp_path, dict(runtime="containerd", config_path=str(config), mode=mode), str(config), "nesting limit")


def test_a_deep_containerd_drop_in_that_the_config_imports(tmp_path, config):
    drop_in = tmp_path / "etc/containerd/conf.d/10-deep.toml"
    drop_in.parent.mkdir(parents=True)
    drop_in.write_text("version = 2\n" + DEEP_TOML)
    config.write_text(config.read_text().replace("imports = []", 'imports = ["%s/*.toml"]' % drop_in.parent))
    refused(tmp_path, dict(runtime="containerd", config_path=str(config)), str(drop_in), "nesting limit")


@pytest.mark.parametrize("version, cri", [(2, CRI2), (3, CRI3)])
@pytest.mark.parametrize("table, line, field", [
    ("containerd", "default_runtime_name = [1]", "containerd.default_runtime_name must be a string, found a list"),
    ("containerd", "default_runtime_name = {a = 1}", "default_runtime_name must be a string"),
    ("containerd.runtimes.runc", "runtime_type = 5", "runtimes.runc.runtime_type must be a string, found an integer"),
    ("", "cdi_spec_dirs = [\"/etc/cdi\", 1]", "cdi_spec_dirs[1] must be a string"),
    ("", "cdi_spec_dirs = \"/etc/cdi\"", "cdi_spec_dirs must be a list"),
])
@pytest.mark.parametrize("mode", ["in_place", "drop_in"])
def test_wrong_types_in_containerd_fields_name_the_field(tmp_path, config, version, cri, table, line, field, mode):
    header = '[plugins."%s"%s]' % (cri, "." + table if table else "")
    config.write_text("version = %d\n%s\n%s\n" % (version, header, line))
    refused(tmp_path, dict(runtime="containerd", config_path=str(config), mode=mode, enable_cdi=True),
            str(config), field, "Nothing was changed")


@pytest.mark.parametrize("mode", ["in_place", "drop_in"])
def test_a_nul_byte_in_an_imports_glob(tmp_path, config, mode):
    config.write_text('version = 2\nimports = ["/etc/containerd/conf.d/\\u0000*.toml"]\n')
    message = refused(tmp_path, dict(runtime="containerd", config_path=str(config), mode=mode), str(config),
                      "imports[0]", "NUL byte")
    assert "embedded null" not in message


@pytest.mark.parametrize("where", ["main", "drop-in", "other drop-in"])
@pytest.mark.parametrize("text, expected", [
    (DEEP_TOML, "nesting limit"),
    ("[crio.runtime]\ndefault_runtime = [1]\n", "crio.runtime.default_runtime must be a string, found a list"),
    ("[crio.runtime.runtimes]\nrunc = 1\n", "crio.runtime.runtimes.runc must be a table"),
    ("[crio.runtime.runtimes.runc]\nruntime_path = [\"/usr/bin/runc\"]\n", "runtimes.runc.runtime_path must be a string"),
])
def test_hostile_structure_in_crio_configs(tmp_path, where, text, expected):
    conf = tmp_path / "etc/crio/crio.conf"
    conf_d = tmp_path / "etc/crio/crio.conf.d"
    conf_d.mkdir(parents=True)
    conf.write_text("[crio.runtime]\n")
    path = {"main": conf, "drop-in": conf_d / "99-nvidia.toml", "other drop-in": conf_d / "10-site.toml"}[where]
    path.write_text(text)
    refused(tmp_path, dict(runtime="crio", config_path=str(conf)), str(path), expected)


@pytest.mark.parametrize("text", [
    "[" * 15000 + "]" * 15000,
    '{"a": ' + "[" * 5000 + "]" * 5000 + "}",  # parsed, then failed in the copy of what was read
    '{"log-opts": ' + '{"a": ' * 5000 + "1" + "}" * 5001,
])
def test_a_daemon_json_nested_thousands_deep(tmp_path, text):
    path = tmp_path / "daemon.json"
    path.write_text(text)
    refused(tmp_path, dict(runtime="docker", config_path=str(path)), str(path), "nesting limit")


@pytest.mark.parametrize("value", ["[1]", "{}", "1", "null"])
def test_a_daemon_json_default_runtime_that_is_no_name(tmp_path, value):
    path = tmp_path / "daemon.json"
    path.write_text('{"default-runtime": %s}' % value)
    refused(tmp_path, dict(runtime="docker", config_path=str(path)), str(path), "default-runtime must be a string")
