# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The controller's nvidia-ml-py, sent with the NVML modules to nodes that lack it. Private to the collection.

nvidia-ml-py is a single pure-Python file, ``pynvml.py`` (ctypes over the
driver's libnvidia-ml.so.1, BSD licence), pinned in requirements/collection.txt
for the controller and the execution environment. The action plugins of
nvml_facts and nvidia_mig add it to the module's arguments (``controller_binding``:
version, sha256, zlib-compressed base64 text, about 70 KiB), and the module loads
it in memory where the node's Python cannot import ``pynvml``
(module_utils/_nvml/binding.py). So a node with the driver and a stock python3
needs nothing installed: no pip, no network, no package manager, no file left
behind.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import hashlib
import importlib.util
import os
import zlib

OPTION = "controller_binding"  # the module option the action plugins fill in
DISTRIBUTION = "nvidia-ml-py"

_CACHE = {}


def controller_payload(find_spec=importlib.util.find_spec, version_of=None):
    """``(payload, None)`` with the controller's ``pynvml.py``, or ``(None, why)`` where there is none to send.

    Read once per controller process. Only nvidia-ml-py's single file is sent: a
    ``pynvml`` package (the old gpuopenanalytics wrapper) would need more than one file.
    """
    if "payload" in _CACHE:
        return _CACHE["payload"]
    try:
        spec = find_spec("pynvml")
    except (ImportError, ValueError) as exc:
        spec, why = None, "pynvml cannot be found on the controller: %s" % exc
    else:
        why = "the controller's Python has no nvidia-ml-py (pip install -r requirements/collection.txt)"
    origin = getattr(spec, "origin", None)
    if spec is not None and (not origin or os.path.basename(origin) != "pynvml.py"):
        spec, why = None, ("the controller's pynvml (%s) is not nvidia-ml-py's single pynvml.py: install nvidia-ml-py "
                           "(requirements/collection.txt)" % origin)
    if spec is None:
        result = (None, why)
    else:
        try:
            with open(origin, "rb") as handle:
                source = handle.read()
        except (IOError, OSError) as exc:
            result = (None, "cannot read the controller's %s: %s" % (origin, exc))
        else:
            result = ({"version": _version(version_of), "sha256": hashlib.sha256(source).hexdigest(),
                       "source": base64.b64encode(zlib.compress(source, 9)).decode("ascii")}, None)
    _CACHE["payload"] = result
    return result


def _version(version_of=None):
    """The controller's nvidia-ml-py version as its metadata gives it, or "unknown"."""
    try:
        if version_of is None:
            from importlib import metadata
            version_of = metadata.version
        return str(version_of(DISTRIBUTION))
    except Exception:  # no metadata for a copied file: still usable, the version is just not known
        return "unknown"


def shorten(result):
    """The module's echo of its arguments without the binding's text (it is no reading for a person)."""
    args = (result.get("invocation") or {}).get("module_args")
    binding = args.get(OPTION) if isinstance(args, dict) else None
    if isinstance(binding, dict) and "source" in binding:
        args[OPTION] = dict(binding, source="(%d characters)" % len(binding["source"] or ""))
    return result
