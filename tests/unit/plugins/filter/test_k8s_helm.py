"""The Helm release decision (install, upgrade, nothing, or recover first) on
recorded `helm history -o json` / `helm status -o json` outputs of every
state (fixtures/helm, see SOURCE.md there), and the decoding of Helm's storage
Secrets that the live path reads instead of calling helm."""
import base64
import gzip
import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter import k8s_helm as f
from ansible_collections.gpuops.platform.plugins.filter.k8s_objects import k8s_helm_release

FIXTURES = Path(__file__).parent / "fixtures" / "helm"
VALUES = {"driver": {"enabled": False}, "toolkit": {"enabled": False}, "mig": {"strategy": "single"},
          "devicePlugin": {"config": {"name": "nvidia-device-plugin-config", "default": "default"}}}
WANTED = k8s_helm_release({"name": "gpu-operator", "namespace": "gpu-operator", "chart": "gpu-operator",
                           "version": "v25.3.0", "repo_url": "https://helm.ngc.nvidia.com/nvidia", "values": VALUES})


def recorded(state):
    return (json.loads((FIXTURES / ("%s.history.json" % state)).read_text()),
            json.loads((FIXTURES / ("%s.status.json" % state)).read_text()))


def decide(state, recover=True, wanted=None):
    history, status = recorded(state)
    return f.k8s_helm_decide(wanted or WANTED, history, status, recover)


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
    history, dummy = recorded(state)
    assert (plan["recover"], plan["rollback_to"], plan["action"]) == (recover, rollback_to, action)
    assert (plan["state"], plan["revision"]) == (history[-1]["status"], history[-1]["revision"])
    verb = "rollback gpu-operator %d" % rollback_to if recover == "rollback" else "uninstall gpu-operator"
    assert plan["command"] == "helm %s --namespace gpu-operator" % verb
    assert plan["state"] in plan["reason"]


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


def test_no_history_installs():
    assert f.k8s_helm_decide(WANTED, [], None)["action"] == "install"


def test_values_that_differ_only_in_a_nested_key_upgrade():
    wanted = dict(WANTED, values=json.loads(json.dumps(VALUES)))
    wanted["values"]["devicePlugin"]["config"]["default"] = "ts4"
    assert decide("deployed", wanted=wanted)["action"] == "upgrade"


def test_values_compare_as_helm_stores_them():
    # A tuple or an int-valued float from a template is the same JSON.
    wanted = dict(WANTED, values=dict(VALUES, extra=(1, 2.0)))
    history, status = recorded("deployed")
    status = dict(status, config=dict(VALUES, extra=[1, 2.0]))
    assert f.k8s_helm_decide(wanted, history, status)["action"] == "unchanged"


def test_another_chart_under_the_same_release_name_upgrades():
    history, status = recorded("deployed")
    status = json.loads(json.dumps(status))
    status["chart"]["metadata"]["name"] = "other-chart"
    assert f.k8s_helm_decide(WANTED, history, status)["action"] == "upgrade"


def test_history_order_does_not_matter():
    history, status = recorded("pending-upgrade")
    assert f.k8s_helm_decide(WANTED, list(reversed(history)), status)["rollback_to"] == 2


def test_an_unknown_status_fails_with_the_history_command():
    history, status = recorded("deployed")
    history[-1]["status"] = "unknown"
    plan = f.k8s_helm_decide(WANTED, history, status)
    assert plan["action"] == "fail"
    assert "helm history gpu-operator --namespace gpu-operator" in plan["reason"]


def test_a_release_without_name_is_refused():
    with pytest.raises(AnsibleFilterError, match="name and namespace"):
        f.k8s_helm_decide({"namespace": "x"}, [], None)


@pytest.mark.parametrize("name, namespace, error", [
    ("gpu-operator,owner!=helm", "gpu-operator", "release name 'gpu-operator,owner!=helm' is invalid"),
    ("x" * 54, "gpu-operator", "at most 53 characters"),
    ("Upper", "gpu-operator", "is invalid"),
    ("gpu-operator", "gpu operator", "namespace 'gpu operator' is not a valid namespace name"),
])
def test_names_that_reach_a_selector_or_command_line_are_validated(name, namespace, error):
    with pytest.raises(AnsibleFilterError, match=error):
        f.k8s_helm_decide(dict(WANTED, name=name, namespace=namespace), [], None)


# --- Helm's storage Secrets (what one k8s_info call per release returns) ------

def storage_secret(release):
    """As Helm's secrets driver stores it: JSON, gzip, base64; the Secret's data base64 on top."""
    payload = base64.b64encode(gzip.compress(json.dumps(release).encode()))
    return {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {"name": "sh.helm.release.v1.%s.v%d" % (release["name"], release["version"]),
                         "namespace": release["namespace"],
                         "labels": {"name": release["name"], "owner": "helm", "status": release["info"]["status"],
                                    "version": str(release["version"])}},
            "data": {"release": base64.b64encode(payload).decode()}}


def revisions(state):
    """Every revision of a recorded state as its own release document."""
    history, status = recorded(state)
    out = []
    for entry in history:
        rel = json.loads(json.dumps(status))
        rel["version"] = entry["revision"]
        rel["info"].update(status=entry["status"], description=entry["description"], last_deployed=entry["updated"])
        name, dummy, version = entry["chart"].rpartition("-")
        rel["chart"]["metadata"].update(name=name, version=version, appVersion=entry["app_version"])
        out.append(rel)
    return out


@pytest.mark.parametrize("state", ["deployed", "pending-install", "pending-upgrade", "pending-rollback", "failed"])
def test_storage_secrets_give_helms_own_history_and_status(state):
    history, status = recorded(state)
    secrets = [storage_secret(r) for r in reversed(revisions(state))]
    got = f.k8s_helm_state(secrets)
    assert got["history"] == history
    assert got["status"] == status


def test_plans_pair_each_release_with_its_lookup():
    lookups = {"results": [{"resources": [storage_secret(r) for r in revisions("pending-upgrade")]},
                           {"resources": []}]}
    other = dict(WANTED, name="kueue", namespace="kueue-system")
    plans = f.k8s_helm_plans([WANTED, other], lookups, True)
    assert [(p["name"], p["recover"], p["action"]) for p in plans] == [
        ("gpu-operator", "rollback", "upgrade"), ("kueue", "", "install")]
    with pytest.raises(AnsibleFilterError, match="2 releases but 1 lookups"):
        f.k8s_helm_plans([WANTED, other], {"results": [{"resources": []}]})


def test_one_lookup_of_every_release_is_split_by_namespace_and_name():
    """What flush reads: one list of owner=helm,name in (...) across namespaces."""
    ours = [storage_secret(r) for r in revisions("pending-upgrade")]
    # The same release name in another namespace is someone else's release, deployed there.
    theirs = []
    for rel in revisions("deployed"):
        rel = dict(rel, namespace="lab")
        theirs.append(storage_secret(rel))
    other = dict(WANTED, name="kueue", namespace="kueue-system")
    plans = f.k8s_helm_plans([WANTED, other], {"resources": theirs + ours}, True)
    assert [(p["name"], p["namespace"], p["state"], p["recover"], p["action"]) for p in plans] == [
        ("gpu-operator", "gpu-operator", "pending-upgrade", "rollback", "upgrade"),
        ("kueue", "kueue-system", "", "", "install")]
    # Only the other namespace has the release: ours is not installed.
    alone = f.k8s_helm_plans([WANTED], {"resources": theirs}, True)
    assert [(p["state"], p["action"], p["reason"]) for p in alone] == [("", "install", "not installed")]


def test_a_secret_that_is_not_helms_is_ignored_and_a_broken_one_named():
    foreign = storage_secret(revisions("deployed")[0])
    foreign["metadata"]["labels"]["owner"] = "someone-else"
    assert f.k8s_helm_state([foreign])["status"] is None
    broken = storage_secret(revisions("deployed")[0])
    broken["data"]["release"] = base64.b64encode(b"not base64 of gzip!").decode()
    with pytest.raises(AnsibleFilterError, match="sh.helm.release.v1.gpu-operator.v1 cannot be decoded"):
        f.k8s_helm_state([broken])
