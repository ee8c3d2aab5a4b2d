# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The FilterModule class a filter plugin file exports, built from its functions; lazy_module and lazy_function."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib

_PLUGINS = "ansible_collections.gpuops.platform.plugins."


class lazy_module(object):
    """The collection's module ``name`` (``plugin_utils.fleet_plan``), imported when an attribute is first read.

    To find one ``gpuops.platform.*`` filter, ansible-core loads every filter
    file of the collection (``Jinja2Loader.get_with_context``), in each forked
    worker, and its collection loader compiles each file from source. A filter
    file that imports its planner only when a filter runs keeps that cost to
    the filter files themselves.
    """

    def __init__(self, name):
        self._name = _PLUGINS + name

    def __getattr__(self, attr):
        return getattr(importlib.import_module(self._name), attr)


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


def lazy_function(name, function, filter_name=None):
    """A stand-in for the function ``function`` of the module ``name``, which imports it when first called.

    ``filter_name``: the name it is a filter under, where that is not the function's own.
    """
    module = lazy_module(name)

    def call(*args, **kwargs):
        return getattr(module, function)(*args, **kwargs)
    call.__name__ = filter_name or function
    return call
