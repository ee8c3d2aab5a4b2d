# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): parsing dcgmi diag output.
"""Parse ``dcgmi diag -r N -j`` output into results per test and GPU.

Shapes read (see tests/fixtures/dcgm/README.md for the recorded outputs):

* DCGM 2.x/3.x: ``{"DCGM GPU Diagnostic": {"test_categories": [{"category",
  "tests": [{"name", "results": [{"gpu_ids": "0,1" | 0, "status", "warnings",
  "info"}]}]}], "version"}}``; the test list may hold ``null`` entries.
* DCGM 4.x: the same tree under ``"DCGM Diagnostic"``, results per entity
  (``entity_group``, ``entity_id``) instead of ``gpu_ids``, a ``test_summary``
  per test, and ``metadata`` / ``entity_groups`` at the top.

Result values are normalised to pass, fail, warn, skip and not run. Anything
else is an error: a result this parser cannot read must never pass a node.
Pure Python, no Ansible import, so that it runs on Python 3.9 targets and in
unit tests alike.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.gpuops.platform.plugins.module_utils._common.input_guard import check_document, check_type

LEVELS = (1, 2, 3, 4)
ROOT_KEYS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")
STATUSES = ("pass", "fail", "warn", "skip", "not run")
# Where dcgmi names the driver it found (at the root of the report, or in its metadata).
DRIVER_KEY = "Driver Version Detected"
# DCGM spells the same result several ways across versions (PASS, Pass, ...).
_STATUS_ALIASES = {
    "pass": "pass", "passed": "pass",
    "fail": "fail", "failed": "fail",
    "warn": "warn", "warning": "warn",
    "skip": "skip", "skipped": "skip",
    "not run": "not run", "not_run": "not run", "notrun": "not run",
}
# Longest text kept per message, so that one chatty test cannot flood a report.
MAX_MESSAGE_CHARS = 500
# dcgmi's report for eight GPUs at level 4 is some hundred KiB; this is far above any real one.
MAX_OUTPUT_BYTES = 16 * 1024 * 1024
OUTPUT = "dcgmi diag -j output"
UNREADABLE = "The diagnostic result cannot be read, so it passes no node; check dcgmi and its version."


def _field(container, key, types, path):
    """``container[key]`` (None when absent or null) when it has one of ``types``, else DcgmDiagError naming its path."""
    value = container.get(key) if isinstance(container, dict) else None
    if value is None:
        return None
    return check_type(value, types, path + [key], OUTPUT, error=DcgmDiagError, advice=UNREADABLE)


_DIGITS = re.compile(r"[0-9]+")


class DcgmDiagError(ValueError):
    """The input or the output of a diagnostic cannot be used; the message says why."""


def validate_level(level):
    """The run level as an int in 1..4, or DcgmDiagError naming the bad value."""
    # ASCII digits, the whole value (blanks around it aside): int() would also take "\uff14".
    text = str(level).strip() if isinstance(level, (int, str)) and not isinstance(level, bool) else ""
    value = int(text) if _DIGITS.fullmatch(text) else None
    if value not in LEVELS:
        raise DcgmDiagError("the DCGM diagnostic level must be 1, 2, 3 or 4 (1 quick, 2 medium, 3 long, "
                            "4 extended), got %r" % (level,))
    return value


def validate_gpu_ids(gpu_ids):
    """GPU ids as a list of non-negative ints (empty: every GPU)."""
    out = []
    for item in gpu_ids or []:
        text = str(item)
        if isinstance(item, bool) or not _DIGITS.fullmatch(text):
            raise DcgmDiagError("GPU ids must be non-negative integers (DCGM GPU ids, as `dcgmi discovery -l` "
                                "lists them), got %r" % (item,))
        out.append(int(text))
    return sorted(set(out))


def command(level, dcgmi="dcgmi", gpu_ids=None, hostengine=None):
    """The argument list of the diagnostic (never a shell string)."""
    argv = [dcgmi, "diag", "-r", str(validate_level(level)), "-j"]
    ids = validate_gpu_ids(gpu_ids)
    if ids:
        argv.extend(["-i", ",".join(str(i) for i in ids)])
    if hostengine:
        argv.extend(["--host", hostengine])
    return argv


def load(text):
    """The JSON document in dcgmi's output.

    dcgmi may print a line before the document ("Successfully ran diagnostic
    for group.", or a warning), so decoding starts at the first ``{``.
    """
    if isinstance(text, dict):
        return text
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text or ""
    start = text.find("{")
    if start < 0:
        raise DcgmDiagError("dcgmi printed no JSON document (was -j honoured?); its output began with %r"
                            % (text.strip()[:200],))
    # json recurses once per level: the size and the depth are checked before it reads anything.
    check_document(text[start:], OUTPUT, "json", MAX_OUTPUT_BYTES, error=DcgmDiagError, what="The %s" % OUTPUT,
                   advice=UNREADABLE)
    try:
        doc, _end = json.JSONDecoder().raw_decode(text[start:])
    except RecursionError:
        raise DcgmDiagError("The %s nests too deep for the JSON parser (nesting limit)" % OUTPUT)
    except ValueError as exc:
        raise DcgmDiagError("dcgmi's JSON output could not be decoded: %s" % exc)
    if not isinstance(doc, dict):
        raise DcgmDiagError("dcgmi's JSON output is not an object")
    return doc


def _status(value, where):
    key = str(value if value is not None else "").strip().lower()
    if key not in _STATUS_ALIASES:
        raise DcgmDiagError("%s has the result %r, which is none of Pass, Fail, Warn, Skip or Not Run"
                            % (where, value))
    return _STATUS_ALIASES[key]


def _messages(entry, key):
    """Texts of ``warnings`` (objects with ``warning`` or plain strings) or ``info``."""
    out = []
    items = entry.get(key) if isinstance(entry, dict) else None
    if items is not None and not isinstance(items, list):
        items = [items]  # DCGM writes one warning as a plain string
    for item in items or []:
        if isinstance(item, dict):
            text = item.get("warning", item.get("message", item.get("info")))
            if text is None:
                continue
            out.append({"text": _clip(text), "error_id": item.get("error_id")})
        elif item is not None:
            out.append({"text": _clip(item), "error_id": None})
    return out


def _clip(text):
    text = str(text).strip()
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS - 3] + "..."


def _ids(value, field, where):
    """GPU or entity ids: an int, or DCGM's comma-separated text ("0,1,2,3"), as DCGM itself reads them."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return [value]
    parts = [p.strip() for p in value.split(",")] if isinstance(value, str) else []
    if not parts or not all(_DIGITS.fullmatch(p) for p in parts):
        raise DcgmDiagError("%s has unreadable %s %r: DCGM writes a GPU id or ids separated by commas, such as "
                            "\"0,1,2,3\"" % (where, field, value))
    return [int(p) for p in parts]


def _entities(result, where):
    """[(entity_group, entity_id)] of one result entry."""
    for field in ("gpu_ids", "gpu_id"):
        if field in result:
            return [("GPU", i) for i in _ids(result[field], field, where)]
    if "entity_id" in result:
        group = result.get("entity_group", "GPU")
        if not isinstance(group, str) or not group.strip():
            raise DcgmDiagError("%s has the entity_group %r, not an entity group name such as GPU" % (where, group))
        return [(group, i) for i in _ids(result["entity_id"], "entity_id", where)]
    raise DcgmDiagError("%s names no GPU (no gpu_ids, gpu_id or entity_id)" % where)


def _list(value, what):
    """``value`` when it is a list (None: empty), else DcgmDiagError naming ``what``."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise DcgmDiagError("%s must be a list, got %s %r" % (what, type(value).__name__, value))
    return value


def parse(text):
    """Structured results of one ``dcgmi diag -j`` run.

    Returns ``{version, driver_version, runtime_error, results, gpus, tests,
    status, counts}``: ``results`` one entry per test and entity (category,
    test, entity_group, entity_id, gpu (the id, or None for a non-GPU entity),
    status, messages, info); ``gpus`` per GPU id its tests and statuses;
    ``tests`` one entry per test with its worst status; ``status`` the worst of
    all (fail > warn > pass; skip and not run only when nothing ran).
    """
    doc = load(text)
    root = None
    for root_key in ROOT_KEYS:
        if isinstance(doc.get(root_key), dict):
            root = doc[root_key]
            break
    if root is None:
        raise DcgmDiagError("dcgmi's JSON document has neither %s at its top; keys found: %s"
                            % (" nor ".join(repr(k) for k in ROOT_KEYS), ", ".join(sorted(doc)) or "none"))
    metadata = _field(doc, "metadata", dict, []) or {}
    root_path = [root_key]
    out = {
        "version": _field(root, "version", str, root_path) or _field(metadata, "version", str, ["metadata"]) or None,
        "driver_version": _field(root, DRIVER_KEY, str, root_path) or _field(metadata, DRIVER_KEY, str, ["metadata"]),
        "runtime_error": _field(root, "runtime_error", str, root_path) or _field(doc, "runtime_error", str, []) or None,
        "results": [],
    }
    categories = root.get("test_categories")
    if categories is None and not out["runtime_error"]:
        raise DcgmDiagError("the diagnostic document has no test_categories and no runtime_error")
    for cat_index, category in enumerate(_list(categories, "the diagnostic document's test_categories")):
        if not isinstance(category, dict):
            continue
        cat_path = root_path + ["test_categories", cat_index]
        cat_name = _field(category, "category", str, cat_path) or ""
        for test_index, test in enumerate(_list(category.get("tests"), "the tests of category %r" % cat_name)):
            if not isinstance(test, dict):
                continue    # DCGM 3.1 lists null between tests
            test_path = cat_path + ["tests", test_index]
            name = _field(test, "name", str, test_path) or ""
            where = "test %r (%s)" % (name, cat_name)
            summary = _field(test, "test_summary", dict, test_path) or {}
            summary_messages = _messages(summary, "warnings")
            results = [r for r in _list(test.get("results"), "the results of %s" % where) if isinstance(r, dict)]
            if not results and summary.get("status") is not None:
                raise DcgmDiagError("%s has a summary but no per-GPU results" % where)
            for result in results:
                status = _status(result.get("status"), where)
                messages = _messages(result, "warnings")
                if not messages and status in ("fail", "warn"):
                    messages = summary_messages
                for group, entity_id in _entities(result, where):
                    out["results"].append({
                        "category": cat_name, "test": name, "entity_group": group, "entity_id": entity_id,
                        "gpu": entity_id if group.upper() == "GPU" else None, "status": status,
                        "messages": messages, "info": [m["text"] for m in _messages(result, "info")],
                    })
    _summarise(out)
    return out


def _worst(statuses):
    ran = [s for s in statuses if s in ("pass", "fail", "warn")]
    for status in ("fail", "warn", "pass"):
        if status in ran:
            return status
    if "not run" in statuses:
        return "not run"
    return "skip" if statuses else "not run"


def _summarise(out):
    gpus, tests = {}, {}
    for r in out["results"]:
        if r["gpu"] is not None:
            gpus.setdefault(r["gpu"], {})[r["test"]] = r["status"]
        key = (r["category"], r["test"])
        tests.setdefault(key, []).append(r["status"])
    out["gpus"] = dict((str(k), gpus[k]) for k in sorted(gpus))
    out["tests"] = [{"category": c, "test": t, "status": _worst(s)} for (c, t), s in tests.items()]
    out["counts"] = dict((s, sum(1 for r in out["results"] if r["status"] == s)) for s in STATUSES)
    out["status"] = "fail" if out["runtime_error"] else _worst([r["status"] for r in out["results"]])


def _entity(result):
    if result["gpu"] is not None:
        return "GPU %s" % result["gpu"]
    return "%s %s" % (result["entity_group"], result["entity_id"])


def failures(parsed, statuses=("fail",)):
    """One line per failed test and GPU: the test, the GPU and DCGM's message."""
    lines = []
    if parsed.get("runtime_error") and "fail" in statuses:
        lines.append("DCGM diagnostic could not run: %s" % parsed["runtime_error"])
    for r in parsed["results"]:
        if r["status"] not in statuses:
            continue
        text = "; ".join(m["text"] for m in r["messages"]) or "no message from DCGM"
        lines.append("%s: test %r (%s) %s: %s" % (_entity(r), r["test"], r["category"],
                                                  "failed" if r["status"] == "fail" else "warned", text))
    return lines


def health(parsed, level=None, skipped_is="ok"):
    """The ``{status, reasons, source}`` the gpu_health role reads as ``dcgm_diag_health``.

    A failed test is critical, a warning is a warning; skipped or not run
    tests count as ``skipped_is`` (ok by default: DCGM skips what a GPU does
    not support).
    """
    status = {"fail": "critical", "warn": "warning"}.get(parsed["status"], "ok")
    if parsed["status"] in ("skip", "not run") and skipped_is in ("ok", "warning", "critical"):
        status = skipped_is
    prefix = "DCGM diag level %s" % level if level else "DCGM diag"
    reasons = ["%s: %s" % (prefix, line) for line in failures(parsed, ("fail", "warn"))]
    if status != "ok" and not reasons:
        reasons = ["%s: no test ran (%s)" % (prefix, parsed["status"])]
    return {"status": status, "reasons": reasons, "source": "dcgm_diag"}
