# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the MIG model's types.
"""The MIG model's types: the error, a profile name, and one GPU's plan.

They follow NVIDIA mig-parted's ``pkg/types``: :class:`MigProfile` is its
``MigProfile`` (``C``, ``G``, ``GB`` and the attributes after ``+``), parsed once by
:func:`parse_profile` as ``ParseMigProfile`` does, with the ``-attr`` form and the
``+me.all`` and ``+gfx`` attributes that newer GPUs name. :class:`MigError` is the one
error the MIG code raises, like kubernetes.core's ``CoreException``: the module
catches it once and fails with its message and details. :class:`GpuMigPlan` is one
GPU's plan; :meth:`GpuMigPlan.to_dict` is its form in module results, plan.json and
facts, unchanged from when the plan was a dict.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import re


class MigError(Exception):
    """A MIG problem to report: ``message`` for the user, ``details`` for the module result.

    Raised wherever the problem is found and caught once, in the module's ``main()``,
    which fails with ``msg=message`` and the details as further result keys.
    """

    def __init__(self, message, **details):
        super(MigError, self).__init__(message)
        self.message = message
        self.details = details

    def result(self):
        """The keyword arguments of fail_json: the message and the details."""
        result = {"msg": self.message}
        result.update(self.details)
        return result


# "[<c>c.]<g>g.<gb>gb" as mig-parted spells a profile, then an optional "+attr[,attr]"
# or "-attr": +me (media extensions, the *_REV1 ids), +me.all (all media engines,
# *_ALL_ME), -me (no media engine, *_NO_ME), +gfx (graphics, *_GFX).
_HEAD = re.compile(r"^(?:(?P<c>[0-9]+)c\.)?(?P<g>[0-9]+)g\.(?P<gb>[0-9]+)gb")
_TAIL = re.compile(r"^(?P<attrs>[+-][A-Za-z0-9.,]+)?\Z")
ATTRIBUTES = ("me", "me.all", "gfx")
NEGATIVE_ATTRIBUTES = ("me",)
# Attributes that take the GPU's shared media engines: at most one such instance.
MEDIA_ATTRIBUTES = ("me", "me.all")
_EXAMPLES = "1g.10gb, 1g.10gb+me, 1g.24gb-me or 1g.24gb+gfx"


class MigProfile(collections.namedtuple("MigProfile", "c g gb attributes negative_attributes")):
    """A MIG profile name as a value: ``1g.10gb``, ``1g.10gb+me``, ``1g.24gb-me``, ``1c.3g.40gb``.

    ``c``: compute slices of a compute instance sub-profile (``1c.3g.40gb``), None for
    a GPU instance profile (one compute instance over all of its ``g`` slices);
    ``attributes`` and ``negative_attributes`` in the order the name gives them.
    """

    __slots__ = ()

    def __str__(self):
        head = "%dg.%dgb" % (self.g, self.gb) if self.c is None else "%dc.%dg.%dgb" % (self.c, self.g, self.gb)
        if self.attributes:
            return head + "+" + ",".join(self.attributes)
        if self.negative_attributes:
            return head + "-" + ",".join(self.negative_attributes)
        return head

    @property
    def name(self):
        return str(self)

    @property
    def is_sub_profile(self):
        """A compute instance sub-profile (``1c.3g.40gb``), not a whole GPU instance."""
        return self.c is not None

    @property
    def gpu_instance(self):
        """The GPU instance profile of a sub-profile (``1c.3g.40gb`` -> ``3g.40gb``); itself otherwise."""
        return self._replace(c=None)

    @property
    def media_extensions(self):
        """+me and +me.all take the GPU's shared media engines; -me and +gfx do not."""
        return any(a in MEDIA_ATTRIBUTES for a in self.attributes)


def sub_profile_message(name):
    return ("%s is a compute instance sub-profile; this module manages whole GPU instances "
            "(one compute instance each)" % name)


def parse_profile(name, gpu_instance=False):
    """The :class:`MigProfile` of ``name``; raises MigError naming the value and what is wrong.

    ``gpu_instance``: refuse a compute instance sub-profile (``1c.3g.40gb``), as a
    mig-parted config entry, whose instances get one compute instance each, must.
    """
    if not isinstance(name, str) or not name:
        raise MigError("a profile name must be a string such as 1g.10gb", profile=name)
    head = _HEAD.match(name)
    if head and head.group("c") is not None and gpu_instance:
        raise MigError(sub_profile_message(name), profile=name)
    tail = _TAIL.match(name[head.end():]) if head else None
    if not tail:
        raise MigError("%r is not a MIG profile name such as %s" % (name, _EXAMPLES), profile=name)
    suffix = tail.group("attrs") or ""
    attrs, negative = (), ()
    if suffix:
        items = suffix[1:].split(",")
        known = ATTRIBUTES if suffix[0] == "+" else NEGATIVE_ATTRIBUTES
        unknown = [a for a in items if a not in known]
        if unknown or len(set(items)) != len(items):
            raise MigError("%s: attribute %s%s is not one of %s" % (
                name, suffix[0], ",".join(unknown) or "(repeated)", ", ".join(suffix[0] + a for a in known)),
                profile=name)
        if suffix[0] == "+":
            attrs = tuple(items)
        else:
            negative = tuple(items)
    c = None if head.group("c") is None else int(head.group("c"))
    g, gb = int(head.group("g")), int(head.group("gb"))
    if g < 1 or gb < 1 or c == 0:
        raise MigError("%s: slices and memory must be at least 1" % name, profile=name)
    return MigProfile(c, g, gb, attrs, negative)


def profile_or_none(name):
    """The :class:`MigProfile` of ``name``, or None where it is not one (a name read from a GPU)."""
    try:
        return parse_profile(name)
    except MigError:
        return None


# --- plans ---------------------------------------------------------------------

ENABLED, DISABLED = "enabled", "disabled"
# The layout key of a MIG device NVML could not name (nvml_facts records "profile": null):
# it matches no requested profile, so a config that selects the GPU replaces it.
UNNAMED = "unnamed"


class MigState(collections.namedtuple("MigState", "mig layout instances")):
    """A GPU's MIG side before or after: mode, {profile: count} and the instances at their placements."""

    __slots__ = ()

    def to_dict(self):
        return {"mig": self.mig, "layout": self.layout, "instances": self.instances}


class GpuMigPlan(object):
    """One GPU's MIG plan: what it is, the mode change and the instances to keep, destroy and create.

    Instances are dicts (``gpu_instance_id``, ``profile``, ``start``, ``size``; a created
    one has no ``gpu_instance_id``), as the result shows them.
    """

    __slots__ = ("index", "uuid", "name", "device_id", "family", "rules", "entry", "mig_supported",
                 "current_mode", "pending_mode", "wanted_mode", "set_mode", "reset_required",
                 "before", "after", "keep", "destroy", "create")

    def __init__(self, index, uuid, name, device_id, family, rules, entry, mig_supported,
                 current_mode, pending_mode, before):
        self.index, self.uuid, self.name, self.device_id = index, uuid, name, device_id
        self.family, self.rules, self.entry, self.mig_supported = family, rules, entry, mig_supported
        self.current_mode, self.pending_mode, self.wanted_mode = current_mode, pending_mode, None
        self.set_mode = self.reset_required = False
        self.before = self.after = before
        self.keep, self.destroy, self.create = [], [], []

    @property
    def changed(self):
        return bool(self.set_mode or self.reset_required or self.destroy or self.create)

    def to_dict(self):
        """The plan as module results, plan.json and facts give it (keys in this order)."""
        return {
            "index": self.index, "uuid": self.uuid, "name": self.name, "device_id": self.device_id,
            "family": self.family, "rules": self.rules, "entry": self.entry, "mig_supported": self.mig_supported,
            "mode": {"current": self.current_mode, "pending": self.pending_mode, "wanted": self.wanted_mode},
            "set_mode": self.set_mode, "reset_required": self.reset_required, "before": self.before.to_dict(),
            "keep": self.keep, "destroy": self.destroy, "create": self.create, "changed": self.changed,
            "after": self.after.to_dict(),
        }

    def describe(self, side):
        """One line for diff output of ``side`` (before or after): mode and instances at their placements."""
        state = self.before if side == "before" else self.after
        head = "GPU %s %s: MIG %s" % (self.index, self.name or "", state.mig or "unsupported")
        if state.mig != ENABLED:
            return head
        parts = ["%s@%s" % (i["profile"] or UNNAMED, "?" if i["start"] is None else i["start"]) for i in state.instances]
        return "%s: %s" % (head, ", ".join(parts) or "no instances")

    @classmethod
    def from_dict(cls, data):
        """The plan from its :meth:`to_dict` form (a plan read back from a result or plan.json)."""
        mode = data.get("mode") or {}
        plan = cls(data.get("index"), data.get("uuid"), data.get("name"), data.get("device_id"), data.get("family"),
                   data.get("rules"), data.get("entry"), data.get("mig_supported"), mode.get("current"),
                   mode.get("pending"), _state(data.get("before")))
        plan.wanted_mode = mode.get("wanted")
        plan.set_mode, plan.reset_required = bool(data.get("set_mode")), bool(data.get("reset_required"))
        plan.after = _state(data.get("after"))
        plan.keep, plan.destroy, plan.create = (list(data.get(k) or []) for k in ("keep", "destroy", "create"))
        return plan

    @classmethod
    def of(cls, value):
        """``value`` as a GpuMigPlan: itself, or one from its dict form."""
        return value if isinstance(value, cls) else cls.from_dict(value)


def _state(data):
    data = data or {}
    return MigState(data.get("mig"), data.get("layout") or {}, data.get("instances") or [])


class NodeMigPlan(object):
    """A node's plan for one config: every problem, what was noted, and each GPU's plan.

    ``mig_unsupported`` is None where the facts could not be planned at all (then the
    dict form leaves it out); ``k8s_resources`` is what the node exposes per strategy.
    """

    __slots__ = ("config", "errors", "warnings", "notes", "mig_unsupported", "gpus", "k8s_resources")

    def __init__(self, config, errors, warnings, notes, mig_unsupported, gpus, k8s_resources):
        self.config, self.errors, self.warnings, self.notes = config, errors, warnings, notes
        self.mig_unsupported, self.gpus, self.k8s_resources = mig_unsupported, gpus, k8s_resources

    @property
    def valid(self):
        return not self.errors

    @property
    def changed(self):
        return self.valid and any(gp.changed for gp in self.gpus)

    def to_dict(self):
        """The plan as the module returns it and plan.json holds it (keys in this order)."""
        out = {"config": self.config, "valid": self.valid, "errors": self.errors, "warnings": self.warnings,
               "notes": self.notes}
        if self.mig_unsupported is not None:
            out["mig_unsupported"] = self.mig_unsupported
        out.update(gpus=[gp.to_dict() for gp in self.gpus], changed=self.changed, k8s_resources=self.k8s_resources)
        return out
