"""The 503 SlowDown answers (and the timed-out requests) Spark executors got, counted for the
driver's run record.

Why: a throttled request is retried and counted in the process that sent it
(`paimon_format.storage.in_flight.throttled_requests`), and on a Spark placement most requests are
sent by executors, processes of their own, so the driver's count alone understated what the store
answered (issue #26: the run record reports the throttled count). Here every FileIO pickled on the
driver while a SparkContext is active carries a `_ThrottleCounter` holding two Spark accumulators
(throttles, timeouts)
(`fileio.pickle_companion`); a task receives its table's FileIO with its closure, unpickles the
counter, and from then on that executor process's throttles are added to the accumulator, whose
updates Spark sends to the driver when the task finishes. The driver reads the total as tasks end.

A Python worker runs one task at a time, and every task unpickles its own closure, so the counter a
task registers replaces the one of the task before; a task that received no FileIO (none of our
jobs' storage tasks) counts nothing. On the driver unpickling a counter does nothing: the driver's
throttles are the process's own count.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from paimon_format.storage.fileio import pickle_companion
from paimon_format.storage.in_flight import TIMED_OUT, set_throttle_listener

_LOCK = threading.Lock()


class _ThrottleCounter:
    """Carried by a pickled FileIO: in a Spark task, counts the process's throttles into the run's
    accumulator."""

    def __init__(self, accumulator: Any, timeouts: Any) -> None:
        self._accumulator = accumulator
        self._timeouts = timeouts

    def __getstate__(self) -> dict[str, Any]:
        return {"accumulator": self._accumulator, "timeouts": self._timeouts}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._accumulator = state["accumulator"]
        self._timeouts = state["timeouts"]
        if _in_spark_task():
            set_throttle_listener(self._count)

    def _count(self, kind: str) -> None:
        with _LOCK:  # the task's I/O threads may be throttled at once; Accumulator.add is not atomic
            (self._timeouts if kind == TIMED_OUT else self._accumulator).add(1)


class _DriverState:
    """The accumulator of the active SparkContext (a new context gets a new one)."""

    context: Any = None
    counter: _ThrottleCounter | None = None


_STATE = _DriverState()


def _in_spark_task() -> bool:
    """In a Spark task now? Only a process that loaded pyspark's task context can be one."""
    task_context = sys.modules.get("pyspark.taskcontext")
    return task_context is not None and task_context.TaskContext.get() is not None


def _active_context() -> Any:
    """The driver's active SparkContext, or None (no Spark loaded or started: a driver-local run;
    an executor, where none is active)."""
    context_module = sys.modules.get("pyspark.context")
    return None if context_module is None else context_module.SparkContext._active_spark_context


def _counter() -> _ThrottleCounter | None:
    """What a FileIO pickled now carries: the active context's counter (None without Spark)."""
    context = _active_context()
    if context is None:
        return None
    with _LOCK:
        if _STATE.context is not context or _STATE.counter is None:
            _STATE.counter = _ThrottleCounter(context.accumulator(0), context.accumulator(0))
            _STATE.context = context
        return _STATE.counter


def executor_throttles() -> tuple[int, int, int]:
    """(id of the counting context, throttles and timeouts its executors' tasks reported so far);
    (0, 0, 0) before any FileIO went to an executor. Callers take differences of two readings of the
    same context."""
    with _LOCK:
        if _STATE.counter is None or _STATE.context is None:
            return 0, 0, 0
        counter = _STATE.counter
        return id(_STATE.context), int(counter._accumulator.value), int(counter._timeouts.value)


def throttles_since(before: tuple[int, int, int]) -> tuple[int, int]:
    """Executors' (throttles, timeouts) since `before` (an `executor_throttles()` reading)."""
    context, throttled, timed_out = executor_throttles()
    if context != before[0]:
        return throttled, timed_out
    return throttled - before[1], timed_out - before[2]


pickle_companion(_counter)
