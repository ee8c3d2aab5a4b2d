# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Files that controller-side actions write (reports, rendered manifests). Private to the collection."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile


def write_atomic(path, data, mode=0o644):
    """Write bytes ``data`` to ``path`` through a temporary file in its folder and a rename.

    A reader (a browser, a GitOps agent, a later run) never sees half a file; the
    folder is created when missing.
    """
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
