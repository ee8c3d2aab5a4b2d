"""The driver branch the collection installs by default is one the pinned GPU Operator chart ships.

The chart's own driver (``driver.version`` of ../shared/reference/gpu-operator/chart/values.yaml) or its previous
release's (``previous/chart/values.yaml``): a default older than both would downgrade current hosts (#42), and the
next chart bump makes this test ask the question again.
"""
import yaml

from ansible_collections.gpuops.platform.plugins.plugin_utils import driver_action, fleet_plan


def _chart_branch(path):
    version = yaml.safe_load(path.read_text())["driver"]["version"]
    return str(version).split(".", 1)[0]


def test_the_default_branch_is_the_pinned_charts_or_its_previous_releases(repo_root, shared_reference):
    chart = shared_reference / "gpu-operator"
    shipped = {_chart_branch(chart / "chart" / "values.yaml"), _chart_branch(chart / "previous" / "chart" / "values.yaml")}
    default = yaml.safe_load((repo_root / "roles" / "nvidia_driver" / "defaults" / "main.yml").read_text())
    assert default["nvidia_driver_branch"] in shipped, (
        "roles/nvidia_driver/defaults/main.yml nvidia_driver_branch %r is neither branch the pinned GPU Operator chart "
        "ships (%s): move the default to one of them" % (default["nvidia_driver_branch"], ", ".join(sorted(shipped))))


def test_every_restatement_of_the_default_branch_is_the_roles(repo_root):
    default = yaml.safe_load((repo_root / "roles" / "nvidia_driver" / "defaults" / "main.yml").read_text())
    spec = yaml.safe_load((repo_root / "roles" / "nvidia_driver" / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    branch = default["nvidia_driver_branch"]
    assert options["nvidia_driver_branch"]["default"] == branch
    assert driver_action.DRIVER_DEFAULTS["nvidia_driver_branch"] == fleet_plan.DEFAULTS["nvidia_driver_branch"] == branch
    for name in ("nvidia_driver_allow_downgrade",):
        assert options[name]["default"] == default[name] == driver_action.DRIVER_DEFAULTS[name] == fleet_plan.DEFAULTS[name]
