"""The mig-parted v1 format: accepted as operators write it, rejected loudly otherwise."""
import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._mig import config as C

# NVIDIA mig-parted's own example layout: filters per model, 'all' devices.
MIG_PARTED_EXAMPLE = {
    "version": "v1",
    "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
        "all-balanced": [
            {"device-filter": ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"], "devices": "all",
             "mig-enabled": True, "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}},
            {"device-filter": "0x233010DE", "devices": "all", "mig-enabled": True,
             "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
        ],
        "custom": [{"devices": [0, 1], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
                   {"devices": [2, 3], "mig-enabled": False}],
    },
}


def test_mig_parted_file_parses_unchanged():
    configs = C.parse(MIG_PARTED_EXAMPLE)
    assert sorted(configs) == ["all-balanced", "all-disabled", "all-enabled", "custom"]
    balanced = configs["all-balanced"]
    assert balanced[0].device_filter == ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]
    assert balanced[1].device_filter == ["0x233010DE"]
    assert balanced[1].mig_devices == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert configs["all-enabled"][0].mig_enabled is True and configs["all-enabled"][0].mig_devices == {}
    custom = configs["custom"]
    assert custom[0].devices == [0, 1] and custom[1].mig_enabled is False


def test_entry_selection_respects_devices_and_filter():
    configs = C.parse(MIG_PARTED_EXAMPLE)
    a100, h100 = configs["all-balanced"]
    assert a100.selects(3, "0x20b010de") and not a100.selects(3, "0x233010DE")
    assert h100.selects(0, "0x233010DE") and not h100.selects(0, None)
    first, second = configs["custom"]
    assert first.selects(1, "0x233010DE") and not first.selects(2, "0x233010DE")
    assert second.selects(2, "0x233010DE")


def test_document_problems_reported_together():
    with pytest.raises(C.MigConfigError) as err:
        C.parse({"version": "v2", "extra": 1, "mig-configs": {"a": []}})
    assert err.value.problems == [
        "unknown top-level key 'extra' (allowed: version, mig-configs)",
        "'version' must be v1, got 'v2'",
    ]


BROKEN = {
    "version": "v1",
    "mig-configs": {
        "a": [{"devices": "all", "mig-enabled": True}],                                   # no mig-devices
        "b": [{"devices": "all", "mig-enabled": False, "mig-devices": {"1g.10gb": 1}}],  # forbidden
        "c": [{"devices": [0, -1], "mig-enabled": "yes", "device-filter": "0x2330", "colour": "x"}],
        "d": [{"mig-enabled": True, "mig-devices": {"1g.10gb": -2, "2g.20gb": "two", "1g.5gb+xx": 1}}],
        "e": [],
        "fine": [{"devices": "all", "mig-enabled": False, "mig-devices": {}}],
    },
}


def test_each_config_reports_all_its_problems_and_only_its_own():
    configs = C.parse(BROKEN)
    assert sorted(configs) == ["fine"] and sorted(configs.invalid) == ["a", "b", "c", "d", "e"]
    assert configs.invalid == {
        "a": ["config 'a' entry 1: 'mig-devices' (profile: count) is required when mig-enabled is true"],
        "b": ["config 'b' entry 1: 'mig-devices' must be empty or left out when mig-enabled is false, "
              "got {'1g.10gb': 1}"],
        "c": ["config 'c' entry 1: unknown key 'colour' (allowed: devices, device-filter, mig-enabled, mig-devices)",
              "config 'c' entry 1: 'devices' must be 'all' or a list of GPU indices, got [0, -1]",
              "config 'c' entry 1: device-filter '0x2330' is not a PCI device id such as 0x233010DE",
              "config 'c' entry 1: 'mig-enabled' is required and must be true or false, got 'yes'"],
        "d": ["config 'd' entry 1: 'devices' is required ('all' or a list of GPU indices)",
              "config 'd' entry 1: 1g.10gb count must be a whole number >= 0, got -2",
              "config 'd' entry 1: 2g.20gb count must be a whole number >= 0, got 'two'",
              "config 'd' entry 1: 1g.5gb+xx: attribute +xx is not one of +me, +me.all, +gfx"],
        "e": ["config 'e': must be a non-empty list of entries"],
    }
    # the config being applied is what is reported; a sibling's problems never are
    assert C.select(configs, "fine")[0].mig_enabled is False
    with pytest.raises(C.MigConfigError) as err:
        C.select(configs, "b")
    assert err.value.problems == configs.invalid["b"]


def test_mig_enabled_false_with_empty_mig_devices_is_accepted():
    entry = C.parse_config("off", [{"devices": "all", "mig-enabled": False, "mig-devices": {}}])[0]
    assert entry.mig_enabled is False and entry.mig_devices == {}
    with pytest.raises(C.MigConfigError):
        C.parse_config("off", [{"devices": "all", "mig-enabled": False, "mig-devices": {"1g.10gb": 0}}])


def test_an_empty_devices_list_is_accepted_and_selects_nothing():
    entry = C.parse_config("none", [{"devices": [], "mig-enabled": False}])[0]
    assert entry.devices == [] and not entry.selects(0, "0x233010DE")


@pytest.mark.parametrize("profile", ["1g.10gb", "1g.10gb+me", "1g.24gb+gfx", "1g.24gb-me", "2g.48gb+me.all",
                                     "4g.96gb+gfx"])
def test_profile_attributes_nvidia_uses_parse(profile):
    entry = C.parse_config("x", [{"devices": "all", "mig-enabled": True, "mig-devices": {profile: 1}}])[0]
    assert entry.mig_devices == {profile: 1}


@pytest.mark.parametrize("profile,message", [
    ("1g.10gb+xx", "1g.10gb+xx: attribute +xx is not one of +me, +me.all, +gfx"),
    ("1g.10gb-gfx", "1g.10gb-gfx: attribute -gfx is not one of -me"),
    ("1g.10gb+me,me", "1g.10gb+me,me: attribute +(repeated) is not one of +me, +me.all, +gfx"),
    ("1g.10gb+me-me", "'1g.10gb+me-me' is not a MIG profile name"),
    ("1g10gb", "'1g10gb' is not a MIG profile name"),
    ("0g.10gb", "0g.10gb: slices and memory must be at least 1"),
    ("1c.3g.40gb", "1c.3g.40gb is a compute instance sub-profile"),
])
def test_bad_profile_names_say_why(profile, message):
    with pytest.raises(C.MigConfigError) as err:
        C.parse_config("x", [{"devices": "all", "mig-enabled": True, "mig-devices": {profile: 1}}])
    assert message in err.value.problems[0]


@pytest.mark.parametrize("document,message", [
    (None, "the MIG config must be a mapping with 'version' and 'mig-configs', got NoneType"),
    ({"version": "v1"}, "'mig-configs' must map config names to lists of entries"),
])
def test_malformed_documents(document, message):
    with pytest.raises(C.MigConfigError) as err:
        C.parse(document)
    assert message in err.value.problems


@pytest.mark.parametrize("entries,message", [
    (["all"], "config 'x' entry 1: must be a mapping, got str"),
    ([{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": True}}],
     "config 'x' entry 1: 1g.10gb count must be a whole number >= 0, got True"),
])
def test_malformed_entries(entries, message):
    configs = C.parse({"version": "v1", "mig-configs": {"x": entries}})
    assert message in configs.invalid["x"]


def test_zero_counts_are_dropped_and_select_names_what_exists():
    configs = C.parse({"version": "v1", "mig-configs": {
        "x": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 0, "7g.80gb": 1}}]}})
    assert C.select(configs, "x")[0].mig_devices == {"7g.80gb": 1}
    with pytest.raises(C.MigConfigError) as err:
        C.select(configs, "y")
    assert err.value.problems == ["config 'y' is not in mig-configs (available: x)"]
