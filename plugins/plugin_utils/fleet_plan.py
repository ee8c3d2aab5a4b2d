# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Plan a whole fleet from recorded ``nvml_facts`` on the controller, in one pass.

Each host is planned from its own recorded facts and its own inventory
variables: the driver (wanted against installed and loaded), the MIG layout
(through the same validation and planning code as the ``nvidia_mig`` module),
health, NVSwitches and fabric manager, and what the node advertises to
Kubernetes (through plugin_utils/gpu_capacity.py, the model the filters wrap). One bad host never
stops the others: its problems are recorded on it and the fleet is marked
invalid.

Hosts with the same GPUs, MIG state and MIG config get the same MIG plan, so
the plan is computed once per distinct combination (a fleet is made of a few
node types).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.plugin_utils import gpu_capacity as capacity
from ansible_collections.gpuops.platform.plugins.module_utils._common.shown import shown, type_words
from ansible_collections.gpuops.platform.plugins.module_utils._mig import config as mig_config
from ansible_collections.gpuops.platform.plugins.module_utils._mig import plan as mig_plan
from ansible_collections.gpuops.platform.plugins.plugin_utils import documents, fleet_approval, recorded_facts
from ansible_collections.gpuops.platform.plugins.plugin_utils.driver_action import driver_action, driver_setting_errors
from ansible_collections.gpuops.platform.plugins.plugin_utils.health_verdict import HealthVerdictError, health_verdict
from ansible_collections.gpuops.platform.plugins.plugin_utils.variable_types import node_name_problem

PLAN_VERSION = 1
NVIDIA_DEVICE_ID = re.compile(r"^0x[0-9A-Fa-f]{4}10DE\Z")
FABRICMANAGER_CHOICES = ("auto", "true", "false")

# The roles' own defaults for the variables the plan reads (the unit tests
# compare these with roles/*/defaults/main.yml, so they cannot drift).
DEFAULTS = {
    "nvidia_driver_state": "present",
    "nvidia_driver_branch": "580",
    "nvidia_driver_version": "",
    "nvidia_driver_fabricmanager": "auto",
    "nvidia_driver_allow_downgrade": False,
    "mig_config_name": "",
    "mig_config": {},
    "mig_config_file": "",
}


# What an unexpected shape in one host's facts can raise in the planners below.
HOST_FAILURES = (AttributeError, IndexError, KeyError, TypeError, ValueError, ArithmeticError, RecursionError)


class FleetPlanError(Exception):
    """A problem with the fleet's shared settings (not one host's)."""


def host_settings(hostvars, name):
    """The variables of one host the plan reads, with the roles' defaults."""
    out = dict((key, hostvars.get(key, default)) for key, default in DEFAULTS.items())
    out["replay_file"] = hostvars.get("gpuops_nvml_replay_file") or ""
    out["node_name"] = hostvars.get("gpu_nodes_node_name") or hostvars.get("mig_k8s_node_name") or name
    out["device_plugin_config"] = hostvars.get("gpu_nodes_device_plugin_config") or ""
    out["labels"] = hostvars.get("gpu_nodes_host_labels") or {}
    out["dra"] = bool(hostvars.get("gpu_nodes_dra", False))
    return out


# What each setting may be (None: the role's default), and the inventory variable it comes from.
SETTING_KINDS = {
    "nvidia_driver_state": (str,), "nvidia_driver_branch": (str, int), "nvidia_driver_version": (str, int, float),
    "nvidia_driver_fabricmanager": (str, bool), "nvidia_driver_allow_downgrade": (bool, str), "mig_config_name": (str,), "mig_config": (dict,),
    "mig_config_file": (str,), "replay_file": (str,), "node_name": (str,), "device_plugin_config": (str,),
    "labels": (dict,),
}
SETTING_VARIABLES = {"replay_file": "gpuops_nvml_replay_file", "node_name": "gpu_nodes_node_name",
                     "device_plugin_config": "gpu_nodes_device_plugin_config", "labels": "gpu_nodes_host_labels"}


def setting_type_errors(settings):
    """Problems with the types of one host's variables, each naming the variable and the value."""
    errors = []
    for key, kinds in sorted(SETTING_KINDS.items()):
        value = settings.get(key)
        if isinstance(value, (dict, list)):
            try:  # each shared part (a YAML alias) counted once: a billion laughs is refused, not written out
                documents.check_depth(value, SETTING_VARIABLES.get(key, key))
            except documents.DocumentError as exc:
                errors.append(str(exc))
                continue
        if value is None or isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool)):
            continue
        errors.append("%s must be %s, got %s %s" % (SETTING_VARIABLES.get(key, key), " or ".join(
            {str: "a string", int: "a number", float: "a number", bool: "true or false", dict: "a mapping"}[k]
            for k in kinds if k is not float), type_words(value), shown(value)))
    labels = settings.get("labels")
    if isinstance(labels, dict) and not all(isinstance(k, str) for k in labels):
        errors.append("gpu_nodes_host_labels must map label names (strings) to values, got %s" % (shown(labels),))
    return errors


# ---------------------------------------------------------------------------
# Facts
# ---------------------------------------------------------------------------

def load_facts(path):
    """(facts, error) of one host's recorded facts file."""
    if not os.path.exists(path):
        return None, ("no facts file for this host (%s): record its nvml_facts output there, or set "
                      "gpuops_nvml_replay_file for it" % path)
    try:  # the one reader of records and replay files: size and depth checked before parsing
        return recorded_facts.read_file(path)["nvidia"], None
    except recorded_facts.RecordedFactsError as exc:
        return None, str(exc)


def check_gpus(facts):
    """Problems that make a host's facts unusable: GPUs that are not known NVIDIA GPUs."""
    problems = []
    for position, gpu in enumerate(facts.get("gpus") or []):
        if not isinstance(gpu, dict):
            problems.append("GPU #%d of the facts is not a mapping" % position)
            continue
        device_id = (gpu.get("pci") or {}).get("device_id")
        if not isinstance(device_id, str) or not NVIDIA_DEVICE_ID.fullmatch(device_id):
            problems.append("GPU %s (%s): unknown GPU, PCI device id %r is not an NVIDIA device (0xDDDD10DE)"
                            % (gpu.get("index", position), gpu.get("name") or "no name", device_id))
        elif not gpu.get("name"):
            problems.append("GPU %s (%s): unknown GPU, the facts give no product name"
                            % (gpu.get("index", position), device_id))
    return problems


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def setting_errors(settings):
    """``[(variable, message)]`` for the driver settings of one host that no plan can use.

    The driver's version, branch and state by plugin_utils/driver_action.py (the
    rules of every playbook that acts on the driver), and the fabric manager.
    """
    wanted = str(settings["nvidia_driver_fabricmanager"]).lower()
    errors = driver_setting_errors(settings)
    if wanted not in FABRICMANAGER_CHOICES:
        errors.append(("nvidia_driver_fabricmanager", "nvidia_driver_fabricmanager %r is not one of %s"
                       % (wanted, ", ".join(FABRICMANAGER_CHOICES))))
    return errors


def check_settings(hosts):
    """The settings problems of every host, before anything is planned or written.

    ``hosts``: ``[(name, hostvars mapping)]``. Returns ``[(variable, message, [host, ...])]``, one entry per
    distinct problem with its hosts in inventory order.
    """
    grouped = {}
    for name, hostvars in hosts:
        for variable, message in setting_errors(host_settings(hostvars, name)):
            grouped.setdefault((variable, message), []).append(name)
        found = node_name_problem(name, hostvars)
        if found:
            grouped.setdefault(found, []).append(name)
    return [(variable, message, names) for (variable, message), names in grouped.items()]


def plan_driver(settings, facts):
    """Wanted against installed and loaded: the action, and whether the node reboots (driver_action)."""
    return driver_action(settings, facts)


# ---------------------------------------------------------------------------
# Health and fabric
# ---------------------------------------------------------------------------

def plan_health(facts):
    """Per-GPU health and the node's verdict: plugin_utils/health_verdict.py, as health.yml judges it."""
    verdict = health_verdict(facts)
    return dict((key, verdict[key]) for key in ("status", "reasons", "gpus", "unhealthy_gpus"))


def plan_fabric(settings, facts):
    switches = facts.get("nvswitch_count") or 0
    wanted = str(settings["nvidia_driver_fabricmanager"]).lower()
    # nvml_facts records a state NVML did not report as null: "unknown" in the plan
    states = sorted(set((g.get("fabric") or {}).get("state") or "unknown" for g in facts.get("gpus") or []
                        if g.get("fabric")))
    warnings = []
    if wanted not in FABRICMANAGER_CHOICES:
        return ({"nvswitches": switches, "fabric_manager": None, "fabric_states": states},
                [message for variable, message in setting_errors(settings) if variable == "nvidia_driver_fabricmanager"],
                [])
    needed = bool(switches) if wanted == "auto" else wanted == "true"
    if switches and wanted == "false":
        warnings.append("%d NVSwitch(es) but nvidia_driver_fabricmanager is false: the NVLink fabric will not "
                        "come up without nvidia-fabricmanager" % switches)
    return {"nvswitches": switches, "fabric_manager": needed, "fabric_states": states}, [], warnings


# ---------------------------------------------------------------------------
# MIG
# ---------------------------------------------------------------------------

class _MigPlanner(object):
    """MIG plans through mig_config and mig_plan, once per distinct (config, GPUs)."""

    def __init__(self, read_document):
        self._read_document = read_document
        self._parsed = {}
        self._plans = {}

    def _entries(self, settings):
        document = settings["mig_config"]
        if settings["mig_config_file"]:
            if document:
                raise mig_config.MigConfigError(["set exactly one of mig_config and mig_config_file"])
            key = ("file", settings["mig_config_file"])
        else:
            key = ("inline", json.dumps(document, sort_keys=True, default=str))
        if key not in self._parsed:
            try:
                doc = self._read_document(settings["mig_config_file"]) if key[0] == "file" else document
                self._parsed[key] = (mig_config.parse(doc), None)
            except mig_config.MigConfigError as exc:
                self._parsed[key] = (None, exc)
        parsed, error = self._parsed[key]
        if error is not None:
            raise error
        return key, mig_config.select(parsed, settings["mig_config_name"])

    def plan(self, settings, facts):
        name = settings["mig_config_name"]
        if not name:
            return {"config": None, "valid": True, "errors": [], "changed": False, "gpus": [],
                    "k8s_resources": None}
        try:
            key, entries = self._entries(settings)
        except mig_config.MigConfigError as exc:
            # Name the variable to change: the config's name, or the document.
            document = "mig_config_file %s" % settings["mig_config_file"] if settings["mig_config_file"] else "mig_config"
            return {"config": name, "valid": False, "changed": False, "gpus": [], "k8s_resources": None,
                    "errors": ["invalid MIG config (%s): %s" % ("mig_config_name %r" % name if "is not in mig-configs" in p
                                                                else document, p) for p in exc.problems]}
        gpus = [{"index": g.get("index"), "pci": g.get("pci"), "name": g.get("name"), "mig": g.get("mig")}
                for g in facts.get("gpus") or []]
        memo = json.dumps([key, name, facts.get("present"), facts.get("reason"), gpus], sort_keys=True, default=str)
        if memo not in self._plans:
            result = mig_plan.plan_node(facts, entries, name, offline=True)
            self._plans[memo] = {
                "config": name, "valid": result.valid, "errors": result.errors,
                "warnings": result.warnings, "mig_unsupported": result.mig_unsupported, "changed": result.changed,
                "gpus": [{"index": gp.index, "name": gp.name, "changed": gp.changed, "reset_required": gp.reset_required,
                          "before": gp.describe("before"), "after": gp.describe("after")}
                         for gp in result.gpus],
                "k8s_resources": result.k8s_resources}
        return self._plans[memo]


# ---------------------------------------------------------------------------
# The fleet
# ---------------------------------------------------------------------------

def _gpu_models(facts):
    models = {}
    for gpu in facts.get("gpus") or []:
        model = gpu.get("name") or "unknown"
        models[model] = models.get(model, 0) + 1
    return models


def _add(total, counts):
    for key, value in counts.items():
        total[key] = total.get(key, 0) + value


def blank_host(name, facts_path, node):
    """A host's plan before anything is known of it: valid, no GPU, no error yet."""
    return {"host": name, "facts_file": facts_path, "valid": True, "errors": [], "warnings": [],
            "present": False, "gpu_count": 0, "gpu_models": {}, "driver": None, "mig": None, "health": None,
            "fabric": None, "capacity": None, "node": node}


def plan_host(name, settings, facts_path, mig, sharing, strategy, default_config, common_labels, keep=None,
              loaded=None):
    """The plan of one host; never raises for the host's own problems.

    With ``keep`` (a dict), a planned host's MIG resources go there, for the
    Kubernetes layer of the same run. ``loaded``: ``(facts, error)`` already
    read (recorded_facts.load), else the facts are read from ``facts_path``.
    """
    host = blank_host(name, facts_path, settings["node_name"])
    errors = setting_type_errors(settings)
    if errors:
        host.update(errors=errors, valid=False, node=settings["node_name"] if isinstance(settings["node_name"], str) else name)
        return host
    facts, error = loaded if loaded is not None else load_facts(facts_path)
    if error:
        host["errors"].append(error)
        host["valid"] = False
        return host
    problems = check_gpus(facts)
    try:
        health = None if problems else plan_health(facts)
    except HealthVerdictError as exc:
        # A damaged record (health of the wrong type or an unknown status) is this host's error, not the run's.
        problems.append(str(exc))
    if problems:
        host["errors"].extend(problems)
        host["valid"] = False
        return host
    host["present"] = bool(facts.get("present"))
    host["gpu_count"] = len(facts.get("gpus") or [])
    host["gpu_models"] = _gpu_models(facts)
    if not host["present"]:
        if facts.get("pci_gpu_count"):
            # GPUs on the PCI bus that NVML cannot read: the reason names them and why.
            host["warnings"].append(facts.get("reason") or "NVML cannot read the NVIDIA GPUs on the PCI bus")
        else:
            host["warnings"].append("no NVIDIA GPU: %s" % (facts.get("reason") or "NVML reports none"))

    host["driver"], errors = plan_driver(settings, facts)
    host["errors"].extend(errors)
    host["health"] = health
    host["fabric"], errors, warnings = plan_fabric(settings, facts)
    host["errors"].extend(errors)
    host["warnings"].extend(warnings)
    host["mig"] = mig.plan(settings, facts)
    host["errors"].extend(host["mig"]["errors"])
    host["warnings"].extend(host["mig"].get("warnings") or [])

    node = {"name": settings["node_name"], "host": name, "nvidia": facts,
            "mig_k8s_resources": host["mig"]["k8s_resources"] if host["mig"]["valid"] else None,
            "config": settings["device_plugin_config"], "labels": dict(common_labels, **settings["labels"]),
            "dra": settings["dra"]}
    if host["mig"]["valid"]:
        try:
            result = capacity.gpu_capacity([node], strategy, sharing, default_config)
            host["capacity"] = result["nodes"][settings["node_name"]]
            if keep is not None:
                # The facts stay in their store (read again through recorded_facts): only the planned MIG resources.
                keep[name] = {"mig_k8s_resources": node["mig_k8s_resources"]}
        except AnsibleFilterError as exc:
            host["errors"].append("Kubernetes capacity: %s" % exc)
    host["valid"] = not host["errors"]
    return host


def _read_yaml(path):
    try:
        return documents.read_yaml(path, "mig_config_file")
    except documents.DocumentError as exc:
        raise mig_config.MigConfigError([str(exc)])


def _recorded(hostvars, name, facts_dir):
    """``(where, (facts, error), record)`` of a host, through the one facts source of every playbook."""
    try:
        where, record = recorded_facts.load(hostvars, name, facts_dir or "")
    except recorded_facts.RecordedFactsError as exc:
        try:
            where = recorded_facts.source(hostvars, name, facts_dir or "")[1]
        except recorded_facts.RecordedFactsError:  # a path that is refused is no file to name
            where = ""
        return where, (None, str(exc)), None
    if record is None:
        return "", (None, "no recorded facts for this host: set gpuops_fleet_facts_dir (record them with "
                          "playbooks/record_facts.yml), gpuops_nvml_replay_file or gpuops_fleet_facts_cache"), None
    return where, (with_provenance(record["nvidia"], record.get("node")), None), record


def with_provenance(facts, node):
    """The facts the driver is planned from: nvml_facts' and, where preflight recorded it, the node's
    ``driver_provenance`` (driver_action keeps or refuses a driver from outside the packages by it)."""
    found = (node or {}).get("driver_provenance")
    return dict(facts, driver_provenance=found) if isinstance(found, dict) and isinstance(facts, dict) else facts


def plan_fleet(hosts, facts_dir, mig_strategy="single", sharing_configs=None, default_config="", labels=None,
               keep=None, inputs=None):
    """Plan every host. ``hosts``: ``[(name, hostvars mapping)]`` in inventory order.

    Returns ``{version, valid, errors, summary, hosts}``; ``errors`` names each
    invalid host and its reasons; ``keep`` as in plan_host. With ``inputs`` (a dict), what each host was
    planned from goes there: ``{host: (facts digest, settings digests)}`` (fleet_approval). A bad shared
    setting (MIG strategy, sharing configs) raises FleetPlanError: no host could be planned against it.
    """
    try:
        sharing = capacity.gpu_sharing_configs(sharing_configs or [], mig_strategy)
    except AnsibleFilterError as exc:
        raise FleetPlanError("gpu_sharing_configs (of the first k8s_control host) cannot be used: %s" % exc)
    if default_config and default_config not in sharing:
        raise FleetPlanError("the default device-plugin config %r (gpu_sharing_default_config of the first k8s_control "
                             "host) is not one of gpu_sharing_configs (%s)"
                             % (default_config, ", ".join(sorted(sharing)) or "none"))
    mig = _MigPlanner(_read_yaml)
    planned = {}
    seen_nodes = {}
    for name, hostvars in hosts:
        settings = host_settings(hostvars, name)
        path, record = "", None
        try:
            path, loaded, record = _recorded(hostvars, name, facts_dir)
            recorded_at = record.get("recorded_at") if isinstance(record, dict) else None
            # Normalised: inventories/demo/../../tests/x.json reads as tests/x.json in every message.
            path = os.path.normpath(path) if path else path
            host = plan_host(name, settings, path, mig, sharing, mig_strategy, default_config, labels or {},
                             keep, loaded)
            if loaded[0] is not None:
                # The record's own time, wherever it was kept (the fact cache has no file to date it by);
                # None: a facts file of unknown time, dated later by its mtime.
                host["facts_recorded_at"] = recorded_facts.epoch(recorded_at)
        except HOST_FAILURES as exc:
            # One host's facts never stop the fleet: what its facts broke is that host's error.
            node = settings["node_name"] if isinstance(settings["node_name"], str) else name
            host = dict(blank_host(name, path, node), valid=False, errors=[
                "this host cannot be planned from its facts (%s) and variables (%s: %s): check the file "
                "against nvml_facts' output, record it again, and report this with the file"
                % (path, type(exc).__name__, exc)])
        other = seen_nodes.setdefault(host["node"], name)
        if other != name:
            host["errors"].append("Kubernetes node name %s is also used by host %s" % (host["node"], other))
            host["valid"] = False
        planned[name] = host
        if inputs is not None:
            inputs[name] = (fleet_approval.facts_digest(record), fleet_approval.settings_digests(hostvars))
    return {"version": PLAN_VERSION, "mig_strategy": mig_strategy, "hosts": planned,
            "summary": summarize(planned, mig_strategy),
            "errors": ["%s: %s" % (n, "; ".join(h["errors"])) for n, h in planned.items() if not h["valid"]],
            "valid": all(h["valid"] for h in planned.values())}


def _strategy_refuses(mig, strategy):
    """True when a valid MIG layout cannot be advertised under the fleet's MIG strategy."""
    entry = ((mig or {}).get("k8s_resources") or {}).get(strategy) if strategy else None
    return isinstance(entry, dict) and entry.get("valid") is False


def summarize(hosts, mig_strategy=None):
    """Fleet totals of the per-host plans. With ``mig_strategy``, a layout that strategy cannot advertise
    counts as an invalid MIG layout, as its host is invalid."""
    out = {"hosts": len(hosts), "hosts_valid": 0, "hosts_invalid": [], "gpus": 0, "gpus_by_model": {},
           "driver_versions": {}, "gpus_by_model_and_driver": {}, "driver_changes": [], "reboot": [],
           "invalid_mig": [], "mig_changes": [], "mig_unsupported": [], "unhealthy_gpus": 0,
           "health": {"ok": 0, "warning": 0, "critical": 0},
           "unhealthy_nodes": [], "fabric_manager": [], "capacity": {}, "capacity_by_model": {}, "dra_nodes": [],
           "shared": {}, "no_capacity": []}
    for name, host in hosts.items():
        if host["valid"]:
            out["hosts_valid"] += 1
        else:
            out["hosts_invalid"].append(name)
        out["gpus"] += host["gpu_count"]
        _add(out["gpus_by_model"], host["gpu_models"])
        driver = host["driver"]
        if driver is not None:
            version = driver["installed"] or "none"
            out["driver_versions"][version] = out["driver_versions"].get(version, 0) + host["gpu_count"]
            for model, count in host["gpu_models"].items():
                _add(out["gpus_by_model_and_driver"].setdefault(model, {}), {version: count})
            if driver["action"] not in ("none", "invalid"):
                out["driver_changes"].append(name)
            if driver["reboot_required"]:
                out["reboot"].append(name)
        mig = host["mig"]
        if mig is not None and mig["config"] and (not mig["valid"] or _strategy_refuses(mig, mig_strategy)):
            out["invalid_mig"].append(name)
        elif mig is not None and mig["changed"]:
            out["mig_changes"].append(name)
        if mig is not None and mig.get("mig_unsupported"):
            out["mig_unsupported"].append(name)
        health = host["health"]
        if health is not None:
            out["health"][health["status"]] += 1
            out["unhealthy_gpus"] += health["unhealthy_gpus"]
            if health["status"] != "ok":
                out["unhealthy_nodes"].append(name)
        if host["fabric"] and host["fabric"]["fabric_manager"]:
            out["fabric_manager"].append(name)
        cap = host["capacity"]
        if host["present"] and not cap:
            out["no_capacity"].append(name)
        if cap:
            # Time-slicing and MPS replicas: nvidia.com/gpu counts them, not GPUs.
            for resource, entry in (cap.get("shared") or {}).items():
                total = out["shared"].setdefault(resource, {"devices": 0, "replicas": 0, "mode": entry["mode"]})
                if total["mode"] != entry["mode"]:
                    total["mode"] = "time-slicing and MPS"
                total["devices"] += entry["devices"]
                total["replicas"] += entry["replicas"]
            if cap.get("dra"):
                out["dra_nodes"].append(name)
            _add(out["capacity"], cap["resources"])
            if cap.get("product"):
                _add(out["capacity_by_model"].setdefault(cap["product"], {}), cap["resources"])
    return out
