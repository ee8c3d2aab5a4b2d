# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release).
"""A private kubeconfig for a bearer token, and its removal.

The folder is made by tempfile.mkdtemp (mode 0700, a name no one else holds)
and the file is created with O_EXCL and mode 0600 inside it, so no other user
can read the token at any moment. Only such a folder is removed again: one
named with PREFIX that holds nothing but the kubeconfig.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile

PREFIX = "gpuops-k8s-"
FILE = "kubeconfig"


# The module's arguments (plugins/modules/k8s_token_kubeconfig.py), which its action plugin checks too when it
# removes the kubeconfig in the controller's own process.
ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["present", "absent"], default="present"),
    server=dict(type="str"),
    api_key=dict(type="str", no_log=True),
    path=dict(type="path"),
)
REQUIRED_IF = [("state", "present", ("server", "api_key")), ("state", "absent", ("path",))]


class TokenKubeconfigError(Exception):
    pass


def document(server, token):
    """The kubeconfig (JSON, which every kubeconfig reader takes as YAML) of one cluster, user and context."""
    return {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "gpuops", "cluster": {"server": server}}],
        "users": [{"name": "gpuops", "user": {"token": token}}],
        "contexts": [{"name": "gpuops", "context": {"cluster": "gpuops", "user": "gpuops"}}],
        "current-context": "gpuops",
    }


def check(server, token):
    for name, value in (("server", server), ("api_key", token)):
        if not value or not value.strip():
            raise TokenKubeconfigError("%s is empty: give the API server's URL and its bearer token" % name)
        if any(c in value for c in "\0\r\n"):
            raise TokenKubeconfigError("%s holds a NUL byte or a line break: give it as one line" % name)
    if not server.startswith(("https://", "http://")):
        raise TokenKubeconfigError("server %r is no URL: give it as https://HOST:PORT" % server)


def write(server, token, parent=None):
    """Write the kubeconfig into a new private folder under ``parent`` (the temporary folder); its path."""
    check(server, token)
    folder = tempfile.mkdtemp(prefix=PREFIX, dir=parent)
    path = os.path.join(folder, FILE)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(document(server, token), handle)
    except OSError:
        remove(path)
        raise
    return path


def owned(path):
    """Whether ``path`` is a kubeconfig that write() made: an absolute path, FILE in a PREFIX folder."""
    if "\0" in path or not os.path.isabs(path):
        return False
    folder = os.path.dirname(path)
    return os.path.basename(path) == FILE and os.path.basename(folder).startswith(PREFIX)


def remove(path, dry_run=False):
    """Remove the kubeconfig and its folder (not with ``dry_run``); whether anything was there. Refuses any other
    path."""
    if not owned(path):
        raise TokenKubeconfigError("%r is not a kubeconfig that this module wrote (an absolute path, %s in a %s* folder): "
                                   "nothing was removed" % (path, FILE, PREFIX))
    folder = os.path.dirname(path)
    if not os.path.lexists(folder):
        return False
    if os.path.islink(folder) or not os.path.isdir(folder):
        raise TokenKubeconfigError("%r is not a folder: nothing was removed" % folder)
    others = sorted(set(os.listdir(folder)) - set([FILE]))
    if others:
        raise TokenKubeconfigError("%r holds %s besides the kubeconfig: nothing was removed" % (folder, ", ".join(others)))
    if dry_run:
        return True
    if os.path.lexists(path):
        os.unlink(path)
    os.rmdir(folder)
    return True


def converge(params, check_mode):
    """The module's work: ``{changed, path}`` of ``params`` (ARGUMENT_SPEC's); any failure as a TokenKubeconfigError
    whose message says what to do."""
    present = params["state"] == "present"
    try:
        if present:
            check(params["server"], params["api_key"])
            return {"changed": True, "path": "" if check_mode else write(params["server"], params["api_key"])}
        return {"changed": remove(params["path"], dry_run=check_mode), "path": params["path"]}
    except OSError as exc:
        raise TokenKubeconfigError("could not %s the kubeconfig: %s (check the temporary folder's space and "
                                   "permissions)" % ("write" if present else "remove", exc))
