"""playbooks/record_facts.yml on a fleet behind the fake NVML, then the recorded fleet planned like the live one.

Each GPU host runs on the local connection with its own Python interpreter: a
wrapper that puts tests/integration/nvml_shim first on PYTHONPATH and names the
host's hardware model (tests/unit/fakes/nvml_nodes.py), so the real nvml_facts
module reads that node's fake NVML. The fleet is recorded into a folder (and,
in a second run, into Ansible's jsonfile fact cache only), planned by
plan_fleet.yml from the records, and compared with the plan of the facts the
collector returns live for the same nodes, and with upgrade.yml --check run
live and from the records.
"""
import json
import os
import re
import subprocess
import sys

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as collector
from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan
from fakes.fake_pynvml import FakeNvml
from fakes.nvml_nodes import NODES

pytestmark = pytest.mark.slow

# host: (hardware model, nvidia_driver_version)
FLEET = {"dgx-1": ("dgx-a100", "570.172.08"), "hgx-1": ("hgx-h100", "570.195.03"), "hgx-2": ("hgx-h100", "570.195.03"),
         "h200-1": ("h200-mig", "570.172.08"), "l40s-1": ("l40s", "570.172.08")}
MIG = {"version": "v1", "mig-configs": {"all-1g.18gb": [{"devices": "all", "mig-enabled": True,
                                                         "mig-devices": {"1g.18gb": 7}}]}}


@pytest.fixture(scope="module")
def site(repo_root, tmp_path_factory):
    installed = repo_root / "collections" / "ansible_collections" / "gpuops" / "platform"
    assert installed.is_dir(), "run scripts/bootstrap.sh first: ansible-playbook needs the installed collection"
    return Site(repo_root, tmp_path_factory.mktemp("record"))


class Site(object):
    def __init__(self, root, tmp):
        self.root, self.tmp = root, tmp
        self.bin = tmp / "bin"
        self.bin.mkdir()
        self.interpreters = {}
        python = os.path.join(os.path.dirname(sys.executable), "python")  # the venv's, not the one it links to
        for model in set(m for m, _v in FLEET.values()):
            wrapper = self.bin / ("python-" + model)
            wrapper.write_text("#!/bin/sh\nGPUOPS_FAKE_NVML_NODE=%s PYTHONPATH=%s exec %s \"$@\"\n" % (
                model, root / "tests" / "integration" / "nvml_shim", python))
            wrapper.chmod(0o755)
            self.interpreters[model] = str(wrapper)

    def inventory(self, name="hosts.yml", extra_hosts=None, **group_vars):
        hosts = dict((h, {"ansible_python_interpreter": self.interpreters[m], "nvidia_driver_version": v})
                     for h, (m, v) in FLEET.items())
        hosts["h200-1"].update(mig_config=MIG, mig_config_name="all-1g.18gb")
        hosts.update(extra_hosts or {})
        data = {"all": {"vars": dict({"ansible_connection": "local", "gpuops_nodes_become": False}, **group_vars),
                        "children": {"gpu_nodes": {"hosts": hosts}}}}
        path = self.tmp / name
        path.write_text(json.dumps(data))
        return path

    def play(self, playbook, inventory, *args, env=None):
        command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
                   "playbooks/%s.yml" % playbook] + list(args)
        proc = subprocess.run(command, cwd=str(self.root), capture_output=True, text=True, check=False, timeout=600,
                              env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", **(env or {})))
        return proc.returncode, " ".join((proc.stdout + proc.stderr).split())


def live_plan(tmp):
    """The fleet plan of the facts the collector returns for the same fake nodes right now (no recording)."""
    folder = tmp / "live"
    folder.mkdir(exist_ok=True)
    hostvars = []
    for host, (model, version) in FLEET.items():
        (folder / ("%s.json" % host)).write_text(json.dumps(collector.collect(FakeNvml(NODES[model]()))))
        hostvars.append((host, dict({"nvidia_driver_version": version},
                                    **({"mig_config": MIG, "mig_config_name": "all-1g.18gb"} if host == "h200-1" else {}))))
    # plan_fleet.yml's defaults without a k8s_control host: single strategy, whole GPUs.
    return fleet_plan.plan_fleet(hostvars, str(folder), "single", [{"name": "default", "mode": "none"}], "default")


# What plan.json adds to each host's plan for the page (fleet_views.enrich), where the facts were read from, and
# the digests of what it was planned from (fleet_approval).
VIEW_KEYS = {"facts_file", "pool", "disruption", "wave", "facts_recorded_at", "facts_time_source", "inputs"}


def comparable(plan):
    """The per-host plans without where the facts were read from and the page's views of them."""
    return dict((name, dict((k, v) for k, v in host.items() if k not in VIEW_KEYS)) for name, host in plan["hosts"].items())


def upgrade_lines(out):
    return sorted(re.sub(r", from [^)]*\)", ")", line) for line in re.findall(r"msg: '?([\w.-]+: (?:skip|upgrade|reboot)[^)]*\))", out))


def test_record_then_plan_gives_the_live_plan(site):
    facts_dir = site.tmp / "facts"
    inventory = site.inventory(gpuops_fleet_facts_dir=str(facts_dir))
    rc, out = site.play("record_facts", inventory)
    assert rc == 0, out[-3000:]
    assert "Recorded 5 of 5 host(s) into %s: 5 written, 0 unchanged" % facts_dir in out
    record = json.loads((facts_dir / "hgx-1.json").read_text())
    assert record["format"] == 1 and record["collection_version"]
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", record["recorded_at"])
    assert record["nvidia"]["gpu_count"] == 8 and record["nvidia"]["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert record["node"]["kernel"] == os.uname().release and "distro" in record["node"]

    report = site.tmp / "report"
    plan_inventory = site.inventory("plan.yml")  # planned from the folder given to the planner
    rc, out = site.play("plan_fleet", plan_inventory, "-e", "gpuops_fleet_facts_dir=%s" % facts_dir,
                        "-e", "gpuops_fleet_report_dir=%s" % report)
    assert rc == 0, out[-3000:]
    recorded = json.loads((report / "plan.json").read_text())
    live = live_plan(site.tmp)
    assert live["valid"] and recorded["valid"], recorded["errors"]
    assert comparable(recorded) == comparable(live)
    assert sorted(recorded["summary"]["driver_changes"]) == ["hgx-1", "hgx-2"]

    # upgrade.yml --check plans the same, live and from the records, and as plan.json says.
    rc, live_out = site.play("upgrade", site.inventory("live.yml"), "--check")
    assert rc == 0, live_out[-3000:]
    rc, recorded_out = site.play("upgrade", inventory, "--check")
    assert rc == 0, recorded_out[-3000:]
    assert "from %s" % (facts_dir / "hgx-1.json") in recorded_out
    assert upgrade_lines(live_out) == upgrade_lines(recorded_out) and len(upgrade_lines(live_out)) == 5
    upgrading = sorted(line.split(":")[0] for line in upgrade_lines(recorded_out) if ": upgrade" in line)
    assert upgrading == sorted(recorded["summary"]["driver_changes"])


def test_an_unchanged_host_keeps_its_file_and_check_mode_records_nothing(site):
    facts_dir = site.tmp / "again"
    inventory = site.inventory("again.yml", gpuops_fleet_facts_dir=str(facts_dir))
    rc, out = site.play("record_facts", inventory)
    assert rc == 0, out[-3000:]
    before = dict((p.name, (p.read_text(), p.stat().st_mtime_ns)) for p in facts_dir.iterdir())
    rc, out = site.play("record_facts", inventory)
    assert rc == 0 and "5 written" not in out and "0 written, 5 unchanged" in out, out[-3000:]
    assert dict((p.name, (p.read_text(), p.stat().st_mtime_ns)) for p in facts_dir.iterdir()) == before

    fresh = site.tmp / "never"
    rc, out = site.play("record_facts", site.inventory("check.yml", gpuops_fleet_facts_dir=str(fresh)), "--check")
    assert rc == 0, out[-3000:]
    assert "Would record 5 of 5 host(s)" in out and "check mode: nothing recorded" in out
    assert not fresh.exists()


def test_a_host_that_fails_keeps_its_old_record_and_is_named(site):
    facts_dir = site.tmp / "partial"
    inventory = site.inventory("partial.yml", gpuops_fleet_facts_dir=str(facts_dir))
    assert site.play("record_facts", inventory)[0] == 0
    old = (facts_dir / "l40s-1.json").read_text()
    broken = site.inventory("broken.yml", gpuops_fleet_facts_dir=str(facts_dir), extra_hosts={
        "l40s-1": {"ansible_python_interpreter": str(site.tmp / "no-such-python"), "nvidia_driver_version": "570.172.08"}})
    rc, out = site.play("record_facts", broken)
    assert rc != 0
    assert "Recorded 4 of 5 host(s)" in out
    assert "1 host(s) not recorded (unreachable or failed, see above); their old records are kept: l40s-1" in out
    assert (facts_dir / "l40s-1.json").read_text() == old


def test_the_fact_cache_is_a_store_too(site):
    """AWX's way: no folder, the records live in the fact cache between jobs (here the jsonfile plugin)."""
    cache = site.tmp / "cache"
    env = {"ANSIBLE_CACHE_PLUGIN": "jsonfile", "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(cache),
           "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "0"}
    rc, out = site.play("record_facts", site.inventory("cache.yml"), env=env)
    assert rc == 0 and "into the fact cache: 5 written" in out, out[-3000:]
    (cached,) = cache.glob("*hgx-1")  # one file per host (its name has the plugin's prefix)
    data = json.loads(cached.read_text())
    data = json.loads(data["__payload__"]) if "__payload__" in data else data  # ansible-core 2.19+ wraps the facts
    assert data["gpuops_recorded"]["nvidia"]["gpu_count"] == 8 and data["gpuops_recorded"]["format"] == 1
    rc, out = site.play("record_facts", site.inventory("cache.yml"), env=env)
    assert rc == 0 and "0 written, 5 unchanged" in out, out[-3000:]

    report = site.tmp / "cache-report"
    rc, out = site.play("plan_fleet", site.inventory("cache.yml"), "-e", "gpuops_fleet_facts_cache=true",
                        "-e", "gpuops_fleet_report_dir=%s" % report, env=env)
    assert rc == 0, out[-3000:]
    assert comparable(json.loads((report / "plan.json").read_text())) == comparable(live_plan(site.tmp))

    # Without a persistent fact cache or a folder, nothing would be kept: refused.
    rc, out = site.play("record_facts", site.inventory("cache.yml"))
    assert rc != 0 and "nowhere to record its facts: set gpuops_fleet_facts_dir" in out
