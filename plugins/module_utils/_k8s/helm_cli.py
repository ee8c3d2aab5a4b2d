# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): helm runs of the collection's modules.
"""helm run by a module over kubernetes.core's AnsibleHelmModule (HelmModule: the kubeconfig read where it is, never
copied): its binary, its connection settings (kubeconfig, context, host, token, CA as environment variables, never on
the command line), each command kept in order, each output read as JSON, each failure named with the command."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

try:
    import yaml
except ImportError:  # kubernetes.core's helm module reports the missing PyYAML first
    yaml = None

try:  # kubernetes.core 6.3+; before it, the kubeconfig option is no_log whole
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import extract_sensitive_values_from_kubeconfig
except ImportError:
    extract_sensitive_values_from_kubeconfig = None
from ansible_collections.kubernetes.core.plugins.module_utils.helm import AnsibleHelmModule
from ansible_collections.kubernetes.core.plugins.module_utils.version import LooseVersion

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import helm
from ansible_collections.gpuops.platform.plugins.module_utils._k8s.side_by_side import in_order

# kubernetes.core's connection options and the helm environment variables that carry them (helm's own
# HELM_KUBE* settings, documented by `helm --help`).
HELM_SETTINGS = (("context", "HELM_KUBECONTEXT"), ("release_namespace", "HELM_NAMESPACE"), ("api_key", "HELM_KUBETOKEN"),
                 ("host", "HELM_KUBEAPISERVER"), ("ca_cert", "HELM_KUBECAFILE"))


class HelmModule(AnsibleHelmModule):
    """kubernetes.core's AnsibleHelmModule whose helm runs read the kubeconfig where it is.

    kubernetes.core (_prepare_helm_environment) reads a kubeconfig given as a path and writes a copy of it, token
    and all, to a new file in $TMPDIR for helm, removed only when the module exits. The collection's kubeconfig (the
    private one its token step writes, 0600 in a 0700 folder, or the operator's) is a file already: helm gets its
    path (KUBECONFIG), and the other settings as helm's own environment variables, so no second copy of a credential
    is ever written. kubernetes.core's way is kept where a file must be written: a kubeconfig given inline (a dict),
    or a helm too old for HELM_KUBECAFILE (3.5) or HELM_KUBEINSECURE_SKIP_TLS_VERIFY (3.10) when those are set."""

    def _prepare_helm_environment(self):
        kubeconfig = self.params.get("kubeconfig")
        params = dict((k, self.params.get(k)) for k in ("ca_cert", "validate_certs"))
        old = None
        if params["ca_cert"] or params["validate_certs"] is False:
            old = LooseVersion(self.get_helm_version() or "0") < LooseVersion(
                "3.10.0" if params["validate_certs"] is False else "3.5.0")
        if (kubeconfig and not isinstance(kubeconfig, str)) or old or yaml is None:
            return super(HelmModule, self)._prepare_helm_environment()
        env = dict((name, self.params.get(option)) for option, name in HELM_SETTINGS if self.params.get(option))
        if params["validate_certs"] is False:
            env["HELM_KUBEINSECURE_SKIP_TLS_VERIFY"] = "true"
        if kubeconfig:
            path = os.path.expanduser(kubeconfig)
            env["KUBECONFIG"] = path
            # As kubernetes.core does: the kubeconfig's secrets are never shown, whatever helm prints. A file that
            # cannot be read is left to helm, whose failure names it.
            try:
                with open(path) as handle:
                    content = yaml.safe_load(handle)
            except (IOError, OSError, yaml.YAMLError):
                content = None
            if isinstance(content, dict) and extract_sensitive_values_from_kubeconfig is not None:
                self._module.no_log_values.update(extract_sensitive_values_from_kubeconfig(content))
        return env


# The argument spec of one release to read and decide on (k8s_helm_wanted's entries): helm_releases' and
# k8s_server_side_apply's ``releases``.
RELEASE_SPEC = dict(
    name=dict(type="str", required=True),
    namespace=dict(type="str", required=True),
    chart=dict(type="str", default=""),
    chart_version=dict(type="str", required=True),
    values_digest=dict(type="str", required=True, no_log=True),
)


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
        rc, out, err = self.module.run_helm_command([self._binary] + list(args), fails_on_error=False)
        return self._answer(self.commands[-1], what, show_output, parse, rc, out, err)

    def _answer(self, shown_args, what, show_output, parse, rc, out, err):
        """One helm run's output, parsed as JSON unless not ``parse``; a failure, or output that is no JSON, fails
        the module naming the command."""
        printed = " ".join(shown_args)
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
        # helm's environment (the connection settings), as run_helm_command passes it; kubernetes.core prepares it on
        # first use, so once here, before the threads. run_command builds each child's environment from a copy of
        # its own: one thread per read is safe.
        environment = self.module.env_update
        done = in_order(
            lambda call: self.module.run_command([self._binary] + list(call[0]), environ_update=environment),
            calls, workers=len(calls))
        results = []
        for (args, what, show), (rc, out, err) in zip(calls, done):
            self.commands.append(list(args))
            results.append(self._answer(self.commands[-1], what, show, True, rc, out, err))
        return results

    def fail(self, msg, **extra):
        self.module.fail_json(msg=msg, commands=self.commands, **extra)


def _read(release, need):
    """The helm read that ``need`` names for a release: its arguments, what it should print, whether a failure may
    show its output (never for values)."""
    where = [release["name"], "--namespace", release["namespace"], "-o", "json"]
    if need == "values":
        return ["get", "values"] + where, "(the values)", False
    return ["history"] + where, "(a history)", True


def checked_state(module, releases, recover):
    """``(plans, commands, stops)`` of ``releases``: their names checked against Helm's rules first (a bad one fails
    the module before helm runs), then read_and_decide; ``stops`` are the reasons of the releases left pending that
    recovery may not touch (``recover=False``), to fail with."""
    try:
        for release in releases:
            helm.check_release(release)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    plans, commands = read_and_decide(module, releases, recover)
    return plans, commands, [p["reason"] for p in plans if p["action"] == "fail"]


def read_and_decide(module, releases, recover):
    """``(plans, commands)``: one helm list for every release, then values or history only where the decision needs
    them (helm.decide), over ``module`` (kubernetes.core's AnsibleHelmModule: helm's binary and connection)."""
    run = HelmRunner(module)
    plans = []
    if releases:
        try:
            listed = helm.listed_by_release(run(helm.list_args(releases), "(a list of releases)"))
        except ValueError as exc:
            run.fail(str(exc))
        entries = [listed.get((release["namespace"], release["name"])) for release in releases]
        needs = [helm.needs(release, entry) for release, entry in zip(releases, entries)]
        # Every read a decision needs, side by side: the values of each release deployed at the wanted chart (they
        # may hold secrets: never in the result, not even when helm fails), the history of each one left pending.
        reads = [_read(release, need) for release, need in zip(releases, needs) if need]
        answers = iter(run.side_by_side(reads))
        for release, entry, need in zip(releases, entries, needs):
            answer = next(answers) if need else None
            values = answer if need == "values" else None
            history = answer if need == "history" else None
            plans.append(helm.decide(release, entry, history, {} if values is None and need == "values" else values,
                                     recover))
    return plans, run.commands
