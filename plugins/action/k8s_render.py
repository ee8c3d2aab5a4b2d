# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Write a layer's rendered files on the controller in one step (see plugins/modules/k8s_render.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.action import ActionBase

from ansible_collections.gpuops.platform.plugins.plugin_utils.controller_files import write_atomic

# What the render writes, relative to its folder: <NN>-<layer>/manifests.yaml
# and <NN>-<layer>/helm/<release>/{release,values}.yaml. Pruning touches
# nothing else, so other files kept in a GitOps repository stay.
RENDERED = re.compile(r"^[0-9]{2}-[A-Za-z0-9_.-]+/(manifests\.yaml|helm/[A-Za-z0-9_.-]+/(release|values)\.yaml)\Z")


def _relative(path):
    """``path`` if it is one of the render's own relative file names, else an error naming it."""
    text = to_text(path)
    if not RENDERED.match(text) or "/../" in "/%s/" % text:
        raise AnsibleActionFail("k8s_render: %r is not a rendered file name (<NN>-<layer>/manifests.yaml or "
                                "<NN>-<layer>/helm/<release>/release.yaml|values.yaml)" % (text,))
    return text


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise AnsibleActionFail("k8s_render: %s is a directory where a rendered file belongs; move it away" % path)


def _rendered_files(root):
    """Relative names of the render's own files under ``root``."""
    found = []
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            rel = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
            if RENDERED.match(rel):
                found.append(rel)
    return found


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "folder", "files", "prune", "keep"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars or {})
        dummy, args = self.validate_argument_spec(argument_spec=dict(
            path=dict(type="path", required=True),
            folder=dict(type="str", default=""),
            files=dict(type="list", elements="dict", default=[]),
            prune=dict(type="bool", default=False),
            keep=dict(type="list", elements="str", default=[]),
        ))
        root = args["path"]
        if os.path.exists(root) and not os.path.isdir(root):
            raise AnsibleActionFail("k8s_render: path %s exists and is not a directory" % root)
        check = bool(self._task.check_mode)
        prefix = args["folder"].strip("/") + "/" if args["folder"].strip("/") else ""
        wanted = []
        for entry in args["files"]:
            if set(entry) != {"path", "content"}:
                raise AnsibleActionFail("k8s_render: each file needs exactly 'path' and 'content', got %s"
                                        % ", ".join(sorted(to_text(k) for k in entry)))
            wanted.append((_relative(prefix + to_text(entry["path"])), to_bytes(entry["content"], errors="surrogate_or_strict")))
        written, unchanged, removed, diffs = [], 0, [], []
        for rel, data in wanted:
            target = os.path.join(root, rel)
            before = _read(target)
            if before == data:
                unchanged += 1
                continue
            written.append(rel)
            diffs.append({"before_header": target if before is not None else "/dev/null", "after_header": target,
                          "before": to_text(before or b"", errors="surrogate_or_replace"),
                          "after": to_text(data, errors="surrogate_or_replace")})
            if not check:
                write_atomic(target, data)
        if args["prune"] and os.path.isdir(root):
            keep = set(_relative(k) for k in args["keep"]) | set(rel for rel, dummy in wanted)
            for rel in _rendered_files(root):
                if rel in keep:
                    continue
                removed.append(rel)
                target = os.path.join(root, rel)
                diffs.append({"before_header": target, "after_header": "/dev/null",
                              "before": to_text(_read(target) or b"", errors="surrogate_or_replace"), "after": ""})
                if not check:
                    os.unlink(target)
        result.update(changed=bool(written or removed), written=written, removed=removed, unchanged=unchanged,
                      path=root)
        if self._task.diff and diffs:
            result["diff"] = diffs
        return result
