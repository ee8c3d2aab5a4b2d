"""The NCCL smoke test's verdict, on recorded all_reduce_perf logs of both
outcomes (tests/fixtures/nccl-tests/README.md says where their layout comes from)."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.platform.plugins.filter.nccl_test import nccl_test_result
from conftest import FIXTURES

LOGS = FIXTURES / "nccl-tests"


@pytest.fixture(scope="module")
def rdma():
    return (LOGS / "rdma-ib-gdrdma.log").read_text()


@pytest.fixture(scope="module")
def socket():
    return (LOGS / "socket-fallback.log").read_text()


def test_rdma_engaged_passes_with_its_numbers(rdma):
    r = nccl_test_result(rdma, 20)
    assert r == {"passed": True, "transport": "IB", "gdrdma": True, "peak_busbw": 23.58, "avg_busbw": 23.2542, "sizes": 6,
                 "detail": "NET/IB/GDRDMA, peak bus bandwidth 23.58 GB/s (floor 20.00)"}


def test_socket_fallback_fails_whatever_the_floor(socket):
    r = nccl_test_result(socket, 0)
    assert r["passed"] is False and r["transport"] == "Socket" and r["gdrdma"] is False
    assert r["peak_busbw"] == 3.52 and r["avg_busbw"] == 3.48333
    assert r["detail"] == "NCCL used NET/Socket, not only the IB/RoCE transport (NET/IB)"


def test_rdma_under_the_floor_fails(rdma):
    r = nccl_test_result(rdma, 23.59)
    assert not r["passed"] and r["detail"] == "peak bus bandwidth 23.58 GB/s is under the floor of 23.59 GB/s"
    assert nccl_test_result(rdma, 23.58)["passed"]


def test_ib_without_gpudirect_fails_unless_allowed(rdma):
    staged = rdma.replace("via NET/IB/0/GDRDMA", "via NET/IB/0", 3)
    r = nccl_test_result(staged, 20)
    assert not r["passed"] and r["detail"] == "3 of 8 network channels without GPUDirect RDMA (GDRDMA)"
    assert nccl_test_result(staged, 20, require_gdrdma=False)["passed"]


def test_one_socket_channel_among_ib_ones_fails(rdma):
    mixed = rdma.replace("[send] via NET/IB/0/GDRDMA", "[send] via NET/Socket/0", 1)
    r = nccl_test_result(mixed, 20)
    assert not r["passed"] and r["transport"] == "IB,Socket"


def test_wrong_results_fail(rdma):
    rows = rdma.replace("23.58      0    45537", "23.58      3    45537")
    assert rows != rdma
    assert nccl_test_result(rows, 20)["detail"] == "all_reduce_perf reported wrong results"
    bounds = rdma.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 12 FAILED")
    assert nccl_test_result(bounds, 20)["detail"] == "all_reduce_perf reported wrong results"


def test_a_run_that_did_not_finish_fails(rdma):
    cut = rdma.split("#       size")[0]
    r = nccl_test_result(cut, 0)
    assert not r["passed"] and r["detail"] == "all_reduce_perf printed no results (no bandwidth table or average)"
    assert r["sizes"] == 0 and r["avg_busbw"] is None


def test_an_empty_log_or_one_without_nccl_debug_fails():
    r = nccl_test_result("", 0)
    assert not r["passed"] and r["transport"] == "none"
    assert r["detail"].startswith("no network channel in the log")
    assert not nccl_test_result(None, 0)["passed"]


def test_bad_arguments_are_named():
    with pytest.raises(AnsibleFilterError, match="must be a string"):
        nccl_test_result({"log": ""})
    with pytest.raises(AnsibleFilterError, match="min_busbw_gbps must be a number"):
        nccl_test_result("", "fast")


@pytest.mark.parametrize("old, new", [
    ("# Avg bus bandwidth    : 23.2542", "# Avg bus bandwidth    : 2.1.0"),  # a garbled average
    ("# Avg bus bandwidth    : 23.2542", "# Avg bus bandwidth    : nan"),
])
def test_a_malformed_average_is_no_result(rdma, old, new):
    assert old in rdma
    result = nccl_test_result(rdma.replace(old, new))
    assert result["avg_busbw"] is None and not result["passed"]
    assert "printed no results" in result["detail"]


def test_a_garbled_wrong_count_is_not_a_number(rdma):
    row = [line for line in rdma.splitlines() if line.strip().startswith("33554432")][0]
    garbled = row[:-1] + "\u00b2"  # a superscript digit: str.isdigit() says yes, int() says no
    result = nccl_test_result(rdma.replace(row, garbled))
    assert result["passed"] and result["sizes"] == nccl_test_result(rdma)["sizes"]
