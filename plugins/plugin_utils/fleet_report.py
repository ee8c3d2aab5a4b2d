# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The fleet plan as one self-contained HTML page, from plan.json alone.

Everything is inline (CSS, the script, SVG plots) and a Content-Security-Policy
forbids any fetch, so the page opens from a file, a CI artifact or a mail
attachment without network. Every text that comes from the plan (host names,
GPU names, reasons) is HTML-escaped, and the per-host data the script reads is
JSON with ``<``, ``>`` and ``&`` escaped, shown through ``textContent`` only.

The page is built for fleets of tens of thousands of hosts: the rollups (per
pool, reboot waves, tenants, what changed) come first as static HTML; the
hosts are columns of small numbers and indexes into one table of distinct
strings, which the script expands into a filtered, sorted, virtualized table
(only the rows on screen exist in the DOM) and a detail panel per host.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
from html import escape
from urllib.parse import quote

from ansible_collections.gpuops.platform.plugins.plugin_utils import fleet_schema, fleet_views

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
COLORS = ["#2f6fb0", "#76b900", "#d9822b", "#8e44ad", "#16a085", "#c0392b", "#7f8c8d", "#b7950b"]
HEALTH_COLORS = {"ok": "#3c9a3c", "warning": "#e0a100", "critical": "#c0392b", "invalid": "#555555"}
LIST_LIMIT = 10      # names listed inline before "and N more"
WAVE_ROWS = 200      # waves listed before the rest is left to the node table's filter
SQUARES = 2000       # health squares: every host up to this, else the hosts that are not ok

STYLE = """
*{box-sizing:border-box}
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;background:#f4f6f9;overflow-wrap:anywhere}
header{background:#1d2330;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c8d0dc}main{padding:16px 24px;max-width:1600px}
nav.toc{display:flex;flex-wrap:wrap;gap:4px 14px;margin:0 0 12px}nav.toc a{color:#2f6fb0}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin-bottom:16px}
.card{background:#fff;border-radius:6px;padding:10px 14px;min-width:120px;flex:1 1 120px;box-shadow:0 1px 2px rgba(0,0,0,.12)}
.card .n{font-size:26px;font-weight:600}.card .l{color:#5a6475;font-size:12px;text-transform:uppercase}
.card.bad .n{color:#c0392b}.card.warn .n{color:#b07a00}.card.good .n{color:#3c8a3c}
.plots{display:flex;flex-wrap:wrap;gap:12px;margin-bottom:16px}
.plot{background:#fff;border-radius:6px;padding:10px 14px;box-shadow:0 1px 2px rgba(0,0,0,.12);flex:1 1 300px;min-width:0}
.plot svg{width:100%;height:auto;display:block}
.plot h2,section h2{font-size:15px;margin:0 0 8px}
section{background:#fff;border-radius:6px;padding:10px 14px;margin-bottom:16px;box-shadow:0 1px 2px rgba(0,0,0,.12);min-width:0}
.tbox{overflow:auto;max-width:100%}.tbox table{overflow-wrap:normal}
#pool-table{min-width:980px}#tenant-table td,#queue-table td,#wave-table td,#diff-totals td{white-space:nowrap}
.tbox.tall{max-height:420px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e3e7ee;vertical-align:top}
th{background:#eef1f6;position:sticky;top:0;z-index:1}
td.num,th.num{text-align:right}
#pool-table td:first-child,#wave-table td:first-child{white-space:nowrap}th{white-space:nowrap}
.tag{display:inline-block;border-radius:3px;padding:0 6px;font-size:12px;color:#fff}
.ok{background:#3c9a3c}.warning{background:#e0a100}.critical{background:#c0392b}.invalid{background:#555}
.over{color:#c0392b;font-weight:600}.muted{color:#6b7485}.better{color:#3c8a3c;font-weight:600}.worse{color:#c0392b;font-weight:600}
ul.errors{margin:0;padding-left:18px;color:#a93226}ul.notes{margin:0;padding-left:18px;color:#6b5400}
.hbar{display:flex;height:12px;min-width:90px;border-radius:2px;overflow:hidden;background:#e3e7ee}
.hbar span{display:block;height:100%}
.squares{display:flex;flex-wrap:wrap;gap:2px}
.squares a{display:block;width:12px;height:12px;border-radius:2px}
.legend span{display:inline-block;margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
.filter{display:flex;flex-wrap:wrap;gap:8px;align-items:center;margin-bottom:8px}
.filter input{flex:1 1 240px;min-width:0;font:inherit;padding:4px 8px;border:1px solid #b9c2d0;border-radius:4px}
#nodebox{height:560px;max-height:70vh;overflow:auto;border:1px solid #e3e7ee;border-radius:4px}
#node-table{table-layout:fixed;min-width:1480px}
#node-table th{cursor:pointer;user-select:none;white-space:nowrap}
#node-table th[aria-sort=ascending]:after{content:" \\25B2"}#node-table th[aria-sort=descending]:after{content:" \\25BC"}
#node-table td{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;height:26px;padding:3px 8px}
#node-table tbody tr.row{cursor:pointer}#node-table tbody tr.row:hover td{background:#f0f4fa}
#node-table tr.s1 td{background:#fff6dc}#node-table tr.s2 td{background:#fbe3e0}#node-table tr.s3 td{background:#fdecea}
#node-table tr.hit td{background:#d7e8ff !important;font-weight:600}
#detail{min-height:40px}#detail dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}
#detail dt{color:#5a6475}#detail dd{margin:0}
@media (max-width:600px){header{padding:10px 12px}main{padding:10px 8px}.card{min-width:95px;padding:8px}
.card .n{font-size:20px}section,.plot{padding:8px}}
"""


def _e(value):
    return escape("" if value is None else str(value), quote=True)


def _box(table, tall=False):
    return '<div class="tbox%s">%s</div>' % (" tall" if tall else "", table)


def _bars(title, items, key, width=420):
    """A horizontal bar chart of (label, value) pairs as inline SVG that scales to its box."""
    items = [(label, value) for label, value in items if value]
    if not items:
        return '<div class="plot" data-plot="%s"><h2>%s</h2><p class="muted">nothing to show</p></div>' % (
            _e(key), _e(title))
    top = max(value for _label, value in items)
    row, label_w = 22, 190
    height = row * len(items) + 6
    parts = ['<svg role="img" aria-label="%s" viewBox="0 0 %d %d" style="max-width:%dpx" '
             'xmlns="http://www.w3.org/2000/svg">' % (_e(title), width, height, width)]
    for i, (label, value) in enumerate(items):
        length = max(2, int((width - label_w - 60) * value / float(top)))
        y = i * row + 3
        parts.append('<text x="%d" y="%d" text-anchor="end" font-size="12">%s</text>'
                     % (label_w - 6, y + 14, _e(label if len(label) < 30 else label[:28] + "..")))
        parts.append('<rect x="%d" y="%d" width="%d" height="16" fill="%s"><title>%s: %s</title></rect>'
                     % (label_w, y + 2, length, COLORS[i % len(COLORS)], _e(label), _e(value)))
        parts.append('<text x="%d" y="%d" font-size="12">%s</text>' % (label_w + length + 4, y + 14, _e(value)))
    parts.append("</svg>")
    return '<div class="plot" data-plot="%s"><h2>%s</h2>%s</div>' % (_e(key), _e(title), "".join(parts))


def _stacked(title, data, key, width=420):
    """GPUs by model, one bar per model split by driver version."""
    if not data:
        return _bars(title, [], key, width)
    versions = sorted(set(v for per in data.values() for v in per))
    color = dict((v, COLORS[i % len(COLORS)]) for i, v in enumerate(versions))
    top = max(sum(per.values()) for per in data.values())
    row, label_w = 22, 190
    legend_rows = (len(versions) + 2) // 3
    height = row * len(data) + 10 + 16 * legend_rows
    parts = ['<svg role="img" aria-label="%s" viewBox="0 0 %d %d" style="max-width:%dpx" '
             'xmlns="http://www.w3.org/2000/svg">' % (_e(title), width, height, width)]
    for i, (model, per) in enumerate(sorted(data.items())):
        y = i * row + 3
        parts.append('<text x="%d" y="%d" text-anchor="end" font-size="12">%s</text>'
                     % (label_w - 6, y + 14, _e(model if len(model) < 30 else model[:28] + "..")))
        x = label_w
        for version in versions:
            count = per.get(version, 0)
            if not count:
                continue
            w = max(2, int((width - label_w - 50) * count / float(top)))
            parts.append('<rect x="%d" y="%d" width="%d" height="16" fill="%s"><title>%s, driver %s: %d GPU(s)'
                         '</title></rect>' % (x, y + 2, w, color[version], _e(model), _e(version), count))
            x += w
        parts.append('<text x="%d" y="%d" font-size="12">%d</text>' % (x + 4, y + 14, sum(per.values())))
    for n, version in enumerate(versions):
        x, y = 4 + (n % 3) * 138, row * len(data) + 8 + 16 * (n // 3)
        parts.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" font-size="11">'
                     'driver %s</text>' % (x, y, color[version], x + 14, y + 9, _e(version)))
    parts.append("</svg>")
    return '<div class="plot" data-plot="%s"><h2>%s</h2>%s</div>' % (_e(key), _e(title), "".join(parts))


def _card(label, value, key, tone=""):
    return ('<div class="card %s"><div class="n" data-summary="%s">%s</div><div class="l">%s</div></div>'
            % (tone, _e(key), _e(value), _e(label)))


def _names(names, what):
    """Up to LIST_LIMIT names, then how many more and where they are."""
    if not names:
        return "none"
    shown = ", ".join(names[:LIST_LIMIT])
    if len(names) > LIST_LIMIT:
        shown += " and %d more (%s)" % (len(names) - LIST_LIMIT, what)
    return shown


def _counts(mapping):
    return ", ".join("%s: %s" % kv for kv in sorted((mapping or {}).items())) or "none"


def _hbar(health):
    total = sum(health.values()) or 1
    spans = "".join('<span class="%s" style="width:%.2f%%" title="%s: %d"></span>' % (s, 100.0 * health.get(s, 0) / total,
                                                                                      s, health.get(s, 0))
                    for s in fleet_views.STATUSES if health.get(s))
    return '<div class="hbar">%s</div>' % spans


def _q(text):
    """A link that filters the node table."""
    return "#q=" + _e(quote(text, safe=":"))


# ---------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------

_TREND_CLASS = {"better": "better", "worse": "worse", "neutral": "muted", "same": ""}


def _changes(plan):
    d = plan["diff"]
    if d.get("previous") is None:
        return ('<section id="changes"><h2>What changed since the last plan</h2><p class="muted" data-diff="none">%s'
                "</p></section>" % _e(d.get("problem") or "No earlier plan to compare with: the first run whose plan "
                                      "differs from this one compares with it (kept as plan.previous.json), or give "
                                      "gpuops_fleet_previous_plan."))
    if fleet_views.unchanged(d):
        return ('<section id="changes"><h2>What changed since the last plan</h2><p data-diff="same">No change since the '
                "last plan (<code>%s</code>, version %s).</p></section>" % (_e(d["previous"]), _e(d.get("previous_version"))))
    totals = d["totals"]
    rows = []
    for key, label in (("hosts", "hosts"), ("gpus", "GPUs"), ("reboot", "nodes to reboot"),
                       ("driver_changes", "driver changes"), ("unhealthy_nodes", "unhealthy nodes"),
                       ("invalid", "invalid plans")):
        rows.append((label, totals[key][0], totals[key][1], key))
    for res, (old, new) in sorted(totals["capacity"].items()):
        rows.append(("capacity " + res, old, new, "capacity:" + res))
    for ver, (old, new) in sorted(totals["driver_versions"].items()):
        rows.append(("GPUs on driver " + ver, old, new, "driver:" + ver))
    # Coloured by meaning, not by sign: fewer unhealthy nodes is good news, less capacity bad news.
    body = "".join('<tr data-total="%s"><td>%s</td><td class="num">%s</td><td class="num">%s</td>'
                   '<td class="num %s" data-trend="%s">%s</td></tr>' % (
                       _e(key), _e(label), old, new, _TREND_CLASS[fleet_views.trend(key, old, new)],
                       fleet_views.trend(key, old, new), ("%+d" % (new - old)) if new != old else "")
                   for label, old, new, key in rows)
    counts = d["counts"]
    facets = ", ".join('<a href="%s" data-changed="%s">%s: %d</a>' % (_q("changed:" + k), k, k, counts[k])
                       for k in ("driver", "wanted", "mig", "health", "capacity"))
    return "".join([
        '<section id="changes"><h2>What changed since the last plan</h2>',
        '<p>Compared with <code>%s</code> (version %s): <b data-diff="added">%d</b> host(s) added, '
        '<b data-diff="removed">%d</b> removed, <b data-diff="changed">%d</b> changed (%s).</p>'
        % (_e(d["previous"]), _e(d.get("previous_version")), len(d["added"]), len(d["removed"]), len(d["changed"]),
           facets),
        "<p><b>Added:</b> %s</p>" % _e(_names(d["added"], "filter the node table with changed:added")) if d["added"] else "",
        "<p><b>Removed:</b> %s</p>" % _e(_names(d["removed"], "see the previous plan")) if d["removed"] else "",
        _box('<table id="diff-totals"><thead><tr><th>total</th><th class="num">before</th><th class="num">now</th>'
             '<th class="num">change</th></tr></thead><tbody>%s</tbody></table>' % body),
        "</section>"])


def _pools(plan):
    rows = []
    for name, pool in sorted(plan["pools"].items()):
        rows.append(
            '<tr data-pool="%s"><td><a href="%s">%s</a></td><td class="num">%d</td><td class="num">%d</td><td>%s</td>'
            '<td>%s</td><td>%s</td><td>%s</td><td>%s<span class="muted">%s</span></td><td class="num">%d / %d / %d</td>'
            '<td class="num">%d</td><td class="num">%d</td></tr>' % (
                _e(name), _q("pool:" + name), _e(name), pool["hosts"], pool["gpus"], _e(_counts(pool["models"])),
                _e(_counts(pool["drivers"])), _e(_counts(pool["mig_layouts"])), _e(_counts(pool["capacity"])),
                _hbar(pool["health"]), _e(" ".join("%s %d" % (s, pool["health"][s]) for s in fleet_views.STATUSES
                                                   if pool["health"][s])),
                pool["drain"], pool["gpu_reset"], pool["reboot"], pool["stale"], pool.get("no_facts", 0)))
    return ('<section id="pools"><h2>Pools (inventory groups)</h2>%s</section>' % _box(
        '<table id="pool-table"><thead><tr><th>pool</th><th class="num">hosts</th><th class="num">GPUs</th>'
        '<th>models (GPUs)</th><th>drivers (hosts)</th><th>MIG layouts (hosts)</th><th>Kubernetes capacity</th>'
        '<th>health</th><th class="num">drain / GPU reset / reboot</th><th class="num">stale facts</th><th class="num">no facts</th></tr>'
        '</thead>'
        '<tbody>%s</tbody></table>' % "".join(rows)))


def _waves(plan):
    w = plan["waves"]
    order = plan["order"]
    batches = w["batches"]
    rows = []
    for b in batches[:WAVE_ROWS]:
        members = order[b["first"]:b["first"] + b["size"]]
        rows.append('<tr data-wave="%d"%s><td><a href="%s">%d</a>%s</td><td class="num">%d</td><td>%s</td>'
                    '<td class="num">%d</td><td class="num">%d</td><td>%s</td></tr>' % (
                        b["wave"], ' class="idle"' if not b["drained"] else "", _q("wave:%d" % b["wave"]), b["wave"],
                        " (canary)" if w["canary"] and b["wave"] == 1 else "", b["size"],
                        _e(members[0] if len(members) == 1 else "%s ... %s" % (members[0], members[-1])),
                        b["drained"], b["reboots"], _e(_counts(b["capacity_removed"]))))
    more = ""
    if len(batches) > WAVE_ROWS:
        more = ('<p class="muted">%d more waves: filter the node table with wave:N.</p>' % (len(batches) - WAVE_ROWS))
    busy = sum(1 for b in batches if b["drained"])
    drained = sum(b["drained"] for b in batches)
    return "".join([
        '<section id="waves"><h2>Reboot waves of upgrade.yml</h2>',
        '<p>serial %s%s: <b data-waves="count">%d</b> wave(s) over %d host(s); <b data-waves="busy">%d</b> of them '
        'drain nodes (%d node(s) in all). A wave runs the hosts in inventory order; nodes already on the wanted '
        'driver, loaded, or without a driver are skipped without a drain.</p>'
        % (_e(w["serial"][-1]), ", a canary wave of one first" if w["canary"] else "", len(batches), len(order), busy,
           drained),
        _box('<table id="wave-table"><thead><tr><th>wave</th><th class="num">hosts</th><th>first ... last</th>'
             '<th class="num">drained</th><th class="num">reboots</th><th>capacity taken away</th></tr></thead>'
             '<tbody>%s</tbody></table>' % "".join(rows), tall=True),
        more, "</section>"])


def _tenants(plan):
    t = plan["tenants"]
    names = [r["name"] for r in t["tenants"]]
    head = "".join("<th class=\"num\">%s</th>" % _e(n) for n in names)
    rows = []
    for r in t["resources"]:
        cells = "".join('<td class="num">%s</td>' % tenant["quota"].get(r["resource"], 0) for tenant in t["tenants"])
        rows.append('<tr data-resource="%s"%s><td>%s</td><td class="num">%d</td>%s<td class="num">%d</td><td>%s</td></tr>'
                    % (_e(r["resource"]), ' class="over"' if r["overcommitted"] else "", _e(r["resource"]),
                       r["capacity"], cells, r["tenants"], "overcommitted" if r["overcommitted"] else "ok"))
    queues = t["cluster_queues"]
    qhead = "".join("<th class=\"num\">%s</th>" % _e(q["name"]) for q in queues)
    qrows = []
    for r in t["flavors"]:
        cells = "".join('<td class="num">%s</td>' % q["nominal"].get(r["flavor"], {}).get(r["resource"], 0)
                        for q in queues)
        qrows.append('<tr data-flavor="%s %s"%s><td>%s</td><td>%s</td><td class="num">%d</td>%s<td class="num">%d</td>'
                     '<td>%s</td></tr>' % (_e(r["flavor"]), _e(r["resource"]), ' class="over"' if r["overcommitted"] else "",
                                           _e(r["flavor"]), _e(r["resource"]), r["capacity"], cells, r["nominal"],
                                           "overcommitted" if r["overcommitted"] else "ok"))
    return "".join([
        '<section id="tenants"><h2>Tenants and queues against capacity</h2>',
        "<p>Each tenant's ResourceQuota (requests) per GPU resource, as the gpu_tenants role sets it, and each Kueue "
        "ClusterQueue's nominal quota per flavor, as the kueue role sets it.%s</p>" % (
            ' <b class="over" data-overcommit="yes">Overcommitted.</b>' if t["overcommitted"] else
            ' <span data-overcommit="no">Within capacity.</span>'),
        '<p><b class="over">Quotas that cannot be read (the plan is not valid):</b></p><ul class="errors" '
        'data-quota-errors="%d">%s</ul>' % (len(t["errors"]), "".join("<li>%s</li>" % _e(e) for e in t["errors"]))
        if t.get("errors") else "",
        _box('<table id="tenant-table"><thead><tr><th>resource</th><th class="num">capacity</th>%s<th class="num">'
             'tenants in all</th><th></th></tr></thead><tbody>%s</tbody></table>' % (head, "".join(rows))),
        _box('<table id="queue-table"><thead><tr><th>flavor</th><th>resource</th><th class="num">capacity</th>%s'
             '<th class="num">nominal in all</th><th></th></tr></thead><tbody>%s</tbody></table>'
             % (qhead, "".join(qrows))) if qrows else '<p class="muted">No ClusterQueue quota on a GPU flavor.</p>',
        "</section>"])


def _health(plan, statuses):
    order = plan["order"]
    if len(order) <= SQUARES:
        shown, note = order, "one square per node"
    else:
        shown = [n for n in order if statuses[n] != "ok"][:SQUARES]
        note = "the %d node(s) that are not ok%s; the %d ok nodes are counted per pool above" % (
            len(shown), " (first %d)" % SQUARES if len(shown) == SQUARES else "",
            sum(1 for n in order if statuses[n] == "ok"))
    squares = "".join('<a class="%s" href="#h=%s" title="%s: %s"></a>' % (statuses[n], _e(quote(n, safe="")), _e(n), statuses[n])
                      for n in shown)
    legend = "".join('<span><i class="%s"></i>%s</span>' % (s, s) for s in fleet_views.STATUSES)
    return ('<section id="health"><h2>Health by node</h2><p class="muted">%s; a square opens its row.</p>'
            '<div class="squares">%s</div><p class="legend">%s</p></section>' % (_e(note), squares, legend))


# ---------------------------------------------------------------------------
# The per-host data the script expands
# ---------------------------------------------------------------------------

def _relative(path, root):
    if not path:
        return ""
    if root and path.startswith(root.rstrip(os.sep) + os.sep):
        return path[len(root.rstrip(os.sep)) + 1:]
    return path


def _change_text(delta):
    return "; ".join("%s %s -> %s" % (k, v[0], v[1]) for k, v in sorted(delta.items()))


def _data(plan, statuses):
    """Columns of the hosts in inventory order: numbers, and indexes into one table of distinct strings."""
    strings, index = [""], {"": 0}

    def s(text):
        text = "" if text is None else str(text)
        got = index.get(text)
        if got is None:
            got = index[text] = len(strings)
            strings.append(text)
        return got

    hosts, order, root = plan["hosts"], plan["order"], plan.get("facts_root") or ""
    changed, added = plan["diff"].get("changed") or {}, set(plan["diff"].get("added") or [])
    cols = dict((k, []) for k in ("name", "pool", "status", "gpus", "model", "drv", "want", "act", "dis", "mig",
                                  "wave", "rec", "src", "cap", "chg", "facts", "migd"))
    notes = {}
    codes = dict((st, i) for i, st in enumerate(fleet_views.STATUSES))
    for i, name in enumerate(order):
        host = hosts[name]
        driver = host.get("driver") or {}
        mig = host.get("mig") or {}
        cols["name"].append(name)
        cols["pool"].append(s(host.get("pool")))
        cols["status"].append(codes[statuses[name]])
        cols["gpus"].append(host.get("gpu_count") or 0)
        cols["model"].append(s(", ".join(sorted(host.get("gpu_models") or {})) or "-"))
        cols["drv"].append(s(driver.get("installed") or "-"))
        cols["want"].append(s(driver.get("wanted") or "-"))
        cols["act"].append(s(driver.get("action") or "-"))
        cols["dis"].append(s(host["disruption"]["summary"]))
        cols["mig"].append(s("-" if not mig.get("config") else "%s (%s)" % (
            mig["config"], "invalid" if not mig.get("valid") else ("change" if mig.get("changed") else "no change"))))
        cols["migd"].append(s("\n".join("%s -> %s" % (gp.get("before", ""), (gp.get("after") or "").split(": ", 1)[-1])
                                        for gp in mig.get("gpus") or [])))
        cols["wave"].append(host.get("wave") or 0)
        cols["rec"].append(host.get("facts_recorded_at"))
        cols["src"].append(s(host.get("facts_time_source")))
        cols["cap"].append(s(_counts((host.get("capacity") or {}).get("resources")) if host.get("capacity") else "-"))
        cols["chg"].append(s("added" if name in added else _change_text(changed.get(name) or {})))
        cols["facts"].append(_relative(host.get("facts_file"), root))
        found = list(host.get("errors") or []) + list(host.get("warnings") or []) + list(driver.get("reasons") or [])
        found += (host.get("health") or {}).get("reasons") or []
        if found:
            notes[i] = [s(n) for n in found]
    cols["notes"] = notes
    cols["strings"] = strings
    cols["stale_after_hours"] = plan.get("stale_after_hours", 168)
    cols["errors"] = dict((i, len(hosts[n].get("errors") or [])) for i, n in enumerate(order) if hosts[n].get("errors"))
    return cols


def _json_for_script(data):
    text = json.dumps(data, separators=(",", ":"), sort_keys=True)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


NODE_COLUMNS = [
    # key, label, width (px), kind: s string index, n number, t text; what decides today comes first
    ("name", "host", 150, "t"), ("pool", "pool", 110, "s"), ("status", "status", 80, "status"),
    ("dis", "disruption", 150, "s"), ("wave", "wave", 55, "n"), ("chg", "since last plan", 200, "s"),
    ("drv", "driver", 95, "s"), ("want", "wanted", 95, "s"), ("act", "driver action", 100, "s"),
    ("gpus", "GPUs", 55, "n"), ("model", "model", 170, "s"), ("mig", "MIG config", 150, "s"),
    ("rec", "facts age", 85, "age"), ("cap", "Kubernetes resources", 240, "s"),
]


def render(plan, title="GPU fleet plan"):
    """The page for a plan.json of schema version 2 or later (fleet_views.enrich)."""
    if plan.get("version") not in fleet_schema.SUPPORTED[1:]:
        raise fleet_schema.FleetPlanDataError(
            "the page needs plan.json version 2 or later, got %r: plan it again with playbooks/plan_fleet.yml"
            % (plan.get("version"),))
    s = plan["summary"]
    statuses = dict((n, fleet_views.status(h)) for n, h in plan["hosts"].items())
    stale = len(fleet_views.stale_hosts(plan))
    no_facts = len(fleet_views.no_facts_hosts(plan))
    cards = [
        _card("hosts", s["hosts"], "hosts"),
        _card("invalid plans", len(s["hosts_invalid"]), "hosts_invalid", "bad" if s["hosts_invalid"] else "good"),
        _card("GPUs", s["gpus"], "gpus"),
        _card("driver changes", len(s["driver_changes"]), "driver_changes", "warn" if s["driver_changes"] else ""),
        _card("nodes to reboot", len(s["reboot"]), "reboot", "warn" if s["reboot"] else ""),
        _card("invalid MIG layouts", len(s["invalid_mig"]), "invalid_mig", "bad" if s["invalid_mig"] else "good"),
        _card("MIG changes", len(s["mig_changes"]), "mig_changes"),
        _card("unhealthy GPUs", s["unhealthy_gpus"], "unhealthy_gpus", "bad" if s["unhealthy_gpus"] else "good"),
        _card("fabric manager nodes", len(s["fabric_manager"]), "fabric_manager"),
        _card("reboot waves", len(plan["waves"]["batches"]), "waves"),
        _card("stale facts", stale, "stale", "warn" if stale else "good"),
        _card("no facts", no_facts, "no_facts", "bad" if no_facts else "good"),
    ]
    lists = []
    for label, key, flt in (("Invalid plans", "hosts_invalid", "status:invalid"), ("Nodes to reboot", "reboot",
                                                                                   "disruption:reboot"),
                            ("Invalid MIG layouts", "invalid_mig", "mig:invalid"),
                            ("Unhealthy nodes", "unhealthy_nodes", "status:critical"),
                            ("MIG asked of nodes where no GPU can do MIG", "mig_unsupported", "mig:")):
        if s.get(key):
            lists.append('<p data-list="%s"><b>%s (%d):</b> %s</p>' % (
                key, _e(label), len(s[key]), _e(_names(s[key], "filter the node table with %s" % flt))))
    errors = ""
    if plan["errors"]:
        errors = ('<section id="errors"><h2>Hosts that cannot be planned as they are (%d)</h2><ul class="errors">%s</ul>'
                  "%s</section>" % (len(plan["errors"]), "".join("<li>%s</li>" % _e(e) for e in plan["errors"][:LIST_LIMIT]),
                                    '<p class="muted">and %d more: filter the node table with status:invalid</p>'
                                    % (len(plan["errors"]) - LIST_LIMIT) if len(plan["errors"]) > LIST_LIMIT else ""))
    capacity_rows = "".join('<tr><td>%s</td><td class="num" data-capacity="%s">%d</td></tr>' % (_e(k), _e(k), v)
                            for k, v in sorted(s["capacity"].items()))
    model_rows = "".join('<tr><td>%s</td><td class="num" data-model="%s">%d</td></tr>' % (_e(k), _e(k), v)
                         for k, v in sorted(s["gpus_by_model"].items()))
    driver_rows = "".join('<tr><td>%s</td><td class="num" data-driver="%s">%d</td></tr>' % (_e(k), _e(k), v)
                          for k, v in sorted(s["driver_versions"].items()))
    verdict = "every host can be planned" if not s["hosts_invalid"] else "%d host(s) cannot be planned" % len(s["hosts_invalid"])
    if plan["tenants"].get("errors"):
        verdict += "; %d quota(s) cannot be read" % len(plan["tenants"]["errors"])
    head = "".join('<th data-col="%s" data-kind="%s" style="width:%dpx">%s</th>' % (k, kind, w, _e(label))
                   for k, label, w, kind in NODE_COLUMNS)
    nav = "".join('<a href="#%s">%s</a>' % (a, b) for a, b in (
        ("changes", "changes"), ("pools", "pools"), ("waves", "waves"), ("tenants", "tenants"), ("health", "health"),
        ("nodes", "nodes")))
    return "".join([
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" content="%s">' % CSP,
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>%s</title><style>%s</style></head><body>" % (_e(title), STYLE),
        "<header><h1>%s</h1><p>%d hosts, %d GPUs, MIG strategy %s: %s</p><p>facts from <code>%s</code></p></header><main>"
        % (_e(title), s["hosts"], s["gpus"], _e(plan["mig_strategy"]), _e(verdict), _e(plan.get("facts_root") or "-")),
        '<nav class="toc">%s</nav>' % nav,
        '<div class="cards" id="summary">%s</div>' % "".join(cards),
        "".join(lists), errors,
        _changes(plan), _pools(plan), _waves(plan), _tenants(plan),
        '<div class="plots">',
        _stacked("GPUs by model and driver version", s["gpus_by_model_and_driver"], "models"),
        _bars("Kubernetes capacity by resource", sorted(s["capacity"].items()), "capacity"),
        '<div class="plot"><h2>Capacity by resource</h2>%s</div>' % _box(
            '<table id="capacity"><tbody>%s</tbody></table>' % (capacity_rows or '<tr><td class="muted">none</td></tr>')),
        '<div class="plot"><h2>GPUs by model</h2>%s</div>' % _box('<table id="models"><tbody>%s</tbody></table>' % model_rows),
        '<div class="plot"><h2>GPUs by driver version</h2>%s</div>' % _box(
            '<table id="drivers"><tbody>%s</tbody></table>' % driver_rows),
        "</div>",
        _health(plan, statuses),
        '<section id="nodes"><h2>Nodes</h2><div class="filter"><input id="filter" type="search" '
        'placeholder="filter: words, or pool:, status:, wave:, disruption:, driver:, mig:, changed:, stale:yes, stale:none" '
        'aria-label="filter the nodes"><span id="count" class="muted"></span></div>',
        '<div id="nodebox"><table id="node-table"><thead><tr>%s</tr></thead><tbody></tbody></table></div>' % head,
        '<p class="muted">Click a column to sort, a row for its details.</p></section>',
        '<section id="detail-section"><h2>Node details</h2><div id="detail" class="muted">Pick a node in the table '
        "or a health square.</div></section>",
        '<output id="perf" hidden></output>',
        '<script type="application/json" id="fleet-data">%s</script>' % _json_for_script(_data(plan, statuses)),
        "</main><script>%s</script></body></html>\n" % SCRIPT,
    ])


SCRIPT = r"""
(function () {
  "use strict";
  var t0 = performance.now();
  var D = JSON.parse(document.getElementById("fleet-data").textContent);
  var S = D.strings, N = D.name.length, ROW = 26, OVERSCAN = 8;
  var STATUS = ["ok", "warning", "critical", "invalid"];
  var NOW = Date.now() / 1000, STALE = D.stale_after_hours * 3600;
  var box = document.getElementById("nodebox"), table = document.getElementById("node-table");
  var tbody = table.tBodies[0], heads = table.tHead.rows[0].cells, input = document.getElementById("filter");
  var count = document.getElementById("count"), perf = document.getElementById("perf");
  var cols = [];
  for (var c = 0; c < heads.length; c++) { cols.push({key: heads[c].getAttribute("data-col"), kind: heads[c].getAttribute("data-kind")}); }
  var selected = -1, sortCol = null, sortDir = 1;
  var order = new Int32Array(N), view = new Int32Array(N), size = N;
  for (var i = 0; i < N; i++) { order[i] = i; view[i] = i; }

  function age(i) { var r = D.rec[i]; return r === null ? Infinity : NOW - r; }
  function ageText(i) {
    var a = age(i);
    if (a === Infinity) { return "no facts"; }
    if (a < 3600) { return Math.max(0, Math.round(a / 60)) + " min"; }
    if (a < 172800) { return Math.round(a / 3600) + " h"; }
    return Math.round(a / 86400) + " d";
  }
  function stale(i) { var a = age(i); return a !== Infinity && a > STALE; }
  function text(col, i) {
    var v = D[col.key][i];
    if (col.kind === "s") { return S[v]; }
    if (col.kind === "status") { return STATUS[v]; }
    if (col.kind === "age") { return ageText(i) + (stale(i) ? " (stale)" : ""); }
    return String(v);
  }
  // what each filter key looks at
  var FIELDS = {host: "name", name: "name", pool: "pool", status: "status", model: "model", driver: "drv",
                wanted: "want", action: "act", disruption: "dis", mig: "mig", wave: "wave", changed: "chg",
                resources: "cap", facts: "facts"};
  var hay = null, SL = S.map(function (t) { return t.toLowerCase(); });
  function haystacks() {
    hay = new Array(N);
    for (var i = 0; i < N; i++) {
      hay[i] = [D.name[i], S[D.pool[i]], STATUS[D.status[i]], S[D.model[i]], S[D.drv[i]], S[D.want[i]], S[D.act[i]],
                S[D.dis[i]], S[D.mig[i]], S[D.chg[i]], S[D.cap[i]]].join("\u0001").toLowerCase();
    }
  }
  function field(key, i) {
    var k = FIELDS[key];
    if (k === "name" || k === "facts") { return D[k][i].toLowerCase(); }
    if (k === "status") { return STATUS[D.status[i]]; }
    if (k === "wave") { return String(D.wave[i]); }
    return SL[D[k][i]];
  }
  function matcher(query) {
    var tests = [];
    query.toLowerCase().split(/\s+/).forEach(function (word) {
      if (!word) { return; }
      var at = word.indexOf(":"), key = at > 0 ? word.slice(0, at) : "", value = at > 0 ? word.slice(at + 1) : word;
      if (key === "stale" && value === "none") {
        tests.push(function (i) { return D.rec[i] === null; });
      } else if (key === "stale") {
        var want = value !== "no";
        tests.push(function (i) { return stale(i) === want; });
      } else if (key === "changed" && (value === "yes" || value === "")) {
        tests.push(function (i) { return D.chg[i] !== 0; });
      } else if (key === "wave" || key === "gpus") {
        var n = parseInt(value, 10), k2 = key === "wave" ? "wave" : "gpus";
        tests.push(function (i) { return D[k2][i] === n; });
      } else if (key === "status") {
        tests.push(function (i) { return STATUS[D.status[i]] === value; });
      } else if (FIELDS[key]) {
        tests.push(function (i) { return field(key, i).indexOf(value) >= 0; });
      } else {
        if (hay === null) { haystacks(); }
        tests.push(function (i) { return hay[i].indexOf(word) >= 0; });
      }
    });
    return tests;
  }
  function applyFilter() {
    var tests = matcher(input.value), n = 0, t = tests.length;
    outer: for (var j = 0; j < N; j++) {
      var i = order[j];
      for (var k = 0; k < t; k++) { if (!tests[k](i)) { continue outer; } }
      view[n++] = i;
    }
    size = n;
    count.textContent = n === N ? N + " nodes" : n + " of " + N + " nodes";
  }
  // Sorting: each column's rank per row is computed once (its distinct values sorted), then a sort is
  // one native numeric sort of rank * N + row (ties stay in inventory order).
  var rankCache = {};
  function ranks(col) {
    if (rankCache[col.key]) { return rankCache[col.key]; }
    var out = new Float64Array(N), i;
    if (col.kind === "s") {
      var used = [], seen = {};
      for (i = 0; i < N; i++) { var v = D[col.key][i]; if (!seen[v]) { seen[v] = 1; used.push(v); } }
      used.sort(function (a, b) { return S[a] < S[b] ? -1 : S[a] > S[b] ? 1 : 0; });
      var rank = {};
      used.forEach(function (v, r) { rank[v] = r; });
      for (i = 0; i < N; i++) { out[i] = rank[D[col.key][i]]; }
    } else if (col.kind === "t" || col.kind === "age") {
      var idx = new Array(N), key = new Array(N);
      for (i = 0; i < N; i++) { idx[i] = i; key[i] = col.kind === "age" ? age(i) : D[col.key][i]; }
      idx.sort(function (a, b) { var x = key[a], y = key[b]; return x < y ? -1 : x > y ? 1 : 0; });
      var r = -1, last;
      for (i = 0; i < N; i++) { if (i === 0 || key[idx[i]] !== last) { r++; last = key[idx[i]]; } out[idx[i]] = r; }
    } else {
      for (i = 0; i < N; i++) { out[i] = D[col.key][i]; }
    }
    return (rankCache[col.key] = out);
  }
  function sortBy(index, dir) {
    var rank = ranks(cols[index]), top = 0, i;
    for (i = 0; i < N; i++) { if (rank[i] > top) { top = rank[i]; } }
    var keys = new Float64Array(N);
    for (i = 0; i < N; i++) { keys[i] = (dir === 1 ? rank[i] : top - rank[i]) * N + i; }
    keys.sort();
    for (i = 0; i < N; i++) { order[i] = keys[i] % N; }
    sortCol = index; sortDir = dir;
    for (var h = 0; h < heads.length; h++) { heads[h].removeAttribute("aria-sort"); }
    heads[index].setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
  }
  function cell(tr, value, title) {
    var td = document.createElement("td");
    td.textContent = value;
    if (title) { td.title = value; }
    tr.appendChild(td);
  }
  function spacer(height) {
    var tr = document.createElement("tr"), td = document.createElement("td");
    td.colSpan = cols.length; td.style.height = height + "px"; td.style.padding = "0"; td.style.border = "0";
    tr.appendChild(td); tr.className = "spacer";
    return tr;
  }
  function render() {
    box.style.height = Math.min(560, (Math.max(size, 3) + 1) * ROW + 24) + "px";
    var top = box.scrollTop, height = box.clientHeight || 560;
    var first = Math.max(0, Math.floor(top / ROW) - OVERSCAN), last = Math.min(size, Math.ceil((top + height) / ROW) + OVERSCAN);
    var frag = document.createDocumentFragment();
    frag.appendChild(spacer(first * ROW));
    for (var j = first; j < last; j++) {
      var i = view[j], tr = document.createElement("tr");
      tr.className = "row" + (D.status[i] ? " s" + D.status[i] : "") + (i === selected ? " hit" : "");
      tr.setAttribute("data-host", D.name[i]);
      tr.setAttribute("data-row", i);
      for (var c = 0; c < cols.length; c++) { cell(tr, text(cols[c], i), true); }
      frag.appendChild(tr);
    }
    frag.appendChild(spacer((size - last) * ROW));
    tbody.textContent = "";
    tbody.appendChild(frag);
  }
  function item(dl, label, value) {
    var dt = document.createElement("dt"), dd = document.createElement("dd");
    dt.textContent = label; dd.textContent = value; dl.appendChild(dt); dl.appendChild(dd);
    return dd;
  }
  function detail(i) {
    var out = document.getElementById("detail"), dl = document.createElement("dl");
    out.textContent = ""; out.className = ""; out.setAttribute("data-detail", D.name[i]);
    item(dl, "host", D.name[i]);
    for (var c = 1; c < cols.length; c++) { item(dl, table.tHead.rows[0].cells[c].textContent, text(cols[c], i)); }
    item(dl, "facts file", D.facts[i] + " (time from " + (S[D.src[i]] || "nowhere") + ")");
    var mig = S[D.migd[i]];
    if (mig) { item(dl, "MIG per GPU", "").style.whiteSpace = "pre-wrap"; dl.lastChild.textContent = mig; }
    out.appendChild(dl);
    var notes = D.notes[i];
    if (notes) {
      var ul = document.createElement("ul");
      ul.className = D.errors[i] ? "errors" : "notes";
      notes.forEach(function (n) { var li = document.createElement("li"); li.textContent = S[n]; ul.appendChild(li); });
      out.appendChild(ul);
    }
  }
  function select(i, scroll) {
    selected = i;
    var at = -1;
    for (var j = 0; j < size; j++) { if (view[j] === i) { at = j; break; } }
    if (at < 0) { input.value = ""; applyFilter(); for (j = 0; j < size; j++) { if (view[j] === i) { at = j; break; } } }
    if (scroll && at >= 0) {
      box.scrollTop = Math.max(0, at * ROW - 3 * ROW);
      document.getElementById("nodes").scrollIntoView();
    }
    render();
    detail(i);
  }
  function timed(what, fn) {
    var start = performance.now();
    fn(); render();
    var ms = performance.now() - start;
    perf.setAttribute("data-" + what + "-ms", ms.toFixed(2));
    return ms;
  }
  function fromHash() {
    var params = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var at = part.indexOf("=");
      if (at > 0) {
        try { params[part.slice(0, at)] = decodeURIComponent(part.slice(at + 1)); } catch (e) { /* not ours */ }
      }
    });
    if (params.sort !== undefined) {
      for (var c = 0; c < cols.length; c++) {
        if (cols[c].key === params.sort) { sortBy(c, params.dir === "desc" ? -1 : 1); }
      }
    }
    if (params.q !== undefined) {
      input.value = params.q;
      timed("filter", applyFilter);
      document.getElementById("nodes").scrollIntoView();
    } else {
      applyFilter(); render();
    }
    if (params.h !== undefined) {
      var i = D.name.indexOf(params.h);
      if (i >= 0) { select(i, true); }
    }
    return params;
  }
  function prepare() {
    var start = performance.now();
    if (hay === null) { haystacks(); }
    cols.forEach(ranks);
    perf.setAttribute("data-prepare-ms", (performance.now() - start).toFixed(1));
  }
  function bench() {
    // a fixed series of filters and sorts, timed; then the filter and sort the page had
    var keep = {q: input.value, col: sortCol, dir: sortDir};
    var filters = ["hgx", "status:critical", "pool:l40s driver:570", "wave:3", "zzz-no-such-host", ""], ms = {filter: [], sort: []};
    filters.forEach(function (q) { input.value = q; ms.filter.push(timed("filter", applyFilter)); });
    [0, 6, 12, 9].forEach(function (c) {
      [1, -1].forEach(function (dir) { ms.sort.push(timed("sort", function () { sortBy(c, dir); applyFilter(); })); });
    });
    ["filter", "sort"].forEach(function (k) {
      perf.setAttribute("data-bench-" + k + "-max-ms", Math.max.apply(null, ms[k]).toFixed(2));
      perf.setAttribute("data-bench-" + k + "-runs", ms[k].length);
      perf.setAttribute("data-bench-" + k + "-all-ms", ms[k].map(function (x) { return x.toFixed(1); }).join(" "));
    });
    if (keep.col === null) {
      for (var j = 0; j < N; j++) { order[j] = j; }
      for (var h = 0; h < heads.length; h++) { heads[h].removeAttribute("aria-sort"); }
      sortCol = null;
    } else { sortBy(keep.col, keep.dir); }
    input.value = keep.q; applyFilter(); render();
  }

  input.addEventListener("input", function () {
    timed("filter", applyFilter);
    box.scrollTop = 0;
    history.replaceState(null, "", "#q=" + encodeURIComponent(input.value));
  });
  table.tHead.addEventListener("click", function (ev) {
    var th = ev.target.closest("th");
    if (!th) { return; }
    var index = Array.prototype.indexOf.call(heads, th);
    timed("sort", function () { sortBy(index, sortCol === index ? -sortDir : 1); applyFilter(); });
  });
  tbody.addEventListener("click", function (ev) {
    var tr = ev.target.closest("tr.row");
    if (tr) { select(parseInt(tr.getAttribute("data-row"), 10), false); }
  });
  var pending = false;
  box.addEventListener("scroll", function () {
    if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; render(); }); }
  });
  window.addEventListener("hashchange", fromHash);
  var params = fromHash();
  perf.setAttribute("data-ready-ms", (performance.now()).toFixed(1));
  perf.setAttribute("data-script-ms", (performance.now() - t0).toFixed(1));
  perf.setAttribute("data-parsed-ms", t0.toFixed(1));      // the rollups above the script are parsed
  if (window.PerformanceObserver) {
    new PerformanceObserver(function (list) {
      list.getEntries().forEach(function (e) {
        if (e.name === "first-contentful-paint") { perf.setAttribute("data-fcp-ms", e.startTime.toFixed(1)); }
      });
    }).observe({type: "paint", buffered: true});
  }
  // the filter's text and the sort ranks are built once, right after the first paint, not on the first use
  if (params.bench !== undefined) { prepare(); bench(); } else { setTimeout(prepare, 0); }
  var root = document.documentElement;
  perf.setAttribute("data-page-width", root.scrollWidth);
  perf.setAttribute("data-view-width", root.clientWidth);
  perf.setAttribute("data-state", "ready");
})();
"""
