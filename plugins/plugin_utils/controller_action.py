# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The base of the action plugins that run on the controller alone (no connection, no file sent)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ControllerAction(object):
    """Mixed in before ActionBase (``class ActionModule(ControllerAction, ActionBase)``): an action that plans or
    reads on the controller, so no connection to the host is made. A mixin, since plugin_utils never imports
    the plugins above it."""

    TRANSFERS_FILES = False
    _requires_connection = False

    def begin(self, tmp, task_vars, argument_spec):
        """``(result, args)``: ActionBase's result and the task's arguments, validated against ``argument_spec``."""
        result = super(ControllerAction, self).run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=argument_spec)
        return result, args
