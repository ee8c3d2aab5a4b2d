"""Reads side by side (module_utils/_k8s/side_by_side.py): results in order, the first failure in order, and the
calls really in flight at once."""
import threading

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._k8s import side_by_side


def test_results_come_in_the_items_order_whatever_ends_first():
    ends = threading.Event()

    def read(item):
        if item == 0:
            assert ends.wait(10)  # the first item ends last
        if item == 2:
            ends.set()
        return item * 10
    assert side_by_side.in_order(read, range(3)) == [0, 10, 20]


def test_the_calls_are_in_flight_at_once_up_to_the_workers():
    together = threading.Barrier(4, timeout=10)  # breaks (and fails the test) unless four calls wait at once
    assert side_by_side.in_order(lambda item: together.wait() is not None and item, range(4), workers=4) == [0, 1, 2, 3]
    running, most, lock = [0], [0], threading.Lock()

    def count(item):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        threading.Event().wait(0.01)
        with lock:
            running[0] -= 1
        return item
    assert side_by_side.in_order(count, range(20), workers=3) == list(range(20)) and most[0] <= 3


def test_the_first_failure_in_order_is_raised_once_every_call_ended():
    ended = []

    def read(item):
        if item in (1, 3):
            raise ValueError("item %d" % item)
        ended.append(item)
        return item
    with pytest.raises(ValueError, match="item 1"):
        side_by_side.in_order(read, range(5))
    assert sorted(ended) == [0, 2, 4]


def test_one_item_or_none_runs_in_the_callers_thread():
    caller = threading.current_thread()
    assert side_by_side.in_order(lambda item: threading.current_thread() is caller, [1]) == [True]
    assert side_by_side.in_order(lambda item: 1 / 0, []) == []
