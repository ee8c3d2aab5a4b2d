# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): writing the planned files.
"""Writing the planned config files: atomically, through symlinks, with backups."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile

from ansible.module_utils.common.text.converters import to_bytes, to_native

from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import ConfigError


def write_target(path):
    """The file a write of ``path`` goes to: through a symlink to its target, like copy's ``follow=yes``.

    Replacing the link by a regular file would leave its target (the file the
    engine may really read, for example from a config management checkout) stale.
    """
    return os.path.realpath(path) if os.path.islink(path) else path


def write_file(module, path, text):
    """Write ``text`` to ``path`` (through a symlink) atomically.

    ``module.atomic_move`` gives an existing file's mode, owner and SELinux
    context to the new content; a new file gets the default mode for the umask.
    """
    target = write_target(path)
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        if target != path:
            raise ConfigError("%s is a symlink to %s, whose directory does not exist; fix the link and run again"
                              % (path, target))
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".%s." % os.path.basename(target))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(to_bytes(text))
        module.atomic_move(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_edits(module, edits, backup, result):
    """Write every changed file; fails the module (with ``result``) on the first that cannot be written.

    The failure is ``changed`` only when a file before it was written, and ``files`` lists those written."""
    backups, written = {}, []
    # The drop-in first, then the config that imports it: never an import of a missing file.
    for edit in reversed(edits):
        if backup and edit.before is not None:
            backups[edit.path] = module.backup_local(write_target(edit.path))
        try:
            write_file(module, edit.path, edit.after)
        except (IOError, OSError, ConfigError) as exc:
            failed = dict(result, changed=bool(written), restart_required=bool(written), files=written)
            module.fail_json(msg="cannot write %s: %s%s" % (edit.path, to_native(exc), (
                " (written before it: %s)" % ", ".join(written)) if written else " (nothing was written)"), **failed)
        written.append(edit.path)
    return backups
