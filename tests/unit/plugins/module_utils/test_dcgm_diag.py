"""The dcgmi diag JSON parser on recorded outputs (tests/fixtures/dcgm), every shape and result value."""
import copy
import json
import re

import pytest

from ansible_collections.gpuops.platform.plugins.filter import gpu_health
from ansible_collections.gpuops.platform.plugins.module_utils._node import dcgm_diag

PERSISTENCE = ('Persistence Mode: Persistence mode for GPU 0 is disabled. Enable persistence mode by running '
               '"nvidia-smi -i <gpuId> -pm 1 " as root.')
DEPLOYMENT_3X = ["Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS-related Blocks",
                 "Persistence Mode", "Environmental Variables", "Page Retirement/Row Remap", "Graphics Processes",
                 "Inforom"]


@pytest.fixture
def fixture(fixtures_dir):
    def read(name):
        return (fixtures_dir / "dcgm" / name).read_text()
    return read


def by_test(parsed):
    return dict(((r["test"], r["gpu"]), r) for r in parsed["results"])


def test_dcgm_3_nvvs_capture_all_pass_on_eight_gpus(fixture):
    parsed = dcgm_diag.parse(fixture("dcgm-3.1.0-nvvs-8gpu-pass.txt"))   # text before the JSON, null tests
    assert parsed["version"] == "3.1.0" and parsed["status"] == "pass" and parsed["runtime_error"] is None
    # "gpu_ids": "0,...,7" is one result per GPU, "gpu_ids": 3 one result for GPU 3.
    assert len(parsed["results"]) == 9 * 8 + 8
    assert sorted(parsed["gpus"]) == [str(i) for i in range(8)]
    assert list(parsed["gpus"]["5"]) == DEPLOYMENT_3X + ["software"]
    assert set(parsed["gpus"]["5"].values()) == {"pass"}
    assert parsed["counts"] == {"pass": 80, "fail": 0, "warn": 0, "skip": 0, "not run": 0}
    assert dcgm_diag.failures(parsed) == []
    assert dcgm_diag.health(parsed, 1) == {"status": "ok", "reasons": [], "source": "dcgm_diag"}


def test_dcgm_4_level1_capture_fails_with_the_test_gpu_and_message(fixture):
    parsed = dcgm_diag.parse(fixture("dcgm-4.2.3-gb10-r1-fail.json"))
    assert (parsed["version"], parsed["driver_version"], parsed["status"]) == ("4.2.3", "580.82.09", "fail")
    (result,) = parsed["results"]
    assert result == {"category": "Deployment", "test": "software", "entity_group": "GPU", "entity_id": 0, "gpu": 0,
                      "status": "fail", "messages": [{"text": PERSISTENCE, "error_id": 29}], "info": []}
    assert dcgm_diag.failures(parsed) == ["GPU 0: test 'software' (Deployment) failed: " + PERSISTENCE]
    health = dcgm_diag.health(parsed, 1)
    assert health["status"] == "critical"
    assert health["reasons"] == ["DCGM diag level 1: GPU 0: test 'software' (Deployment) failed: " + PERSISTENCE]


def test_dcgm_4_level2_capture_fail_and_skip(fixture):
    parsed = dcgm_diag.parse(fixture("dcgm-4.2.3-gb10-r2-fail-skip.json"))
    assert parsed["gpus"] == {"0": {"software": "fail", "memory": "skip", "pcie": "skip"}}
    assert parsed["tests"] == [{"category": "Deployment", "test": "software", "status": "fail"},
                               {"category": "Hardware", "test": "memory", "status": "skip"},
                               {"category": "Integration", "test": "pcie", "status": "skip"}]
    assert parsed["counts"] == {"pass": 0, "fail": 1, "warn": 0, "skip": 2, "not run": 0}
    assert parsed["status"] == "fail"
    assert len(dcgm_diag.failures(parsed)) == 1          # a skip is not a failure


def test_dcgm_4_5_capture_pass_info_kept_and_summary_warning_not_doubled(fixture):
    parsed = dcgm_diag.parse(fixture("dcgm-4.5.2-gb10-r2-fail-pass.json"))
    results = by_test(parsed)
    assert parsed["version"] == "4.5.2"
    assert results[("memory", 0)]["status"] == "pass"
    assert results[("memory", 0)]["info"] == ["Allocated 112427837082 bytes (87.5%)"]
    assert results[("pcie", 0)]["info"][0] == "GPU to Host bandwidth:\t\t58.62 GB/s"
    # The result's own warning, not the same warning again from test_summary.
    assert results[("software", 0)]["messages"] == [{"text": PERSISTENCE, "error_id": 29}]
    assert parsed["status"] == "fail" and parsed["counts"]["pass"] == 2


def test_derived_warn_is_a_warning_not_a_failure(fixture):
    parsed = dcgm_diag.parse(fixture("derived-dcgm-4.2.3-gb10-r1-warn.json"))
    assert parsed["status"] == "warn" and dcgm_diag.failures(parsed) == []
    assert dcgm_diag.failures(parsed, ("warn",)) == ["GPU 0: test 'software' (Deployment) warned: " + PERSISTENCE]
    assert dcgm_diag.health(parsed, 2)["status"] == "warning"
    assert dcgm_diag.health(parsed, 2)["reasons"][0].startswith("DCGM diag level 2: GPU 0: test 'software'")


def test_derived_not_run_is_kept_apart_from_skip(fixture):
    parsed = dcgm_diag.parse(fixture("derived-dcgm-4.2.3-gb10-r2-not-run.json"))
    assert parsed["gpus"]["0"] == {"software": "fail", "memory": "not run", "pcie": "skip"}
    assert parsed["counts"]["not run"] == 1 and parsed["counts"]["skip"] == 1


def test_nothing_ran_is_skip_or_not_run_and_health_ok_unless_asked(fixture):
    doc = json.loads(fixture("dcgm-4.2.3-gb10-r2-fail-skip.json"))
    doc["DCGM Diagnostic"]["test_categories"] = doc["DCGM Diagnostic"]["test_categories"][1:]   # the two skips
    parsed = dcgm_diag.parse(json.dumps(doc))
    assert parsed["status"] == "skip"
    assert dcgm_diag.health(parsed)["status"] == "ok"
    assert dcgm_diag.health(parsed, 3, skipped_is="warning") == {
        "status": "warning", "reasons": ["DCGM diag level 3: no test ran (skip)"], "source": "dcgm_diag"}


def test_every_status_spelling_dcgm_uses(fixture):
    doc = json.loads(fixture("dcgm-4.2.3-gb10-r1-fail.json"))
    result = doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]
    for spelling, status in (("PASS", "pass"), ("Pass", "pass"), ("FAIL", "fail"), ("Warn", "warn"),
                             ("WARNING", "warn"), ("Skip", "skip"), ("SKIP", "skip"), ("Not Run", "not run"),
                             ("NOT_RUN", "not run")):
        result["status"] = spelling
        assert dcgm_diag.parse(copy.deepcopy(doc))["results"][0]["status"] == status, spelling


@pytest.mark.parametrize("status", ["", None, "ERROR", "ok", "Passed with errors"])
def test_an_unknown_result_value_never_passes(fixture, status):
    doc = json.loads(fixture("dcgm-4.2.3-gb10-r1-fail.json"))
    doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]["status"] = status
    with pytest.raises(dcgm_diag.DcgmDiagError, match=r"test 'software' \(Deployment\) has the result"):
        dcgm_diag.parse(json.dumps(doc))


def test_runtime_error_fails_the_run_with_dcgms_message():
    parsed = dcgm_diag.parse('{"DCGM GPU Diagnostic": {"runtime_error": "Cannot run: the host engine is busy",'
                             ' "version": "3.3.5"}}')
    assert parsed["status"] == "fail" and parsed["results"] == []
    assert dcgm_diag.failures(parsed) == ["DCGM diagnostic could not run: Cannot run: the host engine is busy"]
    assert dcgm_diag.health(parsed)["status"] == "critical"


@pytest.mark.parametrize("text, message", [
    ("", "printed no JSON document"),
    ("Error: unable to connect to host engine at 127.0.0.1.", "printed no JSON document"),
    ('{"DCGM GPU Diagnostic": {"test_categories": [', "could not be decoded"),
    ('{"something": {}}', "keys found: something"),
    ('{"DCGM Diagnostic": {}}', "no test_categories and no runtime_error"),
    ('{"DCGM Diagnostic": {"test_categories": [{"category": "x", "tests": [{"name": "t", "results": '
     '[{"status": "Pass"}]}]}]}}', "test 't' \\(x\\) names no GPU"),
    ('{"DCGM Diagnostic": {"test_categories": [{"category": "x", "tests": [{"name": "t", "results": '
     '[{"status": "Pass", "gpu_ids": "0,a"}]}]}]}}', "unreadable gpu_ids"),
])
def test_unusable_output_is_a_clear_error(text, message):
    with pytest.raises(dcgm_diag.DcgmDiagError, match=message):
        dcgm_diag.parse(text)


@pytest.mark.parametrize("level", [1, 2, 3, 4, "3", " 4 "])
def test_levels_one_to_four(level):
    assert dcgm_diag.command(level) == ["dcgmi", "diag", "-r", str(int(level)), "-j"]


@pytest.mark.parametrize("level", [0, 5, -1, "1; reboot", "", None, True, 2.5, "long"])
def test_a_bad_level_is_refused_with_what_is_allowed(level):
    with pytest.raises(dcgm_diag.DcgmDiagError, match="must be 1, 2, 3 or 4"):
        dcgm_diag.command(level)


def test_command_is_an_argument_list_with_gpus_and_host_engine():
    assert dcgm_diag.command(3, "/usr/bin/dcgmi", [1, "0", 1], "dcgm.gpu-operator.svc:5555") == [
        "/usr/bin/dcgmi", "diag", "-r", "3", "-j", "-i", "0,1", "--host", "dcgm.gpu-operator.svc:5555"]
    with pytest.raises(dcgm_diag.DcgmDiagError, match="non-negative integers"):
        dcgm_diag.command(1, gpu_ids=["0,1"])
    with pytest.raises(dcgm_diag.DcgmDiagError, match="non-negative integers"):
        dcgm_diag.command(1, gpu_ids=[-1])


def test_a_long_message_is_clipped():
    doc = {"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory", "results": [
        {"entity_group": "GPU", "entity_id": 2, "status": "Fail", "warnings": [{"warning": "x" * 5000}]}]}]}]}}
    (line,) = dcgm_diag.failures(dcgm_diag.parse(doc))
    assert line.startswith("GPU 2: test 'memory' (Hardware) failed: xxx") and line.endswith("...")
    assert len(line) < dcgm_diag.MAX_MESSAGE_CHARS + 60


def test_health_feeds_the_gpu_health_plan_critical_taint(fixture):
    """The fact as the gpu_health role reads it: a failed DCGM test taints a node whose NVML health is ok."""
    diag = dcgm_diag.health(dcgm_diag.parse(fixture("dcgm-4.2.3-gb10-r1-fail.json")), 1)
    ok = {"present": True, "health": {"status": "ok", "reasons": []}}
    node = {"metadata": {"name": "n1", "resourceVersion": "3", "labels": {}, "annotations": {}}, "spec": {}}
    (plan,) = gpu_health.gpu_health_plan([{"host": "h1", "name": "n1", "nvidia": ok, "extra": [diag]}], [node], {})
    assert plan["status"] == "critical"
    assert plan["patch"]["metadata"]["labels"] == {"gpuops.io/gpu-health": "critical"}
    assert plan["patch"]["spec"]["taints"] == [{"key": "gpuops.io/gpu-unhealthy", "value": "true",
                                                "effect": "NoSchedule"}]
    assert "test 'software'" in plan["patch"]["metadata"]["annotations"]["gpuops.io/gpu-health-reasons"]
    passed = dcgm_diag.health(dcgm_diag.parse(fixture("dcgm-3.1.0-nvvs-8gpu-pass.txt")), 1)
    (plan,) = gpu_health.gpu_health_plan([{"host": "h1", "name": "n1", "nvidia": ok, "extra": [passed]}], [node], {})
    assert plan["status"] == "ok" and "taints" not in plan["patch"].get("spec", {})


def test_a_failure_outweighs_a_warning_in_the_same_run(fixture):
    """The warn capture's test plus the fail-and-skip capture's tests in one document."""
    warn = json.loads(fixture("derived-dcgm-4.2.3-gb10-r1-warn.json"))
    doc = json.loads(fixture("dcgm-4.2.3-gb10-r2-fail-skip.json"))
    categories = doc["DCGM Diagnostic"]["test_categories"]
    for order in (warn["DCGM Diagnostic"]["test_categories"] + categories,
                  categories + warn["DCGM Diagnostic"]["test_categories"]):
        doc["DCGM Diagnostic"]["test_categories"] = order
        parsed = dcgm_diag.parse(copy.deepcopy(doc))
        assert parsed["status"] == "fail" and parsed["counts"]["warn"] == 1
        assert dcgm_diag.health(parsed)["status"] == "critical"
        assert len(dcgm_diag.health(parsed)["reasons"]) == 2        # the failure and the warning


def test_a_failure_without_its_own_warning_takes_the_test_summarys(fixture):
    """DCGM 4.x puts a test's warnings in test_summary as well; the 4.5.2 capture without the per-result copy."""
    doc = json.loads(fixture("dcgm-4.5.2-gb10-r2-fail-pass.json"))
    del doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]["warnings"]
    (line,) = dcgm_diag.failures(dcgm_diag.parse(doc))
    assert line == "GPU 0: test 'software' (Deployment) failed: " + PERSISTENCE
    doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["test_summary"].pop("warnings")
    (line,) = dcgm_diag.failures(dcgm_diag.parse(doc))
    assert line == "GPU 0: test 'software' (Deployment) failed: no message from DCGM"


def _one_result(**result):
    return json.dumps({"DCGM GPU Diagnostic": {"version": "3.1.0", "test_categories": [
        {"category": "Hardware", "tests": [{"name": "Diagnostic", "results": [dict(status="Pass", **result)]}]}]}})


@pytest.mark.parametrize("result, gpus", [
    ({"gpu_ids": "0,1,2,3,4,5,6,7"}, list(range(8))),   # DCGM 2.x/3.x write a comma-separated string
    ({"gpu_ids": 3}, [3]),                              # or one id as a number
    ({"gpu_id": "0,1"}, [0, 1]),
    ({"entity_group": "GPU", "entity_id": "0,1"}, [0, 1]),
    ({"entity_group": "GPU", "entity_id": 5}, [5]),
])
def test_gpu_lists_in_every_shape_dcgm_writes(result, gpus):
    parsed = dcgm_diag.parse(_one_result(**result))
    assert [r["gpu"] for r in parsed["results"]] == gpus


@pytest.mark.parametrize("result, message", [
    ({"gpu_ids": "0;1"}, "unreadable gpu_ids '0;1': DCGM writes a GPU id or ids separated by commas"),
    ({"gpu_id": True}, "unreadable gpu_id True"),
    ({"entity_id": "²"}, "unreadable entity_id '²'"),
    ({"entity_group": 7, "entity_id": 0}, "the entity_group 7, not an entity group name"),
    ({"gpu_ids": 0, "warnings": 12}, None),  # one warning, as a number: kept as its text
])
def test_unreadable_gpu_lists_are_refused_naming_the_test_and_field(result, message):
    if message is None:
        assert dcgm_diag.parse(_one_result(**result))["results"][0]["gpu"] == 0
        return
    with pytest.raises(dcgm_diag.DcgmDiagError, match="test 'Diagnostic' \\(Hardware\\) has " + re.escape(message)):
        dcgm_diag.parse(_one_result(**result))


@pytest.mark.parametrize("doc, message", [
    ({"test_categories": 1}, "test_categories must be a list, got int 1"),
    ({"test_categories": [{"category": "Hardware", "tests": 5}]}, "the tests of category 'Hardware' must be a list"),
    ({"test_categories": [{"category": "Hardware", "tests": [{"name": "x", "results": "Pass"}]}]},
     "the results of test 'x' \\(Hardware\\) must be a list"),
])
def test_lists_that_are_not_lists_are_refused(doc, message):
    with pytest.raises(dcgm_diag.DcgmDiagError, match=message):
        dcgm_diag.parse(json.dumps({"DCGM GPU Diagnostic": doc}))


# -- hostile structure: a clear DcgmDiagError naming the output and the field or limit --------------

def _doc(**test):
    base = {"name": "software", "results": [{"gpu_ids": "0", "status": "Pass"}]}
    base.update(test)
    return json.dumps({"DCGM GPU Diagnostic": {"version": "3.3.5",
                                               "test_categories": [{"category": "Deployment", "tests": [base]}]}})


@pytest.mark.parametrize("text", [
    '{"DCGM GPU Diagnostic": ' + "[" * 15000 + "]" * 15000 + "}",
    "Successfully ran diagnostic for group.\n" + '{"a": ' * 15000 + "1" + "}" * 15000,
    '{"DCGM Diagnostic": {"test_categories": ' + "[" * 5000,
])
def test_output_nested_thousands_deep_is_refused_before_json_reads_it(text):
    with pytest.raises(dcgm_diag.DcgmDiagError, match=r"^The dcgmi diag -j output nests arrays or objects [0-9]+ "
                       r"levels deep, deeper than the 64 .*\(nesting limit\)"):
        dcgm_diag.parse(text)


def test_output_over_the_size_limit_is_refused(monkeypatch):
    monkeypatch.setattr(dcgm_diag, "MAX_OUTPUT_BYTES", 1024)
    with pytest.raises(dcgm_diag.DcgmDiagError, match=r"dcgmi diag -j output is 2 KiB, more than the 1 KiB"):
        dcgm_diag.parse(_doc(info=["x" * 2048]))


@pytest.mark.parametrize("doc, field", [
    (_doc(name=["software"]), '"DCGM GPU Diagnostic".test_categories[0].tests[0].name must be a string, found a list'),
    (_doc(test_summary=[1]), '"DCGM GPU Diagnostic".test_categories[0].tests[0].test_summary must be a table/object'),
    (json.dumps({"DCGM GPU Diagnostic": {"version": {"v": 1}, "test_categories": []}}),
     '"DCGM GPU Diagnostic".version must be a string'),
    (json.dumps({"DCGM Diagnostic": {"test_categories": [{"category": 7, "tests": []}]}}),
     '"DCGM Diagnostic".test_categories[0].category must be a string, found an integer 7'),
    (json.dumps({"DCGM Diagnostic": {"test_categories": []}, "metadata": {"Driver Version Detected": 570}}),
     'metadata."Driver Version Detected" must be a string'),
    (json.dumps({"DCGM Diagnostic": {"runtime_error": ["x"]}}), '"DCGM Diagnostic".runtime_error must be a string'),
    (json.dumps({"DCGM Diagnostic": {"test_categories": []}, "metadata": []}), "metadata must be a table/object"),
])
def test_a_field_of_the_wrong_type_is_named_by_its_path(doc, field):
    with pytest.raises(dcgm_diag.DcgmDiagError) as caught:
        dcgm_diag.parse(doc)
    assert str(caught.value).startswith("dcgmi diag -j output: " + field), str(caught.value)
    assert "passes no node" in str(caught.value)


@pytest.mark.parametrize("level", ["\uff14", "\u0664", "2\u00b2"])
def test_a_level_in_unicode_digits_is_refused(level):
    with pytest.raises(dcgm_diag.DcgmDiagError, match="must be 1, 2, 3 or 4"):
        dcgm_diag.validate_level(level)


@pytest.mark.parametrize("gpu_id", ["\uff11", "\u00b2", "1\n"])
def test_gpu_ids_in_unicode_digits_or_with_a_line_break_are_refused(gpu_id):
    with pytest.raises(dcgm_diag.DcgmDiagError, match="non-negative integers"):
        dcgm_diag.validate_gpu_ids([gpu_id])
