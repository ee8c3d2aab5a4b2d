"""cluster.yml with the monitoring layer on, rendered without a cluster: the
layer lands between the tenants and the smoke tests, the GPU Operator layer
carries the counters ConfigMap its exporter reads, and every object is valid."""
import pytest

from k8s_support import DEFAULT_K8S_VERSION, validate_objects

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def monitored(render):
    """An existing Prometheus Operator (assumed API kinds), a tenant with an HPA on GPU utilization."""
    return render("monitored", extra_vars={
        "gpu_monitoring_enabled": True,
        "prometheus_adapter_enabled": True,
        "gpu_tenants_list": [{"name": "team-a", "gpu_share": 0.5}],
        "gpu_monitoring_autoscalers": [{"tenant": "team-a", "deployment": "llm-server", "max_replicas": 4, "target": 70}],
        "gpuops_k8s_assume_api_kinds": ["monitoring.coreos.com/v1/ServiceMonitor",
                                        "monitoring.coreos.com/v1/PrometheusRule"],
    }, nodes={"gpu-a": {"facts": "hgx-h100"}})


def test_the_monitoring_layer_is_rendered_after_the_tenants(monitored, shared_reference):
    layers = monitored.layers
    assert layers["gpu_monitoring"]["order"] == 85
    assert layers["gpu_tenants"]["order"] < 85 < layers["gpu_smoke_test"]["order"]
    kinds = sorted(o["kind"] for o in layers["gpu_monitoring"]["objects"])
    assert kinds == ["ConfigMap"] * 4 + ["HorizontalPodAutoscaler", "Namespace", "PrometheusRule"]
    hpa = monitored.one("HorizontalPodAutoscaler", "llm-server-gpu", "team-a")
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "gpu_utilization"
    # The custom metrics the HPA reads: the prometheus_adapter layer, right after this one.
    assert layers["gpu_monitoring"]["releases"] == {}
    assert sorted(layers["prometheus_adapter"]["releases"]) == ["prometheus-adapter"]
    assert layers["prometheus_adapter"]["order"] == 87
    counts = validate_objects(monitored.objects, shared_reference, DEFAULT_K8S_VERSION)
    assert counts["builtin"] + counts["custom"] == len(monitored.objects)


def test_the_gpu_operator_layer_carries_the_counters_its_exporter_reads(monitored):
    cm = monitored.one("ConfigMap", "gpuops-dcgm-counters", "gpu-operator")
    assert cm in monitored.layers["gpu_operator"]["objects"]
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in cm["data"]["dcgm-metrics.csv"]
    dcgm = monitored.releases["gpu-operator"]["values"]["dcgmExporter"]
    assert dcgm["config"] == {"name": "gpuops-dcgm-counters"}
    assert dcgm["serviceMonitor"] == {"enabled": True, "additionalLabels": {"release": "kube-prometheus-stack"}}
    rule = monitored.one("PrometheusRule", "gpuops-gpu", "monitoring")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
