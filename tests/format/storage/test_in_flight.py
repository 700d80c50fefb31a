"""map_in_flight: order, laziness, real concurrency, errors at their turn, and AIMD narrowing."""

from __future__ import annotations

import itertools
import pickle
import threading

import pytest

from paimon_format.storage import in_flight
from paimon_format.storage.fileio import FileIO
from paimon_format.storage.in_flight import (
    allowed_in_flight,
    map_in_flight,
    note_throttled,
    stream_in_flight,
    throttled_requests,
)


def _recover() -> None:
    """Let the process-wide window grow back to full after a test narrowed it."""
    while allowed_in_flight(64) < 64:
        list(map_in_flight(lambda x: x, range(256), 64))


def test_results_come_in_input_order_whatever_finishes_first() -> None:
    release = {i: threading.Event() for i in range(8)}

    def call(i: int) -> int:
        if i < 7:
            assert release[i + 1].wait(timeout=10)  # each waits for the one after it: reverse finishing
        release[i].set()
        return i * i

    assert list(map_in_flight(call, range(8), 8)) == [i * i for i in range(8)]


def test_calls_really_overlap_up_to_the_limit() -> None:
    barrier = threading.Barrier(6, timeout=10)  # breaks (and fails the test) unless 6 run at once

    def call(i: int) -> int:
        barrier.wait()
        return i

    assert list(map_in_flight(call, range(12), 6)) == list(range(12))


def test_never_more_than_the_limit_at_once() -> None:
    lock = threading.Lock()
    running = peak = 0

    def call(i: int) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        with lock:
            running -= 1
        return i

    list(map_in_flight(call, range(500), 3))
    assert 1 <= peak <= 3


def test_items_are_taken_lazily() -> None:
    taken = []

    def items():
        for i in itertools.count():
            taken.append(i)
            yield i

    results = map_in_flight(lambda i: i, items(), 4)
    assert [next(results) for _ in range(3)] == [0, 1, 2]
    results.close()
    assert len(taken) <= 3 + 4 + 1


def test_a_failure_is_raised_at_its_turn_and_nothing_after_it_is_yielded() -> None:
    def call(i: int) -> int:
        if i == 3:
            raise OSError("read manifest-3: boom")
        return i

    seen = []
    with pytest.raises(OSError, match="manifest-3"):
        for value in map_in_flight(call, range(10), 4):
            seen.append(value)
    assert seen == [0, 1, 2]


def test_parallelism_one_runs_inline_in_the_calling_thread() -> None:
    me = threading.get_ident()
    assert list(map_in_flight(lambda i: threading.get_ident() == me, range(3), 1)) == [True] * 3


def test_a_throttle_halves_the_window_and_completed_calls_grow_it_back(monkeypatch) -> None:
    _recover()
    monkeypatch.setattr(in_flight, "CUT_INTERVAL_S", 0.0)
    before = throttled_requests()
    note_throttled()
    assert allowed_in_flight(64) == 32
    note_throttled()
    assert allowed_in_flight(64) == 16
    assert throttled_requests() == before + 2
    list(map_in_flight(lambda x: x, range(40), 64))  # two and a half rounds of 16
    assert 16 < allowed_in_flight(64) < 64  # additive: about one more per round of completed calls
    _recover()
    assert allowed_in_flight(64) == 64


def test_throttles_within_one_round_trip_count_once_for_the_window(monkeypatch) -> None:
    _recover()
    monkeypatch.setattr(in_flight, "CUT_INTERVAL_S", 3600.0)
    monkeypatch.setattr(in_flight._WINDOW, "_last_cut", float("-inf"))
    before = throttled_requests()
    for _ in range(5):
        note_throttled()
    assert allowed_in_flight(64) == 32
    assert throttled_requests() == before + 5
    _recover()


def test_io_parallelism_is_high_on_object_stores_low_on_disk_and_configurable() -> None:
    assert FileIO.for_path("s3://bucket/t").io_parallelism == 64
    assert FileIO.for_path("/tmp/t").io_parallelism == 4
    assert FileIO.for_path("s3://bucket/t", io_parallelism=7).io_parallelism == 7

    assert pickle.loads(pickle.dumps(FileIO.for_path("/x", io_parallelism=9))).io_parallelism == 9


def test_a_small_pool_does_not_regrow_the_window_of_the_wide_ones(monkeypatch) -> None:
    _recover()  # the 64-wide pools of _recover make 64 the widest pool seen
    monkeypatch.setattr(in_flight, "CUT_INTERVAL_S", 0.0)
    for _ in range(6):
        note_throttled()
    assert allowed_in_flight(64) == 1
    list(map_in_flight(lambda x: x, range(2), 2))  # two completions of a 2-wide pool
    assert allowed_in_flight(64) <= 4  # about one more per round of the widest pool, not half of it
    _recover()


def test_stream_yields_every_result_of_every_item_with_items_overlapping() -> None:
    barrier = threading.Barrier(4, timeout=10)  # breaks (and fails the test) unless 4 items run at once

    def pages(item: int):
        barrier.wait()
        for page in range(3):
            yield (item, page)

    results = list(stream_in_flight(pages, range(4), 4))
    assert sorted(results) == [(item, page) for item in range(4) for page in range(3)]


def test_stream_holds_a_bounded_buffer_however_many_results_one_item_has() -> None:
    produced = itertools.count(1)
    ahead: list[int] = []
    consumed = 0

    def huge(item: int):
        for page in range(2000):
            ahead.append(next(produced) - consumed)  # results made but not yet taken
            yield page

    for _ in stream_in_flight(huge, range(3), 3, buffered=4):
        consumed += 1
    assert consumed == 6000
    assert max(ahead) <= 4 + 3 + 1  # the buffer, one result per running item, the one being made


def test_stream_raises_a_failure_and_stops_the_other_items() -> None:
    closed: list[int] = []

    def pages(item: int):
        try:
            if item == 1:
                raise OSError("page 0 of range 1 failed")
            while True:
                yield item
        finally:
            closed.append(item)

    with pytest.raises(OSError, match="range 1"):
        for _ in stream_in_flight(pages, range(3), 3, buffered=2):
            pass
    assert sorted(closed) == [0, 1, 2]  # the endless producers stopped and ran their cleanup


def test_stream_left_early_stops_its_producers() -> None:
    closed = threading.Event()

    def endless(item: int):
        try:
            while True:
                yield item
        finally:
            closed.set()

    stream = stream_in_flight(endless, range(1), 2, buffered=1)
    assert next(stream) == 0
    stream.close()
    assert closed.is_set()  # close() returned only after the producer ran its cleanup


def test_stream_with_parallelism_one_runs_inline() -> None:
    caller = threading.get_ident()
    threads = set()

    def pages(item: int):
        threads.add(threading.get_ident())
        yield item

    assert list(stream_in_flight(pages, range(3), 1)) == [0, 1, 2]
    assert threads == {caller}


def test_stream_raises_a_failure_of_a_producers_cleanup_instead_of_waiting() -> None:
    def pages(item: int):
        try:
            yield item
        finally:
            raise OSError("closing range failed")

    with pytest.raises(OSError, match="closing range"):
        list(stream_in_flight(pages, range(2), 2))


def test_both_runs_the_two_calls_at_once_and_returns_both_results() -> None:
    """Each call waits for the other to have started: one after the other, the first would time out."""
    started = threading.Barrier(2, timeout=5)

    def call(value: str) -> str:
        started.wait()
        return value

    assert in_flight.both(lambda: call("a"), lambda: call("b"), 4) == ("a", "b")


def test_both_waits_for_the_second_call_when_the_first_fails() -> None:
    second_done = threading.Event()

    def first() -> None:
        raise ValueError("first failed")

    def second() -> str:
        second_done.wait(5)
        return "b"

    threading.Timer(0.05, second_done.set).start()
    with pytest.raises(ValueError, match="first failed"):
        in_flight.both(first, second, 4)
    assert second_done.is_set()


def test_both_with_parallelism_one_calls_in_order() -> None:
    order: list[str] = []
    assert in_flight.both(lambda: order.append("a") or 1, lambda: order.append("b") or 2, 1) == (1, 2)
    assert order == ["a", "b"]
