"""The MIG hardware rules and the placement search, for every GPU family in the table."""
import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._mig import profiles as P
from mig_helpers import DEVICE_IDS

# family: (1g, 1g+me, 1g with 2 memory slices, 2g, 3g, 4g, 7g), from NVIDIA's MIG user guide
SEVEN_SLICE = {
    "A100 40GB": ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "A100 80GB": ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100 80GB": ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100 NVL 94GB": ("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
    "H100 96GB / GH200": ("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
    "H200 141GB": ("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    "B200": ("1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
    "GB200": ("1g.23gb", "1g.23gb+me", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"),
}
MAX = (7, 1, 4, 3, 2, 1, 1)
STARTS = ((0, 1, 2, 3, 4, 5, 6), (0, 1, 2, 3, 4, 5, 6), (0, 2, 4, 6), (0, 2, 4), (0, 4), (0,), (0,))
SIZES = (1, 1, 2, 2, 4, 4, 8)
ALL_IDS = {
    "A100 40GB": ("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"),
    "A100 80GB": ("0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE"),
    "H100 80GB": ("0x233010DE", "0x233110DE", "0x232210DE"),
    "H100 NVL 94GB": ("0x232110DE", "0x233A10DE"),
    "H100 96GB / GH200": ("0x234210DE", "0x233D10DE"),
    "H200 141GB": ("0x233510DE", "0x233B10DE"),
    "B200": ("0x290110DE",), "GB200": ("0x294110DE",), "A30 24GB": ("0x20B710DE",),
}


@pytest.mark.parametrize("family,ids", sorted(ALL_IDS.items()))
def test_device_ids_map_to_their_family(family, ids):
    for device_id in ids:
        assert P.family_for(device_id).name == family
        assert P.family_for(device_id.lower()).name == family


def test_unknown_device_has_no_table_entry():
    assert P.family_for("0x26B510DE") is None  # L40S: no MIG
    assert P.family_for(None) is None
    assert P.family_for("garbage") is None


@pytest.mark.parametrize("family", sorted(SEVEN_SLICE))
def test_seven_slice_profiles_limits_and_placements(family):
    fam = P.family_for(DEVICE_IDS[family])
    assert (fam.compute_slices, fam.memory_slices, fam.max_instances) == (7, 8, 7)
    assert sorted(fam.profiles) == sorted(SEVEN_SLICE[family])
    for name, most, starts, size in zip(SEVEN_SLICE[family], MAX, STARTS, SIZES):
        profile = fam.profiles[name]
        assert (profile.max_count, profile.starts, profile.memory_slices) == (most, starts, size), name


def test_a30_geometry():
    fam = P.family_for("0x20B710DE")
    assert (fam.compute_slices, fam.memory_slices, fam.max_instances) == (4, 4, 4)
    got = dict((n, (p.max_count, p.starts, p.memory_slices)) for n, p in fam.profiles.items())
    assert got == {"1g.6gb": (4, (0, 1, 2, 3), 1), "1g.6gb+me": (1, (0, 1, 2, 3), 1),
                   "2g.12gb": (2, (0, 2), 2), "2g.12gb+me": (1, (0, 2), 2), "4g.24gb": (1, (0,), 4)}


def _valid_layouts(names):
    one, one_me, one_2m, two, three, four, seven = names
    return [{one: 7}, {one_2m: 4}, {two: 3, one: 1}, {three: 2}, {four: 1, three: 1},
            {three: 1, one: 4}, {seven: 1}, {four: 1, two: 1, one: 1}, {one_me: 1, one: 6},
            {two: 2, three: 1}, {one_2m: 3, two: 1}, {one_2m: 1, one: 6}]


@pytest.mark.parametrize("family", sorted(SEVEN_SLICE))
def test_valid_layouts_are_accepted_and_placed(family):
    fam = P.family_for(DEVICE_IDS[family])
    for layout in _valid_layouts(SEVEN_SLICE[family]):
        assert P.check_layout(fam, layout) == [], layout
        placed = P.find_placements(fam, layout)
        assert sorted(n for n, _s in placed) == sorted(n for n, c in layout.items() for _i in range(c))
        used = 0
        for name, start in placed:
            assert start in fam.profiles[name].starts
            mask = fam.profiles[name].mask(start)
            assert not used & mask, (layout, placed)
            used |= mask


@pytest.mark.parametrize("family", sorted(SEVEN_SLICE))
def test_each_limit_broken_is_reported(family):
    one, one_me, one_2m, two, three, four, seven = SEVEN_SLICE[family]
    fam = P.family_for(DEVICE_IDS[family])
    assert P.check_layout(fam, {seven: 2}) == ["%s x2 exceeds the 1 allowed on %s" % (seven, family)]
    assert P.check_layout(fam, {one: 8}) == ["%s x8 exceeds the 7 allowed on %s" % (one, family)]
    assert P.check_layout(fam, {one_2m: 5})[0].startswith("%s x5 exceeds the 4 allowed" % one_2m)
    assert P.check_layout(fam, {two: 4})[0].startswith("%s x4 exceeds the 3 allowed" % two)
    assert P.check_layout(fam, {three: 3})[0].startswith("%s x3 exceeds the 2 allowed" % three)
    assert P.check_layout(fam, {four: 2})[0].startswith("%s x2 exceeds the 1 allowed" % four)
    assert P.check_layout(fam, {one_me: 2})[0].startswith("%s x2 exceeds the 1 allowed" % one_me)
    # more GPU instances than 7
    assert "8 GPU instances exceed the 7 allowed" in P.check_layout(fam, {one: 7, one_me: 1})[0]
    # compute slices: 4g + 2g x2 = 8 of 7
    assert P.check_layout(fam, {four: 1, two: 2}) == ["the layout needs 8 compute slices; %s has 7" % family]
    # memory slices: 3g x2 + 1g = 9 of 8
    assert P.check_layout(fam, {three: 2, one: 1}) == ["the layout needs 9 memory slices; %s has 8" % family]
    # unknown profile names the family's profiles
    problem = P.check_layout(fam, {"5g.50gb": 1})[0]
    assert problem.startswith("5g.50gb is not a MIG profile of %s" % family) and seven in problem
    assert "compute instance sub-profile" in P.check_layout(fam, {"1c.3g.40gb": 1})[0]


def test_a30_limits():
    fam = P.family_for("0x20B710DE")
    assert P.check_layout(fam, {"1g.6gb": 4}) == []
    assert P.check_layout(fam, {"2g.12gb": 1, "1g.6gb": 2}) == []
    assert P.check_layout(fam, {"2g.12gb+me": 1, "2g.12gb": 1}) == []
    assert P.check_layout(fam, {"1g.6gb": 5})[0] == "1g.6gb x5 exceeds the 4 allowed on A30 24GB"
    assert P.check_layout(fam, {"2g.12gb": 3})[0] == "2g.12gb x3 exceeds the 2 allowed on A30 24GB"
    assert "2 +me instances exceed the 1 allowed" in P.check_layout(fam, {"1g.6gb+me": 1, "2g.12gb+me": 1})[0]
    assert P.check_layout(fam, {"4g.24gb": 1, "1g.6gb": 1}) == [
        "the layout needs 5 compute slices; A30 24GB has 4", "the layout needs 5 memory slices; A30 24GB has 4"]
    assert P.find_placements(fam, {"2g.12gb": 1, "1g.6gb": 2}) == [("2g.12gb", 0), ("1g.6gb", 2), ("1g.6gb", 3)]


def test_three_g_plus_four_one_g_fits_only_with_the_3g_at_4():
    fam = P.family_for("0x233010DE")
    placed = P.find_placements(fam, {"3g.40gb": 1, "1g.10gb": 4})
    assert placed == [("3g.40gb", 4), ("1g.10gb", 0), ("1g.10gb", 1), ("1g.10gb", 2), ("1g.10gb", 3)]
    # a greedy pass (largest first, lowest start) takes start 0 and strands the 1g instances
    assert P.find_placements(fam, {"1g.10gb": 4}, fixed=[("3g.40gb", 0)]) is None


def test_fixed_instances_constrain_the_search():
    fam = P.family_for("0x233010DE")
    # a kept 1g at 5 blocks the 3g at 4 and the 3g at 0 leaves only 4 and 6
    assert P.find_placements(fam, {"3g.40gb": 1, "1g.10gb": 2}, fixed=[("1g.10gb", 5)]) == [
        ("3g.40gb", 0), ("1g.10gb", 4), ("1g.10gb", 6)]
    assert P.find_placements(fam, {"3g.40gb": 2}, fixed=[("1g.10gb", 5)]) is None
    # overlapping fixed instances are rejected
    assert P.find_placements(fam, {}, fixed=[("2g.20gb", 0), ("1g.10gb", 1)]) is None


def test_overlap_reported_when_live_placements_are_narrower():
    # a GPU whose driver offers the 2g only at 2 and 4 (NVML placements win over the table)
    fam = P.Family("test GPU", [
        P.Profile("1g.10gb", 0, 1, 1, 7, range(0, 7)),
        P.Profile("2g.20gb", 1, 2, 2, 3, (2, 4)),
        P.Profile("3g.40gb", 2, 3, 4, 2, (0, 4)),
    ], source="nvml")
    problems = P.check_layout(fam, {"3g.40gb": 1, "2g.20gb": 2})
    assert problems == ["no placement of 2g.20gb x2 + 3g.40gb x1 fits on test GPU: the instances would overlap "
                        "(placements: 2g.20gb at 2/4; 3g.40gb at 0/4)"]


def test_best_keep_keeps_what_can_stay():
    fam = P.family_for("0x233010DE")
    existing = [(10 + s, "1g.10gb", s) for s in range(7)]
    kept, created = P.best_keep(fam, {"3g.40gb": 1, "1g.10gb": 4}, existing)
    assert kept == [10, 11, 12, 13]
    assert created == [("3g.40gb", 4)]
    # 1g at 0..6 -> 3g x2: nothing can stay
    kept, created = P.best_keep(fam, {"3g.40gb": 2}, existing)
    assert kept == [] and created == [("3g.40gb", 0), ("3g.40gb", 4)]


def test_device_id_helpers():
    assert P.pci_device("0x233010DE") == 0x2330
    assert P.pci_device(0x233010DE) == 0x2330
    assert P.normalize_device_id("0x233010de") == "0x233010DE"
    assert P.strip_ci_prefix("1c.3g.40gb") == "3g.40gb"
    assert P.strip_ci_prefix("3g.40gb") == "3g.40gb"


class _Info(object):
    def __init__(self, name):
        self.name = name


@pytest.mark.parametrize("profile_id,name,expected", [
    (P.GI_1_SLICE_GFX, b"MIG 1g.24gb+gfx", "1g.24gb+gfx"),
    (P.GI_1_SLICE_GFX, b"MIG 1g.24gb", "1g.24gb+gfx"),          # a driver that leaves the suffix out
    (P.GI_2_SLICE_NO_ME, "MIG 2g.48gb", "2g.48gb-me"),
    (P.GI_1_SLICE_ALL_ME, "MIG 1g.24gb", "1g.24gb+me.all"),
    (P.GI_1_SLICE_REV1, "MIG 1g.10gb+me", "1g.10gb+me"),
    (P.GI_1_SLICE_REV2, "MIG 1g.20gb", "1g.20gb"),             # REV2 is a size, not an attribute
    (P.GI_1_SLICE, "MIG 1g.10gb", "1g.10gb"),
])
def test_nvml_profile_names_carry_the_attribute_of_their_id(profile_id, name, expected):
    assert P._nvml_profile_name(_Info(name), profile_id) == expected


def test_new_gpus_nvidia_configs_name_are_in_the_table():
    names = dict((device_id, P.family_for(device_id).name) for device_id in (
        "0x232410DE", "0x20B610DE", "0x232910DE", "0x234810DE", "0x318210DE", "0x31C210DE", "0x2BB510DE"))
    assert names == {"0x232410DE": "H100 80GB", "0x20B610DE": "PG506 96GB", "0x232910DE": "H100 96GB / GH200",
                     "0x234810DE": "GH200 144GB HBM3e", "0x318210DE": "B300", "0x31C210DE": "GB300",
                     "0x2BB510DE": "RTX PRO 6000 Blackwell 96GB"}
    rtx = P.family_for("0x2BB510DE")
    assert (rtx.compute_slices, rtx.memory_slices, rtx.max_instances) == (4, 4, 4)
    assert P.check_layout(rtx, {"1g.24gb+gfx": 4}) == []
    assert P.check_layout(rtx, {"1g.24gb-me": 2, "2g.48gb": 1}) == []
    assert P.check_layout(rtx, {"1g.24gb+me.all": 1, "2g.48gb+me.all": 1}) == [
        "2 +me instances exceed the 1 allowed on RTX PRO 6000 Blackwell 96GB "
        "(one set of media engines, which +me and +me.all share)"]
    assert P.check_layout(rtx, {"4g.96gb": 1, "1g.24gb": 1}) == [
        "the layout needs 5 compute slices; RTX PRO 6000 Blackwell 96GB has 4",
        "the layout needs 5 memory slices; RTX PRO 6000 Blackwell 96GB has 4"]
    b300 = P.family_for("0x318210DE")
    assert b300.profile("7g.269gb").memory_slices == 8 and b300.profile("1g.67gb").max_count == 4


@pytest.mark.parametrize("name,expected", [
    ("1g.10gb", (1, 10, (), ())),
    ("1g.24gb+gfx", (1, 24, ("gfx",), ())),
    ("2g.48gb+me.all", (2, 48, ("me.all",), ())),
    ("1g.24gb-me", (1, 24, (), ("me",))),
    ("1g.10gb+me", (1, 10, ("me",), ())),
])
def test_parse_profile_name(name, expected):
    assert P.parse_profile_name(name) == expected
