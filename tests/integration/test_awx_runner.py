"""site.yml through ansible-runner, the way an AWX job template with job_type: check runs it.

AWX hands ansible-runner a private data directory (project, inventory, env/) and
runs without a terminal, so nothing may prompt and every variable must be a flat,
role-prefixed name that a survey can set through extra vars.
"""
import json
import shutil

import ansible_runner
import pytest

import awx_support


@pytest.fixture(scope="module")
def runner_result(tmp_path_factory, repo_root):
    pdd = tmp_path_factory.mktemp("awx-job")
    # The local inventory plans MIG from a recorded fixture under tests/.
    awx_support.copy_project(pdd / "project")
    shutil.copytree(repo_root / "inventories" / "local", pdd / "inventory")
    render_dir = pdd / "rendered"
    (pdd / "env").mkdir()
    # What an AWX survey would send: flat variables, nothing nested.
    (pdd / "env" / "extravars").write_text(json.dumps({"gpuops_k8s_render_dir": str(render_dir)}))
    (pdd / "env" / "envvars").write_text(json.dumps({
        "ANSIBLE_COLLECTIONS_PATH": str(repo_root / "collections"),
        "ANSIBLE_NOCOLOR": "1",
    }))
    result = ansible_runner.run(
        private_data_dir=str(pdd),
        playbook="playbooks/site.yml",
        cmdline="--check",
        quiet=True,
        timeout=900,
    )
    return result


def test_check_job_succeeds(runner_result):
    stdout = runner_result.stdout.read()
    assert runner_result.status == "successful", stdout[-4000:]
    assert runner_result.rc == 0


def test_check_job_ran_every_layer(runner_result):
    plays = [e["event_data"].get("play") for e in runner_result.events if e["event"] == "playbook_on_play_start"]
    assert any("GPU nodes" in (p or "") for p in plays), plays
    assert any("Kubernetes" in (p or "") for p in plays), plays


def test_check_job_had_no_failures_or_unreachable_hosts(runner_result):
    stats = runner_result.stats
    assert not stats.get("failures"), stats
    assert not stats.get("dark"), stats
    assert stats.get("ok", {}).get("localhost", 0) > 0, stats


def test_nothing_prompts(repo_root):
    """AWX has no terminal: no vars_prompt and no interactive pause anywhere."""
    offenders = []
    for path in list(repo_root.glob("playbooks/**/*.yml")) + list(repo_root.glob("roles/**/*.yml")):
        text = path.read_text()
        if "vars_prompt" in text or "ansible.builtin.pause" in text and "prompt:" in text:
            offenders.append(str(path.relative_to(repo_root)))
    assert offenders == []
