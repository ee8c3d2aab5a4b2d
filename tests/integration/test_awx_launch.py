"""awx/gpuops-platform.yml imports completely and every template launches through AWX's API.

What an operator met on a live AWX: a git project that had not synced made AWX refuse
every job template ("Playbook not found for project."), which `awx import` reports and
skips, leaving the workflow's nodes empty; a required question with a default made the
launch endpoint answer 400 ("'gpuops_nodes_serial' value missing"); an empty answer to
an optional question reached the playbooks as a value. The launch rules are AWX's own,
ported in tests/integration/awx_support.py (api_launch, accept_or_ignore_variables,
workflow_node_job_kwargs, each citing the AWX source and commit it follows).
"""
import copy
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile

import ansible_runner
import pytest
import yaml

import awx_support as awx

ROOT = awx.ROOT
TEXT = ("text", "textarea", "password")
# What plan_fleet.yml hands on with set_stats: AWX passes them to the later nodes.
ARTIFACTS = ("gpuops_approved_plan", "gpuops_approved_plan_sha256", "gpuops_fleet_plan_report",
             "gpuops_fleet_plan_summary")


@pytest.fixture(scope="module")
def assets():
    return awx.load_assets()


def _templates(assets):
    return list(assets["job_templates"]) + list(assets["workflow_job_templates"])


def _empty_answers(template):
    """What a launch sends for the optional questions left empty: "" for a text
    question; nothing for a number or a choice, which has no empty value (AWX refuses
    "" for them, see test_an_empty_answer_is_never_a_value)."""
    return {q["variable"]: "" for q in awx._survey(template) if not q["required"] and q["type"] in TEXT}


# ---- The AWX rules themselves -------------------------------------------------------
def test_a_required_question_without_an_answer_is_refused_default_or_not(assets):
    nodes = awx.by_name(assets, "job_templates")["Apply nodes"]
    required = copy.deepcopy(nodes)
    serial = required["related"]["survey_spec"]["spec"][1]
    serial["required"] = True
    assert awx.variables_needed_to_start(required) == ["gpuops_nodes_serial"]
    with pytest.raises(awx.LaunchRefused) as refused:
        awx.api_launch(required, {})
    assert refused.value.errors == {"variables_needed_to_start": ["'gpuops_nodes_serial' value missing"]}
    # Without a default it is the same 400; an answer launches it.
    del serial["default"]
    with pytest.raises(awx.LaunchRefused, match="value missing"):
        awx.api_launch(required, {"gpuops_driver_version": ""})
    assert awx.api_launch(required, {"gpuops_nodes_serial": "2"})["gpuops_nodes_serial"] == "2"
    # Inside a workflow AWX only logs it and starts the job without the variable.
    runtime, errors = awx.workflow_node_job_kwargs(required, {"extra_data": {}}, {}, {})
    assert "gpuops_nodes_serial" not in awx.launch_extra_vars(required, runtime) and errors["variables_needed_to_start"]


def test_launch_rules_follow_awx(assets):
    dcgm = awx.by_name(assets, "job_templates")["DCGM diagnostics"]
    # A default that fails its own question is not sent; a wrong answer is a 400.
    assert awx.api_launch(dcgm, {}) == {"dcgm_diag_level": 1}
    with pytest.raises(awx.LaunchRefused, match="too large"):
        awx.api_launch(dcgm, {"dcgm_diag_level": 5})
    with pytest.raises(awx.LaunchRefused, match="expected to be an integer"):
        awx.api_launch(dcgm, {"dcgm_diag_level": True})
    # An extra var no question asks for: ignored by a job template launch, a 400 for a workflow.
    assert "other" not in awx.api_launch(dcgm, {"other": 1})
    workflow = assets["workflow_job_templates"][0]
    with pytest.raises(awx.LaunchRefused, match="not allowed on launch"):
        awx.api_launch(workflow, {"other": 1}, workflow=True)
    # A text question's min counts characters: "" is too small for min 1.
    question = {"variable": "v", "type": "text", "required": False, "min": 1, "max": 4}
    assert awx.survey_answer_errors(question, {"v": ""}) == ["'v' value  is too small (length is 0 must be at least 1)."]
    assert awx.survey_answer_errors(question, {}) == []
    choice = {"variable": "c", "type": "multiplechoice", "required": False, "choices": "a\nb\n"}
    assert awx.survey_answer_errors(choice, {"c": ""}) == ["Value  for 'c' expected to be one of ['a', 'b']."]


# ---- The shipped templates -------------------------------------------------------------
def test_a_question_with_a_default_is_optional_and_a_required_one_has_none(assets):
    for template in _templates(assets):
        for question in awx._survey(template):
            assert not (question["required"] and "default" in question), (template["name"], question["variable"])
            if not question["required"] and question["type"] in TEXT:
                # An empty answer means "not set": AWX must accept it.
                assert question.get("min") in (0, None, ""), (template["name"], question["variable"])


@pytest.mark.parametrize("answers", ["none", "empty"])
def test_every_template_launches_through_the_api(assets, answers):
    for template in _templates(assets):
        given = {} if answers == "none" else _empty_answers(template)
        extra = awx.api_launch(template, given, workflow=template in assets["workflow_job_templates"])
        assert awx.variables_needed_to_start(template) == [], template["name"]
        for question in awx._survey(template):
            if question["variable"] in given:
                assert extra[question["variable"]] == "", (template["name"], question["variable"])
            elif "default" in question:
                assert extra[question["variable"]] == question["default"], (template["name"], question["variable"])
            else:
                assert question["variable"] not in extra, (template["name"], question["variable"])


def test_an_empty_answer_is_never_a_value(assets):
    """Every optional question either takes "" and its playbooks read "" as unset
    (the text questions, listed here and run in test_plan_fleet_survey below), or has
    no empty value AWX accepts, so an empty answer never reaches a playbook."""
    taken = set()
    for template in _templates(assets):
        for question in awx._survey(template):
            if question["required"]:
                continue
            if question["type"] in TEXT:
                taken.add(question["variable"])
                continue
            with pytest.raises(awx.LaunchRefused):
                awx.api_launch(template, {question["variable"]: ""}, workflow=template in assets["workflow_job_templates"])
    assert taken == {"gpuops_driver_version", "gpuops_nodes_serial"}
    for playbook, uses in (("playbooks/plan_fleet.yml", ["gpuops_driver_version | default('', true) | string | length > 0"]),
                           ("playbooks/nodes.yml", ["gpuops_driver_version | default('', true) | string | length > 0",
                                                    "gpuops_nodes_serial | default('100%', true)"]),
                           ("playbooks/upgrade.yml", ["gpuops_driver_version | default('', true) | string | length > 0"])):
        text = (ROOT / playbook).read_text()
        for use in uses:
            assert use in text, (playbook, use)
        # Never the role's own variable from a survey: an extra var, even "", beats every pool's pin.
        assert "nvidia_driver_version: \"{{ gpuops_driver_version | string }}\"" in text, playbook


def _workflow_nodes_in_order(workflow):
    nodes = {n["identifier"]: n for n in workflow["related"]["workflow_nodes"]}
    children = {c["identifier"] for n in nodes.values() for e in ("success_nodes", "failure_nodes", "always_nodes")
                for c in n["related"][e]}
    order, queue = [], [i for i in nodes if i not in children]
    while queue:
        ident = queue.pop(0)
        order.append(nodes[ident])
        queue += [c["identifier"] for c in nodes[ident]["related"]["success_nodes"]]
    return order


@pytest.mark.parametrize("name, after_plan", [
    ("GPU fleet rollout", ["Apply nodes", "Apply cluster", "GPU health"]),
    ("GPU driver upgrade", ["Rolling driver upgrade"]),
])
@pytest.mark.parametrize("answers", ["none", "empty"])
def test_every_workflow_node_launches_and_the_plan_reaches_the_nodes_after_it(assets, answers, name, after_plan):
    workflow = awx.by_name(assets, "workflow_job_templates")[name]
    templates = awx.by_name(assets, "job_templates")
    workflow_vars = awx.api_launch(workflow, {} if answers == "none" else _empty_answers(workflow), workflow=True)
    # The workflow's answers reach every node over the artifacts: none may hide the plan.
    assert not set(workflow_vars) & set(ARTIFACTS)
    plan = {"gpuops_approved_plan": "/var/lib/gpuops/fleet/7/plan.json", "gpuops_approved_plan_sha256": "ab" * 32,
            "gpuops_fleet_plan_report": "/var/lib/gpuops/fleet/7/index.html", "gpuops_fleet_plan_summary": {"hosts": 2}}
    artifacts, seen = {}, []
    for node in _workflow_nodes_in_order(workflow):
        if not node.get("unified_job_template"):
            assert node["related"]["create_approval_template"]["name"]
            continue
        template = templates[node["unified_job_template"]["name"]]
        runtime, errors = awx.workflow_node_job_kwargs(template, node, workflow_vars, artifacts)
        extra = awx.launch_extra_vars(template, runtime)
        assert errors == {}, (node["identifier"], errors)   # the WFJT's node_prompts_rejected stays empty
        seen.append((template["name"], {k: extra.get(k) for k in ARTIFACTS if k in extra}))
        if template["name"] == "Plan fleet":
            artifacts.update(plan)
        for question in awx._survey(template):
            if question["variable"] in workflow_vars:
                assert extra[question["variable"]] == workflow_vars[question["variable"]]
    assert [template for template, _plan in seen] == ["Record facts", "Plan fleet"] + after_plan
    assert seen[0][1] == seen[1][1] == {}
    assert seen[2:] == [(template, plan) for template in after_plan], "the nodes after the approval run the approved plan"


def test_plan_fleet_hands_the_plan_on_as_artifacts():
    """The last task of plan_fleet.yml: set_stats of the plan's path, digest, page and summary,
    for the whole run (per_host false: AWX stores only that as the job's artifacts)."""
    plays = yaml.safe_load((ROOT / "playbooks" / "plan_fleet.yml").read_text())
    last = plays[-1]["tasks"][-1]
    stats = last["ansible.builtin.set_stats"]
    assert set(stats["data"]) == set(ARTIFACTS) and stats["per_host"] is False, stats
    assert "when" not in last, "a plan that failed stops before it, a valid one is always handed on"
    documented = yaml.safe_load((ROOT / "meta" / "variables.yml").read_text())["variables"]
    assert set(ARTIFACTS) | {"gpuops_driver_version"} <= set(documented), "check_variables would refuse the next job"


# ---- A complete import ------------------------------------------------------------------
# awx/main/utils/ansible.py @ bc5881ad219f042c06f163152b5f3eedf3b8f732: skip_directory and
# could_be_playbook, which Project.playbooks (awx/main/models/projects.py) walks the project
# folder with; JobTemplateSerializer refuses a playbook not in that list ("Playbook not found
# for project."), and for an SCM project the list is empty until its first sync.
VALID_PLAYBOOK = re.compile(r"^\s*?-?\s*?(?:hosts|include|import_playbook):\s*?.*?$")


def _skip_directory(relative_directory_path):
    elements = relative_directory_path.split(os.sep)
    if "roles" in elements or "tasks" in elements:
        return True
    if any(element.startswith(".") for element in elements):
        return True
    return "group_vars" in elements or "host_vars" in elements


def _could_be_playbook(project_path, dir_path, filename):
    if os.path.splitext(filename)[-1] not in (".yml", ".yaml"):
        return None
    path = os.path.join(dir_path, filename)
    with open(path, encoding="utf-8", errors="ignore") as handle:
        for number, line in enumerate(handle):
            if VALID_PLAYBOOK.match(line) or (
                    number == 0 and line.startswith("$ANSIBLE_VAULT;")):
                return os.path.relpath(path, project_path)
    return None


def project_playbooks(project_path):
    """Project.playbooks of a Manual project whose folder is project_path."""
    found = []
    for dirpath, _dirnames, filenames in os.walk(project_path):
        if _skip_directory(dirpath):
            continue
        found += [p for p in (_could_be_playbook(project_path, dirpath, f) for f in filenames) if p is not None]
    return sorted(found, key=str.lower)


def import_problems(assets, playbooks):
    """What `awx import` would drop or leave empty: a job template whose project or
    playbook AWX refuses, a workflow node naming a template that is not created."""
    problems = []
    projects = {p["name"]: p for p in assets["projects"]}
    created = set()
    for template in assets["job_templates"]:
        project = projects.get(template["project"]["name"])
        if project is None:
            problems.append("%s: project %s is not in the file" % (template["name"], template["project"]["name"]))
        elif project["scm_type"]:
            problems.append("%s: %s project %s has no playbooks until it syncs" % (
                template["name"], project["scm_type"], project["name"]))
        elif template["playbook"] not in playbooks:
            problems.append("%s: Playbook not found for project (%s)" % (template["name"], template["playbook"]))
        else:
            created.add(template["name"])
    for workflow in assets["workflow_job_templates"]:
        for node in workflow["related"]["workflow_nodes"]:
            ujt = node.get("unified_job_template")
            if ujt is None:
                if not node["related"].get("create_approval_template"):
                    problems.append("%s: node %s runs nothing" % (workflow["name"], node["identifier"]))
            elif ujt.get("type") != "job_template" or ujt["name"] not in created:
                problems.append("%s: node %s names %s, which is not imported" % (workflow["name"], node["identifier"], ujt))
    return problems


@pytest.fixture(scope="module")
def release_project(tmp_path_factory):
    """The release tarball (ansible-galaxy collection build), unpacked where the README
    says: <PROJECTS_ROOT>/<the project's local_path>."""
    out = tmp_path_factory.mktemp("release")
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-galaxy"), "collection", "build", "--force",
                    "--output-path", str(out / "dist"), str(ROOT)], check=True, capture_output=True, timeout=300)
    (tarball,) = (out / "dist").iterdir()
    local_path = awx.load_assets()["projects"][0]["local_path"]
    project = out / "projects" / local_path
    project.mkdir(parents=True)
    with tarfile.open(tarball) as archive:
        archive.extractall(project, filter="data")
    return project


def test_the_project_is_a_manual_folder_by_default(assets):
    (project,) = assets["projects"]
    assert project["scm_type"] == "" and project["scm_url"] == "", "an SCM project has no playbooks before it syncs"
    # ProjectOptions.get_local_path_choices: a folder directly under PROJECTS_ROOT, not . or _ (AWX's own SCM folders).
    assert project["local_path"] and "/" not in project["local_path"] and project["local_path"][0] not in "._"
    # ProjectSerializer.validate refuses update options on a manual project.
    for option in ("scm_update_on_launch", "scm_delete_on_update", "scm_track_submodules", "scm_clean"):
        assert project[option] is False, option


def test_every_template_and_node_imports_from_the_release_tarball(assets, release_project):
    playbooks = project_playbooks(str(release_project))
    assert "playbooks/nodes.yml" in playbooks and not any("/tasks/" in p or p.startswith("roles/") for p in playbooks)
    assert import_problems(assets, playbooks) == []
    names = {t["name"] for t in assets["job_templates"]}
    for workflow in assets["workflow_job_templates"]:
        for node in workflow["related"]["workflow_nodes"]:
            assert node.get("unified_job_template") is None or node["unified_job_template"]["name"] in names


@pytest.mark.parametrize("change, message", [
    (lambda a: a["projects"][0].update(scm_type="git", scm_url="https://git.example.internal/gpuops/platform.git"),
     "has no playbooks until it syncs"),
    (lambda a: a["job_templates"][2].update(playbook="playbooks/nodes_v2.yml"), "Playbook not found"),
    (lambda a: a["workflow_job_templates"][0]["related"]["workflow_nodes"][3].update(
        unified_job_template={"organization": {"name": "GPU platform", "type": "organization"}, "name": "Apply node",
                              "type": "job_template"}), "is not imported"),
])
def test_the_import_check_finds_what_awx_import_drops(assets, release_project, change, message):
    broken = copy.deepcopy(assets)
    change(broken)
    problems = import_problems(broken, project_playbooks(str(release_project)))
    assert any(message in p for p in problems), problems
    if "syncs" in message:   # every template, and so every node that names one
        nodes = [n for w in assets["workflow_job_templates"] for n in w["related"]["workflow_nodes"]
                 if n.get("unified_job_template")]
        assert len(problems) == len(assets["job_templates"]) + len(nodes), problems


def test_a_task_file_is_no_playbook(tmp_path):
    (tmp_path / "playbooks" / "tasks").mkdir(parents=True)
    (tmp_path / "playbooks" / "tasks" / "x.yml").write_text("- hosts: all\n")
    (tmp_path / "playbooks" / "y.yml").write_text("---\n- name: y\n  hosts: all\n")
    (tmp_path / "playbooks" / "z.yml").write_text("---\n- name: z\n")
    assert project_playbooks(str(tmp_path)) == ["playbooks/y.yml"]


# ---- The playbooks read an empty answer as "not set" --------------------------------------
# ansible-runner runs the ansible-playbook of this Python's environment.
_ENV = {"ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"), "ANSIBLE_NOCOLOR": "1",
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """plan_fleet.yml on the demo fleet through ansible-runner, with the survey's driver
    question answered empty and answered with a version."""
    runs = {}
    for name, answer in (("empty", ""), ("version", "580.82.07")):
        pdd = tmp_path_factory.mktemp("plan-" + name)
        result = ansible_runner.run(
            private_data_dir=str(pdd), playbook=str(ROOT / "playbooks" / "plan_fleet.yml"),
            inventory=str(ROOT / "inventories" / "demo" / "hosts.yml"),
            extravars={"gpuops_driver_version": answer, "gpuops_fleet_report_dir": str(pdd / "fleet")},
            envvars=_ENV,
            quiet=True, timeout=600)
        assert result.status == "successful", result.stdout.read()[-3000:]
        runs[name] = (result, json.loads((pdd / "fleet" / "plan.json").read_text()), pdd / "fleet")
    return runs


@pytest.mark.slow
def test_an_empty_driver_answer_keeps_every_pools_pin(planned):
    _result, plan, _out = planned["empty"]
    # Only the pool pinned to 570.195.03 moves (inventories/demo); an empty nvidia_driver_version
    # would have unpinned every pool (driver changes: 0).
    assert plan["summary"]["driver_changes"] == ["hgx-h100-0%d" % i for i in range(1, 5)]
    _result, plan, _out = planned["version"]
    assert len(plan["summary"]["driver_changes"]) == plan["summary"]["hosts"] == 10


@pytest.mark.slow
def test_plan_fleet_artifacts_name_the_plan_it_wrote(planned):
    for name, (result, plan, out) in planned.items():
        artifacts = awx.job_artifacts(result)
        assert set(artifacts) == set(ARTIFACTS), artifacts
        assert artifacts["gpuops_approved_plan"] == str(out / "plan.json")
        assert artifacts["gpuops_approved_plan_sha256"] == hashlib.sha256((out / "plan.json").read_bytes()).hexdigest()
        assert artifacts["gpuops_fleet_plan_report"] == str(out / "index.html") and (out / "index.html").is_file()
        summary = artifacts["gpuops_fleet_plan_summary"]
        assert summary["hosts"] == 10 and summary["driver_changes"] == len(plan["summary"]["driver_changes"]), name
        assert summary["reboots"] == len(plan["summary"]["reboot"]) and summary["capacity"] == plan["summary"]["capacity"]


@pytest.mark.slow
def test_nodes_yml_reads_empty_answers_as_unset(tmp_path):
    """nodes.yml with the driver and batch size questions answered empty: the pool's pin
    and a batch of 100%."""
    result = ansible_runner.run(
        private_data_dir=str(tmp_path), playbook=str(ROOT / "playbooks" / "nodes.yml"),
        inventory=str(ROOT / "inventories" / "demo" / "hosts.yml"),
        cmdline="--check --limit hgx-h100-01,l40s-01", extravars={"gpuops_driver_version": "", "gpuops_nodes_serial": ""},
        envvars=_ENV, quiet=True, timeout=600)
    assert result.status == "successful", result.stdout.read()[-3000:]
    lines = {e["event_data"]["host"]: e["event_data"]["res"]["msg"][1] for e in result.events
             if e["event"] == "runner_on_ok" and e["event_data"].get("task") == "Summarize the node"}
    assert lines["hgx-h100-01"].startswith("driver 570.195.03 "), lines
    assert lines["l40s-01"].startswith("driver 570.172.08 "), lines
    # One batch of both nodes: an empty batch size is 100% (Ansible starts the play once per batch).
    starts = [e for e in result.events if e["event"] == "playbook_on_play_start" and
              e["event_data"].get("play") == "Prepare GPU nodes"]
    assert len(starts) == 1, len(starts)
