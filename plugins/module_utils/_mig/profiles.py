# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): MIG profiles, limits and placements per GPU family.
"""MIG hardware rules: profiles, limits and placements per GPU family.

The tables follow NVIDIA's MIG user guide. Placements are in memory slices
(start, size), the unit NVML uses in nvmlGpuInstancePlacement_t. On a live GPU
:func:`family_from_nvml` builds the same structure from what the driver reports,
which always wins over the table.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import itertools

from ansible_collections.gpuops.platform.plugins.module_utils._mig.model import (
    MigError, parse_profile, profile_or_none, sub_profile_message)

# NVML GPU instance / compute instance profile ids (nvml.h, NVML_GPU_INSTANCE_PROFILE_*).
GI_1_SLICE, GI_2_SLICE, GI_3_SLICE, GI_4_SLICE, GI_7_SLICE = 0x0, 0x1, 0x2, 0x3, 0x4
GI_1_SLICE_REV1, GI_2_SLICE_REV1, GI_1_SLICE_REV2 = 0x7, 0x8, 0x9
GI_1_SLICE_GFX, GI_2_SLICE_GFX, GI_4_SLICE_GFX = 0xA, 0xB, 0xC
GI_1_SLICE_NO_ME, GI_2_SLICE_NO_ME = 0xD, 0xE
GI_1_SLICE_ALL_ME, GI_2_SLICE_ALL_ME = 0xF, 0x10
GI_3_SLICE_GFX = 0x11
# The name suffix each variant id stands for (go-nvlib's MIG profile attributes).
GI_SUFFIX = {GI_1_SLICE_REV1: "+me", GI_2_SLICE_REV1: "+me", GI_1_SLICE_ALL_ME: "+me.all",
             GI_2_SLICE_ALL_ME: "+me.all", GI_1_SLICE_GFX: "+gfx", GI_2_SLICE_GFX: "+gfx",
             GI_3_SLICE_GFX: "+gfx", GI_4_SLICE_GFX: "+gfx", GI_1_SLICE_NO_ME: "-me", GI_2_SLICE_NO_ME: "-me"}
CI_1_SLICE, CI_2_SLICE, CI_3_SLICE, CI_4_SLICE, CI_7_SLICE = 0x0, 0x1, 0x2, 0x3, 0x4
GI_PROFILE_IDS = tuple(range(0x12))  # NVML_GPU_INSTANCE_PROFILE_COUNT in nvml.h 12.x
CI_PROFILE_BY_SLICES = {1: CI_1_SLICE, 2: CI_2_SLICE, 3: CI_3_SLICE, 4: CI_4_SLICE, 7: CI_7_SLICE}


# The device plugin's resource for a MIG device under the mixed strategy.
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


def mig_resource_name(profile):
    """The resource the NVIDIA device plugin advertises for ``profile`` under the mixed MIG strategy.

    As k8s-device-plugin's ``AddDefaultResourcesToConfig`` (internal/rm/rm.go) names it:
    ``strings.ReplaceAll("mig-" + profile, "+", ".")`` under ``nvidia.com/``, so 1g.10gb+me is
    nvidia.com/mig-1g.10gb.me, 1g.24gb+gfx nvidia.com/mig-1g.24gb.gfx, and 1g.23gb-me keeps its "-".
    """
    return (MIG_RESOURCE_PREFIX + profile).replace("+", ".")


def parse_profile_name(name):
    """(slices, gb, attributes, negative attributes) of a GPU instance profile name, attributes sorted.

    Raises MigError saying what is wrong (model.parse_profile, which refuses a compute
    instance sub-profile here).
    """
    profile = parse_profile(name, gpu_instance=True)
    return profile.g, profile.gb, tuple(sorted(profile.attributes)), tuple(sorted(profile.negative_attributes))


class Profile(object):
    """One GPU instance profile on one GPU family."""

    def __init__(self, name, gi_profile_id, compute_slices, memory_slices, max_count, starts,
                 memory_mib=None, nvml_id=None):
        self.name = name
        self.gi_profile_id = gi_profile_id  # NVML_GPU_INSTANCE_PROFILE_* (the profile index)
        self.nvml_id = nvml_id              # the id NVML creates instances with (profile info .id)
        self.ci_profile_id = CI_PROFILE_BY_SLICES.get(compute_slices, CI_1_SLICE)
        self.compute_slices = compute_slices
        self.memory_slices = memory_slices
        self.max_count = max_count
        self.starts = tuple(starts)
        parsed = profile_or_none(name)
        if parsed is not None and parsed.is_sub_profile:
            parsed = None  # not a GPU instance profile: neither its memory nor its engines are known
        # +me and +me.all take the shared media engines; -me and +gfx do not
        self.media_extensions = parsed is not None and parsed.media_extensions
        if memory_mib is None:
            memory_mib = parsed.gb * 1024 if parsed is not None else 0
        self.memory_mib = memory_mib

    def mask(self, start):
        return ((1 << self.memory_slices) - 1) << start

    def to_dict(self):
        return {"name": self.name, "gi_profile_id": self.gi_profile_id,
                "compute_slices": self.compute_slices, "memory_slices": self.memory_slices,
                "max_count": self.max_count,
                "placements": [{"start": s, "size": self.memory_slices} for s in self.starts]}


class Family(object):
    """The MIG rules of one GPU family (or of one live GPU, from NVML)."""

    def __init__(self, name, profiles, compute_slices=7, memory_slices=8, max_instances=7,
                 source="table"):
        self.name = name
        self.profiles = dict((p.name, p) for p in profiles)
        self.compute_slices = compute_slices
        self.memory_slices = memory_slices
        self.max_instances = max_instances
        self.source = source

    def profile(self, name):
        return self.profiles.get(name)


def _seven_slice(name, gb1, gb1m2, gb2, gb3, gb4, gb7):
    """The A100/H100/H200/B200/B300 geometry: 7 compute slices, 8 memory slices."""
    return Family(name, [
        Profile("1g.%dgb" % gb1, GI_1_SLICE, 1, 1, 7, range(0, 7)),
        Profile("1g.%dgb+me" % gb1, GI_1_SLICE_REV1, 1, 1, 1, range(0, 7)),
        Profile("1g.%dgb" % gb1m2, GI_1_SLICE_REV2, 1, 2, 4, (0, 2, 4, 6)),
        Profile("2g.%dgb" % gb2, GI_2_SLICE, 2, 2, 3, (0, 2, 4)),
        Profile("3g.%dgb" % gb3, GI_3_SLICE, 3, 4, 2, (0, 4)),
        Profile("4g.%dgb" % gb4, GI_4_SLICE, 4, 4, 1, (0,)),
        Profile("7g.%dgb" % gb7, GI_7_SLICE, 7, 8, 1, (0,)),
    ])


def _a30():
    """A30: 4 compute slices and 4 memory slices."""
    return Family("A30 24GB", [
        Profile("1g.6gb", GI_1_SLICE, 1, 1, 4, (0, 1, 2, 3)),
        Profile("1g.6gb+me", GI_1_SLICE_REV1, 1, 1, 1, (0, 1, 2, 3)),
        Profile("2g.12gb", GI_2_SLICE, 2, 2, 2, (0, 2)),
        Profile("2g.12gb+me", GI_2_SLICE_REV1, 2, 2, 1, (0, 2)),
        Profile("4g.24gb", GI_4_SLICE, 4, 4, 1, (0,)),
    ], compute_slices=4, memory_slices=4, max_instances=4)


def _rtx_pro_6000():
    """RTX PRO 6000 Blackwell: 4 slices; each size also as -me, +me.all and +gfx."""
    one, two = (0, 1, 2, 3), (0, 2)
    return Family("RTX PRO 6000 Blackwell 96GB", [
        Profile("1g.24gb", GI_1_SLICE, 1, 1, 4, one),
        Profile("1g.24gb-me", GI_1_SLICE_NO_ME, 1, 1, 4, one),
        Profile("1g.24gb+gfx", GI_1_SLICE_GFX, 1, 1, 4, one),
        Profile("1g.24gb+me.all", GI_1_SLICE_ALL_ME, 1, 1, 1, one),
        Profile("2g.48gb", GI_2_SLICE, 2, 2, 2, two),
        Profile("2g.48gb-me", GI_2_SLICE_NO_ME, 2, 2, 2, two),
        Profile("2g.48gb+gfx", GI_2_SLICE_GFX, 2, 2, 2, two),
        Profile("2g.48gb+me.all", GI_2_SLICE_ALL_ME, 2, 2, 1, two),
        Profile("4g.96gb", GI_4_SLICE, 4, 4, 1, (0,)),
        Profile("4g.96gb+gfx", GI_4_SLICE_GFX, 4, 4, 1, (0,)),
    ], compute_slices=4, memory_slices=4, max_instances=4)


# PCI device id (upper 16 bits of NVML's pciDeviceId) -> family. Every id that
# NVIDIA's shipped mig-parted configs name is here (docs/mig-gpus.md lists them).
_FAMILIES = [
    (("20B0", "20B1", "20F1", "20F6"), lambda: _seven_slice("A100 40GB", 5, 10, 10, 20, 20, 40)),
    (("20B2", "20B5", "20F3", "20F5"), lambda: _seven_slice("A100 80GB", 10, 20, 20, 40, 40, 80)),
    (("20B6",), lambda: _seven_slice("PG506 96GB", 12, 24, 24, 48, 48, 96)),
    (("2330", "2331", "2322", "2324"), lambda: _seven_slice("H100 80GB", 10, 20, 20, 40, 40, 80)),
    (("2321", "233A"), lambda: _seven_slice("H100 NVL 94GB", 12, 24, 24, 47, 47, 94)),
    (("2342", "233D", "2329"), lambda: _seven_slice("H100 96GB / GH200", 12, 24, 24, 48, 48, 96)),
    (("2348",), lambda: _seven_slice("GH200 144GB HBM3e", 18, 36, 36, 72, 72, 144)),
    (("2335", "233B"), lambda: _seven_slice("H200 141GB", 18, 35, 35, 71, 71, 141)),
    (("2901",), lambda: _seven_slice("B200", 23, 45, 45, 90, 90, 180)),
    (("2941",), lambda: _seven_slice("GB200", 23, 47, 47, 93, 93, 186)),
    (("3182",), lambda: _seven_slice("B300", 34, 67, 67, 135, 135, 269)),
    (("31C2",), lambda: _seven_slice("GB300", 35, 70, 70, 139, 139, 278)),
    (("20B7",), _a30),
    (("2BB1", "2BB4", "2BB5"), _rtx_pro_6000),
]
FAMILIES = {}
for _ids, _make in _FAMILIES:
    _family = _make()
    for _id in _ids:
        FAMILIES[int(_id, 16)] = _family


def pci_device(device_id):
    """16-bit PCI device from NVML's pciDeviceId ("0x233010DE" or int); None if unparsable."""
    if device_id is None:
        return None
    try:
        value = int(device_id, 16) if not isinstance(device_id, int) else device_id
    except (TypeError, ValueError):
        return None
    return value >> 16 if value > 0xFFFF else value


def normalize_device_id(device_id):
    """Canonical "0x233010DE" form, or None."""
    try:
        value = int(device_id, 16) if not isinstance(device_id, int) else device_id
    except (TypeError, ValueError):
        return None
    return "0x%08X" % value


def family_for(device_id):
    """The table's family for a PCI device id, or None when the table does not know it."""
    return FAMILIES.get(pci_device(device_id))


def strip_ci_prefix(name):
    """ "1c.3g.40gb" -> "3g.40gb" (compute instance sub-profile to its GPU instance profile)."""
    parsed = profile_or_none(name)
    if parsed is not None and parsed.is_sub_profile:
        return name.split(".", 1)[1]
    return name


# --- placement search ------------------------------------------------------

def _expand(family, counts):
    """Profiles to place, biggest and most constrained first (the search branches least)."""
    items = []
    for name, count in counts.items():
        items.extend([family.profiles[name]] * count)
    items.sort(key=lambda p: (-p.memory_slices, len(p.starts), p.name))
    return items


def find_placements(family, counts, fixed=()):
    """Place ``counts`` ({profile: n}) around ``fixed`` ([(profile name, start)]).

    Exact search with backtracking: a greedy pass misses layouts such as 3g + 4x1g on
    a 7-slice GPU, which fits only with the 3g at start 4. Returns a list of
    (profile name, start) for the new instances in a deterministic order, or None.
    """
    used = 0
    for name, start in fixed:
        profile = family.profiles[name]
        mask = profile.mask(start)
        if used & mask:
            return None
        used |= mask
    items = _expand(family, counts)
    chosen = []

    def place(i, used, lowest):
        if i == len(items):
            return True
        profile = items[i]
        # identical profiles take increasing starts: no permutations are retried
        floor = lowest if i and items[i - 1] is profile else -1
        for start in profile.starts:
            if start <= floor:
                continue
            mask = profile.mask(start)
            if start + profile.memory_slices > family.memory_slices or used & mask:
                continue
            chosen.append((profile.name, start))
            if place(i + 1, used | mask, start):
                return True
            chosen.pop()
        return False

    return list(chosen) if place(0, used, -1) else None


def best_keep(family, counts, existing):
    """Which existing instances can stay so that the fewest are destroyed and created.

    ``existing``: [(key, profile name, start)] of instances that are candidates to
    keep (already of a wanted profile and placement known). Returns
    (kept keys, [(profile, start)] to create), trying larger keep sets first.
    """
    candidates = [e for e in existing if counts.get(e[1], 0) > 0]
    for size in range(len(candidates), -1, -1):
        for subset in itertools.combinations(candidates, size):
            remaining = dict(counts)
            ok = True
            for _key, name, _start in subset:
                remaining[name] = remaining.get(name, 0) - 1
                if remaining[name] < 0:
                    ok = False
                    break
            if not ok:
                continue
            remaining = dict((k, v) for k, v in remaining.items() if v > 0)
            placed = find_placements(family, remaining, [(n, s) for _k, n, s in subset])
            if placed is not None:
                return [k for k, _n, _s in subset], placed
    return None, None


# --- validation --------------------------------------------------------------

def check_layout(family, counts):
    """Problems with a wanted layout ({profile: count}) on ``family``, as strings."""
    problems = []
    known = {}
    for name in sorted(counts):
        count = counts[name]
        profile = family.profile(name)
        if profile is None:
            parsed = profile_or_none(name)
            if parsed is not None and parsed.is_sub_profile:
                why = sub_profile_message(name)
            else:
                why = "%s is not a MIG profile of %s (profiles: %s)" % (
                    name, family.name, ", ".join(sorted(family.profiles)))
            problems.append(why)
            continue
        if count > profile.max_count:
            problems.append("%s x%d exceeds the %d allowed on %s" % (name, count, profile.max_count, family.name))
        if count:
            known[name] = count
    if problems:
        return problems
    total = sum(known.values())
    if total > family.max_instances:
        problems.append("%d GPU instances exceed the %d allowed on %s" % (total, family.max_instances, family.name))
    media = sum(c for n, c in known.items() if family.profiles[n].media_extensions)
    if media > 1:
        problems.append("%d +me instances exceed the 1 allowed on %s (one set of media engines, which +me and +me.all share)"
                        % (media, family.name))
    compute = sum(family.profiles[n].compute_slices * c for n, c in known.items())
    if compute > family.compute_slices:
        problems.append("the layout needs %d compute slices; %s has %d" % (compute, family.name, family.compute_slices))
    memory = sum(family.profiles[n].memory_slices * c for n, c in known.items())
    if memory > family.memory_slices:
        problems.append("the layout needs %d memory slices; %s has %d" % (memory, family.name, family.memory_slices))
    if not problems and find_placements(family, known) is None:
        problems.append("no placement of %s fits on %s: the instances would overlap (placements: %s)" % (
            layout_string(known), family.name,
            "; ".join("%s at %s" % (n, "/".join(str(s) for s in family.profiles[n].starts)) for n in sorted(known))))
    return problems


def layout_string(counts):
    return " + ".join("%s x%d" % (n, c) for n, c in sorted(counts.items()) if c) or "no instances"


# --- live rules from NVML ----------------------------------------------------

def _nvml_profile_name(info, profile_id=None):
    """ "MIG 1g.24gb+gfx" -> "1g.24gb+gfx"; a variant id whose name lacks its suffix gets it."""
    name = getattr(info, "name", b"")
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    name = (name or "").strip()
    if name.startswith("MIG "):
        name = name[4:]
    suffix = GI_SUFFIX.get(profile_id)
    parsed = profile_or_none(name) if suffix else None
    if parsed is not None and not (parsed.is_sub_profile or parsed.attributes or parsed.negative_attributes):
        name += suffix
    return name


def family_from_nvml(nvml, handle, label, placements_of):
    """The rules of one live GPU from NVML profile info and possible placements.

    ``placements_of(handle, profile_id, info)`` returns [(start, size)]; it hides the
    ctypes calling convention of nvmlDeviceGetGpuInstancePossiblePlacements.
    Returns None when the GPU reports no MIG profile.
    """
    profiles = []
    compute = memory = 0
    for profile_id in GI_PROFILE_IDS:
        try:
            info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, profile_id)
        except nvml.NVMLError:
            continue  # profile not supported on this GPU (NOT_SUPPORTED / INVALID_ARGUMENT)
        name = _nvml_profile_name(info, profile_id)
        try:
            parse_profile_name(name)
        except MigError:
            continue  # a name this module cannot express in mig-parted's format
        if not info.instanceCount:
            continue
        placements = placements_of(handle, profile_id, info)
        if not placements:
            continue
        size = placements[0][1]
        profiles.append(Profile(name, profile_id, int(info.sliceCount), int(size), int(info.instanceCount),
                                sorted(s for s, _z in placements), memory_mib=int(info.memorySizeMB),
                                nvml_id=int(info.id)))
        compute = max(compute, int(info.sliceCount))
        memory = max([memory] + [s + z for s, z in placements])
    if not profiles:
        return None
    return Family(label, profiles, compute_slices=compute, memory_slices=memory, max_instances=compute,
                  source="nvml")
