"""AWX's rules and AWX's job launch, rebuilt from AWX's source for the tests of awx/.

AWX itself is a Django service and cannot run here, so what it does with the shipped
assets is rebuilt, rule by rule, from its source (github.com/ansible/awx, cited per
function), and the jobs run through the real ansible-runner exactly as AWX hands them
to it: a private data directory with the project, an inventory script of the job's
(slice of) hosts, the extra vars from the survey defaults, and the environment and
files of the credentials' injectors.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import ansible_runner
import jsonschema
import yaml
from awxkit import yaml_file
from jinja2 import StrictUndefined, UndefinedError, sandbox

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / "awx" / "gpuops-platform.yml"
VENV_BIN = Path(sys.executable).parent


def ee_ansible_core():
    """The ansible-core version execution-environment.yml installs (its pip pin)."""
    ee = yaml.safe_load((ROOT / "execution-environment.yml").read_text())
    name, _sep, version = ee["dependencies"]["ansible_core"]["package_pip"].partition("==")
    assert name == "ansible-core" and version, "execution-environment.yml pins ansible-core with ==, got %r" % name
    return version


def load_assets(path=ASSETS):
    """The file as `awx import --conf.format yaml` reads it (awxkit/cli/resource.py Import)."""
    with open(path) as handle:
        return yaml.load(handle, Loader=yaml_file.Loader)


def by_name(assets, kind):
    return {obj["name"]: obj for obj in assets.get(kind) or []}


# ---- Surveys ------------------------------------------------------------------
# awx/api/views/__init__.py, JobTemplateSurveySpec: the question types and the
# Python type a default must have.
SURVEY_TYPES = {"text": str, "textarea": str, "password": str, "multiplechoice": str, "multiselect": str,
                "integer": int, "float": float}


def survey_spec_errors(spec):
    """JobTemplateSurveySpec._validate_spec_data (awx/api/views/__init__.py): what
    POST .../survey_spec/ refuses with 400. Returns the messages, empty when AWX accepts it."""
    errors = []
    for field, kind in (("name", str), ("description", str), ("spec", list)):
        if field not in spec:
            errors.append("Field '%s' is missing from survey spec." % field)
        elif not isinstance(spec[field], kind):
            errors.append("Expected %s for field '%s'." % (kind.__name__, field))
    if isinstance(spec.get("spec"), list) and len(spec["spec"]) < 1:
        errors.append("'spec' doesn't contain any items.")
    if errors:
        return errors
    seen = set()
    for idx, item in enumerate(spec["spec"]):
        if not isinstance(item, dict):
            return ["Survey question %s is not a json object." % idx]
        for field in ("type", "question_name", "variable", "required"):
            if field not in item:
                return ["'%s' missing from survey question %s" % (field, idx)]
            kind = bool if field == "required" else str
            if not isinstance(item[field], kind):
                return ["'%s' in survey question %s expected to be %s." % (field, idx, kind.__name__)]
        if item["variable"] in seen:
            return ["'variable' '%s' duplicated in survey question %s." % (item["variable"], idx)]
        seen.add(item["variable"])
        qtype = item["type"]
        if qtype not in SURVEY_TYPES:
            return ["'%s' in survey question %s is not one of the allowed question types." % (qtype, idx)]
        if "default" in item and item["default"] != "" and not isinstance(item["default"], SURVEY_TYPES[qtype]):
            return ["Default value %s in survey question %s expected to be %s." % (item["default"], idx, qtype)]
        for key in ("min", "max"):
            if key in item and item[key] is not None and not isinstance(item[key], int):
                return ["The %s limit in survey question %s expected to be integer." % (key, idx)]
        if qtype in ("multiselect", "multiplechoice"):
            if "choices" not in item:
                return ["Survey question %s of type %s must specify choices." % (idx, qtype)]
            choices = item["choices"]
            if isinstance(choices, str):
                choices = [c for c in choices.splitlines() if c.strip() != ""]
            if "default" in item:
                defaults = item["default"]
                if isinstance(defaults, str):
                    defaults = [d for d in defaults.splitlines() if d.strip() != ""]
                if qtype == "multiplechoice" and len(defaults) > 1:
                    return ["Multiple Choice (Single Select) can only have one default value."]
                if any(d not in choices for d in defaults):
                    return ["Default choice must be answered from the choices listed."]
        if isinstance(item.get("default"), str) and item["default"].startswith("$encrypted$"):
            return ["$encrypted$ is a reserved keyword, may not be used for new default in position %s." % idx]
    return []


# The launch rules below are ported from AWX's source, ansible/awx at the commits named:
#   awx/main/models/mixins.py @ 6a9566e10234c9dc42b870f2a8178e90fe950293, SurveyJobTemplateMixin:
#     _survey_element_validation, _accept_or_ignore_variables, _update_unified_job_kwargs,
#     variables_needed_to_start;
#   awx/main/models/workflow.py @ 6a61b7ce4984e60971d1d8e70e53e72d285acc80, WorkflowJobNode.get_job_kwargs
#     (what a workflow node's job gets: its own prompts, the ancestors' artifacts, the workflow's extra vars);
#   awx/api/serializers.py, JobLaunchSerializer.validate (_exclude_errors=['prompts']: an extra var no
#     question asks for is ignored, every other error is a 400) and WorkflowJobLaunchSerializer.validate
#     (no exclusions).
# AWX 24.6.1 answers the same way (the operator's 400 "'gpuops_nodes_serial' value missing" for a
# required question that has a default is the "value missing" rule below).
PASSWORD_PLACEHOLDER = "$encrypted$"


def survey_answer_errors(element, data, validate_required=True):
    """SurveyJobTemplateMixin._survey_element_validation: what a launch refuses, for
    one question and the submitted answers (an empty list when AWX accepts them)."""
    var = element["variable"]
    errors = []
    if element["type"] == "password":
        value = data.get(var)
        if isinstance(value, str) and value == PASSWORD_PLACEHOLDER:
            if element.get("default") is None and element["required"]:
                if validate_required:
                    errors.append("'%s' value missing" % var)
            return errors
    if var not in data and element["required"]:
        if validate_required:
            errors.append("'%s' value missing" % var)
    elif element["type"] in ("textarea", "text", "password"):
        if var in data:
            value = data[var]
            if not isinstance(value, str):
                return ["Value %s for '%s' expected to be a string." % (value, var)]
            if "min" in element and element["min"] not in ("", None) and len(value) < int(element["min"]):
                errors.append("'%s' value %s is too small (length is %s must be at least %s)." % (
                    var, value, len(value), element["min"]))
            if "max" in element and element["max"] not in ("", None) and len(value) > int(element["max"]):
                errors.append("'%s' value %s is too large (must be no more than %s)." % (var, value, element["max"]))
    elif element["type"] == "integer":
        if var in data:
            value = data[var]
            if not isinstance(value, int) or isinstance(value, bool):  # AWX: type(...) != int, so True is refused too
                return ["Value %s for '%s' expected to be an integer." % (value, var)]
            if "min" in element and element["min"] not in ("", None) and value < int(element["min"]):
                errors.append("'%s' value %s is too small (must be at least %s)." % (var, value, element["min"]))
            if "max" in element and element["max"] not in ("", None) and value > int(element["max"]):
                errors.append("'%s' value %s is too large (must be no more than %s)." % (var, value, element["max"]))
    elif element["type"] == "float":
        if var in data:
            value = data[var]
            if type(value) not in (float, int):
                return ["Value %s for '%s' expected to be a numeric type." % (value, var)]
            if "min" in element and element["min"] not in ("", None) and value < float(element["min"]):
                errors.append("'%s' value %s is too small (must be at least %s)." % (var, value, element["min"]))
            if "max" in element and element["max"] not in ("", None) and value > float(element["max"]):
                errors.append("'%s' value %s is too large (must be no more than %s)." % (var, value, element["max"]))
    elif element["type"] == "multiselect":
        if var in data:
            if not isinstance(data[var], list):
                errors.append("'%s' value is expected to be a list." % var)
            else:
                choices = _choice_list(element)
                errors += ["Value %s for '%s' expected to be one of %s." % (v, var, choices)
                           for v in data[var] if v not in choices]
    elif element["type"] == "multiplechoice":
        choices = _choice_list(element)
        if var in data and data[var] not in choices:
            errors.append("Value %s for '%s' expected to be one of %s." % (data[var], var, choices))
    return errors


def _choice_list(element):
    """A question's choices: a list, or text with one choice a line (blank lines dropped)."""
    choices = element["choices"]
    if isinstance(choices, str):
        return [choice for choice in choices.splitlines() if choice.strip() != ""]
    return list(choices)


def _survey(template):
    """The questions AWX asks: only with survey_enabled and a spec."""
    spec = template.get("related", {}).get("survey_spec") or {}
    return spec.get("spec", []) if template.get("survey_enabled") and "spec" in spec else []


def variables_needed_to_start(template):
    """SurveyJobTemplateMixin.variables_needed_to_start: every required question, default or not."""
    return [element["variable"] for element in _survey(template) if element["required"]]


def accept_or_ignore_variables(template, data, exclude_errors=()):
    """SurveyJobTemplateMixin._accept_or_ignore_variables: (accepted, rejected, errors)
    of the extra vars given at launch."""
    extra_vars = dict(data)
    errors, rejected, accepted = {}, {}, {}
    survey = (template.get("related", {}).get("survey_spec") or {}) if template.get("survey_enabled") else {}
    if survey:
        survey_errors = []
        for element in survey.get("spec", []):
            key = element.get("variable")
            element_errors = survey_answer_errors(element, data, validate_required="required" not in exclude_errors)
            if element_errors:
                survey_errors += element_errors
                if key is not None and key in extra_vars:
                    rejected[key] = extra_vars.pop(key)
            elif key in extra_vars:
                accepted[key] = extra_vars.pop(key)
        if survey_errors:
            errors["variables_needed_to_start"] = survey_errors
    if template.get("ask_variables_on_launch"):
        accepted.update(extra_vars)
        extra_vars = {}
    if extra_vars:
        # Prune the prompted variables for those identical to template
        template_vars = yaml.safe_load(template.get("extra_vars") or "") or {}
        for key in set(template_vars) & set(extra_vars):
            if template_vars[key] == extra_vars[key]:
                extra_vars.pop(key)
    if extra_vars:
        rejected.update(extra_vars)
        if "prompts" not in exclude_errors:
            errors["extra_vars"] = ["Variables %s are not allowed on launch. Check the Prompt on Launch setting on the "
                                    "template to include Extra Variables." % ", ".join(str(k) for k in extra_vars)]
    return accepted, rejected, errors


def launch_extra_vars(template, answers=None):
    """SurveyJobTemplateMixin._update_unified_job_kwargs: the template's extra_vars,
    then each survey default that passes its own question's validation, then the
    answers given at launch."""
    extra = yaml.safe_load(template.get("extra_vars") or "") or {}
    for element in _survey(template):
        default = element.get("default")
        if default is not None and not survey_answer_errors(element, {element["variable"]: default}):
            extra[element["variable"]] = default
    extra.update(answers or {})
    return extra


class LaunchRefused(Exception):
    """The 400 of a launch endpoint: ``errors`` is its JSON body."""

    def __init__(self, errors):
        super().__init__(json.dumps(errors, sort_keys=True))
        self.errors = errors


def api_launch(template, extra_vars=None, workflow=False):
    """POST .../job_templates/<id>/launch/ (JobLaunchSerializer.validate, with
    _exclude_errors=['prompts']) or .../workflow_job_templates/<id>/launch/
    (WorkflowJobLaunchSerializer.validate, nothing excluded): LaunchRefused with
    AWX's errors, or the extra vars of the job (or workflow job) it creates."""
    exclude = () if workflow else ("prompts",)
    accepted, _rejected, errors = accept_or_ignore_variables(template, extra_vars or {}, exclude_errors=exclude)
    if errors:
        raise LaunchRefused(errors)
    return launch_extra_vars(template, accepted)


def job_artifacts(result):
    """Job.artifacts as AWX stores them: the artifact_data of the job's playbook_on_stats
    event, which is what set_stats (per_host: false) left in the run's custom stats."""
    for event in result.events:
        if event["event"] == "playbook_on_stats":
            return dict(event["event_data"].get("artifact_data") or {})
    return {}


def workflow_node_job_kwargs(template, node, workflow_extra_vars, ancestor_artifacts):
    """WorkflowJobNode.get_job_kwargs for a job template node: the extra_vars the node's
    job is created with (launch_extra_vars then adds the template's own and its survey
    defaults), and the errors AWX logs for the node's own prompts (it starts the job
    anyway; the WFJT's node_prompts_rejected lists such nodes). The ancestors'
    artifacts go in, then the workflow job's extra vars over them; neither goes through
    the job template's survey."""
    prompts = dict(node.get("extra_data") or {})
    accepted, _rejected, errors = accept_or_ignore_variables(template, prompts)
    extra = dict(accepted)
    functional = dict(ancestor_artifacts)
    functional.pop("_ansible_no_log", None)
    extra.update(functional)
    extra.update(workflow_extra_vars)
    return extra, errors


# ---- Credential types -------------------------------------------------------------
# awx/main/fields.py: CredentialTypeInputField.schema and CredentialTypeInjectorField.schema.
CREDENTIAL_INPUTS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "required": {"type": "array", "items": {"type": "string"}},
        "fields": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["id", "label"],
            "properties": {
                "type": {"enum": ["string", "boolean"]},
                "format": {"enum": ["ssh_private_key", "url"]},
                "choices": {"type": "array", "minItems": 1, "items": {"type": "string"}, "uniqueItems": True},
                "id": {"type": "string", "pattern": "^[a-zA-Z_]+[a-zA-Z0-9_]*$"},
                "label": {"type": "string"}, "help_text": {"type": "string"},
                "multiline": {"type": "boolean"}, "secret": {"type": "boolean"},
                "ask_at_runtime": {"type": "boolean"}, "default": {},
            }}},
    },
}
CREDENTIAL_INJECTORS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "file": {"type": "object", "additionalProperties": False,
                 "patternProperties": {r"^template(\.[a-zA-Z_]+[a-zA-Z0-9_]*)?$": {"type": "string"}}},
        "env": {"type": "object", "additionalProperties": False,
                "patternProperties": {"^[a-zA-Z_]+[a-zA-Z0-9_]*$": {"type": "string", "pattern": "^[\x00-\x7F]*$"}}},
        "extra_vars": {"type": "object", "additionalProperties": False,
                       "patternProperties": {"^[a-zA-Z_]+[a-zA-Z0-9_]*$": {"type": "string"}}},
    },
}
# awx/main/constants.py ENV_BLOCKLIST, used by CredentialTypeInjectorField.validate_env_var_allowed
# (with every ANSIBLE_* variable).
ENV_BLOCKLIST = frozenset((
    "VIRTUAL_ENV", "PATH", "PYTHONPATH", "PROOT_TMP_DIR", "JOB_ID", "INVENTORY_ID", "INVENTORY_SOURCE_ID",
    "INVENTORY_UPDATE_ID", "AD_HOC_COMMAND_ID", "REST_API_URL", "REST_API_TOKEN", "MAX_EVENT_RES",
    "CALLBACK_QUEUE", "CALLBACK_CONNECTION", "CACHE", "JOB_CALLBACK_DEBUG", "INVENTORY_HOSTVARS",
    "AWX_HOST", "PROJECT_REVISION", "SUPERVISOR_WEB_CONFIG_PATH"))


class _Namespace:
    pass


def credential_type_errors(ctype):
    """CredentialTypeInputField.validate and CredentialTypeInjectorField.validate
    (awx/main/fields.py): what AWX refuses when the credential type is created."""
    errors = ["inputs: %s" % e.message for e in
              jsonschema.Draft4Validator(CREDENTIAL_INPUTS_SCHEMA).iter_errors(ctype["inputs"])]
    errors += ["injectors: %s" % e.message for e in
               jsonschema.Draft4Validator(CREDENTIAL_INJECTORS_SCHEMA).iter_errors(ctype["injectors"])]
    if errors:
        return errors
    inputs = ctype["inputs"]
    if "dependencies" in inputs:
        errors.append("'dependencies' is not supported for custom credentials.")
    ids = set()
    for field in inputs.get("fields", []):
        if field["id"] == "tower":
            errors.append('"tower" is a reserved field name')
        if field["id"] in ids:
            errors.append("field IDs must be unique (%s)" % field["id"])
        ids.add(field["id"])
        ftype = field.get("type", "string")
        if "default" in field and not isinstance(field["default"], {"string": str, "boolean": bool}[ftype]):
            errors.append("%s is not a %s" % (field["default"], ftype))
        for key in ("choices", "multiline", "format", "secret"):
            if key in field and ftype != "string":
                errors.append("%s not allowed for %s type (%s)" % (key, ftype, field["id"]))
    for name in inputs.get("required", []):
        if name not in ids:
            errors.append("required names an undefined field %s" % name)
    injectors = ctype["injectors"]
    # Every template renders against the defined fields and the tower namespace.
    namespace = {name: "EXAMPLE" for name in ids}
    tower = _Namespace()
    files = [k for k in injectors.get("file", {}) if k.startswith("template")]
    if "template" in files:
        if len(files) > 1:
            errors.append("Must use multi-file syntax when injecting multiple files")
        tower.filename = "EXAMPLE_FILENAME"
    elif files:
        tower.filename = _Namespace()
        for name in files:
            setattr(tower.filename, name.split(".")[1], "EXAMPLE_FILENAME")
    namespace["tower"] = tower
    for kind, injector in injectors.items():
        for key, template in injector.items():
            if kind == "env" and (key.startswith("ANSIBLE_") or key in ENV_BLOCKLIST):
                errors.append("Environment variable %s is not allowed to be used in credentials." % key)
            try:
                sandbox.ImmutableSandboxedEnvironment(undefined=StrictUndefined).from_string(template).render(namespace)
            except UndefinedError as exc:
                errors.append("%s uses an undefined field (%s)" % (key, exc))
    return errors


def inject_credential(ctype, inputs, private_data_dir):
    """CredentialType.inject_credential (awx/main/models/credential/__init__.py), custom
    injectors: files rendered into <private_data_dir>/env (0600), then the env
    templates against the inputs and the tower.filename of those files. Returns the
    environment of the job and the one AWX stores and shows (secrets masked)."""
    secret = {f["id"] for f in ctype["inputs"]["fields"] if f.get("secret")}
    namespace, safe_namespace = {}, {}
    tower = _Namespace()
    for name, value in inputs.items():
        if len(value):
            namespace[name] = value
            safe_namespace[name] = "**********" if name in secret else value
    namespace["tower"] = safe_namespace["tower"] = tower
    env_dir = Path(private_data_dir) / "env"
    env_dir.mkdir(parents=True, exist_ok=True)
    render = sandbox.ImmutableSandboxedEnvironment()
    for label, template in ctype["injectors"].get("file", {}).items():
        handle, path = tempfile.mkstemp(dir=str(env_dir))
        with os.fdopen(handle, "w") as out:
            out.write(render.from_string(template).render(**namespace))
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
        if "." not in label:
            tower.filename = path
        else:
            if not hasattr(tower, "filename"):
                tower.filename = _Namespace()
            setattr(tower.filename, label.split(".")[1], path)
    env, safe_env = {}, {}
    for name, template in ctype["injectors"].get("env", {}).items():
        env[name] = render.from_string(template).render(**namespace)
        safe_env[name] = render.from_string(template).render(**safe_namespace)
    return env, safe_env


# ---- Inventory and slices -------------------------------------------------------------
def awx_inventory_from_project(inventory_file, project_dir, base=None):
    """The inventory an AWX inventory sync from the project would hold: AWX imports
    what `ansible-inventory --list --export` prints (ANSIBLE_INVENTORY_EXPORT, awx/main/
    constants.py). Variables are stored as text and templated at run time, where the
    job's inventory is a script in the private data directory: the demo's paths under
    `{{ inventory_dir }}` are pointed at the project's copy of the inventory folder.
    `base` is the shipped inventory (its variables, groups and hosts come first)."""
    proc = subprocess.run([str(VENV_BIN / "ansible-inventory"), "-i", str(inventory_file), "--list", "--export"],
                          capture_output=True, text=True, check=True,
                          env=dict(os.environ, ANSIBLE_INVENTORY_UNPARSED_WARNING="False"))
    listed = json.loads(proc.stdout.replace("{{ inventory_dir }}", str(Path(project_dir) / inventory_file.parent.relative_to(ROOT))))
    inventory = {"vars": {}, "groups": {}, "hosts": {}}
    if base is not None:
        inventory["vars"].update(yaml.safe_load(base.get("variables") or "") or {})
        for host in base["related"]["hosts"]:
            inventory["hosts"][host["name"]] = yaml.safe_load(host.get("variables") or "") or {}
        for group in base["related"]["groups"]:
            inventory["groups"][group["name"]] = {
                "vars": yaml.safe_load(group.get("variables") or "") or {},
                "hosts": [h["name"] for h in group["related"]["hosts"]],
                "children": [c["name"] for c in group["related"]["children"]]}
    inventory["vars"].update(listed.get("all", {}).get("vars", {}))
    for name, group in listed.items():
        if name in ("_meta", "all", "ungrouped"):
            continue
        entry = inventory["groups"].setdefault(name, {"vars": {}, "hosts": [], "children": []})
        entry["vars"].update(group.get("vars", {}))
        entry["hosts"] += [h for h in group.get("hosts", []) if h not in entry["hosts"]]
        entry["children"] += [c for c in group.get("children", []) if c not in entry["children"]]
        for host in group.get("hosts", []):
            inventory["hosts"].setdefault(host, {})
    for host, hostvars in listed.get("_meta", {}).get("hostvars", {}).items():
        inventory["hosts"].setdefault(host, {}).update(hostvars)
    return inventory


def sliced_hosts(inventory, slice_number=1, slice_count=1):
    """Inventory.get_script_data / get_sliced_hosts (awx/main/models/inventory.py): the
    enabled hosts ordered by name, then hosts[slice_number - 1::slice_count]."""
    hosts = sorted(inventory["hosts"])
    if slice_count > 1 and slice_number > 0:
        hosts = hosts[slice_number - 1::slice_count]
    return hosts


def script_data(inventory, slice_number=1, slice_count=1):
    """Inventory.get_script_data(hostvars=True, towervars=True, slice_number, slice_count)."""
    hosts = sliced_hosts(inventory, slice_number, slice_count)
    data = {"all": {}}
    if inventory["vars"]:
        data["all"]["vars"] = inventory["vars"]
    grouped = set()
    for name, group in inventory["groups"].items():
        info = {}
        members = [h for h in group["hosts"] if h in hosts]
        grouped.update(members)
        if members:
            info["hosts"] = members
        if group["children"]:
            info["children"] = group["children"]
        if group["vars"]:
            info["vars"] = group["vars"]
        if info:
            data[name] = info
    data["all"]["hosts"] = [h for h in hosts if h not in grouped]
    if inventory["groups"]:
        data["all"]["children"] = list(inventory["groups"])
    data["_meta"] = {"hostvars": {}}
    for host in hosts:
        data["_meta"]["hostvars"][host] = dict(inventory["hosts"][host], remote_tower_enabled="true")
    return data


# ---- Fact storage -----------------------------------------------------------------
class FactStore:
    """AWX's fact storage, start_fact_cache and finish_fact_cache (awx/main/tasks/facts.py):
    before a use_fact_cache job, each host of the job's slice that has stored facts
    gets <fact_cache>/<host name>, their JSON; afterwards, for each host of the slice,
    a file changed since then is stored, an unchanged one is left, and a missing one
    clears the host's facts (AWX takes it for clear_facts)."""

    def __init__(self):
        self.facts = {}

    def start(self, destination, hosts):
        destination.mkdir(parents=True, mode=0o700)
        last = None
        for host in hosts:
            if host in self.facts:
                path = destination / host
                path.write_text(json.dumps(self.facts[host]))
                os.chmod(path, 0o600)
                last = path.stat().st_mtime
        return last

    def finish(self, destination, write_time, hosts):
        for host in hosts:
            path = destination / host
            if path.exists():
                if not write_time or path.stat().st_mtime > write_time:
                    try:
                        self.facts[host] = json.loads(path.read_text())
                    except ValueError:
                        continue
            else:
                self.facts[host] = {}


# ---- The launch --------------------------------------------------------------------
def copy_project(dest):
    """An AWX project is a checkout of this repository; the collection comes from the
    execution environment (here the repository's collections/)."""
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(
        ".git", ".venv*", ".cache", "build", "collections", "__pycache__", ".pytest_cache", ".hypothesis"))
    return dest


class _Unsafe(str):
    pass


class _ExtraVarsDumper(yaml.SafeDumper):
    pass


_ExtraVarsDumper.add_representer(_Unsafe, lambda dumper, data: dumper.represent_scalar("!unsafe", str(data)))


def _unsafe(value):
    """awx/main/utils/safe_yaml.py safe_dump: every string of a launch's extra vars is
    written !unsafe, so Ansible never templates it."""
    if isinstance(value, str):
        return _Unsafe(value)
    if isinstance(value, dict):
        return {k: _unsafe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unsafe(v) for v in value]
    return value


def launch(template, assets, inventory, project, workdir, job_id, credential_inputs=None, facts=None,
           job_type=None, answers=None, slice_number=1, slice_count=1, verbosity=0, limit=None, timeout=600):
    """One job of `template` as AWX's RunJob builds and runs it (awx/main/tasks/jobs.py):
    build_inventory, build_extra_vars_file, build_env with each credential's
    injectors, build_args (job type, -u, --diff, -l, -v), and for use_fact_cache the
    fact cache of the job's hosts (ansible-runner's fact_cache_type jsonfile under
    artifacts/<job id>/fact_cache). Returns the ansible-runner result and the job's
    environment."""
    pdd = Path(workdir) / ("job-%d" % job_id)
    (pdd / "inventory").mkdir(parents=True)
    (pdd / "env").mkdir()
    os.symlink(project, pdd / "project")
    script = pdd / "inventory" / "hosts"
    script.write_text("#! %s\n# -*- coding: utf-8 -*-\nprint(%r)\n" % (
        sys.executable, json.dumps(script_data(inventory, slice_number, slice_count))))
    os.chmod(script, stat.S_IRUSR | stat.S_IXUSR | stat.S_IWUSR)

    extra = {"awx_job_id": job_id, "awx_job_template_name": template["name"], "tower_job_id": job_id,
             "awx_job_slice_number": slice_number, "awx_job_slice_count": slice_count}
    extra.update(_unsafe(launch_extra_vars(template, answers)))
    (pdd / "env" / "extravars").write_text(yaml.dump(extra, Dumper=_ExtraVarsDumper))

    credentials = {c["name"]: c for c in assets["credentials"]}
    types = {(t["name"], t["kind"]): t for t in assets["credential_types"]}
    env = {"JOB_ID": str(job_id), "ANSIBLE_RETRY_FILES_ENABLED": "False",
           "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_HOME": str(pdd / ".ansible")}
    safe_env = dict(env)
    ssh_user = ""
    for ref in template["related"]["credentials"]:
        credential = credentials[ref["name"]]
        key = (credential["credential_type"]["name"], credential["credential_type"]["kind"])
        if key == ("Machine", "ssh"):
            ssh_user = (credential_inputs or {}).get(ref["name"], credential["inputs"]).get("username", "")
            continue
        injected, shown = inject_credential(types[key], (credential_inputs or {})[ref["name"]], pdd)
        env.update(injected)
        safe_env.update(shown)

    args = []
    if (job_type or template["job_type"]) == "check":
        args.append("--check")
    args += ["-u", ssh_user or "root"]
    if template["diff_mode"]:
        args.append("--diff")
    if limit or template["limit"]:
        args += ["-l", limit or template["limit"]]
    if verbosity:
        args.append("-" + "v" * min(5, verbosity))

    runner_args = {}
    cache_dir, hosts = pdd / "artifacts" / str(job_id) / "fact_cache", sliced_hosts(inventory, slice_number, slice_count)
    if template["use_fact_cache"]:
        write_time = facts.start(cache_dir, hosts)
        runner_args = {"fact_cache_type": "jsonfile"}
    result = ansible_runner.run(private_data_dir=str(pdd), ident=str(job_id), playbook=template["playbook"],
                                inventory=str(script), cmdline=" ".join(args), envvars=env, quiet=True,
                                timeout=timeout, **runner_args)
    if template["use_fact_cache"]:
        facts.finish(cache_dir, write_time, hosts)
    return result, env, safe_env


def host_results(result):
    """Per host, what each task did: (play, task, outcome, changed, message)."""
    outcome = {"runner_on_ok": "ok", "runner_on_failed": "failed", "runner_on_skipped": "skipped",
               "runner_on_unreachable": "unreachable", "runner_item_on_ok": "ok", "runner_item_on_failed": "failed"}
    per_host = {}
    for event in result.events:
        if event["event"] not in outcome:
            continue
        data = event["event_data"]
        res = data.get("res", {})
        msg = res.get("msg")
        per_host.setdefault(data["host"], []).append((
            data.get("play"), data.get("task"), outcome[event["event"]], bool(res.get("changed")),
            json.dumps(msg, sort_keys=True) if msg is not None else None))
    return per_host


def mentions(result, secret):
    """Every place a secret could surface from a job: its events (what AWX stores and
    shows) and its stdout."""
    places = []
    for event in result.events:
        if secret in json.dumps(event):
            places.append("event %s %s" % (event["event"], event.get("event_data", {}).get("task")))
    if secret in result.stdout.read():
        places.append("stdout")
    return places
