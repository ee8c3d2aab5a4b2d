# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Controller side of gpuops.platform.nvml_facts (and, by subclass, nvidia_mig): send the controller's nvidia-ml-py
with the module (plugin_utils/nvml_binding.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash

from ansible_collections.gpuops.platform.plugins.plugin_utils import nvml_binding


class ActionModule(ActionBase):
    """Run the module of this task with the controller's nvidia-ml-py in ``controller_binding``.

    ``OFFLINE``: options that, when set, make the module read no NVML (replayed facts); then
    nothing is sent.
    """

    OFFLINE = ("replay_file",)
    TRANSFERS_FILES = False
    # As the normal action plugin: check mode is the module's own, async runs as with any module.
    _supports_check_mode = True
    _supports_async = True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        if nvml_binding.OPTION in args:
            raise AnsibleActionFail("%s is set by the collection's action plugin from the controller's nvidia-ml-py; "
                                    "remove it from the task" % nvml_binding.OPTION)
        if not any(args.get(name) for name in self.OFFLINE):
            payload, why = nvml_binding.controller_payload()
            if payload is not None:
                args[nvml_binding.OPTION] = payload
            else:
                self._display.vvv("%s: not sent: %s" % (nvml_binding.OPTION, why))
        wrap_async = self._task.async_val
        result = merge_hash(result, self._execute_module(module_name=self._task.resolved_action or self._task.action,
                                                         module_args=args, task_vars=task_vars, wrap_async=wrap_async))
        if not wrap_async:
            # The temporary folder the module ran from, as the normal action plugin removes it.
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return nvml_binding.shorten(result)
