# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The fleet plan as one self-contained HTML page.

Everything is inline (CSS, a few lines of JS to sort tables, SVG plots) and a
Content-Security-Policy forbids any fetch, so the page opens from a file, a CI
artifact or a mail attachment without network. Every text that comes from the
plan (host names, GPU names, reasons) is HTML-escaped.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from html import escape

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
COLORS = ["#2f6fb0", "#76b900", "#d9822b", "#8e44ad", "#16a085", "#c0392b", "#7f8c8d", "#b7950b"]
HEALTH_COLORS = {"ok": "#3c9a3c", "warning": "#e0a100", "critical": "#c0392b", "invalid": "#555555"}

STYLE = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;background:#f4f6f9}
header{background:#1d2330;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c8d0dc}main{padding:16px 24px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin-bottom:16px}
.card{background:#fff;border-radius:6px;padding:10px 14px;min-width:130px;box-shadow:0 1px 2px rgba(0,0,0,.12)}
.card .n{font-size:26px;font-weight:600}.card .l{color:#5a6475;font-size:12px;text-transform:uppercase}
.card.bad .n{color:#c0392b}.card.warn .n{color:#b07a00}.card.good .n{color:#3c8a3c}
.plots{display:flex;flex-wrap:wrap;gap:12px;margin-bottom:16px}
.plot{background:#fff;border-radius:6px;padding:10px 14px;box-shadow:0 1px 2px rgba(0,0,0,.12)}
.plot h2,section h2{font-size:15px;margin:0 0 8px}
section{background:#fff;border-radius:6px;padding:10px 14px;margin-bottom:16px;box-shadow:0 1px 2px rgba(0,0,0,.12)}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e3e7ee;vertical-align:top}
th{background:#eef1f6;cursor:pointer;user-select:none;position:sticky;top:0}th:after{content:" \\2195";color:#9aa3b2}
tr.invalid td{background:#fdecea}tr.critical td{background:#fbe3e0}tr.warning td{background:#fff6dc}
.tag{display:inline-block;border-radius:3px;padding:0 6px;font-size:12px;color:#fff}
.ok{background:#3c9a3c}.warning{background:#e0a100}.critical{background:#c0392b}.invalid{background:#555}
ul.errors{margin:0;padding-left:18px;color:#a93226}ul.notes{margin:0;padding-left:18px;color:#6b5400}
details{margin:4px 0}summary{cursor:pointer}code{font-size:12px}.muted{color:#6b7485}
"""

# Sort a table by the clicked column: numbers as numbers, the rest as text.
SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, col) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var dir = th.getAttribute("data-dir") === "asc" ? -1 : 1;
      th.setAttribute("data-dir", dir === 1 ? "asc" : "desc");
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute("data-v") || a.cells[col].textContent;
        var y = b.cells[col].getAttribute("data-v") || b.cells[col].textContent;
        var nx = parseFloat(x), ny = parseFloat(y);
        if (!isNaN(nx) && !isNaN(ny)) { return (nx - ny) * dir; }
        return x.localeCompare(y) * dir;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def _e(value):
    return escape("" if value is None else str(value), quote=True)


def _bars(title, items, key, width=420):
    """A horizontal bar chart of (label, value) pairs as inline SVG."""
    items = [(label, value) for label, value in items if value]
    if not items:
        return '<div class="plot" data-plot="%s"><h2>%s</h2><p class="muted">nothing to show</p></div>' % (
            _e(key), _e(title))
    top = max(value for _label, value in items)
    row, label_w = 22, 190
    height = row * len(items) + 6
    parts = ['<svg role="img" aria-label="%s" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">'
             % (_e(title), width, height)]
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
    height = row * len(data) + 24
    parts = ['<svg role="img" aria-label="%s" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">'
             % (_e(title), width, height)]
    for i, (model, per) in enumerate(sorted(data.items())):
        y = i * row + 3
        parts.append('<text x="%d" y="%d" text-anchor="end" font-size="12">%s</text>'
                     % (label_w - 6, y + 14, _e(model if len(model) < 30 else model[:28] + "..")))
        x = label_w
        for version in versions:
            count = per.get(version, 0)
            if not count:
                continue
            w = max(2, int((width - label_w - 40) * count / float(top)))
            parts.append('<rect x="%d" y="%d" width="%d" height="16" fill="%s"><title>%s, driver %s: %d GPU(s)'
                         '</title></rect>' % (x, y + 2, w, color[version], _e(model), _e(version), count))
            x += w
        parts.append('<text x="%d" y="%d" font-size="12">%d</text>' % (x + 4, y + 14, sum(per.values())))
    x = 4
    for version in versions:
        y = row * len(data) + 8
        parts.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" font-size="11">'
                     'driver %s</text>' % (x, y, color[version], x + 14, y + 9, _e(version)))
        x += 24 + 7 * len("driver " + version)
    parts.append("</svg>")
    return '<div class="plot" data-plot="%s"><h2>%s</h2>%s</div>' % (_e(key), _e(title), "".join(parts))


def _health_grid(hosts, width=420):
    """One square per node, coloured by its health (grey: not planned)."""
    size, gap = 12, 2
    per_row = max(1, width // (size + gap))
    rows = (len(hosts) + per_row - 1) // per_row or 1
    parts = ['<svg role="img" aria-label="health by node" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">'
             % (width, rows * (size + gap) + 22)]
    for i, (name, host) in enumerate(hosts.items()):
        status = _status(host)
        x, y = (i % per_row) * (size + gap), (i // per_row) * (size + gap)
        parts.append('<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s: %s</title></rect>'
                     % (x, y, size, size, HEALTH_COLORS[status], _e(name), status))
    x, y = 0, rows * (size + gap) + 6
    for status in ("ok", "warning", "critical", "invalid"):
        parts.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" font-size="11">%s'
                     '</text>' % (x, y, HEALTH_COLORS[status], x + 14, y + 9, status))
        x += 80
    parts.append("</svg>")
    return '<div class="plot" data-plot="health"><h2>Health by node</h2>%s</div>' % "".join(parts)


def _status(host):
    if not host["valid"] and host["health"] is None:
        return "invalid"
    if host["health"] is not None and host["health"]["status"] != "ok":
        return host["health"]["status"]
    return "ok" if host["valid"] else "invalid"


def _card(label, value, key, tone=""):
    return ('<div class="card %s"><div class="n" data-summary="%s">%s</div><div class="l">%s</div></div>'
            % (tone, _e(key), _e(value), _e(label)))


def _resources(resources):
    return ", ".join("%s: %s" % (k, v) for k, v in sorted((resources or {}).items())) or "none"


def _host_row(name, host):
    driver = host["driver"] or {}
    mig = host["mig"] or {}
    fabric = host["fabric"] or {}
    cap = host["capacity"] or {}
    status = _status(host)
    action = driver.get("action") or "-"
    mig_text = "-" if not mig.get("config") else "%s (%s)" % (
        mig["config"], "invalid" if not mig["valid"] else ("change" if mig["changed"] else "no change"))
    cells = [
        '<td data-v="%s">%s</td>' % (_e(name), _e(name)),
        '<td data-v="%s"><span class="tag %s">%s</span></td>' % (status, status, status),
        "<td>%d</td>" % host["gpu_count"],
        "<td>%s</td>" % _e(", ".join(sorted(host["gpu_models"])) or "-"),
        "<td>%s</td>" % _e(driver.get("installed") or "-"),
        "<td>%s</td>" % _e(driver.get("loaded") or "-"),
        "<td>%s</td>" % _e(driver.get("wanted") or "-"),
        "<td>%s</td>" % _e(action),
        "<td>%s</td>" % ("yes" if driver.get("reboot_required") else "no"),
        "<td>%s</td>" % _e(mig_text),
        "<td>%s</td>" % _e(fabric.get("nvswitches") or 0),
        "<td>%s</td>" % ("yes" if fabric.get("fabric_manager") else "no"),
        "<td>%s</td>" % _e(_resources(cap.get("resources")) if cap else "-"),
    ]
    return '<tr class="%s" data-host="%s">%s</tr>' % (status if status != "ok" else "", _e(name), "".join(cells))


NODE_COLUMNS = ["host", "status", "GPUs", "model", "driver installed", "loaded", "wanted", "driver action",
                "reboot", "MIG config", "NVSwitches", "fabric manager", "Kubernetes resources"]


def _host_detail(name, host):
    parts = ['<details data-detail="%s"><summary><b>%s</b> <span class="tag %s">%s</span> %s</summary>'
             % (_e(name), _e(name), _status(host), _status(host), _e(host.get("facts_file") or ""))]
    if host["errors"]:
        parts.append('<ul class="errors">%s</ul>' % "".join("<li>%s</li>" % _e(e) for e in host["errors"]))
    notes = list(host["warnings"]) + list((host["driver"] or {}).get("reasons") or [])
    notes += (host["health"] or {}).get("reasons") or []
    if notes:
        parts.append('<ul class="notes">%s</ul>' % "".join("<li>%s</li>" % _e(n) for n in notes))
    mig = {}
    for gp in (host["mig"] or {}).get("gpus") or []:
        mig[gp["index"]] = gp
    health = dict((g["index"], g) for g in (host["health"] or {}).get("gpus") or [])
    if health:
        parts.append('<table class="sortable"><thead><tr><th>GPU</th><th>health</th><th>reasons</th>'
                     '<th>MIG now</th><th>MIG planned</th></tr></thead><tbody>')
        for index in sorted(health, key=lambda i: (i is None, i)):
            g, gp = health[index], mig.get(index) or {}
            parts.append('<tr><td>%s</td><td><span class="tag %s">%s</span></td><td>%s</td><td>%s</td><td>%s</td></tr>'
                         % (_e(index), g["status"], g["status"], _e("; ".join(g["reasons"]) or "-"),
                            _e(gp.get("before", "").split(": ", 1)[-1] or "-"),
                            _e(gp.get("after", "").split(": ", 1)[-1] or "-")))
        parts.append("</tbody></table>")
    parts.append("</details>")
    return "".join(parts)


def render(plan, title="GPU fleet plan"):
    """The page for a plan from fleet_plan.plan_fleet."""
    s = plan["summary"]
    hosts = plan["hosts"]
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
    ]
    lists = []
    for label, key in (("Invalid plans", "hosts_invalid"), ("Nodes to reboot", "reboot"),
                       ("Invalid MIG layouts", "invalid_mig"), ("Unhealthy nodes", "unhealthy_nodes"),
                       ("MIG asked of nodes where no GPU can do MIG", "mig_unsupported")):
        if s[key]:
            lists.append("<p><b>%s:</b> %s</p>" % (_e(label), _e(", ".join(s[key]))))
    capacity_rows = "".join('<tr><td>%s</td><td data-capacity="%s">%d</td></tr>' % (_e(k), _e(k), v)
                            for k, v in sorted(s["capacity"].items()))
    model_rows = "".join('<tr><td>%s</td><td data-model="%s">%d</td></tr>' % (_e(k), _e(k), v)
                         for k, v in sorted(s["gpus_by_model"].items()))
    driver_rows = "".join('<tr><td>%s</td><td data-driver="%s">%d</td></tr>' % (_e(k), _e(k), v)
                          for k, v in sorted(s["driver_versions"].items()))
    errors = ""
    if plan["errors"]:
        errors = ('<section id="errors"><h2>Hosts that cannot be planned as they are</h2><ul class="errors">%s</ul>'
                  "</section>" % "".join("<li>%s</li>" % _e(e) for e in plan["errors"]))
    plots = "".join([
        _stacked("GPUs by model and driver version", s["gpus_by_model_and_driver"], "models"),
        _health_grid(hosts),
        _bars("Kubernetes capacity by resource", sorted(s["capacity"].items()), "capacity"),
    ])
    node_table = ('<table class="sortable" id="nodes"><thead><tr>%s</tr></thead><tbody>%s</tbody></table>'
                  % ("".join("<th>%s</th>" % _e(c) for c in NODE_COLUMNS),
                     "".join(_host_row(n, h) for n, h in hosts.items())))
    verdict = "every host can be planned" if plan["valid"] else "%d host(s) cannot be planned" % len(
        s["hosts_invalid"])
    return "".join([
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" content="%s">' % CSP,
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>%s</title><style>%s</style></head><body>" % (_e(title), STYLE),
        "<header><h1>%s</h1><p>%d hosts, %d GPUs, MIG strategy %s: %s</p></header><main>"
        % (_e(title), s["hosts"], s["gpus"], _e(plan["mig_strategy"]), _e(verdict)),
        '<div class="cards" id="summary">%s</div>' % "".join(cards),
        "".join(lists), errors,
        '<div class="plots">%s</div>' % plots,
        '<div class="plots">',
        '<div class="plot"><h2>Capacity by resource</h2><table id="capacity"><tbody>%s</tbody></table></div>'
        % (capacity_rows or '<tr><td class="muted">none</td></tr>'),
        '<div class="plot"><h2>GPUs by model</h2><table id="models"><tbody>%s</tbody></table></div>' % model_rows,
        '<div class="plot"><h2>GPUs by driver version</h2><table id="drivers"><tbody>%s</tbody></table></div>'
        % driver_rows,
        "</div>",
        "<section><h2>Nodes (click a column to sort)</h2>%s</section>" % node_table,
        '<section id="details"><h2>Per node</h2>%s</section>' % "".join(_host_detail(n, h) for n, h in hosts.items()),
        "</main><script>%s</script></body></html>\n" % SCRIPT,
    ])
