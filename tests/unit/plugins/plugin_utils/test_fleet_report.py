"""The fleet page: self-contained, escaped, and its numbers are the plan's."""
import re
from html.parser import HTMLParser

from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_plan, fleet_report

from test_fleet_plan import NVML, fixture, write


class _Page(HTMLParser):
    def __init__(self):
        HTMLParser.__init__(self)
        self.tags, self.summary, self.rows, self.scripts = [], {}, [], 0
        self._key = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        self._key = attrs.get("data-summary")
        if tag == "tr" and "data-host" in attrs:
            self.rows.append(attrs["data-host"])

    def handle_data(self, data):
        if self._key:
            self.summary[self._key] = data
            self._key = None


def _plan(tmp_path, names):
    for name, facts in names.items():
        write(tmp_path, name, facts)
    return fleet_plan.plan_fleet([(n, {}) for n in names], str(tmp_path))


def test_text_from_files_is_escaped(tmp_path):
    evil = fixture("l40s")
    evil["gpus"][0]["name"] = '<img src=x onerror="alert(1)">'
    host = '<script>alert("host")</script>'
    plan = fleet_plan.plan_fleet([(host, {"gpuops_nvml_replay_file": str(write(tmp_path, "evil", evil))})], "")
    page = fleet_report.render(plan)
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&quot;host&quot;)&lt;/script&gt;" in page
    parser = _Page()
    parser.feed(page)
    assert parser.rows == [host]                       # the parser gets the name back, as text
    names = [tag for tag, _attrs in parser.tags]
    assert names.count("script") == 1 and names.count("img") == 0


def test_page_is_self_contained_and_forbids_fetches(tmp_path):
    plan = _plan(tmp_path, {"a": fixture("hgx-h100"), "b": fixture("l40s")})
    page = fleet_report.render(plan)
    parser = _Page()
    parser.feed(page)
    csp = [a["content"] for t, a in parser.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp == ["default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"]
    for tag, attrs in parser.tags:
        for name in ("src", "href", "action", "srcset"):
            assert name not in attrs or attrs[name].startswith("data:"), (tag, attrs)
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", page)


def test_summary_cards_and_rows_match_the_plan(tmp_path):
    bad = fixture("hgx-h100")
    bad["gpus"][1]["ecc"]["volatile_uncorrectable"] = 1
    plan = _plan(tmp_path, {"a": bad, "b": fixture("l40s"), "c": {"not": "facts"}})
    parser = _Page()
    parser.feed(fleet_report.render(plan))
    s = plan["summary"]
    assert parser.summary == {
        "hosts": "3", "hosts_invalid": "1", "gpus": "9", "driver_changes": "0", "reboot": "0", "invalid_mig": "0",
        "mig_changes": "0", "unhealthy_gpus": "1", "fabric_manager": "1"}
    assert int(parser.summary["gpus"]) == s["gpus"] and int(parser.summary["unhealthy_gpus"]) == s["unhealthy_gpus"]
    assert parser.rows == ["a", "b", "c"]


def test_an_empty_fleet_renders(tmp_path):
    page = fleet_report.render(fleet_plan.plan_fleet([], str(tmp_path)))
    assert "nothing to show" in page and str(NVML) not in page


def test_mig_asked_of_nodes_without_mig_is_on_the_page(tmp_path):
    from test_fleet_plan import MIG
    write(tmp_path, "l40s", fixture("l40s"))
    write(tmp_path, "hgx", fixture("hgx-h100"))
    plan = fleet_plan.plan_fleet([("l40s", {"mig_config": MIG, "mig_config_name": "all-1g.10gb"}),
                                  ("hgx", {"mig_config": MIG, "mig_config_name": "all-disabled"})], str(tmp_path))
    page = fleet_report.render(plan)
    assert "<p><b>MIG asked of nodes where no GPU can do MIG:</b> l40s</p>" in page
    detail = page[page.index('<details data-detail="l40s">'):]
    assert "asks for MIG (entry 1) but no GPU on this node supports MIG" in detail[:detail.index("</details>")]
