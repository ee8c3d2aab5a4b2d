"""The guards on outside input (module_utils/_common/input_guard.py): size, nesting, types, paths."""
import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._common import input_guard as guard


class Refused(Exception):
    pass


@pytest.mark.parametrize("kind, text, depth", [
    ("json", "", 0),
    ("json", "{}", 1),
    ("json", '{"a": [[1], {"b": []}]}', 4),
    ("json", '{"a": "[[[[[[", "b": "\\"[[["}', 1),  # brackets and escaped quotes in strings are no nesting
    ("json", "[" * 300 + "]" * 300, 300),
    ("json", "[" * 300, 300),  # unbalanced: still counted, the parser refuses the rest
    ("toml", "a = [[1], [2]]\n[b.c]\nd = {e = [1]}\n", 2),
    ("toml", "a = '[[[[' # [[[[[[\nb = \"[[[\\\"[[\"\n", 0),
    ("toml", 'a = """\n[[[[\n"" [[[\n"""\nb = \'\'\'\n[[[[\n\'\'\'\n', 0),  # multi-line strings
    ("toml", "[[a]]\n[[a]]\n[a.b]\n", 2),  # a header is its own brackets, closed on its line
    ("toml", "a = " + "[" * 5000, 5000),
])
def test_bracket_depth_counts_nesting_outside_strings_and_comments(kind, text, depth):
    assert guard.bracket_depth(text, kind) == depth


def test_a_document_over_the_depth_or_size_limit_is_refused_naming_it_and_the_limit():
    with pytest.raises(Refused, match=r"^/etc/x\.json nests arrays or objects 65 levels deep, deeper than the 64 "
                                      r"levels.*\(nesting limit\)"):
        guard.check_document("[" * 65 + "]" * 65, "/etc/x.json", "json", 1024, error=Refused)
    assert guard.check_document("[" * 64 + "]" * 64, "/etc/x.json", "json", 1024, error=Refused) == 64
    with pytest.raises(Refused, match=r"^/etc/x\.toml is 2 KiB, more than the 1 KiB .*\(size limit\)"):
        guard.check_document("a = 1\n" * 400, "/etc/x.toml", "toml", 1024, error=Refused)
    # bytes, not characters: four-byte characters count four times
    with pytest.raises(Refused, match="size limit"):
        guard.check_document(u"\U0001F600" * 300, "/etc/x.toml", "toml", 1024, error=Refused)
    assert guard.check_document(None, "/x", "json", 1) == 0


def test_value_depth_counts_without_recursion():
    deep = {}
    node = deep
    for _level in range(20000):  # far past the recursion limit
        node["a"] = {}
        node = node["a"]
    assert guard.value_depth(deep, max_depth=100) == 101
    assert guard.value_depth({"a": [1, {"b": []}]}) == 4
    assert guard.value_depth("text") == 0
    with pytest.raises(Refused, match="more than 64 levels deep"):
        guard.check_value_depth(deep, "/etc/x.toml", error=Refused)


@pytest.mark.parametrize("value, types, ok", [
    ("runc", str, True), ([1], str, False), (True, int, False), (1, int, True), (True, bool, True),
    (1, bool, False), (None, str, False), ({}, dict, True), ([], (dict,), False), (1.5, (int, float), True),
])
def test_check_type_is_exact(value, types, ok):
    if ok:
        assert guard.check_type(value, types, ["a"], "/f", error=Refused) is value
    else:
        with pytest.raises(Refused):
            guard.check_type(value, types, ["a"], "/f", error=Refused)


def test_check_type_names_the_file_and_the_fields_path():
    with pytest.raises(Refused) as caught:
        guard.check_type([1], str, ["plugins", "io.containerd.grpc.v1.cri", "cdi_spec_dirs", 2], "/etc/c.toml",
                         error=Refused)
    assert str(caught.value).startswith(
        '/etc/c.toml: plugins."io.containerd.grpc.v1.cri".cdi_spec_dirs[2] must be a string, found a list [1].')


def test_a_nul_byte_in_a_path_is_refused():
    assert guard.check_path_text("/etc/containerd/conf.d/*.toml", "imports[0]", "/f", error=Refused)
    with pytest.raises(Refused, match=r"^/f: imports\[0\] .* holds a NUL byte"):
        guard.check_path_text("/etc/\x00/*.toml", "imports[0]", "/f", error=Refused)


def test_the_toml_depth_bound_is_never_below_the_real_depth():
    import tomllib
    for text in ["a.b.c = 1\n", "[a.b]\nc.d = [[{e.f = 1}]]\n", "[[a.b]]\n[[a.b.c]]\nd.e = 1\n[[a.b.c]]\n",
                 "".join("x%d = 1\n" % i for i in range(50)) + "[%s]\n" % ".".join("k" * 30), 'a."b.c" = {d = [1]}\n']:
        depth = guard.bracket_depth(text, "toml")
        assert guard.toml_depth_bound(text, depth) >= guard.value_depth(tomllib.loads(text)), text


def test_deep_toml_data_is_walked_only_when_its_text_could_be_that_deep():
    deep_text = "[%s]\n" % ".".join(["a"] * 100)
    import tomllib
    with pytest.raises(Refused, match="nesting limit"):
        guard.check_toml_value_depth(tomllib.loads(deep_text), deep_text, 1, "/etc/x.toml", error=Refused)
    # A shallow text is not walked: data that does not match it is not looked at.
    fake = {"a": []}
    for _level in range(100):
        fake = {"a": [fake]}
    assert guard.check_toml_value_depth(fake, "a = 1\n", 0, "/etc/x.toml", error=Refused) is fake


def test_check_type_names_a_tagged_value_by_its_kind_never_its_class():
    from ansible_collections.gpuops.platform.plugins.module_utils._common import input_guard as guard

    class _AnsibleTaggedInt(int):
        pass

    with pytest.raises(guard.InputLimitError) as caught:
        guard.check_type(_AnsibleTaggedInt(5), str, ["runtime_type"], "/etc/c.toml")
    assert "runtime_type must be a string, found an integer 5." in str(caught.value)
    assert "_Ansible" not in str(caught.value)
