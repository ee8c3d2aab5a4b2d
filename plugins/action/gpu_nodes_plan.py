# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Controller side of gpuops.platform.gpu_nodes_plan: every GPU node of the Kubernetes layer in one task."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.gpuops.platform.plugins.action.fleet_plan import inventory_variables
from ansible_collections.gpuops.platform.plugins.plugin_utils import gpu_capacity, gpu_nodes_plan
from ansible_collections.gpuops.platform.plugins.plugin_utils.controller_action import ControllerAction

ARGS = {
    "hosts": {"type": "list", "elements": "str", "required": True},
    "mig_strategy": {"type": "str", "default": "single"},
    "sharing_configs": {"type": "dict", "default": {}},
    "default_config": {"type": "str", "default": ""},
    "labels": {"type": "dict", "default": {}},
    "label_prefix": {"type": "str", "required": True},
    "taints": {"type": "list", "elements": "dict", "default": []},
    "fleet_nodes": {"type": "dict", "default": {}},
    "render": {"type": "bool", "default": False},
}


class ActionModule(ControllerAction, ActionBase):
    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result, args = self.begin(tmp, task_vars, ARGS)
        variables = inventory_variables(task_vars, args["hosts"], self._loader)
        try:
            capacity, nodes = gpu_nodes_plan.plan(
                [(n, variables[n]) for n in args["hosts"]], args["mig_strategy"], args["sharing_configs"],
                args["default_config"], args["labels"], args["label_prefix"], args["taints"], args["fleet_nodes"],
                args["render"])
        except (gpu_nodes_plan.GpuNodesPlanError, gpu_capacity.CapacityError) as exc:
            raise AnsibleActionFail(to_text(exc))
        result.update(changed=False, capacity=capacity, nodes=nodes)
        if capacity.get("missing_facts"):
            # A warning of this task's, so that no task of its own runs to say it.
            result["warnings"] = ["No NVIDIA facts for %s: their GPUs are not counted. Run playbooks/site.yml (or "
                                  "nodes.yml first) or enable fact caching." % ", ".join(capacity["missing_facts"])]
        return result
