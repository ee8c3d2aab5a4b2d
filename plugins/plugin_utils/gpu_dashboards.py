# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""gpu_monitoring's Grafana dashboards (JSON models), for the Grafana sidecar.

Queries name only metrics of the counters ConfigMap and the recording rules
of plugin_utils/gpu_alerts.py (tested). Panels are laid out on a 24-column
grid: stat panels 6 wide and 4 high in the first row, then time series 12 wide
and 8 high.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
DATASOURCE_VARIABLE = {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
                       "hide": 0, "refresh": 1, "current": {}}
GRID_WIDTH = 24


def _boards(node):
    """Each dashboard's title, query variables and panels [type, title, expr, legend labels, unit]."""
    sel = node + '=~"$node", gpu=~"$gpu"'
    mig = 'GPU_I_PROFILE!="", ' + node + '=~"$node"'
    instance = [node, 'gpu', 'GPU_I_PROFILE', 'GPU_I_ID']
    return {
        'gpu-fleet': {'title': 'GPU fleet overview', 'vars': [], 'panels': [
            ['stat', 'GPUs reporting', 'count(DCGM_FI_DEV_GPU_TEMP)', [], 'none'],
            ['stat', 'GPUs allocated to pods', 'sum(namespace:dcgm_gpus_allocated:count)', [], 'none'],
            ['stat', 'Average GPU utilization', 'avg(DCGM_FI_DEV_GPU_UTIL)', [], 'percent'],
            ['stat', 'Power draw', 'sum(DCGM_FI_DEV_POWER_USAGE)', [], 'watt'],
            ['timeseries', 'Utilization by GPU model', 'model:dcgm_gpu_utilization:avg', ['modelName'], 'percent'],
            ['timeseries', 'GPUs by model', 'model:dcgm_gpus:count', ['modelName'], 'none'],
            ['timeseries', 'Hottest GPU per node', 'max by (' + node + ') (DCGM_FI_DEV_GPU_TEMP)', [node], 'celsius'],
            ['timeseries', 'GPUs with an XID error per node', 'count by (' + node + ') (DCGM_FI_DEV_XID_ERRORS > 0)', [node], 'none'],
            ['timeseries', 'Uncorrectable remapped rows per node', 'sum by (' + node + ') (DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS)', [node], 'none'],
            ['timeseries', 'Framebuffer used per node', 'sum by (' + node + ') (DCGM_FI_DEV_FB_USED) * 1048576', [node], 'bytes'],
        ]},
        'gpu-node': {'title': 'GPU node and device', 'vars': [
            {'name': 'node', 'query': 'label_values(DCGM_FI_DEV_GPU_TEMP, ' + node + ')'},
            {'name': 'gpu', 'query': 'label_values(DCGM_FI_DEV_GPU_TEMP{' + node + '=~"$node"}, gpu)'}], 'panels': [
            ['timeseries', 'GPU utilization', 'DCGM_FI_DEV_GPU_UTIL{' + sel + '}', [node, 'gpu'], 'percent'],
            ['timeseries', 'Tensor pipe active', 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{' + sel + '}', [node, 'gpu'], 'percentunit'],
            ['timeseries', 'Framebuffer used', 'DCGM_FI_DEV_FB_USED{' + sel + '} * 1048576', [node, 'gpu'], 'bytes'],
            ['timeseries', 'Framebuffer free', 'DCGM_FI_DEV_FB_FREE{' + sel + '} * 1048576', [node, 'gpu'], 'bytes'],
            ['timeseries', 'Power draw', 'DCGM_FI_DEV_POWER_USAGE{' + sel + '}', [node, 'gpu'], 'watt'],
            ['timeseries', 'GPU temperature', 'DCGM_FI_DEV_GPU_TEMP{' + sel + '}', [node, 'gpu'], 'celsius'],
            ['timeseries', 'Memory temperature', 'DCGM_FI_DEV_MEMORY_TEMP{' + sel + '}', [node, 'gpu'], 'celsius'],
            ['timeseries', 'SM clock', 'DCGM_FI_DEV_SM_CLOCK{' + sel + '}', [node, 'gpu'], 'none'],
            ['timeseries', 'Throttled by power (fraction of time)', 'rate(DCGM_FI_DEV_POWER_VIOLATION{' + sel + '}[5m]) / 1e9', [node, 'gpu'], 'percentunit'],
            ['timeseries', 'Throttled by temperature (fraction of time)', 'rate(DCGM_FI_DEV_THERMAL_VIOLATION{' + sel + '}[5m]) / 1e9',
             [node, 'gpu'], 'percentunit'],
            ['timeseries', 'Last XID error', 'DCGM_FI_DEV_XID_ERRORS{' + sel + '}', [node, 'gpu'], 'none'],
            ['timeseries', 'Double-bit ECC errors (volatile)', 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{' + sel + '}', [node, 'gpu'], 'none'],
            ['timeseries', 'Remapped rows (uncorrectable)', 'DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{' + sel + '}', [node, 'gpu'], 'none'],
            ['timeseries', 'Remapped rows (correctable)', 'DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS{' + sel + '}', [node, 'gpu'], 'none'],
            ['timeseries', 'Row remap pending', 'DCGM_FI_DEV_ROW_REMAP_PENDING{' + sel + '}', [node, 'gpu'], 'none'],
            ['timeseries', 'Row remap failed', 'DCGM_FI_DEV_ROW_REMAP_FAILURE{' + sel + '}', [node, 'gpu'], 'none'],
        ]},
        'gpu-tenant': {'title': 'GPU tenants: allocation and use', 'vars': [
            {'name': 'namespace', 'query': 'label_values(namespace:dcgm_gpus_allocated:count, namespace)'}], 'panels': [
            ['timeseries', 'GPUs allocated per namespace', 'namespace:dcgm_gpus_allocated:count{namespace=~"$namespace"}', ['namespace'], 'none'],
            ['timeseries', 'GPUs in use per namespace (allocated x utilization)',
             'namespace:dcgm_gpus_allocated:count{namespace=~"$namespace"} * namespace:dcgm_gpu_utilization:avg{namespace=~"$namespace"} / 100',
             ['namespace'], 'none'],
            ['timeseries', 'Average utilization of the allocated GPUs', 'namespace:dcgm_gpu_utilization:avg{namespace=~"$namespace"}',
             ['namespace'], 'percent'],
            ['timeseries', 'GPU memory used per namespace', 'namespace:dcgm_gpu_memory_used_bytes:sum{namespace=~"$namespace"}', ['namespace'], 'bytes'],
            ['timeseries', 'GPU utilization per pod', 'pod:dcgm_gpu_utilization:avg{namespace=~"$namespace"}', ['namespace', 'pod'], 'percent'],
            ['timeseries', 'GPU memory used per pod', 'pod:dcgm_gpu_memory_used_bytes:sum{namespace=~"$namespace"}', ['namespace', 'pod'], 'bytes'],
        ]},
        'gpu-mig': {'title': 'GPU MIG instances', 'vars': [
            {'name': 'node', 'query': 'label_values(DCGM_FI_PROF_GR_ENGINE_ACTIVE{GPU_I_PROFILE!=""}, ' + node + ')'}], 'panels': [
            ['timeseries', 'MIG instances by profile', 'count by (GPU_I_PROFILE) (DCGM_FI_DEV_FB_USED{GPU_I_PROFILE!=""})', ['GPU_I_PROFILE'], 'none'],
            ['timeseries', 'Graphics engine active per instance', 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{' + mig + '}', instance, 'percentunit'],
            ['timeseries', 'Tensor pipe active per instance', 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{' + mig + '}', instance, 'percentunit'],
            ['timeseries', 'Framebuffer used per instance', 'DCGM_FI_DEV_FB_USED{' + mig + '} * 1048576', instance, 'bytes'],
            ['timeseries', 'Framebuffer free per instance', 'DCGM_FI_DEV_FB_FREE{' + mig + '} * 1048576', instance, 'bytes'],
        ]},
    }


def _legend(labels):
    """A Grafana legend format printing the labels, or __auto without any."""
    return " ".join("{{%s}}" % label for label in labels) or "__auto"


def _variable(variable):
    """A Grafana query variable over the data source (all values and several at once)."""
    return {"name": variable["name"], "label": variable["name"], "type": "query", "datasource": DATASOURCE,
            "query": {"query": variable["query"], "refId": "PrometheusVariableQueryEditor-VariableQuery"},
            "definition": variable["query"], "includeAll": True, "multi": True, "refresh": 2, "sort": 1,
            "hide": 0, "current": {}, "options": []}


def _panels(panels):
    """Grafana panels, laid out: stats in the first row, time series two a row below them."""
    stats = len([p for p in panels if p[0] == "stat"])
    out = []
    for index, (kind, title, expr, labels, unit) in enumerate(panels):
        stat = kind == "stat"
        width = 6 if stat else 12
        per_row = GRID_WIDTH // width
        place = index if stat else index - stats
        y = 0 if stat else (4 if stats else 0) + (place // per_row) * 8
        out.append({
            "id": index + 1, "type": kind, "title": title, "datasource": DATASOURCE,
            "gridPos": {"x": (place % per_row) * width, "y": y, "w": width, "h": 4 if stat else 8},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}} if kind == "timeseries" else {},
            "targets": [{"refId": "A", "datasource": DATASOURCE, "expr": expr, "legendFormat": _legend(labels)}],
        })
    return out


def dashboards(names, node_label):
    """{name: Grafana dashboard} for each name (gpu-fleet, gpu-node, gpu-tenant, gpu-mig); node_label names the node in DCGM series."""
    boards = _boards(node_label)
    out = {}
    for name in names:
        board = boards[name]
        out[name] = {
            "uid": "gpuops-" + name, "title": board["title"], "tags": ["gpu", "dcgm", "gpuops"],
            "schemaVersion": 39, "version": 1, "editable": True, "timezone": "browser", "refresh": "30s",
            "time": {"from": "now-6h", "to": "now"},
            "templating": {"list": [DATASOURCE_VARIABLE] + [_variable(v) for v in board["vars"]]},
            "panels": _panels(board["panels"]), "annotations": {"list": []}, "links": [],
        }
    return out
