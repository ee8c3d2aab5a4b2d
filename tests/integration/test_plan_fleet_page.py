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

from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan, fleet_report, fleet_schema, fleet_views

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


def test_demo_fleet_is_planned_from_the_fixtures(repo_root, demo):
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
    fixtures = str(repo_root / "tests" / "fixtures" / "nvml") + os.sep
    for host in plan["hosts"].values():
        path = host["facts_file"]
        assert path == os.path.normpath(path) and os.path.isabs(path) and path.startswith(fixtures), path
    assert plan["facts_root"] == str(repo_root / "tests" / "fixtures" / "nvml")
    fleet_schema.check(plan)
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
        self.summary, self.rows, self.capacity, self.hits, self.waves, self.perf = {}, [], {}, [], [], {}
        self.detail, self.count, self.totals, self.pools = None, None, {}, []
        self._want = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and "data-host" in attrs:
            self.rows.append(attrs["data-host"])
            if "hit" in attrs.get("class", "").split():
                self.hits.append(attrs["data-host"])
        if tag == "tr" and "data-wave" in attrs:
            self.waves.append(int(attrs["data-wave"]))
        if tag == "tr" and "data-pool" in attrs:
            self.pools.append(attrs["data-pool"])
        if tag == "div" and attrs.get("id") == "detail":
            self.detail = attrs.get("data-detail")
        if tag == "output" and attrs.get("id") == "perf":
            self.perf = dict((k[5:], v) for k, v in attrs.items() if k.startswith("data-"))
        if tag == "span" and attrs.get("id") == "count":
            self._want = (self.__dict__, "count")
        for key, where in (("data-summary", self.summary), ("data-capacity", self.capacity)):
            if key in attrs:
                self._want = (where, attrs[key])
        if tag == "tr" and "data-total" in attrs:
            self._total = attrs["data-total"]
            self.totals[self._total] = []
        if tag == "td" and getattr(self, "_total", None):
            self._want = ("total", self._total)

    def handle_endtag(self, tag):
        if tag == "tr":
            self._total = None

    def handle_data(self, data):
        if self._want:
            if self._want[0] == "total":
                self.totals[self._want[1]].append(data)
            else:
                self._want[0][self._want[1]] = data
            self._want = None


def _chromium(page, profile, *args, **kwargs):
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "Chromium is missing: apt-get install chromium (scripts/test.sh installs it)"
    return subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
         "--user-data-dir=%s" % profile, "--enable-logging=stderr", "--v=0"] + list(args) + ["file://%s%s" % (page, kwargs.get("fragment", ""))],
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


def _dom(page, profile, fragment="", width=1400):
    proc = _chromium(page, profile, "--window-size=%d,1200" % width, "--dump-dom", fragment=fragment)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _console(proc.stderr) == []
    dom = _Dom()
    dom.feed(proc.stdout)
    assert dom.perf.get("state") == "ready", proc.stdout[-2000:]
    return dom


def test_page_in_chromium_shows_the_plan(demo, tmp_path):
    out, plan, _proc = demo
    dom = _dom(out / "index.html", tmp_path / "profile")
    s = plan["summary"]
    assert dom.summary == {
        "hosts": str(s["hosts"]), "hosts_invalid": str(len(s["hosts_invalid"])), "gpus": str(s["gpus"]),
        "driver_changes": str(len(s["driver_changes"])), "reboot": str(len(s["reboot"])),
        "invalid_mig": str(len(s["invalid_mig"])), "mig_changes": str(len(s["mig_changes"])),
        "unhealthy_gpus": str(s["unhealthy_gpus"]), "fabric_manager": str(len(s["fabric_manager"])),
        "waves": "10", "stale": "0", "no_facts": "0"}
    assert dom.capacity == dict((k, str(v)) for k, v in s["capacity"].items())
    # every host once in the table, in inventory order; one rollup per inventory group
    assert dom.rows == plan["order"] and sorted(dom.rows) == sorted(plan["hosts"]) and dom.count == "10 nodes"
    assert dom.pools == ["dgx_a100", "h200_mig", "hgx_h100", "l40s_inference"]
    shot = tmp_path / "page.png"
    proc = _chromium(out / "index.html", tmp_path / "profile", "--window-size=1400,2400", "--screenshot=%s" % shot)
    assert proc.returncode == 0 and shot.stat().st_size > 20000 and _console(proc.stderr) == []


def test_the_mig_change_on_the_dgx_is_a_drain_and_a_gpu_reset(demo, tmp_path):
    out, plan, _proc = demo
    assert plan["hosts"]["dgx-a100-01"]["disruption"]["summary"] == "drain + GPU reset"
    assert plan["hosts"]["hgx-h100-01"]["disruption"]["summary"] == "drain + reboot"
    assert plan["hosts"]["l40s-01"]["disruption"]["summary"] == "none"
    dom = _dom(out / "index.html", tmp_path / "profile", "#q=disruption:reset")
    assert dom.rows == ["dgx-a100-01"] and dom.count == "1 of 10 nodes"


def test_filter_and_sort_in_chromium(demo, tmp_path):
    out, _plan, _proc = demo
    dom = _dom(out / "index.html", tmp_path / "profile", "#q=pool:hgx&sort=name&dir=desc")
    assert dom.rows == ["hgx-h100-04", "hgx-h100-03", "hgx-h100-02", "hgx-h100-01"]
    assert float(dom.perf["filter-ms"]) >= 0
    dom = _dom(out / "index.html", tmp_path / "profile", "#q=disruption:reboot%20hgx-h100-0")
    assert dom.rows == ["hgx-h100-01", "hgx-h100-02", "hgx-h100-03", "hgx-h100-04"]
    dom = _dom(out / "index.html", tmp_path / "profile", "#sort=gpus")
    gpus = dict((n, h["gpu_count"]) for n, h in _plan["hosts"].items())
    assert [gpus[n] for n in dom.rows] == sorted(gpus[n] for n in dom.rows) and dom.rows[0] == "h200-mig-01"
    dom = _dom(out / "index.html", tmp_path / "profile", "#q=no-such-node")
    assert dom.rows == [] and dom.count == "0 of 10 nodes"


def test_waves_follow_upgrade_yml_serial_and_canary(repo_root, demo, tmp_path):
    out, plan, _proc = demo
    assert [(b["wave"], b["size"]) for b in plan["waves"]["batches"]] == [(n, 1) for n in range(1, 11)]
    report = tmp_path / "waves"
    proc = _playbook(repo_root, repo_root / "inventories" / "demo" / "hosts.yml", "-e", "gpuops_fleet_report_dir=%s" % report,
                     "-e", "gpuops_upgrade_serial=30%", "-e", "gpuops_upgrade_canary=true")
    assert proc.returncode == 0, proc.stdout[-3000:]
    waves = json.loads((report / "plan.json").read_text())["waves"]
    # upgrade.yml: serial [1, "30%"] of 10 hosts -> 1, 3, 3, 3
    assert [b["size"] for b in waves["batches"]] == [1, 3, 3, 3] and waves["serial"] == ["1", "30%"]
    order = plan["order"]
    assert [order[b["first"]:b["first"] + b["size"]] for b in waves["batches"]][1] == order[1:4]
    assert "upgrade waves (serial 30%, canary first): 4, 2 of them drain nodes" in " ".join(proc.stdout.split())
    dom = _dom(report / "index.html", tmp_path / "profile", "#q=wave:2")
    assert dom.waves == [1, 2, 3, 4] and dom.rows == order[1:4]


def test_a_health_square_opens_its_row(demo, tmp_path):
    out, _plan, _proc = demo
    page = (out / "index.html").read_text()
    assert 'href="#h=l40s-03"' in page
    dom = _dom(out / "index.html", tmp_path / "profile", "#h=l40s-03")
    assert dom.hits == ["l40s-03"] and dom.detail == "l40s-03"


def test_diff_against_a_given_previous_plan(repo_root, demo, tmp_path):
    out, plan, _proc = demo
    previous = json.loads(json.dumps(plan))
    del previous["hosts"]["l40s-04"]                                   # added since
    previous["hosts"]["gone-01"] = dict(previous["hosts"]["l40s-03"], host="gone-01")   # removed since
    previous["hosts"]["hgx-h100-02"]["driver"]["installed"] = "570.158.01"
    previous["hosts"]["hgx-h100-02"]["capacity"]["resources"] = {"nvidia.com/gpu": 4}
    previous["summary"]["capacity"]["nvidia.com/gpu"] = 44
    given = tmp_path / "last-week.json"
    given.write_text(json.dumps(previous))
    report = tmp_path / "report"
    proc = _playbook(repo_root, repo_root / "inventories" / "demo" / "hosts.yml", "-e", "gpuops_fleet_report_dir=%s" % report,
                     "-e", "gpuops_fleet_previous_plan=%s" % given)
    assert proc.returncode == 0, proc.stdout[-3000:]
    said = " ".join(proc.stdout.split())       # the YAML callback folds long lines
    assert ("since the last plan (%s): 1 host(s) added, 1 removed; changed: driver 1, wanted driver 0, MIG 0, health 0, "
            "capacity 1; capacity nvidia.com/gpu 44 -> 48" % given) in said, proc.stdout[-3000:]
    diff = json.loads((report / "plan.json").read_text())["diff"]
    assert diff["added"] == ["l40s-04"] and diff["removed"] == ["gone-01"]
    assert diff["changed"] == {"hgx-h100-02": {"driver": ["570.158.01", "570.172.08"],
                                               "capacity": ["nvidia.com/gpu: 4", "nvidia.com/gpu: 8"]}}
    assert diff["totals"]["capacity"] == {"nvidia.com/gpu": [44, 48]}
    dom = _dom(report / "index.html", tmp_path / "profile", "#q=changed:yes")
    assert dom.rows == ["hgx-h100-02", "l40s-04"] and dom.totals["capacity:nvidia.com/gpu"][1:] == ["44", "48", "+4"]
    # a previous plan that is not a plan is refused before anything is written
    given.write_text(json.dumps({"version": 2, "hosts": []}))
    proc = _playbook(repo_root, repo_root / "inventories" / "demo" / "hosts.yml",
                     "-e", "gpuops_fleet_report_dir=%s" % (tmp_path / "bad"), "-e", "gpuops_fleet_previous_plan=%s" % given)
    assert proc.returncode != 0 and "does not follow the plan.json schema version 2" in proc.stdout
    assert not (tmp_path / "bad").exists()


def test_the_last_plan_is_kept_and_compared_with(repo_root, demo, tmp_path):
    out, plan, _proc = demo
    report = tmp_path / "report"
    report.mkdir()
    previous = json.loads(json.dumps(plan))
    previous["hosts"]["h200-mig-01"]["health"]["status"] = "critical"
    (report / "plan.json").write_text(json.dumps(previous))
    proc = _playbook(repo_root, repo_root / "inventories" / "demo" / "hosts.yml", "-e", "gpuops_fleet_report_dir=%s" % report)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert json.loads((report / "plan.previous.json").read_text()) == previous
    diff = json.loads((report / "plan.json").read_text())["diff"]
    assert diff["changed"] == {"h200-mig-01": {"health": ["critical", "ok"]}} and diff["counts"]["health"] == 1


def test_a_narrow_screen_has_no_page_overflow(demo, tmp_path):
    out, _plan, _proc = demo
    dom = _dom(out / "index.html", tmp_path / "profile", width=390)
    assert int(dom.perf["page-width"]) <= int(dom.perf["view-width"]), dom.perf
    shot = tmp_path / "narrow.png"
    proc = _chromium(out / "index.html", tmp_path / "profile", "--window-size=390,3000", "--screenshot=%s" % shot)
    assert proc.returncode == 0 and shot.stat().st_size > 20000 and _console(proc.stderr) == []
    keep = os.environ.get("GPUOPS_SCREENSHOTS")
    if keep:
        shutil.copy(str(shot), os.path.join(keep, "narrow.png"))


def _big_plan(plan, size):
    """A plan of ``size`` hosts made from the demo's, through the same views (no planner run)."""
    hosts, order = {}, []
    base = [plan["hosts"][n] for n in plan["order"]]
    groups = {"gpu_nodes": order}
    for i in range(size):
        host = json.loads(json.dumps(base[i % len(base)]))
        host["host"] = host["node"] = name = "%s-%05d" % (host["pool"], i)
        if i % 97 == 5 and host["health"]:
            host["health"]["status"] = "critical"
        hosts[name] = host
        order.append(name)
        groups.setdefault(host["pool"], []).append(name)
    big = {"version": 1, "mig_strategy": plan["mig_strategy"], "hosts": hosts, "summary": fleet_plan.summarize(hosts),
           "errors": [], "valid": True}
    return fleet_views.enrich(big, order, fleet_views.pools(order, groups, "gpu_nodes"), "5%", True)


def test_a_20000_host_page_loads_and_is_used(demo, tmp_path):
    _out, plan, _proc = demo
    big = _big_plan(plan, 20000)
    page = tmp_path / "index.html"
    page.write_text(fleet_report.render(big))
    assert page.stat().st_size < 8 * 1024 * 1024
    dom = _dom(page, tmp_path / "profile", "#bench=1&q=pool:hgx_h100%20status:critical&sort=name&dir=desc")
    critical = [n for n in reversed(big["order"]) if n.startswith("hgx_h100") and big["hosts"][n]["health"]["status"] == "critical"]
    assert dom.count == "%d of 20000 nodes" % len(critical) and dom.rows == critical[:len(dom.rows)] and dom.rows
    assert int(dom.perf["bench-filter-runs"]) == 6 and int(dom.perf["bench-sort-runs"]) == 8
    dom = _dom(page, tmp_path / "profile", "#h=%s" % big["order"][12345])
    assert dom.hits == [big["order"][12345]] and 10 < len(dom.rows) < 100      # only what is on screen
    assert dom.waves[:3] == [1, 2, 3] and len(dom.waves) == 21
