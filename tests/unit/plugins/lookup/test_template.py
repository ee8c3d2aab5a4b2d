"""gpuops.platform.template renders as ansible.builtin.template does, without deep-copying the variables."""
from collections import ChainMap

import pytest
import yaml
from ansible import constants as C
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.lookup import template as builtin_template
from ansible.template import Templar

from ansible_collections.gpuops.platform.plugins.lookup import template as gpuops_template

LOOKUPS = {"gpuops.platform.template": gpuops_template, "ansible.builtin.template": builtin_template}

TEMPLATE = "who: {{ who }}\nfile: {{ template_path | basename }}\nextra: {{ extra | default('none') }}\nn: {{ things | length }}\n"


class CopyRefused(object):
    """A variable that fails its test the moment anything deep-copies it."""

    def __deepcopy__(self, memo):
        raise AssertionError("the variables were deep-copied")


@pytest.fixture()
def role(tmp_path):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "objects.yml.j2").write_text(TEMPLATE)
    return tmp_path


def _run(name, variables, **options):
    # As the plugin loader sets a lookup up: its options are the ones its DOCUMENTATION declares.
    module = LOOKUPS[name]
    C.config.initialize_plugin_configuration_definitions("lookup", name, yaml.safe_load(module.DOCUMENTATION)["options"])
    loader = DataLoader()
    lookup = module.LookupModule(loader=loader, templar=Templar(loader=loader, variables=variables))
    lookup._load_name = name
    return lookup.run(["objects.yml.j2"], variables=variables, **options)


def _variables(role, **more):
    return dict({"who": "gpu-a", "things": [1, 2, 3], "role_path": str(role), "ansible_search_path": [str(role)]},
                **more)


def test_the_same_text_as_the_builtin_lookup(role):
    for options in ({}, {"template_vars": {"extra": "from the task"}}):
        ours = _run("gpuops.platform.template", _variables(role), **options)
        builtin = _run("ansible.builtin.template", _variables(role), **options)
        assert ours == builtin
    assert ours == ["who: gpu-a\nfile: objects.yml.j2\nextra: from the task\nn: 3\n"]


def test_what_the_lookup_adds_stays_out_of_the_variables(role):
    variables = _variables(role)
    before = dict(variables)
    _run("gpuops.platform.template", variables, template_vars={"extra": "x"})
    assert variables == before
    assert "template_path" not in variables and "extra" not in variables


def test_the_variables_are_not_deep_copied(role):
    # The builtin lookup copies them (the cost this lookup removes): the guard proves the test can fail.
    with pytest.raises(AssertionError, match="deep-copied"):
        _run("ansible.builtin.template", _variables(role, guard=CopyRefused()))
    assert _run("gpuops.platform.template", _variables(role, guard=CopyRefused())) == [
        "who: gpu-a\nfile: objects.yml.j2\nextra: none\nn: 3\n"]


def test_layered_variables_keep_their_order(role):
    # ansible-core 2.19+ hands a lookup a ChainMap (the task's variables over the play's): the first map wins.
    play = _variables(role, guard=CopyRefused())
    task = {"who": "gpu-b"}
    variables = ChainMap(task, play)
    assert _run("gpuops.platform.template", variables) == ["who: gpu-b\nfile: objects.yml.j2\nextra: none\nn: 3\n"]
    assert task == {"who": "gpu-b"} and "template_path" not in play


def test_text_that_reads_as_a_literal_stays_text_on_every_ansible_core(role):
    # ansible.builtin.template before 2.19 turned "[...]" into a list by default (convert_data); the roles parse the
    # text themselves (gpu_nodes' nodes.json.j2 with from_json).
    (role / "templates" / "objects.yml.j2").write_text('[{"host": {{ who | to_json }}}, {"n": {{ things | length }}}]')
    assert _run("gpuops.platform.template", _variables(role)) == ['[{"host": "gpu-a"}, {"n": 3}]']
