"""Strings from outside are validated whole and in ASCII digits: "570\\n" and "５７０" are refused, "570" is not.

Each validator that used a bare ``$`` (which matches before a trailing newline)
or ``\\d`` (which takes any Unicode digit) is tried with a good value, the same
value with a trailing newline, and with non-ASCII digits.
"""
import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.gpuops.platform.plugins.action import k8s_render
from ansible_collections.gpuops.platform.plugins.filter import k8s_objects
from ansible_collections.gpuops.platform.plugins.module_utils._k8s import helm
from ansible_collections.gpuops.platform.plugins.module_utils._mig import config as mig_config
from ansible_collections.gpuops.platform.plugins.module_utils._node import kubelet_config, preflight
from ansible_collections.gpuops.platform.plugins.module_utils._nvml import collect as nvml
from ansible_collections.gpuops.platform.plugins.modules import dcgm_diag
from ansible_collections.gpuops.platform.plugins.plugin_utils import driver_action, fleet_plan, fleet_views, jinja_tests
from ansible_collections.gpuops.platform.plugins.plugin_utils import gpu_monitoring, k8s_queues


def _refused(call, value, errors):
    with pytest.raises(errors):
        call(value)


def _driver_version(value, kind="version"):
    problem = driver_action.value_problem("nvidia_driver_%s" % kind, value, kind)
    if problem:
        raise ValueError(problem)


def _driver_settings(**kw):
    return fleet_plan.setting_errors(dict(fleet_plan.DEFAULTS, **kw))


# (what, call that raises for a bad value, errors, good value, bad values)
VALIDATORS = [
    ("driver version", _driver_version, ValueError, "580.82.07", ["５８０.82.07", "580.82.07\nx", "580.82.07\n"]),
    ("driver branch", lambda v: _driver_version(v, "branch"), ValueError, "580", ["５８０", "580\n", "٥٨٠"]),
    ("Helm release name", lambda v: helm.check_release({"name": v, "namespace": "gpu-operator"}), ValueError,
     "gpu-operator", ["gpu-operator\n"]),
    ("Helm namespace", lambda v: helm.check_release({"name": "gpu-operator", "namespace": v}), ValueError,
     "gpu-operator", ["gpu-operator\n"]),
    ("kubelet CPU set", kubelet_config.parse_cpuset, kubelet_config.KubeletConfigError, "0-3,8", ["0-3,٨", "0-３"]),
    ("preflight expected_driver", lambda v: preflight.validate({"expected_driver": v}), preflight.PreflightParamError,
     "570.172.08", ["570\n", "５７０", "٥٧٠.172.08"]),
    ("rendered file name", k8s_render._relative, AnsibleActionFail, "50-kueue/manifests.yaml",
     ["50-kueue/manifests.yaml\n"]),
    ("fleet serial", lambda v: fleet_views.serial_list(v, False), Exception, "10%", ["１０%", "٥"]),
]


@pytest.mark.parametrize("what, call, errors, good, bad", VALIDATORS, ids=[v[0] for v in VALIDATORS])
def test_a_trailing_newline_or_a_unicode_digit_is_refused(what, call, errors, good, bad):
    call(good)
    for value in bad:
        _refused(call, value, errors)


@pytest.mark.parametrize("variable, good, bad", [
    ("nvidia_driver_branch", "570", ["570\n", "５７０", "٥٧٠"]),
    ("nvidia_driver_version", "570.172.08", ["570.172.08\n", "５７０.172.08"]),
])
def test_the_planner_refuses_a_driver_setting_with_a_newline_or_unicode_digits(variable, good, bad):
    assert _driver_settings(**{variable: good}) == []
    for value in bad:
        assert [v for v, _m in _driver_settings(**{variable: value})] == [variable]


@pytest.mark.parametrize("pattern, good, bad", [
    (jinja_tests.DNS_LABEL, "gpu-fleet", "gpu-fleet\n"),
    (jinja_tests.DNS_SUBDOMAIN, "a.b", "a.b\n"),
    (jinja_tests.LABEL_KEY, "nvidia.com/gpu.product", "nvidia.com/gpu.product\n"),
    (jinja_tests.LABEL_VALUE, "H100", "H100\n"),
    (jinja_tests.QUANTITY, "8", "8\n"),
    (gpu_monitoring.PROMETHEUS_LABEL, "node", "node\n"),
    (gpu_monitoring.DURATION, "5m", "5m\n"),
    (k8s_queues.KAI_QUEUE_NAME, "team-a", "team-a\n"),
])
def test_the_roles_checks_match_the_whole_value(pattern, good, bad):
    assert jinja_tests.matches(good, pattern) and not jinja_tests.matches(bad, pattern)


def test_ids_and_versions_read_from_facts_and_the_api_are_whole_and_ascii():
    assert fleet_plan.NVIDIA_DEVICE_ID.match("0x233010DE") and not fleet_plan.NVIDIA_DEVICE_ID.match("0x233010DE\n")
    assert mig_config.DEVICE_ID.match("0x233010DE") and not mig_config.DEVICE_ID.match("0x233010DE\n")
    assert nvml.version_key("570.172.08") and nvml.version_key("５７０.172.08") == nvml.version_key("garbage")
    assert dcgm_diag.HOSTENGINE.match("node-1:5555") and not dcgm_diag.HOSTENGINE.match("node-1:5555\n")
    assert k8s_objects._seconds("2026-11-25T17:00:00Z") == 1795626000
    assert k8s_objects._seconds("2026-11-25T17:00:00Z\n") is None and k8s_objects._seconds("２026-11-25T17:00:00Z") is None
