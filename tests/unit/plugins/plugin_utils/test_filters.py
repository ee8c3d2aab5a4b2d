"""filter_module(): every filter is registered under its own function's name."""
import importlib
from pathlib import Path

import pytest

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import filter_module


def first(value):
    return value[0]


def last(value):
    return value[-1]


def test_filters_are_named_after_their_functions():
    filters = filter_module(first, last)().filters()
    assert filters == {"first": first, "last": last}


def test_a_caller_cannot_change_the_table():
    cls = filter_module(first)
    cls().filters().clear()
    assert cls().filters() == {"first": first}


# Every filter plugin file, so that a new one is checked without being listed here.
FILTER_FILES = sorted(p.stem for p in (Path(__file__).resolve().parents[4] / "plugins" / "filter").glob("*.py"))


def test_the_filter_files_are_found():
    assert {"k8s_batch", "k8s_objects", "nccl_test"} <= set(FILTER_FILES)


@pytest.mark.parametrize("name", FILTER_FILES)
def test_every_documented_filter_is_registered(name, repo_root):
    plugin = importlib.import_module("ansible_collections.gpuops.platform.plugins.filter." + name)
    registered = plugin.FilterModule().filters()
    documented = set(p.stem for p in (repo_root / "plugins" / "filter").glob("*.yml"))
    assert registered and set(registered) <= documented
    assert all(getattr(plugin, key) is function for key, function in registered.items())
