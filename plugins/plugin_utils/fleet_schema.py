# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The JSON Schema of plan.json, versioned (docs/fleet_plan_schema.md documents it).

Version 1 is the planner's output (hosts and summary); version 2 adds the
views of ``fleet_views`` (order, pools, waves, tenants, diff, the facts' ages);
version 3 adds what each host was planned from (``inputs``, see
``fleet_approval``) and the waves' ``max_fail_percentage``.
The diff reads a previous plan of either version through ``check``; the page
reads the current one. The schema allows fields it does not name, so a newer
planner may add some without a new version; it changes version when a field
it names changes meaning or type.

``check`` uses the jsonschema library when the controller has it (the test
requirements pin it), and otherwise reads the same schema by the few rules it
uses: a damaged plan.json is refused naming the field's path either way.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.gpuops.platform.plugins.plugin_utils import documents

VERSION = 3
# plan.json's deepest field is about 10 levels down.
PLAN_DEPTH = documents.MAX_DEPTH
SUPPORTED = (1, 2, 3)
STATUS = {"enum": ["ok", "warning", "critical", "invalid"]}
COUNTS = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}
_NULLABLE_OBJECT = {"type": ["object", "null"]}
NAMES = {"type": "array", "items": {"type": "string"}}

HOST = {
    "type": "object",
    "required": ["host", "valid", "errors", "warnings", "gpu_count", "gpu_models", "driver", "mig", "health",
                 "fabric", "capacity"],
    "properties": {
        "host": {"type": "string"},
        "facts_file": {"type": "string"},
        "valid": {"type": "boolean"},
        "errors": NAMES,
        "warnings": NAMES,
        "gpu_count": {"type": "integer", "minimum": 0},
        "gpu_models": COUNTS,
        "driver": {"type": ["object", "null"], "properties": {
            "installed": {"type": ["string", "null"]}, "loaded": {"type": ["string", "null"]},
            "wanted": {"type": "string"}, "action": {"type": "string"}, "reboot_required": {"type": "boolean"},
            "reasons": NAMES}},
        "mig": {"type": ["object", "null"], "properties": {
            "config": {"type": ["string", "null"]}, "valid": {"type": "boolean"}, "changed": {"type": "boolean"},
            "gpus": {"type": "array", "items": {"type": "object", "properties": {
                "before": {"type": "string"}, "after": {"type": "string"}, "changed": {"type": "boolean"},
                "reset_required": {"type": "boolean"}}}}}},
        "health": {"type": ["object", "null"], "properties": {
            "status": {"enum": ["ok", "warning", "critical"]}, "reasons": NAMES,
            "unhealthy_gpus": {"type": "integer", "minimum": 0}}},
        "fabric": _NULLABLE_OBJECT,
        "capacity": {"type": ["object", "null"], "properties": {"resources": COUNTS}},
    },
}

HOST_V2 = {
    "required": ["pool", "disruption", "facts_recorded_at", "facts_time_source", "wave"],
    "properties": {
        "pool": {"type": "string"},
        "disruption": {"type": "object", "required": ["drain", "gpu_reset", "reboot", "summary"], "properties": {
            "drain": {"type": "boolean"}, "gpu_reset": {"type": "boolean"}, "reboot": {"type": "boolean"},
            "summary": {"type": "string"}}},
        "facts_recorded_at": {"type": ["number", "null"]},
        "facts_time_source": {"enum": ["recorded", "mtime", None]},
        "wave": {"type": "integer", "minimum": 1},
    },
}

DIGEST = {"type": "string", "pattern": "^[0-9a-f]{16,64}$"}
HOST_V3 = {
    "properties": {
        "inputs": {"type": "object", "required": ["facts", "settings"], "properties": {
            "facts": {"anyOf": [DIGEST, {"type": "null"}]}, "settings": DIGEST}},
    },
}
INPUTS = {
    "type": "object", "required": ["settings"],
    "properties": {"settings": {"type": "object", "additionalProperties": {
        "type": "object", "additionalProperties": DIGEST}}},
}

SUMMARY = {
    "type": "object",
    "required": ["hosts", "hosts_invalid", "gpus", "gpus_by_model", "driver_versions", "driver_changes", "reboot",
                 "invalid_mig", "mig_changes", "unhealthy_gpus", "unhealthy_nodes", "capacity"],
    "properties": {
        "hosts": {"type": "integer", "minimum": 0}, "gpus": {"type": "integer", "minimum": 0},
        "hosts_invalid": NAMES, "driver_changes": NAMES, "reboot": NAMES, "invalid_mig": NAMES,
        "mig_changes": NAMES, "unhealthy_nodes": NAMES, "unhealthy_gpus": {"type": "integer", "minimum": 0},
        "gpus_by_model": COUNTS, "driver_versions": COUNTS, "capacity": COUNTS,
        "capacity_by_model": {"type": "object", "additionalProperties": COUNTS},
    },
}

WAVES = {
    "type": "object", "required": ["serial", "canary", "batches"],
    "properties": {
        "serial": NAMES, "canary": {"type": "boolean"},
        "batches": {"type": "array", "items": {
            "type": "object", "required": ["wave", "first", "size", "drained", "reboots", "capacity_removed"],
            "properties": {"wave": {"type": "integer", "minimum": 1}, "first": {"type": "integer", "minimum": 0},
                           "size": {"type": "integer", "minimum": 1}, "drained": {"type": "integer", "minimum": 0},
                           "reboots": {"type": "integer", "minimum": 0}, "capacity_removed": COUNTS}}},
    },
}

TENANTS = {
    "type": "object", "required": ["tenants", "cluster_queues", "resources", "flavors", "overcommitted"],
    "properties": {
        "tenants": {"type": "array", "items": {"type": "object", "required": ["name", "quota"],
                                               "properties": {"name": {"type": "string"}, "quota": COUNTS}}},
        "cluster_queues": {"type": "array", "items": {"type": "object", "required": ["name", "nominal"]}},
        "resources": {"type": "array", "items": {"type": "object", "required": [
            "resource", "capacity", "tenants", "overcommitted"]}},
        "flavors": {"type": "array", "items": {"type": "object", "required": [
            "flavor", "resource", "capacity", "nominal", "overcommitted"]}},
        "overcommitted": {"type": "boolean"},
    },
}

PAIR = {"type": "array", "minItems": 2, "maxItems": 2}
DIFF = {
    "type": "object", "required": ["previous"],
    "properties": {
        "previous": {"type": ["string", "null"]},
        "added": NAMES, "removed": NAMES,
        "changed": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": PAIR}},
        "counts": COUNTS,
        "totals": {"type": "object"},
    },
}


def schema(version=VERSION):
    """The JSON Schema (draft 2020-12) of plan.json of ``version``."""
    if version not in SUPPORTED:
        raise ValueError("plan.json version %r is not one of %s" % (version, SUPPORTED))
    host = json.loads(json.dumps(HOST))
    top = {
        "version": {"const": version}, "mig_strategy": {"type": "string"}, "valid": {"type": "boolean"},
        "errors": NAMES, "summary": SUMMARY,
        "hosts": {"type": "object", "additionalProperties": host},
    }
    required = ["version", "mig_strategy", "valid", "errors", "summary", "hosts"]
    if version >= 2:
        host["required"] += HOST_V2["required"]
        host["properties"].update(HOST_V2["properties"])
        top.update({"order": NAMES, "facts_root": {"type": "string"}, "stale_after_hours": {"type": "number", "minimum": 0},
                    "pools": {"type": "object", "additionalProperties": {
                        "type": "object", "required": ["hosts", "gpus", "models", "drivers", "mig_layouts", "capacity",
                                                       "health"]}},
                    "waves": WAVES, "tenants": TENANTS, "diff": DIFF})
        required += ["order", "facts_root", "stale_after_hours", "pools", "waves", "tenants", "diff"]
    if version >= 3:
        # Optional: views made without the planner (a plan.json edited or built by hand) have none, and such
        # a plan cannot be approved (fleet_approval.load refuses it).
        host["properties"].update(HOST_V3["properties"])
        waves = json.loads(json.dumps(WAVES))
        waves["properties"]["max_fail_percentage"] = {"type": "number", "minimum": 0, "maximum": 100}
        top.update({"waves": waves, "inputs": INPUTS, "unplanned": NAMES})
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://gpuops.platform/schemas/fleet-plan/v%d.json" % version,
            "title": "gpuops.platform fleet plan (plan.json), version %d" % version,
            "type": "object", "required": required, "properties": top}


class FleetPlanDataError(ValueError):
    """A plan (or a setting of its views) that does not follow the schema."""


# Fields that tell hosts apart and are checked by their JSON type (and the wave by its sign) alone.
_OWN = {"host": "", "node": "", "facts_file": "", "facts_recorded_at": 0.0, "wave": 1}


_HEX = re.compile(r"^[0-9a-f]{64}\Z")


def _canonical(host):
    if not isinstance(host, dict):
        return host
    out = dict(host)
    for key, value in _OWN.items():
        if key in out and type(out[key]) is type(value) and (key != "wave" or out[key] >= 1):
            out[key] = value
    inputs = out.get("inputs")
    if isinstance(inputs, dict) and isinstance(inputs.get("facts"), str) and _HEX.match(inputs["facts"]):
        out["inputs"] = dict(inputs, facts="0" * 64)
    capacity = out.get("capacity")
    if isinstance(capacity, dict) and isinstance(capacity.get("host"), str):
        out["capacity"] = dict(capacity, host="")
    return out


def _distinct_hosts(plan):
    """The plan with one host per distinct content: a fleet is made of a few node types, and a
    host's validity does not depend on its name, facts path, facts time, facts digest or wave number (past
    their types)."""
    hosts = plan.get("hosts")
    if not isinstance(hosts, dict):
        return plan
    seen = {}
    for name, host in hosts.items():
        same = _canonical(host)
        seen.setdefault(json.dumps(same, sort_keys=True, default=str), (name, host))
    return dict(plan, hosts=dict(seen.values()))


def check(plan, what="plan.json"):
    """Raise FleetPlanDataError naming the first problems when ``plan`` does not follow its version's schema."""
    if not isinstance(plan, dict):
        raise FleetPlanDataError("%s is not a JSON object" % what)
    try:  # before the schema's checks, which recurse as deep as the plan goes
        documents.check_depth(plan, what, PLAN_DEPTH)
    except documents.DocumentError as exc:
        raise FleetPlanDataError(str(exc))
    version = plan.get("version")
    if version not in SUPPORTED:
        raise FleetPlanDataError("%s has version %r; this release reads plan.json versions %s"
                                 % (what, version, ", ".join(str(v) for v in SUPPORTED)))
    try:
        import jsonschema
    except ImportError:  # the collection does not require it: the same schema, read by the few rules it uses
        problems = []
        _problems(_distinct_hosts(plan), schema(version), (), problems)
    else:
        validator = jsonschema.Draft202012Validator(schema(version))
        problems = [(tuple(e.absolute_path), e.message) for e in validator.iter_errors(_distinct_hosts(plan))]
    if problems:
        problems.sort(key=lambda p: [str(k) for k in p[0]])
        raise FleetPlanDataError("%s does not follow the plan.json schema version %d: %s" % (
            what, version, "; ".join("%s: %s" % ("/".join(str(k) for k in path) or "(top)", message[:200])
                                     for path, message in problems[:5])))
    return plan


_TYPES = {
    "object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list), "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool), "null": lambda v: v is None,
    "integer": lambda v: not isinstance(v, bool) and (isinstance(v, int) or isinstance(v, float) and v.is_integer()),
    "number": lambda v: not isinstance(v, bool) and isinstance(v, (int, float)),
}


def _problems(value, rules, path, out):
    """``(path, message)`` into ``out`` for each way ``value`` breaks ``rules``: the JSON Schema keywords the
    plan.json schema uses (type, enum, const, minimum, required, properties, additionalProperties, items,
    minItems, maxItems), as jsonschema reads them."""
    types = rules.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_TYPES[t](value) for t in types):
            out.append((path, "%r is not of type %s" % (value, ", ".join("'%s'" % t for t in types))))
            return
    if "enum" in rules and value not in rules["enum"]:
        out.append((path, "%r is not one of %r" % (value, rules["enum"])))
    if "const" in rules and value != rules["const"]:
        out.append((path, "%r was expected" % (rules["const"],)))
    if "minimum" in rules and _TYPES["number"](value) and value < rules["minimum"]:
        out.append((path, "%r is less than the minimum of %r" % (value, rules["minimum"])))
    if isinstance(value, dict):
        for key in rules.get("required", []):
            if key not in value:
                out.append((path, "%r is a required property" % key))
        properties = rules.get("properties", {})
        for key, item in value.items():
            if key in properties:
                _problems(item, properties[key], path + (key,), out)
            elif "additionalProperties" in rules:
                _problems(item, rules["additionalProperties"], path + (key,), out)
    if isinstance(value, list):
        if len(value) < rules.get("minItems", 0):
            out.append((path, "%r is too short" % (value,)))
        if "maxItems" in rules and len(value) > rules["maxItems"]:
            out.append((path, "%r is too long" % (value,)))
        if "items" in rules:
            for index, item in enumerate(value):
                _problems(item, rules["items"], path + (index,), out)


def loads(text, what):
    """A plan.json document from its text: depth checked before it is parsed, then against its schema."""
    try:
        plan = documents.loads_json(text, what, PLAN_DEPTH)
    except documents.DocumentError as exc:
        raise FleetPlanDataError(str(exc))
    return check(plan, what)


def load(path, what=None):
    """A plan.json file, checked against its schema (its size and depth before it is parsed)."""
    what = what or path
    try:
        text = documents.read_text(path, "plan.json", documents.MAX_PLAN_BYTES)
    except documents.DocumentError as exc:
        raise FleetPlanDataError("cannot read %s: %s" % (what, exc))
    return loads(text, what)
