"""Run a module's main() with given arguments on every supported ansible-core.

ansible-core 2.19 added ``ansible.module_utils.testing.patch_module_args``; 2.17
and 2.18 read the arguments from ``basic._ANSIBLE_ARGS``, as the collections of
that time patched them.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json
from unittest import mock

try:
    from ansible.module_utils.testing import patch_module_args as _patch_module_args
except ImportError:  # ansible-core < 2.19
    _patch_module_args = None


@contextlib.contextmanager
def patch_module_args(args=None):
    args = dict(args or {})
    if _patch_module_args is not None:
        with _patch_module_args(args):
            yield
        return
    from ansible.module_utils import basic
    from ansible.module_utils.common.text.converters import to_bytes

    args.setdefault("_ansible_remote_tmp", "/tmp")
    args.setdefault("_ansible_keep_remote_files", False)
    with mock.patch.object(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args}))):
        yield
