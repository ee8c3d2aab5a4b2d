# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Controller side of gpuops.platform.k8s_layers_plan: every Kubernetes layer of a run, checked, built and planned in
one pass (see plugins/modules/k8s_layers_plan.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.plugins.filter.core import from_yaml_all
from ansible.plugins.loader import lookup_loader

from ansible_collections.gpuops.platform.plugins.filter import k8s_batch
from ansible_collections.gpuops.platform.plugins.plugin_utils.controller_action import ControllerAction

ARGS = {
    "layers": {"type": "list", "elements": "raw", "required": True},
    "roles_dir": {"type": "path", "required": True},
    "settings": {"type": "dict", "default": {}},
    "built": {"type": "dict", "default": {}},
    "render": {"type": "bool", "default": False},
    "api_kinds": {"type": "list", "elements": "str", "default": []},
    "namespaces": {"type": "list", "elements": "str", "default": []},
    "plan": {"type": "bool", "default": True},
}


class ActionModule(ControllerAction, ActionBase):
    def _lookup(self, name, terms, task_vars, **kwargs):
        """``query(name, *terms, **kwargs)``, as a task's template would run it: with the task's variables."""
        plugin = lookup_loader.get(name, loader=self._loader, templar=self._templar)
        return plugin.run(list(terms), variables=task_vars, **kwargs)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result, args = self.begin(tmp, task_vars, ARGS)
        try:
            # Before anything is built: every layer's errors (its role's checks), each named with its layer.
            errors = k8s_batch.k8s_layer_errors(args["layers"])
            if not errors:
                return self._build_and_plan(result, args, task_vars)
        except AnsibleError as exc:
            # A layer's objects may hold a Secret's data, which a message about a malformed layer could show: hidden,
            # as the result is (no_log).
            return dict(result, failed=True, msg=to_text(exc), _ansible_no_log=True)
        raise AnsibleActionFail("; ".join(errors))

    def _build_and_plan(self, result, args, task_vars):
        layers = args["layers"]
        # One render for every layer that says template: its role's templates/objects.yml.j2, with the task's
        # variables (the roles' own included), added to the objects built before (by layer).
        templates = k8s_batch.k8s_layer_templates(layers, args["roles_dir"])
        rendered = self._lookup("gpuops.platform.template", templates.values(), task_vars) if templates else []
        built = dict(args["built"])
        built.update(k8s_batch.k8s_layer_objects(templates, [list(from_yaml_all(text)) for text in rendered]))
        # The result holds the objects, a Secret's data among them: never shown, as no_log (the action's own flag,
        # so that a refusal above is shown).
        result.update(changed=False, objects=built, _ansible_no_log=True)
        if not args["plan"]:
            return result
        # Every layer as the flush applies it (or as its files render), its release variables read in one lookup.
        variables = self._lookup("ansible.builtin.vars", k8s_batch.k8s_layer_variables(layers), task_vars, default="")
        planned = k8s_batch.k8s_layers(layers, variables, args["settings"], args["render"], built)
        if args["render"]:
            result["layers"] = planned
        else:
            result["batch"] = k8s_batch.k8s_batch(planned, args["api_kinds"], args["namespaces"], self._task.check_mode)
        return result
