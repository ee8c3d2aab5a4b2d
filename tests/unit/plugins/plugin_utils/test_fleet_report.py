"""The fleet page: self-contained, escaped, and its numbers are the plan's."""
import json
import re
from html.parser import HTMLParser

import pytest

from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan, fleet_report, fleet_schema, fleet_views

from test_fleet_plan import NVML, ON_570, fixture, write


class _Page(HTMLParser):
    def __init__(self):
        HTMLParser.__init__(self)
        self.tags, self.summary, self.data, self.scripts = [], {}, None, []
        self._key = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        self._key = attrs.get("data-summary") or (("data", None) if attrs.get("id") == "fleet-data" else None)
        if tag == "script" and attrs.get("id") != "fleet-data":
            self._key = ("script", None)

    def handle_data(self, data):
        if self._key == ("data", None):
            self.data = json.loads(data)
        elif self._key == ("script", None):
            self.scripts.append(data)
        elif self._key:
            self.summary[self._key] = data
        self._key = None


def _views(plan, names=None, groups=None):
    names = names if names is not None else list(plan["hosts"])
    return fleet_views.enrich(plan, names, fleet_views.pools(names, groups or {}, "gpu_nodes"))


def _plan(tmp_path, names):
    for name, facts in names.items():
        write(tmp_path, name, facts)
    return _views(fleet_plan.plan_fleet([(n, dict(ON_570)) for n in names], str(tmp_path)))


def test_text_from_files_is_escaped(tmp_path):
    evil = fixture("l40s")
    evil["gpus"][0]["name"] = '<img src=x onerror="alert(1)">'
    host = '<script>alert("host")</script>'
    plan = _views(fleet_plan.plan_fleet([(host, {"gpuops_nvml_replay_file": str(write(tmp_path, "evil", evil))})], ""))
    page = fleet_report.render(plan)
    assert "<script>alert" not in page and "<img src=x" not in page and "</script>alert" not in page
    assert "&lt;script&gt;alert(&quot;host&quot;)&lt;/script&gt;" in page            # the health square
    parser = _Page()
    parser.feed(page)
    assert parser.data["name"] == [host]                       # the script gets the name back, as text
    assert '<img src=x onerror="alert(1)">' in parser.data["strings"]
    names = [tag for tag, _attrs in parser.tags]
    assert names.count("script") == 2 and names.count("img") == 0
    assert "innerHTML" not in parser.scripts[0]                # the script shows data through textContent only


def test_page_is_self_contained_and_forbids_fetches(tmp_path):
    plan = _plan(tmp_path, {"a": fixture("hgx-h100"), "b": fixture("l40s")})
    page = fleet_report.render(plan)
    parser = _Page()
    parser.feed(page)
    csp = [a["content"] for t, a in parser.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp == ["default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"]
    for tag, attrs in parser.tags:
        for name in ("src", "action", "srcset"):
            assert name not in attrs or attrs[name].startswith("data:"), (tag, attrs)
        assert "href" not in attrs or attrs["href"].startswith("#"), (tag, attrs)
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", page)


def test_summary_cards_and_data_match_the_plan(tmp_path):
    bad = fixture("hgx-h100")
    bad["gpus"][1]["ecc"]["volatile_uncorrectable"] = 1
    plan = _plan(tmp_path, {"a": bad, "b": fixture("l40s"), "c": {"not": "facts"}})
    parser = _Page()
    parser.feed(fleet_report.render(plan))
    s = plan["summary"]
    assert parser.summary == {
        "hosts": "3", "hosts_invalid": "1", "gpus": "9", "driver_changes": "0", "reboot": "0", "invalid_mig": "0",
        "mig_changes": "0", "unhealthy_gpus": "1", "fabric_manager": "1", "waves": "3", "stale": "0",
        "no_facts": "1"}
    assert int(parser.summary["gpus"]) == s["gpus"] and int(parser.summary["unhealthy_gpus"]) == s["unhealthy_gpus"]
    data = parser.data
    assert data["name"] == ["a", "b", "c"] and data["status"] == [2, 0, 3] and data["gpus"] == [8, 1, 0]
    assert [data["strings"][i] for i in data["pool"]] == ["ungrouped"] * 3
    assert data["facts"] == ["a.json", "b.json", "c.json"]          # relative to the facts root
    assert "no facts" not in data["strings"] and any("not a recorded nvml_facts result" in t for t in data["strings"])
    assert data["errors"] == {"2": 1}


def test_an_empty_fleet_renders(tmp_path):
    page = fleet_report.render(_views(fleet_plan.plan_fleet([], str(tmp_path))))
    assert "nothing to show" in page and str(NVML) not in page


def test_the_page_refuses_a_plan_without_the_views(tmp_path):
    with pytest.raises(fleet_schema.FleetPlanDataError, match="needs plan.json version 2 or later, got 1"):
        fleet_report.render(fleet_plan.plan_fleet([], str(tmp_path)))


def test_long_lists_are_cut_and_say_where_the_rest_is(tmp_path):
    write(tmp_path, "x", fixture("l40s"))
    plan = fleet_plan.plan_fleet([("h%03d" % i, {"gpuops_nvml_replay_file": str(tmp_path / "x.json"),
                                                 "nvidia_driver_version": "580.82.07"}) for i in range(100)], "")
    page = fleet_report.render(_views(plan))
    assert "h009" in page.split('data-list="reboot"')[1].split("</p>")[0]
    assert "h010" not in page.split('data-list="reboot"')[1].split("</p>")[0]
    assert "and 90 more (filter the node table with disruption:reboot)" in page


def test_mig_asked_of_nodes_without_mig_is_on_the_page(tmp_path):
    from test_fleet_plan import MIG
    write(tmp_path, "l40s", fixture("l40s"))
    write(tmp_path, "hgx", fixture("hgx-h100"))
    plan = _views(fleet_plan.plan_fleet([("l40s", {"mig_config": MIG, "mig_config_name": "all-1g.10gb"}),
                                         ("hgx", {"mig_config": MIG, "mig_config_name": "all-disabled"})], str(tmp_path)))
    page = fleet_report.render(plan)
    assert ('<p data-list="mig_unsupported"><b>MIG asked of nodes where no GPU can do MIG (1):</b> l40s</p>' in page)
    parser = _Page()
    parser.feed(page)
    notes = [parser.data["strings"][i] for i in parser.data["notes"]["0"]]
    assert any("asks for MIG (entry 1) but no GPU on this node supports MIG" in n for n in notes)


def _trends(page):
    """{row key: (change text, class, data-trend)} of the diff totals table."""
    out = {}
    for key, cls, trend, text in re.findall(
            r'<tr data-total="([^"]+)">(?:<td[^>]*>[^<]*</td>){3}<td class="num ?([^"]*)" data-trend="([^"]+)">([^<]*)</td>',
            page):
        out[key] = (text, cls, trend)
    return out


def test_the_diff_is_coloured_by_meaning_not_by_sign(tmp_path):
    """More unhealthy nodes is bad news, fewer is good news; less capacity is bad; a driver version's GPUs is neither."""
    sick = fixture("hgx-h100")
    sick["gpus"][0]["ecc"]["volatile_uncorrectable"] = 2
    for sub in "abc":
        (tmp_path / sub).mkdir()
    before = _plan(tmp_path / "a", {"a": sick, "b": fixture("l40s"), "c": fixture("l40s")})
    after = _plan(tmp_path / "b", {"a": fixture("hgx-h100"), "b": fixture("l40s")})
    after["diff"] = fleet_views.diff(json.loads(json.dumps(before)), after, "old/plan.json")
    trends = _trends(fleet_report.render(after))
    assert trends["unhealthy_nodes"] == ("-1", "better", "better")
    assert trends["hosts"] == ("-1", "worse", "worse")
    assert trends["capacity:nvidia.com/gpu"][1:] == ("worse", "worse")
    assert trends["gpus"] == ("-1", "worse", "worse")
    assert trends["reboot"] == ("", "", "same")
    assert [v for k, v in trends.items() if k.startswith("driver:")] == [("-1", "muted", "neutral")]
    # and the other way round
    again = _plan(tmp_path / "c", {"a": sick, "b": fixture("l40s"), "c": fixture("l40s")})
    again["diff"] = fleet_views.diff(json.loads(json.dumps(after)), again, "old/plan.json")
    trends = _trends(fleet_report.render(again))
    assert trends["unhealthy_nodes"] == ("+1", "worse", "worse") and trends["hosts"] == ("+1", "better", "better")


@pytest.mark.parametrize("key, old, new, trend", [
    ("unhealthy_nodes", 0, 3, "worse"), ("unhealthy_nodes", 3, 0, "better"), ("invalid", 1, 2, "worse"),
    ("reboot", 4, 0, "better"), ("driver_changes", 0, 4, "worse"), ("capacity:nvidia.com/gpu", 48, 44, "worse"),
    ("capacity:nvidia.com/mig-1g.10gb", 8, 16, "better"), ("gpus", 45, 46, "better"), ("driver:570.172.08", 8, 0, "neutral"),
    ("hosts", 10, 10, "same"),
])
def test_each_total_has_its_meaning(key, old, new, trend):
    assert fleet_views.trend(key, old, new) == trend


def test_a_second_identical_plan_says_no_change_since_the_last_plan(tmp_path):
    from ansible_collections.gpuops.platform.plugins.action import fleet_plan as action

    plan_file = str(tmp_path / "plan.json")
    first = _plan(tmp_path, {"a": fixture("hgx-h100"), "b": fixture("l40s")})
    text, kept, same = action._with_diff(first, plan_file, None)
    assert kept is None and same is False
    (tmp_path / "plan.json").write_text(text)
    assert "no change" not in " ".join(fleet_views.overview(first))
    second = _views(fleet_plan.plan_fleet([(n, dict(ON_570)) for n in ("a", "b")], str(tmp_path)))
    text2, kept, same = action._with_diff(second, plan_file, None)
    # Nothing to write (the run changes nothing), and the summary says why.
    assert (text2, kept, same) == (text, None, True)
    line = fleet_views.overview(second, same_as=plan_file)[2]
    assert line == "since the last plan: no change since the last plan (%s)" % plan_file
    # A plan compared with an identical one (gpuops_fleet_previous_plan) says the same, on the page too.
    second["diff"] = fleet_views.diff(json.loads(text), second, "last-week.json")
    assert fleet_views.overview(second)[2] == "since the last plan: no change since the last plan (last-week.json)"
    page = fleet_report.render(second)
    assert 'data-diff="same">No change since the last plan (<code>last-week.json</code>' in page
    assert 'id="diff-totals"' not in page
    # One host changed: no longer "no change".
    sick = fixture("hgx-h100")
    sick["gpus"][0]["ecc"]["volatile_uncorrectable"] = 1
    write(tmp_path, "a", sick)
    third = _views(fleet_plan.plan_fleet([(n, dict(ON_570)) for n in ("a", "b")], str(tmp_path)))
    _text, kept, same = action._with_diff(third, plan_file, None)
    assert kept == text and same is False and "no change" not in fleet_views.overview(third)[2]
    assert third["diff"]["changed"] == {"a": {"health": ["ok", "critical"]}}
