# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The FilterModule class a filter plugin file exports, built from its functions."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def filter_module(*functions):
    """A ``FilterModule`` class whose ``filters()`` names each function after itself.

    The filter's name is the function's name, as every filter's documentation
    (``<name>.yml`` beside the plugin) already says.
    """
    table = dict((function.__name__, function) for function in functions)

    class FilterModule(object):
        def filters(self):
            return dict(table)

    return FilterModule
