# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""gpuops.platform.k8s_token_kubeconfig: the removal in the controller's own process where the host is the controller.

cluster.yml's last task removes the token's kubeconfig from the host that ran its API calls, which is the controller
itself under a local connection (an execution environment, ``ansible_connection: local``). There, a module run (a
Python process of its own, ansible's module code unpacked again) would do what this process can: remove one file and
its folder, as the same user. Any other connection, become, or a kubeconfig to write runs the module."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import token_kubeconfig


class ActionModule(ActionBase):
    def _in_process(self):
        """Whether the host is this controller, reached as this user: a local connection without become."""
        return getattr(self._connection, "transport", None) == "local" and not self._play_context.become

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        if self._task.args.get("state") != "absent" or not self._in_process():
            result.update(self._execute_module(task_vars=task_vars or {}))
            return result
        _validation, params = self.validate_argument_spec(argument_spec=token_kubeconfig.ARGUMENT_SPEC,
                                                          required_if=token_kubeconfig.REQUIRED_IF)
        try:
            result.update(token_kubeconfig.converge(params, self._task.check_mode))
        except token_kubeconfig.TokenKubeconfigError as exc:
            raise AnsibleActionFail("k8s_token_kubeconfig: %s" % exc)
        return result
