"""Counting how many storage calls run at once, to prove requests are in flight without timing them.

`probing(...)` makes every FileIO that `FileIO.for_path` creates meanwhile a `PeakFileIO`: a plain
FileIO (nothing is replaced, every call reaches storage) that counts, per operation, the calls
running at the same moment and the most that ever did (`Probe.peak`). A pool that runs calls at
once shows a peak above 1; a loop, exactly 1.

Overlap is made observable, not left to luck: with `hold` set, a call of the probed operations
waits until a second one is running before it proceeds (`threading.Event`, no sleep). Code that
runs calls one after another never gets there: the first call gives up after `GUARD_S` (a guard
against hanging, never a measurement), the probe stops holding, and the test sees a peak of 1.
Hold only where the code under test has at least two calls to make, and never with an in-flight
limit of 1 (each call would wait out the guard).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from paimon_format.storage.fileio import FileIO, install_wrapper
from paimon_format.storage.in_flight import OBJECT_STORE_PARALLELISM, allowed_in_flight, map_in_flight

GUARD_S = 20.0
R = TypeVar("R")


class Probe:
    """Per operation: the calls running now, the most at once, and every call made."""

    def __init__(self, hold: Sequence[str] = ()) -> None:
        self.hold = set(hold)
        self._lock = threading.Lock()
        self._running: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self._overlap = threading.Event()
        self.gave_up = False

    def holding(self, *operations: str) -> Probe:
        """Hold these operations from now on (after a test's set-up, whose single reads would wait)."""
        self.hold.update(operations)
        return self

    def run(self, operation: str, call: Callable[[], R]) -> R:
        with self._lock:
            running = self._running[operation] = self._running.get(operation, 0) + 1
            self.peak[operation] = max(self.peak.get(operation, 0), running)
            self.calls[operation] = self.calls.get(operation, 0) + 1
            if operation in self.hold and running >= 2:
                self._overlap.set()
        try:
            if operation in self.hold and not self.gave_up and not self._overlap.wait(GUARD_S):
                self.gave_up = True
            return call()
        finally:
            with self._lock:
                self._running[operation] -= 1


class PeakFileIO(FileIO):
    """A FileIO whose reads, existence checks and deletes report to a `Probe`."""

    probe: Probe

    def read_bytes(self, path: str) -> bytes:
        return self.probe.run("read", lambda: super(PeakFileIO, self).read_bytes(path))

    def exists(self, path: str) -> bool:
        return self.probe.run("exists", lambda: super(PeakFileIO, self).exists(path))

    def delete(self, path: str, *, just_read: bool = False) -> bool:
        return self.probe.run("delete", lambda: super(PeakFileIO, self).delete(path, just_read=just_read))

    def delete_many(self, paths: Sequence[str]) -> list[str]:
        return self.probe.run("delete_many", lambda: super(PeakFileIO, self).delete_many(paths))

    def _s3_delete_batch(self, bucket: str, batch: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
        return self.probe.run(
            "delete_objects", lambda: super(PeakFileIO, self)._s3_delete_batch(bucket, batch)
        )


_ACTIVE: list[Probe] = []


def _wrap(file_io: FileIO) -> FileIO:
    if not _ACTIVE or isinstance(file_io, PeakFileIO):
        return file_io
    probed = PeakFileIO(
        file_io.protocol,
        file_io.storage_options,
        file_io.allow_unsafe_overwrite_commit,
        file_io.configured_parallelism,
    )
    probed.probe = _ACTIVE[-1]
    return probed


install_wrapper(_wrap)


def full_window() -> None:
    """Grow the process's in-flight window back to its whole limit: throttles seen by earlier tests
    (503 SlowDown narrows every pool, `in_flight`) would otherwise let fewer calls run at once."""
    while allowed_in_flight(OBJECT_STORE_PARALLELISM) < OBJECT_STORE_PARALLELISM:
        list(map_in_flight(lambda x: x, range(4 * OBJECT_STORE_PARALLELISM), OBJECT_STORE_PARALLELISM))


@contextmanager
def probing(hold: Sequence[str] = ()) -> Iterator[Probe]:
    """FileIOs made by `FileIO.for_path` inside the block report to the probe it yields (the
    in-flight window grown back first, so only the code under test limits the calls at once)."""
    full_window()
    probe = Probe(hold)
    _ACTIVE.append(probe)
    try:
        yield probe
    finally:
        _ACTIVE.remove(probe)


def in_flight_peak(probe: Probe, operation: str) -> int:
    """The most `operation` calls that ran at once (0 when none ran)."""
    return probe.peak.get(operation, 0)
