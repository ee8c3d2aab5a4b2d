# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the nvidia_mig module's run.
"""The nvidia_mig module's work, given its AnsibleModule: read the inputs, plan, apply, verify.

``run_offline`` plans replayed facts; ``run_live`` plans the node's GPUs through
NVML and applies the plan outside check mode. Both end the module (exit_json or
fail_json), like the module body they came from.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.gpuops.platform.plugins.module_utils._common.imports import optional_import
from ansible_collections.gpuops.platform.plugins.module_utils._mig import apply as mig_apply
from ansible_collections.gpuops.platform.plugins.module_utils._mig import config as mig_config
from ansible_collections.gpuops.platform.plugins.module_utils._mig import plan as mig_plan
from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as nvml_utils

yaml, _YAML_IMPORT_ERROR = optional_import("yaml")


def read_document(module, path, option):
    """The JSON or YAML document in ``path``; fails naming ``option`` and the problem."""
    try:
        text = nvml_utils.read_text_file(path, option)
    except nvml_utils.ReplayError as exc:
        module.fail_json(msg="%s; nothing was changed" % exc)
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        # RecursionError: Python before 3.12 refuses deeply nested JSON; YAML says what it is
        pass
    if yaml is None:
        module.fail_json(msg=missing_required_lib("PyYAML", reason="to read the YAML file %s" % path))
    try:
        # libyaml's loader where PyYAML has it: NVIDIA's config files load 10x faster
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        module.fail_json(msg="%s %s is neither JSON nor YAML: %s; nothing was changed" % (option, path, exc))
    except (ValueError, TypeError, RecursionError) as exc:
        module.fail_json(msg="%s %s cannot be read as YAML: %s; nothing was changed" % (option, path, exc))


def check_config_name(module, name):
    # printed in messages and plans; a control character would forge output lines
    if not name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        module.fail_json(msg="config_name %r must be a non-empty name without control characters "
                             "(a key of mig-configs); nothing was changed" % (name,))


def _result(result, changed, actions=(), reboot_reasons=()):
    return dict(changed=changed, plan=dict((k, v) for k, v in result.items() if k != "k8s_resources"),
                k8s_resources=result["k8s_resources"], reboot_required=bool(reboot_reasons),
                reboot_reasons=list(reboot_reasons), actions=list(actions), diff=mig_plan.diff(result))


def _fail_invalid(module, result):
    errors = result["errors"]
    module.fail_json(msg="MIG config '%s' is not valid for this node (%d problem(s)); nothing was changed: %s"
                     % (result["config"], len(errors), "; ".join(errors)), errors=errors,
                     **dict((k, v) for k, v in _result(result, False).items() if k != "changed"))


def _warn(module, result):
    for warning in result.get("warnings") or []:
        module.warn(warning)


def run_offline(module, facts, entries):
    result = mig_plan.plan(facts, entries, module.params["config_name"], offline=True)
    _warn(module, result)
    if not result["valid"]:
        _fail_invalid(module, result)
    if result["changed"] and not module.check_mode:
        module.fail_json(msg="replayed facts can only be planned: run in check mode, or against the live node "
                             "to apply", **dict((k, v) for k, v in _result(result, False).items() if k != "changed"))
    module.exit_json(**_result(result, result["changed"]))


def run_live(module, entries, nvml, reset):
    name = module.params["config_name"]
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        module.fail_json(msg="NVML is not available on this node (%s): install the NVIDIA driver, or plan with "
                             "replayed facts (facts_file)" % exc)
    try:
        mig = mig_apply.NvmlMig(nvml)
        handles = mig.handles()
        facts = mig.facts()
        families = {}
        for gpu, handle in zip(facts["gpus"], handles):
            table = mig_plan.table_rules(gpu)
            live = mig.rules(handle, table.name if table else gpu["name"]) if gpu["mig"]["supported"] else None
            families[gpu["index"]] = live or table

        def rules_for(gpu):
            return families.get(gpu["index"])

        result = mig_plan.plan(facts, entries, name, rules_for=rules_for, offline=False)
        _warn(module, result)
        if not result["valid"]:
            _fail_invalid(module, result)
        if module.check_mode or not result["changed"]:
            module.exit_json(**_result(result, result["changed"]))

        actions, reasons, pending = [], [], set()
        for gp in result["gpus"]:
            try:
                done, reason = mig.apply_gpu(gp["index"], gp, families.get(gp["index"]),
                                             module.params["allow_reset"], module.params["clients_stopped"], reset)
            except mig_apply.MigApplyError as exc:
                module.fail_json(msg=str(exc), actions=actions + exc.actions,
                                 **dict((k, v) for k, v in _result(result, bool(actions + exc.actions)).items()
                                        if k not in ("changed", "actions")))
            actions.extend(done)
            if reason:
                reasons.append(reason)
                pending.add(gp["index"])

        after = mig.facts()
        checked = dict(after, gpus=[g for g in after["gpus"] if g["index"] not in pending])
        problems, _verified = mig_apply.verify(checked, entries, name, rules_for, mig)
        if problems:
            module.fail_json(msg="MIG layout '%s' was applied but does not verify: %s" % (name, "; ".join(problems)),
                             problems=problems, actions=actions,
                             **dict((k, v) for k, v in _result(result, True).items() if k not in ("changed", "actions")))
        module.exit_json(**_result(result, bool(actions), actions, reasons))
    except nvml.NVMLError as exc:
        module.fail_json(msg="NVML call failed: %s" % exc)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def read_inputs(module):
    """The selected config entries and the replayed facts (None for a live run); fails on bad input."""
    params = module.params
    check_config_name(module, params["config_name"])
    document = params["config"]
    if params["config_file"]:
        document = read_document(module, params["config_file"], "config_file")
    try:
        entries = mig_config.select(mig_config.parse(document), params["config_name"])
    except mig_config.MigConfigError as exc:
        module.fail_json(msg="invalid MIG config '%s' (%d problem(s)); nothing was changed: %s"
                         % (params["config_name"], len(exc.problems), "; ".join(exc.problems)), errors=exc.problems)

    facts = params["facts"]
    try:
        if params["facts_file"]:
            facts = nvml_utils.load_replay(params["facts_file"], "facts_file")
        elif facts is not None:
            facts = nvml_utils.validate_replay(facts, "facts")
    except nvml_utils.ReplayError as exc:
        module.fail_json(msg="%s; nothing was changed" % exc)
    return entries, facts
