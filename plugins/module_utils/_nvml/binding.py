# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the NVML binding of a node module.
"""The ``pynvml`` a node module uses: the node's own nvidia-ml-py, else the controller's copy.

nvidia-ml-py is one pure-Python file (``pynvml.py``, ctypes over libnvidia-ml.so.1,
BSD licence). A stock ``python3`` on a node (no pip, PEP 668, no python3-pynvml)
has none, so the action plugins of nvml_facts and nvidia_mig send the controller's
file with the task (``controller_binding``: version, sha256 and the zlib-compressed,
base64 text), and this module loads it in memory when the node cannot import
``pynvml`` itself. Nothing is installed or written on the node, no network and no
package manager is needed. A node that has nvidia-ml-py keeps using its own.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import ctypes
import hashlib
import importlib.util
import sys
import zlib

LIBRARY = "libnvidia-ml.so.1"
PAYLOAD_KEYS = ("version", "sha256", "source")
# The compressed binding is about 50 KiB; anything far bigger is not it.
MAX_SOURCE_BYTES = 8 * 1024 * 1024


class BindingError(Exception):
    """The controller's copy cannot be used; the message says why."""


def node_version():
    """The version of the node's own nvidia-ml-py distribution, or None where it cannot be read."""
    try:
        from importlib import metadata
        return metadata.version("nvidia-ml-py")
    except Exception:  # no metadata (a copied file, Python 3.7): unknown
        return None


def load_payload(payload):
    """The ``pynvml`` module built from the controller's ``payload``; raises BindingError."""
    if not isinstance(payload, dict) or not all(isinstance(payload.get(key), str) for key in PAYLOAD_KEYS):
        raise BindingError("controller_binding must be a mapping with the strings %s, as the action plugin "
                           "sends it" % ", ".join(PAYLOAD_KEYS))
    try:
        source = zlib.decompressobj().decompress(base64.b64decode(payload["source"]), MAX_SOURCE_BYTES)
    except (binascii.Error, ValueError, zlib.error) as exc:
        raise BindingError("controller_binding.source is not zlib-compressed base64 text: %s" % exc)
    if hashlib.sha256(source).hexdigest() != payload["sha256"].lower():
        raise BindingError("controller_binding.source does not match its sha256 %s: it was damaged on the way"
                           % payload["sha256"][:64])
    # pynvml looks itself up in sys.modules while it is executed, as an import would.
    spec = importlib.util.spec_from_loader("pynvml", loader=None,
                                           origin="nvidia-ml-py %s from the controller" % payload["version"])
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get("pynvml")
    sys.modules["pynvml"] = module
    try:
        exec(compile(source, "pynvml.py (nvidia-ml-py %s)" % payload["version"], "exec"), module.__dict__)
    except Exception as exc:  # any failure of foreign code is this error
        if previous is None:
            sys.modules.pop("pynvml", None)
        else:
            sys.modules["pynvml"] = previous
        raise BindingError("the controller's nvidia-ml-py %s does not load on Python %d.%d: %s: %s"
                           % (payload["version"], sys.version_info[0], sys.version_info[1], type(exc).__name__, exc))
    return module


def library_loads(name=LIBRARY):
    """Whether the NVIDIA management library can be loaded (the driver's user-space part is installed)."""
    try:
        ctypes.CDLL(name)
    except OSError:
        return False
    return True


def resolve(node_module, payload, library=LIBRARY):
    """``(pynvml, info, reason)``: the binding to use and where it comes from, or why there is none.

    ``node_module``: the node's own ``pynvml`` (None where it cannot import one); ``payload``: the
    controller's copy (``controller_binding``, None where the controller had none). ``info`` is
    ``{"source": "node" | "controller", "version"}``. Without a binding, ``reason`` names the
    missing library first when libnvidia-ml.so.1 does not load either: no binding helps there.
    """
    if node_module is not None:
        return node_module, {"source": "node", "version": node_version()}, None
    problem = None
    if payload:
        try:
            return load_payload(payload), {"source": "controller", "version": payload["version"]}, None
        except BindingError as exc:
            problem = str(exc)
    if not library_loads(library):
        return None, None, ("%s not found: the NVIDIA driver is not installed (and the node's Python has no "
                            "nvidia-ml-py)" % library)
    return None, None, ("the node's Python (%s) cannot import pynvml and %s: install nvidia-ml-py on the controller "
                        "(requirements/collection.txt), which sends it with the task, or on the node"
                        % (sys.executable, problem or "the controller sent no nvidia-ml-py"))
