"""The guarded import behind HAS_YAML and HAS_PYNVML."""
import json

from ansible_collections.gpuops.platform.plugins.module_utils._common.imports import optional_import


def test_present_library_is_returned_without_error():
    assert optional_import("json") == (json, None)


def test_missing_library_keeps_the_import_error():
    module, error = optional_import("gpuops_no_such_library")
    assert module is None
    assert isinstance(error, ImportError) and "gpuops_no_such_library" in str(error)
