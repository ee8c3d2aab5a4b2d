"""Capacity facts of the test fleets, in the shape gpuops.platform.gpu_capacity returns."""

HGX_H100 = "NVIDIA-H100-80GB-HBM3"
L40S = "NVIDIA-L40S"
H200 = "NVIDIA-H200"


def fleet(nodes):
    """nodes: {name: (product, {resource: count})} -> capacity fact."""
    by_product, total = {}, {}
    for name, (product, resources) in nodes.items():
        per = by_product.setdefault(product, {})
        for res, count in resources.items():
            per[res] = per.get(res, 0) + count
            total[res] = total.get(res, 0) + count
    return {
        "nodes": {name: {"host": name, "product": p, "resources": r} for name, (p, r) in nodes.items()},
        "by_product": by_product,
        "resources": total,
    }


# Two HGX H100 (8 GPUs each) and two L40S (4 each): the host-driver default.
WHOLE_GPUS = fleet({
    "hgx-h100-01": (HGX_H100, {"nvidia.com/gpu": 8}),
    "hgx-h100-02": (HGX_H100, {"nvidia.com/gpu": 8}),
    "l40s-01": (L40S, {"nvidia.com/gpu": 4}),
    "l40s-02": (L40S, {"nvidia.com/gpu": 4}),
})
# Time-slicing with 4 replicas: each GPU is advertised four times.
TIME_SLICED = fleet({
    "l40s-01": (L40S, {"nvidia.com/gpu": 16}),
    "l40s-02": (L40S, {"nvidia.com/gpu": 16}),
})
# MIG single: every GPU cut into 7 x 1g.18gb, advertised as nvidia.com/gpu.
MIG_SINGLE = fleet({
    "h200-mig-01": (H200 + "-MIG-1g.18gb", {"nvidia.com/gpu": 56}),
})
# MIG mixed: profiles are resources of their own.
MIG_MIXED = fleet({
    "h200-mig-01": (H200, {"nvidia.com/mig-1g.18gb": 28, "nvidia.com/mig-3g.71gb": 8}),
    "hgx-h100-01": (HGX_H100, {"nvidia.com/gpu": 8}),
})
