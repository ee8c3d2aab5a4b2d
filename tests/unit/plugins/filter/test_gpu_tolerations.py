"""Tolerations derived from the GPU node taints."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter.gpu_tolerations import gpu_tolerations

GPU_TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
NVIDIA = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def test_each_taint_is_tolerated_by_key_and_effect_whatever_its_value():
    assert gpu_tolerations([GPU_TAINT]) == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_a_taint_without_effect_is_tolerated_for_every_effect():
    assert gpu_tolerations([{"key": "dedicated"}]) == [{"key": "dedicated", "operator": "Exists"}]


def test_extra_tolerations_follow_and_duplicates_are_dropped():
    got = gpu_tolerations([GPU_TAINT, GPU_TAINT], [NVIDIA, {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, NVIDIA])
    assert got == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, NVIDIA]


def test_no_taints_gives_only_the_extra_ones():
    assert gpu_tolerations(None, [NVIDIA]) == [NVIDIA]
    assert gpu_tolerations([]) == []


@pytest.mark.parametrize("taints, message", [
    ([{"value": "true"}], "each taint must be a mapping with a key"),
    (["gpu=true:NoSchedule"], "each taint must be a mapping with a key"),
    ([{"key": "gpu", "effect": "NoRun"}], "taint gpu: effect must be one of NoSchedule, PreferNoSchedule, NoExecute, got 'NoRun'"),
])
def test_bad_taints_are_refused_with_a_clear_message(taints, message):
    with pytest.raises(AnsibleFilterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        gpu_tolerations(taints)
