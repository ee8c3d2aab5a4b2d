# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): helm runs of the collection's modules.
"""helm run by a module over kubernetes.core's AnsibleHelmModule: its binary, its connection settings
(kubeconfig, context, host, token, CA as environment variables, never on the command line), each command kept
in order, each output read as JSON, each failure named with the command."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess


class HelmRunner(object):
    """``run(args, what, show_output=True, shown=None, parse=True)``: helm with the module's connection settings; its
    output parsed as JSON (``what`` names what it should be), or as printed without ``parse``.

    ``commands`` are the argument lists run (after the binary), as shown: ``shown`` replaces an argument (a values
    file's path) by what a result may say of it."""

    def __init__(self, module):
        self.module = module
        self.commands = []
        self._binary = None

    def __call__(self, args, what, show_output=True, shown=None, parse=True):
        if self._binary is None:
            self._binary = self.module.get_helm_binary()
        self.commands.append([(shown or {}).get(a, a) for a in args])
        printed = " ".join(self.commands[-1])
        rc, out, err = self.module.run_helm_command([self._binary] + list(args), fails_on_error=False)
        if rc != 0:
            self.fail("`helm %s` failed (exit %d): %s" % (printed, rc, (err or "").strip() or "no message"),
                      stderr=err, stdout=out if show_output else "")
        if not parse:
            return out
        try:
            return json.loads(out or "null")
        except ValueError as exc:
            self.fail("`helm %s` printed no JSON %s: %s" % (printed, what, exc), stdout=out if show_output else "")

    def side_by_side(self, calls):
        """Run several reads at once, each ``(args, what, show_output)``: their API round trips overlap. Outputs parsed,
        in order; the first failure (in that order) fails the module as ``__call__`` does."""
        if len(calls) < 2:
            return [self(args, what, show_output=show) for args, what, show in calls]
        if self._binary is None:
            self._binary = self.module.get_helm_binary()
        # The environment that run_command gives each helm: the module's locale settings and the connection's.
        env = dict(os.environ)
        env.update(getattr(self.module, "run_command_environ_update", None) or {})
        env.update(self.module.env_update)
        started = [subprocess.Popen([self._binary] + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env, close_fds=True) for args, dummy, dummy in calls]
        # Each read to its end in turn: a helm that fills its pipe waits until its turn comes, none blocks another.
        done = [(proc.returncode, out, err) for proc, (out, err) in ((p, p.communicate()) for p in started)]
        results = []
        for (args, what, show), (rc, out, err) in zip(calls, done):
            self.commands.append(list(args))
            out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
            if rc != 0:
                self.fail("`helm %s` failed (exit %d): %s" % (" ".join(args), rc, err.strip() or "no message"),
                          stderr=err, stdout=out if show else "")
            try:
                results.append(json.loads(out or "null"))
            except ValueError as exc:
                self.fail("`helm %s` printed no JSON %s: %s" % (" ".join(args), what, exc), stdout=out if show else "")
        return results

    def fail(self, msg, **extra):
        self.module.fail_json(msg=msg, commands=self.commands, **extra)
