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
def _as_target():
    """A module runs in its own process, where warn() and deprecate() go into the result.
    Once a test in the same process imports controller code (an action or filter plugin),
    ansible-core 2.19+ marks the process as the controller and sends them to Display
    instead; undo that while the module runs."""
    try:
        from ansible.module_utils import _internal
    except ImportError:  # ansible-core < 2.19 has no such switch
        yield
        return
    with mock.patch.object(_internal, "is_controller", False):
        yield


@contextlib.contextmanager
def patch_module_args(args=None):
    args = dict(args or {})
    if _patch_module_args is not None:
        with _patch_module_args(args), _as_target():
            yield
        return
    from ansible.module_utils import basic
    from ansible.module_utils.common.text.converters import to_bytes

    args.setdefault("_ansible_remote_tmp", "/tmp")
    args.setdefault("_ansible_keep_remote_files", False)
    with mock.patch.object(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args}))):
        yield


class ExitJson(Exception):
    """Raised instead of exiting when a module calls exit_json; args[0] is its result."""


class FailJson(Exception):
    """Raised instead of exiting when a module calls fail_json; args[0] is its result."""


def _exit_json(self, **kwargs):  # pylint: disable=unused-argument
    kwargs.setdefault("changed", False)
    raise ExitJson(kwargs)


def _fail_json(self, **kwargs):  # pylint: disable=unused-argument
    raise FailJson(kwargs)


@contextlib.contextmanager
def module_exits():
    """Make AnsibleModule.exit_json/fail_json raise ExitJson/FailJson."""
    from ansible.module_utils import basic

    with mock.patch.multiple(basic.AnsibleModule, exit_json=_exit_json, fail_json=_fail_json):
        yield


def run_main(main, args, check_mode=False, diff=False, patches=()):
    """``(ok, result)`` of a module's ``main()`` run with ``args`` (in check or diff mode), inside the context
    managers ``patches`` (``mock.patch.object(...)`` of its client, say); needs the ``module_exits`` fixture."""
    import pytest

    args = dict(args)
    if check_mode:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    with contextlib.ExitStack() as stack:
        stack.enter_context(patch_module_args(args))
        for patch in patches:
            stack.enter_context(patch)
        with pytest.raises((ExitJson, FailJson)) as caught:
            main()
    return caught.type is ExitJson, caught.value.args[0]
