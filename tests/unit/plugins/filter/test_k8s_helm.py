"""The Helm release decision (install, upgrade, nothing, or recover first) on
what the real helm printed about a release caught in each state (fixtures/helm,
recorded by record.py there, see SOURCE.md): `helm list --all -o json`, and
where the decision needs them `helm history -o json` and `helm get values -o json`."""
import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter import k8s_helm as f
from ansible_collections.gpuops.platform.plugins.filter.k8s_objects import k8s_helm_release
from ansible_collections.gpuops.platform.plugins.module_utils._k8s import helm

FIXTURES = Path(__file__).parent / "fixtures" / "helm"
VALUES = {"driver": {"enabled": False}, "toolkit": {"enabled": False}, "mig": {"strategy": "single"},
          "devicePlugin": {"config": {"name": "nvidia-device-plugin-config", "default": "default"}}}
RAW = {"name": "gpu-operator", "namespace": "gpu-operator", "chart": "gpu-operator",
       "version": "v25.3.0", "repo_url": "https://helm.ngc.nvidia.com/nvidia", "values": VALUES}
WANTED = k8s_helm_release(RAW)
STATES = sorted(p.name[:-len(".list.json")] for p in FIXTURES.glob("*.list.json"))


def recorded(state, what):
    return json.loads((FIXTURES / ("%s.%s.json" % (state, what))).read_text())


def decide(state, recover=True, wanted=None):
    """As helm_releases decides: the listed entry, then only what helm.needs() says it reads."""
    wanted = wanted or WANTED
    listed = helm.listed_by_release(recorded(state, "list"))[("gpu-operator", "gpu-operator")]
    need = helm.needs(wanted, listed)
    history = recorded(state, "history") if need == "history" else None
    values = recorded(state, "values") if need == "values" else None
    return f.k8s_helm_decide(wanted, listed, history, values, recover)


def test_every_state_was_recorded():
    assert STATES == ["deployed", "deployed-old-chart", "deployed-other-values", "failed", "pending-install",
                      "pending-rollback", "pending-upgrade", "pending-upgrade-after-failed-install", "uninstalled",
                      "uninstalling"]


@pytest.mark.parametrize("state, recover, rollback_to, action", [
    ("pending-install", "uninstall", 0, "install"),
    # The previous revision stays deployed while an upgrade is pending.
    ("pending-upgrade", "rollback", 2, "upgrade"),
    # Rollback to 2 interrupted after a failed revision 3: back to 2 (the deployed one), not to 3.
    ("pending-rollback", "rollback", 2, "upgrade"),
    # Never deployed (the install failed): nothing to roll back to.
    ("pending-upgrade-after-failed-install", "uninstall", 0, "install"),
    ("uninstalling", "uninstall", 0, "install"),
])
def test_pending_states_recover_the_way_helm_advises(state, recover, rollback_to, action):
    plan = decide(state)
    listed = recorded(state, "list")[0]
    assert (plan["recover"], plan["rollback_to"], plan["action"]) == (recover, rollback_to, action)
    assert (plan["state"], str(plan["revision"])) == (listed["status"], listed["revision"])
    verb = "rollback gpu-operator %d" % rollback_to if recover == "rollback" else "uninstall gpu-operator"
    assert plan["command"] == "helm %s --namespace gpu-operator" % verb
    assert plan["state"] in plan["reason"]


@pytest.mark.parametrize("state, need", [
    ("deployed", "values"), ("deployed-other-values", "values"), ("deployed-old-chart", ""), ("failed", ""),
    ("uninstalled", ""), ("uninstalling", ""), ("pending-install", "history"), ("pending-upgrade", "history"),
    ("pending-rollback", "history"), ("pending-upgrade-after-failed-install", "history")])
def test_more_is_read_only_where_the_decision_needs_it(state, need):
    assert helm.needs(WANTED, recorded(state, "list")[0]) == need


@pytest.mark.parametrize("state", ["pending-install", "pending-upgrade", "pending-rollback", "uninstalling"])
def test_without_recovery_a_pending_release_fails_naming_the_helm_command(state):
    plan = decide(state, recover=False)
    assert plan["action"] == "fail"
    assert "is %s" % state in plan["reason"]
    assert "`%s`" % plan["command"] in plan["reason"]
    assert "gpuops_k8s_helm_recover: true" in plan["reason"]


@pytest.mark.parametrize("state, action", [
    ("deployed", "unchanged"),
    ("deployed-other-values", "upgrade"),
    ("deployed-old-chart", "upgrade"),
    ("failed", "upgrade"),
    ("uninstalled", "install"),
])
def test_settled_states(state, action):
    plan = decide(state)
    assert (plan["action"], plan["recover"]) == (action, "")


def test_not_listed_installs():
    assert f.k8s_helm_decide(WANTED, None)["action"] == "install"
    assert helm.listed_by_release([]) == {}


def test_a_release_listed_in_another_namespace_is_not_ours():
    theirs = [dict(e, namespace="lab") for e in recorded("pending-install", "list")]
    assert ("gpu-operator", "gpu-operator") not in helm.listed_by_release(theirs)


def test_values_that_differ_only_in_a_nested_key_upgrade():
    wanted = dict(WANTED, values=json.loads(json.dumps(VALUES)))
    wanted["values"]["devicePlugin"]["config"]["default"] = "ts4"
    assert decide("deployed", wanted=wanted)["action"] == "upgrade"


def test_values_compare_as_helm_stores_them():
    # A tuple or an int-valued float from a template is the same JSON; helm keeps numbers as float64.
    wanted = dict(WANTED, values=dict(VALUES, extra=(1, 2.0), big=2 ** 40))
    listed = recorded("deployed", "list")[0]
    deployed = dict(recorded("deployed", "values"), extra=[1.0, 2], big=float(2 ** 40))
    assert f.k8s_helm_decide(wanted, listed, None, deployed)["action"] == "unchanged"
    # But a string is not a number, and true is not 1.
    assert f.k8s_helm_decide(dict(wanted, values=dict(wanted["values"], big="1099511627776")),
                             listed, None, deployed)["action"] == "upgrade"
    assert helm.values_digest({"a": True}) != helm.values_digest({"a": 1})


def test_the_digest_stands_for_the_values():
    """What the module gets instead of the values decides the same way."""
    wanted = f.k8s_helm_wanted([RAW])[0]
    assert set(wanted) == {"name", "namespace", "chart", "chart_version", "values_digest"}
    assert wanted["values_digest"] == helm.values_digest(VALUES) and wanted["values_digest"].startswith("sha256:")
    assert "nvidia-device-plugin-config" not in json.dumps(wanted)
    assert decide("deployed", wanted=wanted)["action"] == "unchanged"
    assert decide("deployed-other-values", wanted=wanted)["action"] == "upgrade"
    # helm prints null for a release without values.
    assert f.k8s_helm_decide(f.k8s_helm_wanted([dict(RAW, values={})])[0], recorded("deployed", "list")[0],
                             None, {})["action"] == "unchanged"


def test_deployed_without_its_values_read_upgrades():
    assert f.k8s_helm_decide(WANTED, recorded("deployed", "list")[0])["action"] == "upgrade"


def test_another_chart_under_the_same_release_name_upgrades():
    listed = dict(recorded("deployed", "list")[0], chart="other-chart-v25.3.0")
    assert helm.needs(WANTED, listed) == ""
    assert f.k8s_helm_decide(WANTED, listed, None, VALUES)["action"] == "upgrade"
    # A chart from a path has no name to compare: its version is.
    path = dict(WANTED, chart=None)
    assert helm.needs(path, recorded("deployed", "list")[0]) == "values"
    assert helm.needs(path, recorded("deployed-old-chart", "list")[0]) == ""


def test_history_order_does_not_matter():
    listed = recorded("pending-upgrade", "list")[0]
    history = list(reversed(recorded("pending-upgrade", "history")))
    assert f.k8s_helm_decide(WANTED, listed, history)["rollback_to"] == 2


@pytest.mark.parametrize("order", [lambda h: h, lambda h: list(reversed(h)), lambda h: h[2:] + h[:2]])
def test_without_a_deployed_revision_the_newest_superseded_one_is_the_rollback_target(order):
    """A rollback interrupted after its target was superseded: back to the newest superseded revision, never an older
    one (a chart three releases back), whatever order helm history lists them in."""
    base = recorded("pending-rollback", "history")[0]
    history = [dict(base, revision=n, status="superseded", chart="gpu-operator-v24.9.%d" % n) for n in (1, 2, 3, 4)]
    history += [dict(base, revision=5, status="failed"), dict(base, revision=6, status="pending-rollback")]
    listed = dict(recorded("pending-rollback", "list")[0], revision="6")
    plan = f.k8s_helm_decide(WANTED, listed, order(history))
    assert (plan["recover"], plan["rollback_to"]) == ("rollback", 4)
    assert plan["command"] == "helm rollback gpu-operator 4 --namespace gpu-operator"
    # A deployed revision still wins over a newer superseded one.
    history[1]["status"] = "deployed"
    assert f.k8s_helm_decide(WANTED, listed, order(history))["rollback_to"] == 2


def test_an_unknown_status_fails_with_the_history_command():
    listed = dict(recorded("deployed", "list")[0], status="unknown")
    plan = f.k8s_helm_decide(WANTED, listed)
    assert plan["action"] == "fail"
    assert "helm history gpu-operator --namespace gpu-operator" in plan["reason"]


def test_list_arguments_name_only_the_wanted_releases():
    args = helm.list_args([WANTED, dict(WANTED, name="kai.scheduler"), WANTED])
    assert args == ["list", "--all", "--all-namespaces", "--max", "0", "--filter",
                    "^(?:gpu\\-operator|kai\\.scheduler)$", "-o", "json"]
    with pytest.raises(ValueError, match="helm list printed dict"):
        helm.listed_by_release({"releases": []})


def test_a_release_without_name_is_refused():
    with pytest.raises(AnsibleFilterError, match="needs a name and a namespace"):
        f.k8s_helm_decide({"namespace": "x"}, None)


@pytest.mark.parametrize("name, namespace, error", [
    ("gpu-operator|.*", "gpu-operator", r"release name 'gpu-operator\|\.\*' is invalid"),
    ("x" * 54, "gpu-operator", "at most 53 characters"),
    ("Upper", "gpu-operator", "is invalid"),
    ("gpu-operator", "gpu operator", "namespace 'gpu operator' is not a valid namespace name"),
])
def test_names_that_reach_a_command_line_are_validated(name, namespace, error):
    with pytest.raises(AnsibleFilterError, match=error):
        f.k8s_helm_decide(dict(WANTED, name=name, namespace=namespace), None)
    with pytest.raises(AnsibleFilterError, match=error):
        f.k8s_helm_wanted([dict(RAW, name=name, namespace=namespace)])
