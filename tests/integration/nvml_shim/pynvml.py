"""A stand-in ``pynvml`` for modules run by ansible-playbook in the tests: the fake NVML of one node.

Put this folder first on PYTHONPATH and name the node in GPUOPS_FAKE_NVML_NODE
(a key of tests/unit/fakes/nvml_nodes.NODES: dgx-a100, hgx-h100, h200-mig,
l40s, no-gpu). Importing ``pynvml`` then gives ``fakes.fake_pynvml.FakeNvml``
of that node, as the unit tests use it; the real pynvml (the fake's source of
constants and errors) is loaded first, from the rest of the path.
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_TESTS_UNIT = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "unit")

sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
del sys.modules["pynvml"]
import pynvml as _real  # noqa: E402,F401  (the real binding, for the fake's constants)

sys.path.insert(0, _TESTS_UNIT)
from fakes.fake_pynvml import FakeNvml  # noqa: E402
from fakes.nvml_nodes import NODES  # noqa: E402

sys.modules["pynvml"] = FakeNvml(NODES[os.environ["GPUOPS_FAKE_NVML_NODE"]]())
