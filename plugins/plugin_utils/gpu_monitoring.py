# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The gpu_monitoring plan: its checks and its autoscalers, and the adapter's rules.

Every value that ends up inside PromQL, a Prometheus template or the DCGM
exporter's CSV is checked here, so the role's templates can write it as is.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuops.platform.plugins.plugin_utils.jinja_tests import (
    DNS_LABEL, DNS_SUBDOMAIN, LABEL_KEY, LABEL_VALUE, is_integer, is_number, matches, to_float, to_str)

PROMETHEUS_LABEL = r"^[a-zA-Z_][a-zA-Z0-9_]*\Z"
DURATION = r"^[0-9]+(ms|s|m|h|d|w|y)\Z"
SEVERITIES = ["critical", "warning", "info"]
LABEL_VARIABLES = ["gpu_monitoring_node_label", "gpu_monitoring_namespace_label", "gpu_monitoring_pod_label"]
DURATION_VARIABLES = ["gpu_monitoring_temp_for", "gpu_monitoring_throttle_for", "gpu_monitoring_idle_for",
                      "gpu_monitoring_exporter_down_for", "gpu_monitoring_absent_for"]
# Thresholds: (variable, above, at most).
THRESHOLDS = [("gpu_monitoring_gpu_temp_threshold", 0, 150), ("gpu_monitoring_memory_temp_threshold", 0, 150),
              ("gpu_monitoring_throttle_ratio", 0, 1), ("gpu_monitoring_idle_threshold", 0, 100)]
# Variables whose keys and values become Kubernetes labels.
LABEL_MAP_VARIABLES = ["gpu_monitoring_selector_labels", "gpu_monitoring_dashboard_labels"]
# The checked variables, as the role's vars/main.yml hands them over.
SETTINGS = ["gpu_monitoring_rules", "gpu_monitoring_namespace", "gpu_monitoring_counters_configmap",
            "gpu_monitoring_exporter_job", "gpu_monitoring_alerts_disabled", "gpu_monitoring_xid_classes",
            "gpu_monitoring_xid_other_severity", "gpu_monitoring_runbook_url", "gpu_monitoring_extra_counters",
            *LABEL_VARIABLES, *DURATION_VARIABLES, *[t[0] for t in THRESHOLDS], *LABEL_MAP_VARIABLES]
# The custom metrics per pod that the prometheus_adapter role exposes, with the
# aggregation of the gpu_monitoring recording rule each reads (pod:dcgm_<name>:<aggregation>).
ADAPTER_METRICS = [("gpu_utilization", "avg"), ("gpu_memory_used_bytes", "sum")]


def _get(item, key, default):
    """``item.key | default(default)``: the default only when the key is missing."""
    return item.get(key, default) if isinstance(item, dict) else default


def _settings_errors(settings, alert_names):
    """Messages for the role's own variables (everything but the autoscalers)."""
    errors = []
    rules = settings["gpu_monitoring_rules"]
    if to_str(rules).lower() not in ("auto", "true", "false"):
        errors.append("gpu_monitoring_rules must be auto, true or false, got %r" % (rules,))
    if not matches(settings["gpu_monitoring_namespace"], DNS_LABEL):
        errors.append("gpu_monitoring_namespace %r is not a DNS label" % (settings["gpu_monitoring_namespace"],))
    if not matches(settings["gpu_monitoring_counters_configmap"], DNS_SUBDOMAIN):
        errors.append("gpu_monitoring_counters_configmap %r is not a DNS-1123 subdomain" % (settings["gpu_monitoring_counters_configmap"],))
    for var in LABEL_VARIABLES:
        if not matches(settings[var], PROMETHEUS_LABEL):
            errors.append("%s %r is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)" % (var, settings[var]))
    if not matches(settings["gpu_monitoring_exporter_job"], r"^[A-Za-z0-9_.:/-]+$"):
        errors.append("gpu_monitoring_exporter_job %r may hold only letters, digits and _.:/-" % (settings["gpu_monitoring_exporter_job"],))
    for var in DURATION_VARIABLES:
        if not matches(settings[var], DURATION):
            errors.append("%s %r is not a Prometheus duration such as 5m or 1h" % (var, settings[var]))
    for var, low, high in THRESHOLDS:
        value = settings[var]
        number = is_number(value) or (isinstance(value, str) and matches(value, r"^[0-9]+(\.[0-9]+)?$"))
        if isinstance(value, bool) or not number or to_float(value) <= low or to_float(value) > high:
            errors.append("%s must be a number above %s and at most %s, got %r" % (var, low, high, value))
    unknown = [name for name in settings["gpu_monitoring_alerts_disabled"] if name not in alert_names]
    if unknown:
        errors.append("gpu_monitoring_alerts_disabled names unknown alerts %s; the alerts are %s"
                      % (", ".join(to_str(n) for n in unknown), ", ".join(alert_names)))
    for entry in settings["gpu_monitoring_xid_classes"]:
        xid = _get(entry, "xid", None)
        if not is_integer(xid) or xid < 1 or xid > 1000 or _get(entry, "severity", "") not in SEVERITIES or \
                not matches(_get(entry, "meaning", ""), r"^[A-Za-z0-9][A-Za-z0-9 ,.()/-]*$"):
            errors.append("gpu_monitoring_xid_classes entry %r needs xid (an integer 1-1000), severity "
                          "(critical, warning or info) and meaning (letters, digits, spaces and ,.()/-)" % (entry,))
    if settings["gpu_monitoring_xid_other_severity"] not in SEVERITIES:
        errors.append("gpu_monitoring_xid_other_severity must be critical, warning or info")
    if not matches(settings["gpu_monitoring_runbook_url"], r'^https?://[^\s{}"]+(\{alert\}[^\s{}"]*)?$'):
        errors.append("gpu_monitoring_runbook_url %r must be an http(s) URL without spaces, quotes or "
                      "braces, except one {alert} placeholder" % (settings["gpu_monitoring_runbook_url"],))
    for var in LABEL_MAP_VARIABLES:
        for key, value in (settings[var] or {}).items():
            if not matches(key, LABEL_KEY) or not isinstance(value, str) or not matches(value, LABEL_VALUE):
                errors.append('%s: %r: %r is not a valid Kubernetes label (values are strings; quote "1")' % (var, key, value))
    if len(settings["gpu_monitoring_dashboard_labels"]) != 1:
        errors.append("gpu_monitoring_dashboard_labels must be the one label the Grafana sidecar selects")
    for entry in settings["gpu_monitoring_extra_counters"]:
        if not matches(_get(entry, "name", ""), r"^DCGM_(FI|EXP)_[A-Z0-9_]+$") or \
                _get(entry, "type", "") not in ("gauge", "counter", "label") or \
                not matches(_get(entry, "help", ""), r"^[^,#\r\n]*$"):
            errors.append("gpu_monitoring_extra_counters entry %r needs name (DCGM_FI_*), type (gauge, "
                          "counter or label) and help without commas, # or line breaks" % (entry,))
    return errors


def _autoscaler_errors(autoscaler, metrics):
    """Messages for one autoscaler (tenant resolved, defaults filled in by ``autoscalers``)."""
    a = autoscaler
    namespace = a.get("namespace")
    deployment = a.get("deployment", "")
    what = "autoscaler for %s/%s" % (namespace or a.get("tenant", "?"), a.get("deployment", "?"))
    errors = []
    if not namespace:
        errors.append("%s: set namespace, or tenant to a name in gpu_tenants_list (got tenant %r)" % (what, a.get("tenant")))
    elif not matches(namespace, DNS_LABEL):
        errors.append("%s: namespace is not a DNS label" % what)
    if not matches(deployment, DNS_SUBDOMAIN) or len(to_str(deployment)) > 249:
        errors.append("%s: deployment must be a Deployment name (DNS-1123 subdomain)" % what)
    if a.get("metric") not in metrics:
        errors.append("%s: metric %r is not one the adapter exposes (%s)" % (what, a.get("metric"), ", ".join(metrics)))
    low, high = a.get("min_replicas"), a.get("max_replicas")
    if not is_integer(low) or not is_integer(high) or low < 1 or high < low:
        errors.append("%s: min_replicas (default 1) and max_replicas must be integers with 1 <= min_replicas <= max_replicas" % what)
    target = a.get("target")
    if isinstance(target, bool) or not matches(a.get("target", ""), r"^[0-9]+(\.[0-9]+)?([KMGTPE]i?|m)?$") or \
            to_float("".join(c for c in to_str(target) if c in "0123456789.")) <= 0:
        errors.append("%s: target must be a positive quantity (average per pod, e.g. 60 or 20Gi), got %r" % (what, target))
    return what, errors


def errors(settings, alert_names, autoscalers, adapter_enabled):
    """Every problem of the monitoring settings, one message each, "gpu_monitoring: " first; empty when valid.

    ``settings`` maps each name of ``SETTINGS`` to its value; ``alert_names``
    are the alerts of the role's rules; ``autoscalers`` come from
    ``autoscalers()``; ``adapter_enabled`` is whether the prometheus_adapter
    role serves the custom metrics they scale on.
    """
    out = _settings_errors(settings, alert_names)
    metrics = [name for name, dummy in ADAPTER_METRICS]
    seen = []
    for autoscaler in autoscalers:
        what, found = _autoscaler_errors(autoscaler, metrics)
        out.extend(found)
        key = "%s/%s" % (autoscaler.get("namespace"), autoscaler.get("deployment", ""))
        if key in seen:
            out.append("%s: listed twice" % what)
        seen.append(key)
    if autoscalers and not adapter_enabled:
        out.append("gpu_monitoring_autoscalers need the custom metrics of the prometheus-adapter release; "
                   "set prometheus_adapter_enabled: true (the gpuops.platform.prometheus_adapter role)")
    return ["gpu_monitoring: " + message for message in out]


def autoscalers(entries, tenants):
    """The autoscalers with the tenant resolved to its namespace, metric and min_replicas defaulted.

    A tenant's namespace is its ``namespace``, else its name (as gpu_tenants
    makes it); an unknown tenant leaves the namespace empty, which ``errors``
    reports.
    """
    namespaces = dict((t["name"], t.get("namespace") or t["name"]) for t in tenants or [])
    out = []
    for entry in entries or []:
        resolved = dict(entry)
        resolved["namespace"] = entry.get("namespace") or namespaces.get(entry.get("tenant", ""), "")
        resolved["metric"] = entry.get("metric", "gpu_utilization")
        resolved["min_replicas"] = entry.get("min_replicas", 1)
        out.append(resolved)
    return out


def adapter_rules(metrics=None):
    """prometheus-adapter custom rules: each recording rule ``pod:dcgm_<name>:<aggregation>`` as ``<name>`` per pod."""
    rules = []
    for name, aggregation in metrics or ADAPTER_METRICS:
        rules.append({
            "seriesQuery": 'pod:dcgm_%s:%s{namespace!="",pod!=""}' % (name, aggregation),
            "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
            "name": {"matches": "^pod:dcgm_(.+):%s$" % aggregation, "as": "${1}"},
            "metricsQuery": "max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
        })
    return rules
