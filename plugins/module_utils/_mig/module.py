# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the nvidia_mig module's run.
"""The nvidia_mig module's work, given its AnsibleModule: read the inputs, plan, apply, verify.

:func:`run` returns the module's result. Every problem is raised as a MigError
(model.MigError) whose details are the further keys of the failed result; the
module's ``main()`` catches it once and fails with it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.gpuops.platform.plugins.module_utils._common.imports import optional_import
from ansible_collections.gpuops.platform.plugins.module_utils._common.input_guard import check_value_shape, unique_keys_hook
from ansible_collections.gpuops.platform.plugins.module_utils._mig import apply as mig_apply
from ansible_collections.gpuops.platform.plugins.module_utils._mig import config as mig_config
from ansible_collections.gpuops.platform.plugins.module_utils._mig import plan as mig_plan
from ansible_collections.gpuops.platform.plugins.module_utils._mig.model import MigError
from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as nvml_utils

yaml, _YAML_IMPORT_ERROR = optional_import("yaml")


def read_document(path, option):
    """The JSON or YAML document in ``path``; raises MigError naming ``option`` and the problem."""
    try:
        text = nvml_utils.read_text_file(path, option)
    except nvml_utils.ReplayError as exc:
        raise MigError("%s; nothing was changed" % exc)
    try:
        unique = unique_keys_hook("%s %s" % (option, path), MigError, "Nothing was changed; fix the file and run again.")
        # The same shape check as YAML's: Python 3.12+ reads JSON nested thousands deep.
        return check_value_shape(json.loads(text, object_pairs_hook=unique), "%s %s" % (option, path), error=MigError)
    except MigError:
        raise
    except (ValueError, RecursionError):
        # RecursionError: Python before 3.12 refuses deeply nested JSON; YAML says what it is
        pass
    if yaml is None:
        raise MigError(missing_required_lib("PyYAML", reason="to read the YAML file %s" % path))
    try:
        # libyaml's loader where PyYAML has it: NVIDIA's config files load 10x faster
        document = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise MigError("%s %s is neither JSON nor YAML: %s; nothing was changed" % (option, path, exc))
    except (ValueError, TypeError, RecursionError) as exc:
        raise MigError("%s %s cannot be read as YAML: %s; nothing was changed" % (option, path, exc))
    # Aliases are shared, not copied: counted once each, a kilobyte of aliases of aliases is refused here.
    return check_value_shape(document, "%s %s" % (option, path), error=MigError)


def check_config_name(name):
    # printed in messages and plans; a control character would forge output lines
    if not name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise MigError("config_name %r must be a non-empty name without control characters "
                       "(a key of mig-configs); nothing was changed" % (name,))


def _result(result, changed, actions=(), reboot_reasons=()):
    """The module result of a NodeMigPlan."""
    plan = result.to_dict()
    return dict(changed=changed, plan=dict((k, v) for k, v in plan.items() if k != "k8s_resources"),
                k8s_resources=plan["k8s_resources"], reboot_required=bool(reboot_reasons),
                reboot_reasons=list(reboot_reasons), actions=list(actions), diff=mig_plan.diff(result))


def _details(result, **first):
    """The result keys a failure carries beside its message: ``first`` (errors, actions), then the plan's, without ``changed``."""
    details = dict(first)
    details.update((k, v) for k, v in _result(result, False).items() if k != "changed" and k not in first)
    return details


def _planned(warn, result):
    """Warn of the plan's warnings (``warn``: a callable); raise its problems as one MigError when it is not valid."""
    for warning in result.warnings or []:
        warn(warning)
    if not result.valid:
        errors = result.errors
        raise MigError("MIG config '%s' is not valid for this node (%d problem(s)); nothing was changed: %s"
                       % (result.config, len(errors), "; ".join(errors)), **_details(result, errors=errors))
    return result


def plan_offline(facts, entries, config_name, warn):
    """The plan of replayed facts, as the module's check mode returns it (its result dict).

    The one function behind the module's replay and the mig role's plan from recorded facts (the
    ``mig_replay_plan`` filter, on the controller): the same answer either way. Raises MigError when the plan is
    not valid.
    """
    result = _planned(warn, mig_plan.plan_node(facts, entries, config_name, offline=True))
    return result, _result(result, result.changed)


def run_offline(module, facts, entries):
    result, out = plan_offline(facts, entries, module.params["config_name"], module.warn)
    if result.changed and not module.check_mode:
        raise MigError("replayed facts can only be planned: run in check mode, or against the live node "
                       "to apply", **_details(result))
    return out


def _live_rules(mig):
    """The node's facts and each GPU's MIG rules: NVML's where it lists them, else the table's."""
    handles = mig.handles()
    facts = mig.facts()
    families = {}
    for gpu, handle in zip(facts["gpus"], handles):
        table = mig_plan.table_rules(gpu)
        live = mig.rules(handle, table.name if table else gpu["name"]) if gpu["mig"]["supported"] else None
        families[gpu["index"]] = live or table
    return facts, families


def _apply(module, mig, result, families, reset):
    """Apply every GPU's plan. Returns (actions, reboot reasons, GPUs pending a reboot)."""
    actions, reasons, pending = [], [], set()
    for gp in result.gpus:
        try:
            done, reason = mig.apply_gpu(gp.index, gp, families.get(gp.index),
                                         module.params["allow_reset"], module.params["clients_stopped"], reset)
        except mig_apply.MigApplyError as exc:
            raise MigError(str(exc), **_details(result, actions=actions + exc.actions))
        actions.extend(done)
        if reason:
            reasons.append(reason)
            pending.add(gp.index)
    return actions, reasons, pending


def run_live(module, entries, nvml, reset):
    name = module.params["config_name"]
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise MigError("NVML is not available on this node (%s): install the NVIDIA driver, or plan with "
                       "replayed facts (facts_file)" % exc)
    try:
        mig = mig_apply.NvmlMig(nvml)
        facts, families = _live_rules(mig)

        def rules_for(gpu):
            return families.get(gpu["index"])

        result = _planned(module.warn, mig_plan.plan_node(facts, entries, name, rules_for=rules_for, offline=False))
        if module.check_mode or not result.changed:
            return _result(result, result.changed)
        actions, reasons, pending = _apply(module, mig, result, families, reset)
        after = mig.facts()
        checked = dict(after, gpus=[g for g in after["gpus"] if g["index"] not in pending])
        problems, _verified = mig_apply.verify(checked, entries, name, rules_for, mig)
        if problems:
            raise MigError("MIG layout '%s' was applied but does not verify: %s" % (name, "; ".join(problems)),
                           **_details(result, problems=problems, actions=actions))
        return _result(result, bool(actions), actions, reasons)
    except nvml.NVMLError as exc:
        raise MigError("NVML call failed: %s" % exc)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def read_inputs(params):
    """The selected config entries and the replayed facts (None for a live run), from the module's ``params``
    (config or config_file, config_name, facts or facts_file); raises MigError on bad input."""
    check_config_name(params["config_name"])
    document = params["config"]
    if params["config_file"]:
        document = read_document(params["config_file"], "config_file")
    try:
        entries = mig_config.select(mig_config.parse(document), params["config_name"])
    except mig_config.MigConfigError as exc:
        raise MigError("invalid MIG config '%s' (%d problem(s)); nothing was changed: %s"
                       % (params["config_name"], len(exc.problems), "; ".join(exc.problems)), errors=exc.problems)

    facts = params["facts"]
    try:
        if params["facts_file"]:
            facts = nvml_utils.load_replay(params["facts_file"], "facts_file")
        elif facts is not None:
            facts = nvml_utils.validate_replay(facts, "facts")
    except nvml_utils.ReplayError as exc:
        raise MigError("%s; nothing was changed" % exc)
    return entries, facts


def run(module, nvml, reset, nvml_import_error=None):
    """The module's result: plan replayed facts, or plan (and apply) the live node through ``nvml``.

    ``nvml``: the pynvml module, None where there is none (``nvml_import_error``, the reason
    module_utils/_nvml/binding.resolve gives, says why).
    Raises MigError for every problem.
    """
    entries, facts = read_inputs(module.params)
    if facts is not None:
        return run_offline(module, facts, entries)
    if nvml is None:
        raise MigError(str(nvml_import_error) if nvml_import_error else missing_required_lib("nvidia-ml-py"))
    return run_live(module, entries, nvml, reset)
