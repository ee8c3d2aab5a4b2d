"""playbooks/plan_fleet.yml as a user runs it, and its page in a real headless Chromium.

The demo fleet (inventories/demo) is planned once for the module; a second
inventory with broken inputs shows per-host errors and the failing exit code.
"""
import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser

import pytest

pytestmark = pytest.mark.slow
PLAYBOOK = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook")]


def _playbook(repo_root, inventory, *extra):
    installed = repo_root / "collections" / "ansible_collections" / "gpuops" / "platform"
    assert installed.is_dir(), "run scripts/bootstrap.sh first: ansible-playbook needs the installed collection"
    return subprocess.run(PLAYBOOK + ["-i", str(inventory), "playbooks/plan_fleet.yml"] + list(extra),
                          cwd=str(repo_root), capture_output=True, text=True, check=False, timeout=300,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))


@pytest.fixture(scope="module")
def demo(repo_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("fleet")
    proc = _playbook(repo_root, repo_root / "inventories" / "demo" / "hosts.yml", "-e", "gpuops_fleet_report_dir=%s" % out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, json.loads((out / "plan.json").read_text()), proc


def test_demo_fleet_is_planned_from_the_fixtures(demo):
    _out, plan, proc = demo
    s = plan["summary"]
    assert plan["valid"] and s["hosts"] == 10 and s["gpus"] == 45
    assert s["gpus_by_model"] == {"NVIDIA A100-SXM4-80GB": 8, "NVIDIA H100 80GB HBM3": 32, "NVIDIA H200": 1,
                                  "NVIDIA L40S": 4}
    assert s["reboot"] == ["hgx-h100-0%d" % i for i in range(1, 5)]     # the pool moving to 570.195.03
    assert s["mig_changes"] == ["dgx-a100-01"] and s["invalid_mig"] == []
    assert s["mig_unsupported"] == [] and "MIG asked of nodes where no GPU can do MIG: none" in proc.stdout
    assert s["capacity"] == {"nvidia.com/gpu": 48, "nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8,
                             "nvidia.com/mig-3g.40gb": 8, "nvidia.com/mig-1g.18gb": 7}
    assert all(h["facts_file"].endswith(".json") and "/tests/fixtures/nvml/" in h["facts_file"]
               for h in plan["hosts"].values())
    assert "report: " in proc.stdout and "index.html" in proc.stdout


def test_a_second_run_changes_nothing(repo_root, demo):
    out, _plan, _proc = demo
    proc = _playbook(repo_root, repo_root / "inventories" / "demo" / "hosts.yml",
                     "-e", "gpuops_fleet_report_dir=%s" % out, "-e", "gpuops_fleet_publish_facts=false")
    assert proc.returncode == 0 and "changed=0" in proc.stdout, proc.stdout[-2000:]


def test_broken_inputs_fail_after_writing_both_files(repo_root, fixtures_dir, tmp_path):
    facts = tmp_path / "facts"
    facts.mkdir()
    shutil.copy(str(fixtures_dir / "nvml" / "l40s.json"), str(facts / "good.json"))
    (facts / "junk.json").write_text('{"ansible_facts": {"something": "else"}}')
    odd = json.loads((fixtures_dir / "nvml" / "l40s.json").read_text())
    odd["gpus"][0]["pci"]["device_id"] = "0xFFFF10DF"
    (facts / "odd.json").write_text(json.dumps(odd))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("gpu_nodes:\n  hosts:\n    good:\n    junk:\n    missing:\n    odd:\n")
    out = tmp_path / "report"
    proc = _playbook(repo_root, inventory, "-e", "gpuops_fleet_facts_dir=%s" % facts,
                     "-e", "gpuops_fleet_report_dir=%s" % out)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "3 host(s) cannot be planned" in proc.stdout
    for host, why in (("junk", "not a recorded nvml_facts result"), ("missing", "no facts file for this host"),
                      ("odd", "unknown GPU")):
        assert "- %s: " % host in proc.stdout and why in proc.stdout
    plan = json.loads((out / "plan.json").read_text())
    assert plan["hosts"]["good"]["valid"] and plan["summary"]["hosts_invalid"] == ["junk", "missing", "odd"]
    page = (out / "index.html").read_text()
    assert "no facts file for this host" in page and "unknown GPU" in page


def test_a_missing_report_dir_is_a_clear_error(repo_root, tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("gpu_nodes:\n  hosts:\n    a:\n")
    proc = _playbook(repo_root, inventory)
    assert proc.returncode != 0 and "Set gpuops_fleet_report_dir" in proc.stdout


# --- the page in Chromium ----------------------------------------------------------

class _Dom(HTMLParser):
    def __init__(self):
        HTMLParser.__init__(self)
        self.summary, self.rows, self.capacity, self.details = {}, [], {}, []
        self._want = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and "data-host" in attrs:
            self.rows.append(attrs["data-host"])
        if "data-detail" in attrs:
            self.details.append(attrs["data-detail"])
        for key, where in (("data-summary", self.summary), ("data-capacity", self.capacity)):
            if key in attrs:
                self._want = (where, attrs[key])

    def handle_data(self, data):
        if self._want:
            self._want[0][self._want[1]] = data
            self._want = None


def _chromium(page, profile, *args):
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "Chromium is missing: apt-get install chromium (scripts/test.sh installs it)"
    return subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
         "--user-data-dir=%s" % profile, "--enable-logging=stderr", "--v=0"] + list(args) + ["file://%s" % page],
        capture_output=True, text=True, check=False, timeout=120)


def _console(stderr):
    """Console messages (JavaScript errors, CSP violations for any fetch) in Chromium's log."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def test_the_checks_catch_console_errors_and_fetches(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src '
                    "'none'; script-src 'unsafe-inline'\"></head><body><img src=\"http://192.0.2.1/x.png\">"
                    "<script>undefinedFunction();</script></body></html>")
    messages = _console(_chromium(page, tmp_path / "profile", "--dump-dom").stderr)
    assert any("192.0.2.1" in m for m in messages) and any("undefinedFunction" in m for m in messages)


def test_page_in_chromium_shows_the_plan(demo, tmp_path):
    out, plan, _proc = demo
    proc = _chromium(out / "index.html", tmp_path / "profile", "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _console(proc.stderr) == []
    dom = _Dom()
    dom.feed(proc.stdout)
    s = plan["summary"]
    assert dom.summary == {
        "hosts": str(s["hosts"]), "hosts_invalid": str(len(s["hosts_invalid"])), "gpus": str(s["gpus"]),
        "driver_changes": str(len(s["driver_changes"])), "reboot": str(len(s["reboot"])),
        "invalid_mig": str(len(s["invalid_mig"])), "mig_changes": str(len(s["mig_changes"])),
        "unhealthy_gpus": str(s["unhealthy_gpus"]), "fabric_manager": str(len(s["fabric_manager"]))}
    assert dom.capacity == dict((k, str(v)) for k, v in s["capacity"].items())
    # every host once in the table and once in the details (plan.json keeps its keys sorted)
    assert sorted(dom.rows) == sorted(plan["hosts"]) == sorted(dom.details) and len(dom.rows) == s["hosts"]
    shot = tmp_path / "page.png"
    proc = _chromium(out / "index.html", tmp_path / "profile", "--window-size=1400,1200", "--screenshot=%s" % shot)
    assert proc.returncode == 0 and shot.stat().st_size > 20000 and _console(proc.stderr) == []
