"""awx/gpuops-platform.yml is what `awx import` takes, and what AWX accepts.

The file is read with awxkit's own loader, its natural keys are checked against
awxkit's NATURAL_KEY definitions, and its references against the order in which
awxkit's import_assets creates resources (a reference to an object created later
imports as null). Surveys and the credential type are checked with AWX's own rules
(tests/integration/awx_support.py, each function citing the AWX source it follows),
and every survey question against the argument specs of the roles it sets.
"""
import copy
import itertools
import re
from pathlib import Path

import pytest
import yaml
from awxkit.api import pages
from awxkit.api.client import Connection
from awxkit.api.mixins import has_create
from awxkit.api.pages.api import EXPORTABLE_RESOURCES
from awxkit.api.pages.page import get_registered_page
from awxkit.api.resources import resources
from awxkit.api.utils import remove_encrypted

from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_waves

import awx_support as awx
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan

ROOT = Path(__file__).resolve().parents[2]
# awxkit page class of each natural key type.
PAGE_CLASSES = {
    "organization": pages.Organization, "execution_environment": pages.ExecutionEnvironment,
    "credential_type": pages.CredentialType, "credential": pages.Credential, "project": pages.Project,
    "inventory": pages.Inventory, "host": pages.Host, "group": pages.Group, "job_template": pages.JobTemplate,
    "workflow_job_template": pages.WorkflowJobTemplate, "workflow_job_template_node": pages.WorkflowJobTemplateNode,
}
# AWX's own credential types, which `awx export` leaves out (they are managed) and
# which every AWX has.
MANAGED = [{"name": "Machine", "kind": "ssh", "type": "credential_type"}]
TEMPLATES = ["Record facts", "Plan fleet", "Apply nodes", "Apply cluster", "Rolling driver upgrade", "GPU health",
             "DCGM diagnostics", "Kubelet tuning"]


@pytest.fixture(scope="module")
def assets():
    return awx.load_assets()


def _objects(node, found=None):
    """Every object of the file (top level and related), with its natural key."""
    found = [] if found is None else found
    if isinstance(node, dict):
        if "natural_key" in node:
            found.append(node)
        for value in node.values():
            _objects(value, found)
    elif isinstance(node, list):
        for value in node:
            _objects(value, found)
    return found


def _references(obj):
    """Natural keys an object names in its fields and in related attach lists."""
    refs = []
    for key, value in obj.items():
        if key in ("natural_key",):
            continue
        if isinstance(value, dict) and "type" in value:
            refs.append((key, value))
    for key, value in (obj.get("related") or {}).items():
        if isinstance(value, list):
            refs += [(key, v) for v in value if isinstance(v, dict) and "natural_key" not in v]
    return refs


def test_top_level_resources_are_what_awx_exports(assets):
    assert set(assets) <= set(EXPORTABLE_RESOURCES), set(assets) - set(EXPORTABLE_RESOURCES)
    for resource, objects in assets.items():
        assert isinstance(objects, list) and objects, resource


def test_natural_keys_follow_awxkit(assets):
    for obj in _objects(assets):
        key = obj["natural_key"]
        fields = PAGE_CLASSES[key["type"]].NATURAL_KEY
        assert set(key) - {"type"} <= set(fields), (key, fields)
        for field in fields:
            if field in obj:
                assert key[field] == obj[field], (key, field, obj[field])
        if "name" in fields:
            assert key["name"] == obj["name"], key
    names = [awx.json.dumps(o["natural_key"], sort_keys=True) for o in _objects(assets)]
    assert len(names) == len(set(names)), "two objects share a natural key"


def _import_order():
    """ApiV2._dependent_resources (awxkit/api/pages/api.py): resources in
    has_create.page_creation_order of their page classes."""
    conn = Connection("https://awx.invalid")
    item = {}
    for resource in EXPORTABLE_RESOURCES:
        url = resources.inventories if resource == "inventory" else getattr(resources, resource)
        item[get_registered_page(url)(conn, endpoint=url).__item_class__] = resource
    classes = list(item)
    return [item[cls] for cls in itertools.chain(*has_create.page_creation_order(*classes)) if cls in item]


def test_every_reference_is_imported_before_it_is_needed(assets):
    """A top-level object's reference is looked up when the object is posted: the
    object it names must be in the file (or be one of AWX's managed types) and come
    earlier in the import order. Related objects are created after every top-level one."""
    order = _import_order()
    keys = {awx.json.dumps(o["natural_key"], sort_keys=True): o for o in _objects(assets)}
    keys.update({awx.json.dumps(m, sort_keys=True): None for m in MANAGED})
    created_in = {}
    for resource in order:
        for obj in assets.get(resource) or []:
            created_in[awx.json.dumps(obj["natural_key"], sort_keys=True)] = order.index(resource)
    for resource in assets:
        for obj in assets[resource]:
            for field, ref in _references(obj):
                text = awx.json.dumps(ref, sort_keys=True)
                assert text in keys, "%s %s: %s names %s, which is not in the file" % (resource, obj["name"], field, ref)
                if text in created_in:
                    assert created_in[text] < order.index(resource), (
                        "%s %s: %s %s is created after it, so awx import would set it to null" % (
                            resource, obj["name"], field, ref))
    for obj in _objects(assets):
        for field, ref in _references(obj):
            assert awx.json.dumps(ref, sort_keys=True) in keys, (obj["natural_key"], field, ref)


def test_the_import_order_check_can_fail(assets):
    broken = copy.deepcopy(assets)
    broken["organizations"][0]["default_environment"] = broken["execution_environments"][0]["natural_key"]
    with pytest.raises(AssertionError, match="created after it"):
        test_every_reference_is_imported_before_it_is_needed(broken)


def test_secrets_are_placeholders_that_import_empty(assets):
    types = {(t["name"], t["kind"]): t for t in assets["credential_types"]}
    secret_fields = {("Machine", "ssh"): {"password", "ssh_key_data", "ssh_key_unlock", "become_password"}}
    for key, ctype in types.items():
        secret_fields[key] = {f["id"] for f in ctype["inputs"]["fields"] if f.get("secret")}
    for cred in assets["credentials"]:
        key = (cred["credential_type"]["name"], cred["credential_type"]["kind"])
        for name, value in cred["inputs"].items():
            if name in secret_fields[key] or name == "ca_cert":
                assert value == "$encrypted$", (cred["name"], name)
                assert remove_encrypted(value) == ""


# ---- Credential type ------------------------------------------------------------------
def test_credential_type_passes_awx_validation(assets):
    (ctype,) = assets["credential_types"]
    assert ctype["name"] == "GPU platform Kubernetes API"
    assert awx.credential_type_errors(ctype) == []


@pytest.mark.parametrize("change, message", [
    (lambda t: t["injectors"]["env"].update(ANSIBLE_CONFIG="{{ host }}"), "is not allowed"),
    (lambda t: t["injectors"]["env"].update(PATH="/tmp"), "is not allowed"),
    (lambda t: t["injectors"]["env"].update(K8S_AUTH_PROXY="{{ proxy }}"), "undefined field"),
    (lambda t: t["injectors"]["file"].update({"template.ca": "{{ ca_cert }}"}), "multi-file syntax"),
    (lambda t: t["inputs"]["fields"].append({"id": "tower", "label": "x"}), "reserved"),
    (lambda t: t["inputs"]["fields"].append({"id": "2x", "label": "x"}), "does not match"),
    (lambda t: t["injectors"].update(extra={}), "Additional properties"),
])
def test_credential_type_validation_refuses_what_awx_refuses(assets, change, message):
    ctype = copy.deepcopy(assets["credential_types"][0])
    change(ctype)
    assert any(message in e for e in awx.credential_type_errors(ctype)), awx.credential_type_errors(ctype)


def test_credential_type_injects_the_token_as_k8s_auth_environment_only(assets, tmp_path):
    (ctype,) = assets["credential_types"]
    fields = {f["id"]: f for f in ctype["inputs"]["fields"]}
    assert set(fields) == {"host", "token", "ca_cert"} and fields["token"]["secret"] is True
    assert set(ctype["inputs"]["required"]) == {"host", "token", "ca_cert"}
    assert set(ctype["injectors"]) == {"env", "file"}, "never extra_vars: they show in the job and at -vvv"
    assert set(ctype["injectors"]["env"]) == {"K8S_AUTH_HOST", "K8S_AUTH_API_KEY", "K8S_AUTH_SSL_CA_CERT"}
    env, safe_env = awx.inject_credential(ctype, {"host": "https://api.gpu.test:6443", "token": "s3cr3t-token",
                                                  "ca_cert": "-----BEGIN CERTIFICATE-----\nMIIB\n"}, tmp_path)
    assert env["K8S_AUTH_HOST"] == "https://api.gpu.test:6443" and env["K8S_AUTH_API_KEY"] == "s3cr3t-token"
    ca = Path(env["K8S_AUTH_SSL_CA_CERT"])
    assert ca.parent == tmp_path / "env" and ca.read_text() == "-----BEGIN CERTIFICATE-----\nMIIB\n"
    assert oct(ca.stat().st_mode & 0o777) == "0o600"
    assert safe_env["K8S_AUTH_API_KEY"] == "**********" and "s3cr3t-token" not in awx.json.dumps(safe_env)


# ---- Surveys ---------------------------------------------------------------------
def _surveyed(assets):
    for kind in ("job_templates", "workflow_job_templates"):
        for template in assets[kind]:
            if template.get("survey_enabled"):
                yield template


def test_surveys_pass_awx_validation(assets):
    surveyed = list(_surveyed(assets))
    assert {t["name"] for t in surveyed} >= {"Apply nodes", "Rolling driver upgrade", "GPU fleet rollout"}
    for template in surveyed:
        assert awx.survey_spec_errors(template["related"]["survey_spec"]) == [], template["name"]
        for element in template["related"]["survey_spec"]["spec"]:
            if "default" in element:
                assert awx.survey_answer_errors(element, {element["variable"]: element["default"]}) == [], element


@pytest.mark.parametrize("change, message", [
    (lambda q: q.update(type="boolean"), "allowed question types"),
    (lambda q: q.update(default="5"), "expected to be integer"),
    (lambda q: q.update(max="4"), "limit in survey question"),
    (lambda q: q.pop("required"), "'required' missing"),
    (lambda q: q.update(type="multiplechoice", choices=["1", "2"], default="3"), "Default choice"),
    (lambda q: q.update(type="multiplechoice", default="1"), "must specify choices"),
])
def test_survey_validation_refuses_what_awx_refuses(assets, change, message):
    spec = copy.deepcopy(next(t for t in assets["job_templates"] if t["name"] == "DCGM diagnostics")["related"]["survey_spec"])
    change(spec["spec"][0])
    assert any(message in e for e in awx.survey_spec_errors(spec)), awx.survey_spec_errors(spec)


def test_survey_answers_are_checked_as_awx_checks_them(assets):
    dcgm = next(t for t in assets["job_templates"] if t["name"] == "DCGM diagnostics")
    level = dcgm["related"]["survey_spec"]["spec"][0]
    assert awx.survey_answer_errors(level, {"dcgm_diag_level": 3}) == []
    assert "too large" in awx.survey_answer_errors(level, {"dcgm_diag_level": 5})[0]
    assert "expected to be an integer" in awx.survey_answer_errors(level, {"dcgm_diag_level": "3"})[0]
    nodes = next(t for t in assets["job_templates"] if t["name"] == "Apply nodes")
    serial = nodes["related"]["survey_spec"]["spec"][1]
    assert serial["variable"] == "gpuops_nodes_serial" and serial["required"] is False
    assert awx.survey_answer_errors(serial, {}) == []
    # Required, AWX wants an answer whatever the default (the operator's 400).
    assert awx.survey_answer_errors(dict(serial, required=True), {}) == ["'gpuops_nodes_serial' value missing"]
    assert "too large" in awx.survey_answer_errors(serial, {"gpuops_nodes_serial": "10000"})[0]
    # A default that fails its own question is not sent (_update_unified_job_kwargs).
    broken = copy.deepcopy(dcgm)
    broken["related"]["survey_spec"]["spec"][0]["default"] = 9
    assert "dcgm_diag_level" not in awx.launch_extra_vars(broken)
    assert awx.launch_extra_vars(dcgm) == {"dcgm_diag_level": 1}


def _roles_of(playbook, seen=None):
    """Roles a playbook runs (gpuops.platform.<role>), through import_playbook; for
    the fleet planner, the roles whose variables it plans with (fleet_plan.DEFAULTS)."""
    seen = set() if seen is None else seen
    text = (ROOT / playbook).read_text()
    roles = set(re.findall(r"gpuops\.platform\.([a-z0-9_]+)", text))
    if "gpuops.platform.fleet_plan:" in text:
        roles |= {role.name for role in (ROOT / "roles").iterdir()
                  if (role / "meta" / "argument_specs.yml").is_file() and set(fleet_plan.DEFAULTS) & set(_specs(role.name))}
    for imported in re.findall(r"import_playbook:\s*(\S+)", text):
        path = str(Path(playbook).parent / imported)
        if path not in seen:
            seen.add(path)
            roles |= _roles_of(path, seen)
            text += (ROOT / path).read_text()
    return {r for r in roles if (ROOT / "roles" / r / "meta" / "argument_specs.yml").is_file()}


def _specs(role):
    specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    return {name: opt for entry in specs.values() for name, opt in (entry.get("options") or {}).items()}


# What each argument spec type accepts from each survey question type, as AWX sends it
# (text and multiplechoice: a string; integer: an int).
SURVEY_FOR_SPEC = {"str": {"text", "textarea", "multiplechoice", "password"}, "int": {"integer"}, "path": {"text"}}


# The rollout variables that upgrade.yml's waves action reads from the hosts' variables (extra vars, so survey
# answers, included), through plugin_utils/fleet_waves, rather than in a Jinja default: how each is read.
WAVES_READ = {fleet_waves.SERIAL: "", fleet_waves.CANARY: " | bool", fleet_waves.MAX_FAIL: ""}


def _playbook_variable(playbook, variable):
    """A documented playbook variable (meta/variables.yml) and how the playbook reads it."""
    documented = yaml.safe_load((ROOT / "meta" / "variables.yml").read_text())["variables"]
    text = (ROOT / playbook).read_text()
    uses = re.findall(r"%s \| default\(([^)]*)\)((?: \| \w+)?)" % re.escape(variable), text)
    if "gpuops.platform.upgrade_waves:" in text and variable in WAVES_READ:
        uses.append(("", WAVES_READ[variable]))
    return variable in documented, uses


def _check_question(element, playbooks):
    var, qtype = element["variable"], element["type"]
    roles = set().union(*(_roles_of(p) for p in playbooks))
    specs = {}
    for role in roles:
        specs.update(_specs(role))
    if var in specs:
        spec = specs[var]
        assert qtype in SURVEY_FOR_SPEC[spec.get("type", "str")], (var, qtype, spec.get("type"))
        if spec.get("choices") and qtype == "multiplechoice":
            choices = element["choices"] if isinstance(element["choices"], list) else element["choices"].splitlines()
            assert set(choices) <= {str(c) for c in spec["choices"]}, (var, choices, spec["choices"])
        elif spec.get("choices"):  # every answer min..max must be one of the spec's choices
            assert qtype == "integer" and set(range(element["min"], element["max"] + 1)) <= set(spec["choices"]), (
                var, spec["choices"])
        if spec.get("required"):
            assert element["required"] and "default" not in element, var
        if "default" in element:
            value = element["default"]
            assert not spec.get("choices") or value in spec["choices"], (var, value)
        return
    for playbook in playbooks:
        documented, uses = _playbook_variable(playbook, var)
        if documented and uses:
            default, filt = uses[0]
            if filt.strip() == "| bool":
                assert qtype == "multiplechoice" and set(element["choices"]) == {"true", "false"}, var
            else:
                assert qtype in ("integer", "text"), var
            return
    raise AssertionError("%s is neither a variable of %s nor a documented variable of %s" % (var, sorted(roles), playbooks))


def test_every_survey_question_is_a_real_variable_its_playbook_reads(assets):
    templates = {t["name"]: t for t in assets["job_templates"]}
    for template in _surveyed(assets):
        if template["name"] in templates:
            playbooks = [template["playbook"]]
        else:  # a workflow's survey reaches every job template of the workflow
            playbooks = [templates[n["unified_job_template"]["name"]]["playbook"]
                         for n in template["related"]["workflow_nodes"] if n.get("unified_job_template")]
            playbooks = [p for p in playbooks if (ROOT / p).is_file()]
        for element in template["related"]["survey_spec"]["spec"]:
            _check_question(element, playbooks)


@pytest.mark.parametrize("element", [
    {"variable": "nvidia_driver_versions", "type": "text", "required": False},
    {"variable": "dcgm_diag_level", "type": "text", "required": True},
    {"variable": "gpu_health_taint_effect", "type": "multiplechoice", "choices": ["NoSchedule", "Evict"], "required": True},
    {"variable": "dcgm_diag_level", "type": "integer", "required": True, "min": 0, "max": 4, "default": 1},
])
def test_question_check_refuses_what_the_specs_refuse(element):
    playbooks = {"nvidia_driver_versions": "playbooks/nodes.yml", "dcgm_diag_level": "playbooks/dcgm_diag.yml",
                 "gpu_health_taint_effect": "playbooks/health.yml"}
    with pytest.raises(AssertionError):
        _check_question(element, [playbooks[element["variable"]]])


# ---- Job templates and the workflow -------------------------------------------------
def test_job_templates_are_the_ones_operators_need(assets):
    templates = {t["name"]: t for t in assets["job_templates"]}
    assert list(templates) == TEMPLATES
    k8s = {"name": "GPU cluster API"}
    uses_k8s = {n for n, t in templates.items() if any(c["name"] == k8s["name"] for c in t["related"]["credentials"])}
    assert uses_k8s == {"Apply nodes", "Apply cluster", "Rolling driver upgrade", "GPU health", "Kubelet tuning"}
    assert templates["Record facts"]["use_fact_cache"] and templates["Record facts"]["playbook"] == "playbooks/record_facts.yml"
    assert templates["Plan fleet"]["job_type"] == "check" and templates["Plan fleet"]["use_fact_cache"]
    assert templates["Apply nodes"]["job_slice_count"] > 1 and templates["Apply nodes"]["playbook"] == "playbooks/nodes.yml"
    assert templates["Apply cluster"]["limit"] == "k8s_control" and templates["Apply cluster"]["use_fact_cache"]
    for name, template in templates.items():
        assert template["execution_environment"] == assets["execution_environments"][0]["natural_key"], name
        expected = {"gpuops_fleet_facts_cache": True} if name == "Plan fleet" else None
        assert yaml.safe_load(template["extra_vars"]) == expected, "%s: settings belong in the inventory" % name
        if name != "Plan fleet" and template["job_type"] == "run" and name != "Record facts":
            assert template["ask_job_type_on_launch"], "%s: launching it as check gives the plan" % name


def test_job_template_playbooks_are_in_the_project(assets):
    for template in assets["job_templates"]:
        assert (ROOT / template["playbook"]).is_file(), template["playbook"]


def test_inventory_has_the_gpu_and_control_groups(assets):
    (inventory,) = assets["inventory"]
    groups = {g["name"]: g for g in inventory["related"]["groups"]}
    assert set(groups) == {"gpu_nodes", "k8s_control"}
    assert groups["k8s_control"]["related"]["hosts"] == [inventory["related"]["hosts"][0]["natural_key"]]
    localhost = yaml.safe_load(inventory["related"]["hosts"][0]["variables"])
    assert localhost["ansible_connection"] == "local"
    # Slices: MIG's Kubernetes calls go to the execution environment, which every
    # slice has, not to k8s_control, which only one slice has (test_awx_jobs).
    gpu_vars = yaml.safe_load(groups["gpu_nodes"]["variables"])
    assert gpu_vars == {"mig_kubernetes": True, "mig_k8s_control_host": "localhost"}


def _workflow_run(workflow, outcomes):
    """Which nodes run, given each node's outcome ('successful' or 'failed'; an
    approval denied or timed out fails): AWX starts a node when a parent finishes
    along an edge of that kind (success_nodes, failure_nodes, always_nodes)."""
    nodes = {n["identifier"]: n for n in workflow["related"]["workflow_nodes"]}
    children = {i for n in nodes.values() for e in ("success_nodes", "failure_nodes", "always_nodes")
                for i in (c["identifier"] for c in n["related"][e])}
    ran, queue = [], [i for i in nodes if i not in children]
    while queue:
        ident = queue.pop(0)
        ran.append(ident)
        edge = "success_nodes" if outcomes.get(ident, "successful") == "successful" else "failure_nodes"
        for kind in (edge, "always_nodes"):
            queue += [c["identifier"] for c in nodes[ident]["related"][kind] if c["identifier"] not in ran]
    return ran


def test_workflow_records_plans_waits_for_approval_then_applies(assets):
    workflow = awx.by_name(assets, "workflow_job_templates")["GPU fleet rollout"]
    nodes = {n["identifier"]: n for n in workflow["related"]["workflow_nodes"]}
    assert _workflow_run(workflow, {}) == ["record", "plan", "approve", "apply-nodes", "apply-cluster", "health"]
    templates = [nodes[i].get("unified_job_template", {}).get("name") if nodes[i].get("unified_job_template") else None
                 for i in _workflow_run(workflow, {})]
    assert templates == ["Record facts", "Plan fleet", None, "Apply nodes", "Apply cluster", "GPU health"]
    approval = nodes["approve"]["related"]["create_approval_template"]
    assert approval["name"] and approval["timeout"] > 0 and "unified_job_template" not in nodes["approve"]
    # A failed plan stops it; so does a denied approval or a failed record.
    assert _workflow_run(workflow, {"plan": "failed"}) == ["record", "plan"]
    assert _workflow_run(workflow, {"approve": "failed"}) == ["record", "plan", "approve"]
    assert _workflow_run(workflow, {"record": "failed"}) == ["record"]
    for node in nodes.values():
        key = node["natural_key"]
        assert key["workflow_job_template"] == workflow["natural_key"] and key["identifier"] == node["identifier"]


def test_driver_upgrade_workflow_records_plans_waits_for_approval_then_upgrades(assets):
    workflow = awx.by_name(assets, "workflow_job_templates")["GPU driver upgrade"]
    nodes = {n["identifier"]: n for n in workflow["related"]["workflow_nodes"]}
    assert _workflow_run(workflow, {}) == ["record", "plan", "approve", "upgrade"]
    templates = [(nodes[i].get("unified_job_template") or {}).get("name") for i in _workflow_run(workflow, {})]
    assert templates == ["Record facts", "Plan fleet", None, "Rolling driver upgrade"]
    assert "unified_job_template" not in nodes["approve"] and nodes["approve"]["related"]["create_approval_template"]["timeout"] > 0
    assert _workflow_run(workflow, {"plan": "failed"}) == ["record", "plan"]
    assert _workflow_run(workflow, {"approve": "failed"}) == ["record", "plan", "approve"]
    # The plan's upgrade waves and the upgrade come from the same answers.
    upgrade = awx.by_name(assets, "job_templates")["Rolling driver upgrade"]
    assert workflow["related"]["survey_spec"]["spec"] == upgrade["related"]["survey_spec"]["spec"]
    for node in nodes.values():
        key = node["natural_key"]
        assert key["workflow_job_template"] == workflow["natural_key"] and key["identifier"] == node["identifier"]


def test_the_execution_environment_keeps_the_fact_cache_awx_reads():
    """AWX's fact storage (awx/main/tasks/facts.py, start_fact_cache and
    finish_fact_cache) reads and writes plain <fact_cache>/<host> JSON files;
    ansible-core 2.19 wraps every cache entry as s1_<host> (ansible/ansible#85874).
    The image's ansible-core must be older, and the one the AWX jobs are run on
    (requirements/compat.txt, scripts/compat.sh)."""
    version = awx.ee_ansible_core()
    assert tuple(int(p) for p in version.split(".")[:2]) < (2, 19), version
    compat = (awx.ROOT / "requirements" / "compat.txt").read_text()
    assert "ansible-core==%s\n" % version in compat, "the EE's ansible-core is not the compat stage's"
    runtime = yaml.safe_load((awx.ROOT / "meta" / "runtime.yml").read_text())["requires_ansible"]
    assert runtime == ">=2.17.0" and tuple(int(p) for p in version.split(".")[:2]) >= (2, 17), runtime


# ---- What the README and the approvals say -----------------------------------------------
def test_a_refused_template_makes_awx_import_go_on_and_exit_1(monkeypatch):
    """README, "Put the project in place": with a git project not yet synced, AWX refuses each template
    ("Playbook not found for project."); awxkit's import logs it, goes on with the next object, and the
    command exits 1 (awxkit/api/pages/api.py _import_list, awxkit/cli/resource.py parse_resource)."""
    import argparse
    import io
    import sys
    from types import SimpleNamespace

    from awxkit import exceptions

    try:
        import pkg_resources  # noqa: F401  (awxkit's CLI reads its own version with it; setuptools 81 drops it)
    except ImportError:
        from importlib.metadata import version
        monkeypatch.setitem(sys.modules, "pkg_resources", SimpleNamespace(
            get_distribution=lambda name: SimpleNamespace(version=version(name))))
    from awxkit.cli import resource as cli_resource

    posted = []

    def post(data):
        posted.append(data["name"])
        if data["name"] == "Plan fleet":
            raise exceptions.BadRequest(400, {"playbook": ["Playbook not found for project."]})
        return {"id": len(posted), "name": data["name"]}

    api = pages.ApiV2(Connection("https://awx.invalid"))
    api._cache = SimpleNamespace(
        get_options=lambda page: SimpleNamespace(r=SimpleNamespace(headers={"Allow": "GET, POST"}), json={
            "actions": {"POST": {"name": {"type": "string"}, "playbook": {"type": "string"}}}}),
        get_by_natural_key=lambda key: None, set_page=lambda page: None)
    endpoint = SimpleNamespace(endpoint="/api/v2/job_templates/", post=post)
    api._import_list(endpoint, [{"name": n, "playbook": "playbooks/x.yml", "natural_key": {"name": n, "type": "job_template"}}
                                for n in ("Plan fleet", "Apply nodes")])
    assert posted == ["Plan fleet", "Apply nodes"] and api._has_error is True

    # The command's exit status, as `awx import` reaches it with that result.
    stdin = io.StringIO("job_templates: []\n")
    stdin.name = "<stdin>"
    client = SimpleNamespace(parser=argparse.ArgumentParser(prog="awx"), subparsers={}, help=False,
                             stdin=stdin, authenticate=lambda: None,
                             get_config=lambda key: "yaml",
                             v2=SimpleNamespace(json={}, _has_error=True, import_assets=lambda data: None))
    monkeypatch.setattr(sys, "argv", ["awx", "import"])
    with pytest.raises(SystemExit) as done:
        cli_resource.parse_resource(client)
    assert done.value.code == 1
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "would still exit 0" not in readme and "`awx import` would go on to create the other objects and exit 1" in readme


def test_the_approvals_name_where_the_page_is_and_what_the_run_checks(assets):
    """The approver is sent to the last line of Plan fleet's "Summarize the fleet", which names the page, and told
    what the run after the approval checks (each check has its test in tests/integration/test_upgrade_waves.py)."""
    plays = yaml.safe_load((ROOT / "playbooks" / "plan_fleet.yml").read_text())
    summary = [t for t in plays[0]["tasks"] if t["name"] == "Summarize the fleet"][0]
    assert summary["ansible.builtin.debug"]["msg"][-1].startswith("report: {{ gpuops_fleet_plan.report_file }}")
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert 'the last line of its task "Summarize the fleet" (`report: <page> (plan: <plan.json>)`)' in readme
    for name in ("GPU fleet rollout", "GPU driver upgrade"):
        nodes = awx.by_name(assets, "workflow_job_templates")[name]["related"]["workflow_nodes"]
        text = " ".join([n for n in nodes if n["identifier"] == "approve"][0]["related"][
            "create_approval_template"]["description"].split())
        assert 'the last line of its task "Summarize the fleet"' in text
        for check in ("SHA-256 is not gpuops_approved_plan_sha256", "waves other than its settings cut",
                      "a host twice or missing", "no hosts", "names none of the run's hosts", "facts or settings changed"):
            assert check in text, (name, check)


def test_the_file_and_the_readme_warn_that_importing_again_empties_the_secrets(assets):
    header = (ROOT / "awx" / "gpuops-platform.yml").read_text().split("\norganizations:")[0]
    assert "importing again" in header and "emptied" in " ".join(header.replace("#", " ").split())
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "**Import once, then fill in:** importing the file again" in readme
    # What the warning rests on: awxkit sends an object the AWX already has with PUT, each placeholder as empty.
    assert all(remove_encrypted(v) == "" for c in assets["credentials"] for v in c["inputs"].values() if v == "$encrypted$")
