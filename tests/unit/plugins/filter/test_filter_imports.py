"""Loading the filter files costs only the filter files.

ansible-core finds one ``gpuops.platform.*`` filter by loading every filter file
of the collection, in each forked worker, compiling each from source. A filter
file therefore imports the planner it calls only when one of its filters runs
(plugin_utils/filters.py: lazy_module, lazy_function).
"""
import json
import subprocess
import sys

import pytest

from ansible_collections.gpuops.platform.plugins.plugin_utils.filters import lazy_function, lazy_module

# What every filter file may pull in when it is loaded: the FilterModule helper,
# and the release suffixes that k8s_batch.py's own constant is made from.
LOADED_WITH_THE_FILTERS = {"plugin_utils", "plugin_utils.filters", "plugin_utils.k8s_apply"}

_LOAD_ALL = """
import importlib, json, pkgutil, sys
sys.path[:0] = %r
import ansible_collections.gpuops.platform.plugins.filter as pkg
filters = {}
for _, name, _ in pkgutil.iter_modules(pkg.__path__):
    module = importlib.import_module(pkg.__name__ + "." + name)
    filters.update(module.FilterModule().filters())
prefix = "ansible_collections.gpuops.platform.plugins."
print(json.dumps({"filters": sorted(filters), "loaded": sorted(
    m[len(prefix):] for m in sys.modules if m.startswith(prefix) and not m.startswith(prefix + "filter"))}))
"""


def _load_all_filters():
    paths = [p for p in sys.path if p.endswith(("/.cache/src", "/collections"))]
    out = subprocess.run([sys.executable, "-c", _LOAD_ALL % (paths,)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_loading_every_filter_file_imports_no_planner():
    loaded = _load_all_filters()
    assert len(loaded["filters"]) > 50, loaded["filters"]
    assert set(loaded["loaded"]) <= LOADED_WITH_THE_FILTERS, sorted(set(loaded["loaded"]) - LOADED_WITH_THE_FILTERS)


def test_a_lazy_module_imports_on_first_use_and_names_a_missing_attribute():
    driver_action = lazy_module("plugin_utils.driver_action")
    from ansible_collections.gpuops.platform.plugins.plugin_utils import driver_action as real
    assert driver_action.driver_action is real.driver_action
    with pytest.raises(AttributeError, match="no_such_function"):
        driver_action.no_such_function  # pylint: disable=pointless-statement


def test_a_lazy_function_keeps_its_name_and_passes_every_argument():
    from ansible_collections.gpuops.platform.plugins.plugin_utils import gpu_capacity as real
    product_label = lazy_function("plugin_utils.gpu_capacity", "gpu_product_label")
    assert product_label.__name__ == "gpu_product_label"
    assert product_label("NVIDIA H100 80GB HBM3") == real.gpu_product_label("NVIDIA H100 80GB HBM3")
