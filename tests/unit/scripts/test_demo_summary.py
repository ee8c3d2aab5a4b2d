"""scripts/demo.sh's closing summary: nvidia.com/gpu beside the GPU count says how many are sharing replicas."""
import json
import subprocess
import sys

from conftest import ROOT


def _summary(tmp_path, summary):
    text = (ROOT / "scripts" / "demo.sh").read_text()
    script = text.split("<<'PY'\n", 1)[1].split("\nPY\n", 1)[0]
    (tmp_path / "plan.json").write_text(json.dumps({"summary": summary}))
    return subprocess.run([sys.executable, "-", str(tmp_path), str(tmp_path / "rendered")], input=script,
                          capture_output=True, text=True, check=True, timeout=60).stdout


def test_the_capacity_line_explains_time_slicing_replicas(tmp_path):
    summary = {"hosts": 10, "gpus": 45, "gpus_by_model": {"NVIDIA L40S": 4, "NVIDIA H100 80GB HBM3": 32},
               "driver_changes": [], "reboot": [], "mig_changes": [], "invalid_mig": [], "unhealthy_gpus": 0,
               "hosts_invalid": [], "capacity": {"nvidia.com/gpu": 48, "nvidia.com/mig-1g.10gb": 16},
               "shared": {"nvidia.com/gpu": {"devices": 4, "replicas": 16, "mode": "time-slicing"}}}
    out = _summary(tmp_path, summary)
    assert "45 GPUs" in out
    assert "capacity:   nvidia.com/gpu 48 (16 of them time-slicing replicas of 4 GPUs), nvidia.com/mig-1g.10gb 16" in out
