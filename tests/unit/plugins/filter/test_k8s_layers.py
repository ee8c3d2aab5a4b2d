"""k8s_layers: every layer of a run as flush applies it and the render writes it, from what each role
declares (its <role>__layer) and, for a role's release, its release variables read in one lookup."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter.k8s_applyset import k8s_applyset_members
from ansible_collections.gpuops.platform.plugins.filter.k8s_batch import k8s_batch, k8s_layer_variables, k8s_layers
from ansible_collections.gpuops.platform.plugins.filter.k8s_objects import k8s_phases

SETTINGS = {"field_manager": "gpuops-platform", "wait_timeout": 300, "helm_timeout": "10m0s", "helm_recover": True,
            "prune": True, "prune_namespaces_with_foreign_objects": False, "applyset_namespace": "gpuops-system"}
NS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}}
QUEUE = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "team-a"}}
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "kueue-system"}}
# kueue's release variables as a query of k8s_layer_variables returns them ('' where one is not defined).
KUEUE_VARS = [True, "kueue", "kueue-system", "kueue", "0.14.1", "oci://registry.k8s.io/kueue/charts", "", "",
              {"replicas": 2}]


def settings(**kw):
    return dict(dict(SETTINGS, force_conflicts=False), **kw)


def test_the_release_variables_of_each_layer_with_a_role_in_order():
    layers = [{"layer": "gpu_nodes", "objects": []}, {"layer": "kueue", "objects": [], "release_from": "kueue"},
              [{"layer": "volcano", "objects": [], "release_from": "volcano"}]]
    names = k8s_layer_variables(layers)
    assert names[:9] == ["kueue_manage_release", "kueue_release_name", "kueue_namespace", "kueue_chart_ref",
                         "kueue_chart_version", "kueue_chart_repo_url", "kueue_chart_path", "kueue__helm_values",
                         "kueue_values"]
    assert names[9:] == [n.replace("kueue", "volcano", 1) for n in names[:9]]


def test_a_layer_is_what_flush_queued_for_it_before():
    """The entry the old per-layer queue step built: ApplySet members, phases, releases, the shared settings."""
    (entry,) = k8s_layers([{"layer": "kueue", "order": "50", "objects": [NS, QUEUE], "release_from": "kueue",
                            "wait_crds": ["clusterqueues.kueue.x-k8s.io"]}], KUEUE_VARS, settings())
    members = k8s_applyset_members([NS, QUEUE], "gpuops-kueue", "gpuops-system")
    assert entry == {"layer": "kueue", "order": 50, "set_name": "gpuops-kueue", "members": members,
                     "phases": k8s_phases(members),
                     "releases": [{"name": "kueue", "namespace": "kueue-system", "chart": "kueue", "version": "0.14.1",
                                   "repo_url": "oci://registry.k8s.io/kueue/charts", "chart_path": "",
                                   # The layer creates the namespace itself, with its labels.
                                   "create_namespace": False, "values": {"replicas": 2}}],
                     "wait_crds": ["clusterqueues.kueue.x-k8s.io"], "wait": False, "no_log": False,
                     "force_conflicts": False, "objects": 2, "settings": SETTINGS}
    # What flush takes: the entry goes through k8s_batch unchanged in meaning.
    batch = k8s_batch([entry])
    assert batch["settings"] == SETTINGS and [r["name"] for r in batch["releases"]] == ["kueue"]


def test_computed_chart_values_win_over_the_plain_ones_and_no_release_when_the_role_manages_none():
    computed = KUEUE_VARS[:7] + [{"computed": True}, {"replicas": 2}]
    (entry,) = k8s_layers([{"layer": "kueue", "objects": [], "release_from": "kueue"}], computed, settings())
    assert entry["releases"][0]["values"] == {"computed": True} and entry["releases"][0]["create_namespace"] is True
    (entry,) = k8s_layers([{"layer": "kueue", "objects": [], "release_from": "kueue"}], ["false"] + KUEUE_VARS[1:],
                          settings())
    assert entry["releases"] == []


def test_hidden_output_forced_conflicts_and_the_given_releases():
    given = {"name": "x", "namespace": "n", "chart": "c", "version": "1", "sensitive": True}
    a, b, c = k8s_layers([{"layer": "a", "objects": [SECRET]}, {"layer": "b", "objects": [], "releases": [given]},
                          {"layer": "c", "objects": [QUEUE], "force_conflicts": "true", "no_log": "yes", "wait": True}],
                         [], settings(force_conflicts=False))
    assert (a["no_log"], b["no_log"], c["no_log"]) == (True, True, True)
    assert (a["force_conflicts"], c["force_conflicts"], c["wait"]) == (False, True, True)
    assert b["releases"] == [given]
    (d,) = k8s_layers([{"layer": "d", "objects": []}], [], settings(force_conflicts=True))
    assert d["force_conflicts"] is True and d["no_log"] is False


def test_layers_come_in_order_and_a_list_item_is_a_role_with_several_or_none():
    got = k8s_layers([{"layer": "late", "order": 90, "objects": []}, [], [{"layer": "b", "order": 20, "objects": []},
                      {"layer": "a", "order": 20, "objects": []}]], [], settings())
    assert [(e["layer"], e["order"]) for e in got] == [("b", 20), ("a", 20), ("late", 90)]


def test_render_adds_the_folder_and_files_of_each_layer():
    (entry,) = k8s_layers([{"layer": "kueue", "order": 50, "objects": [NS], "release_from": "kueue"}], KUEUE_VARS,
                          settings(), True)
    assert entry["folder"] == "50-kueue"
    assert [f["path"] for f in entry["files"]] == ["manifests.yaml", "helm/kueue/release.yaml", "helm/kueue/values.yaml"]
    assert entry["files"][0]["content"].startswith("# Layer kueue: apply in document order.\n---\n")
    (empty,) = k8s_layers([{"layer": "gpu_nodes", "order": 30, "objects": []}], [], settings(), True)
    assert empty["files"] == []
    # Apply mode writes nothing, so it builds no files.
    (applied,) = k8s_layers([{"layer": "kueue", "objects": [NS]}], [], settings())
    assert "files" not in applied and "folder" not in applied


@pytest.mark.parametrize("layers, values, message", [
    ({"layer": "a", "objects": []}, [], "must be a list of layers"),
    ([{"objects": []}], [], "needs a name"),
    ([{"layer": "a", "objects": {}}], [], "its objects as a list"),
    ([{"layer": "a", "objects": [], "wait_crd": []}], [], "unknown key.s. wait_crd"),
    ([{"layer": "a", "objects": [], "release_from": "a"}], [True], "1 release variable values for 9 names"),
])
def test_bad_layers_are_refused_with_what_is_wrong(layers, values, message):
    with pytest.raises(AnsibleFilterError, match=message):
        k8s_layers(layers, values, settings())


def test_each_layer_takes_its_own_release_variables():
    volcano = [True, "volcano", "volcano-system", "volcano", "1.13.0", "https://volcano-sh.github.io/helm-charts", "",
               "", {"basic": 1}]
    layers = [{"layer": "kueue", "objects": [], "release_from": "kueue"}, {"layer": "plain", "objects": []},
              {"layer": "volcano", "order": 40, "objects": [], "release_from": "volcano"}]
    got = dict((e["layer"], e) for e in k8s_layers(layers, KUEUE_VARS + volcano, settings()))
    assert [r["name"] for r in got["kueue"]["releases"]] == ["kueue"]
    assert got["volcano"]["releases"][0]["namespace"] == "volcano-system"
    assert got["volcano"]["releases"][0]["values"] == {"basic": 1} and got["plain"]["releases"] == []


def test_a_layer_that_says_template_takes_its_roles_objects_template(tmp_path):
    from ansible_collections.gpuops.platform.plugins.filter.k8s_batch import k8s_layer_objects, k8s_layer_templates
    (tmp_path / "volcano" / "templates").mkdir(parents=True)
    (tmp_path / "volcano" / "templates" / "objects.yml.j2").write_text("---\n")
    layers = [{"layer": "volcano", "template": True}, {"layer": "gpu_nodes", "objects": [NS]}]
    templates = k8s_layer_templates(layers, str(tmp_path))
    assert templates == {"volcano": str(tmp_path / "volcano" / "templates" / "objects.yml.j2")}
    with pytest.raises(AnsibleFilterError, match="layer kueue says template, but .*kueue/templates/objects.yml.j2 does not exist"):
        k8s_layer_templates([{"layer": "kueue", "template": "yes"}], str(tmp_path))
    # Documents as from_yaml_all gives them: a list document gives its items, empty ones are dropped.
    built = k8s_layer_objects(templates, [[None, [QUEUE, None], NS, {}]])
    assert built == {"volcano": [QUEUE, NS]}
    with pytest.raises(AnsibleFilterError, match="1 templates but 0 rendered"):
        k8s_layer_objects(templates, [])
    got = dict((e["layer"], e) for e in k8s_layers(layers, [], settings(), False, built))
    assert got["volcano"]["objects"] == 2 and got["gpu_nodes"]["objects"] == 1
    with pytest.raises(AnsibleFilterError, match="layer volcano says template, but its objects were not built"):
        k8s_layers(layers, [], settings())


def test_a_layers_errors_refuse_every_layer_before_anything_is_planned():
    with pytest.raises(AnsibleFilterError, match="volcano_queues is not valid: x; kueue: y"):
        k8s_layers([{"layer": "volcano", "objects": [], "errors": ["volcano_queues is not valid: x"]},
                    {"layer": "kueue", "objects": [], "errors": ["kueue: y"]}, {"layer": "ok", "objects": []}],
                   [], settings())


def test_layer_errors_are_named_with_their_layer_in_order_and_a_list_of_layers_is_taken():
    from ansible_collections.gpuops.platform.plugins.filter.k8s_batch import k8s_layer_errors
    layers = [{"layer": "kueue", "objects": [], "errors": ["no cluster queue", "quota below zero"]},
              [{"layer": "volcano", "objects": []}, {"layer": "gpu_tenants", "objects": [], "errors": ["team-a: bad"]}]]
    assert k8s_layer_errors(layers) == ["kueue: no cluster queue", "kueue: quota below zero", "gpu_tenants: team-a: bad"]
    assert k8s_layer_errors([{"layer": "volcano", "objects": [], "errors": []}]) == []
    with pytest.raises(AnsibleFilterError, match="must be a list of layers"):
        k8s_layer_errors({"layer": "kueue"})
