"""The run record every job emits, and steady progress logging for long phases.

The record is the job's answer to "what did last night's run do": one JSON document that a scheduler
can store and a human can read, written also when the job fails or refuses.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import resource
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import fsspec

from jobs.runtime.executor_throttles import executor_throttles, throttles_since
from paimon_format.storage.in_flight import throttled_requests, timed_out_requests

SAMPLE_LIMIT = 20


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class RunRecord:
    """One JSON document per run: what the job did (or, in a dry run, would do).

    Counts and bytes are totals by name (e.g. `files_deleted`, `bytes_deleted`); samples are a few
    paths per name, capped so that a job deleting millions of files still emits a small record.
    A key has one type in every operation's record (scheduler dashboards index them): counts and
    bytes are integers, `snapshot_ids.base` / `.committed` a number or null, `.committed_ids` a list.

    `details.storage.throttled_requests` (set by `finish`): requests the store answered with 503
    SlowDown while the record was open, in the driver and in the Spark tasks that ran meanwhile
    (counted by `jobs.runtime.executor_throttles`); each was retried, none failed the run by itself.
    `details.storage.timed_out_requests` likewise: requests that got no answer (a read or connect
    timeout, a dropped connection), each retried with back-off; only spent retries fail a run.
    """

    operation: str
    table: str | None = None
    dry_run: bool = False
    started: str = field(default_factory=_now)
    finished: str | None = None
    duration_s: float | None = None
    status: str = "running"  # running | done | failed | refused
    exit_code: int | None = None
    snapshot_ids: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    samples: dict[str, list[str]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    _clock: float = field(default_factory=time.monotonic, repr=False)
    _throttled_before: int = field(default_factory=throttled_requests, repr=False)
    _timed_out_before: int = field(default_factory=timed_out_requests, repr=False)
    _executor_throttled_before: tuple[int, int, int] = field(default_factory=executor_throttles, repr=False)

    def count(self, key: str, value: int) -> None:
        self.counts[key] = self.counts.get(key, 0) + int(value)

    def add_bytes(self, key: str, value: int) -> None:
        self.bytes[key] = self.bytes.get(key, 0) + int(value)

    def committed(self, snapshot_id: int) -> None:
        """Record a snapshot this run committed: `snapshot_ids.committed` is always the last one (a
        number, null when nothing was committed), `snapshot_ids.committed_ids` every one, in order,
        whichever operation ran (one commit or one per batch)."""
        self.snapshot_ids["committed"] = int(snapshot_id)
        self.snapshot_ids.setdefault("committed_ids", []).append(int(snapshot_id))

    def sample(self, key: str, paths: list[str]) -> None:
        """Keep the first SAMPLE_LIMIT paths given under `key` over all calls."""
        bucket = self.samples.setdefault(key, [])
        bucket.extend(str(path) for path in list(paths)[: max(SAMPLE_LIMIT - len(bucket), 0)])

    def finish(self, status: str, error: str | None = None, exit_code: int | None = None) -> None:
        self.status = status
        self.error = error
        self.exit_code = exit_code
        self.finished = _now()
        self.duration_s = round(time.monotonic() - self._clock, 3)
        storage = self.details.setdefault("storage", {})
        executors, executors_timed_out = throttles_since(self._executor_throttled_before)
        storage["throttled_requests"] = throttled_requests() - self._throttled_before + executors
        storage["timed_out_requests"] = timed_out_requests() - self._timed_out_before + executors_timed_out
        # the driver process's peak resident memory so far (Linux reports KiB): what a user sizes the
        # driver by, and what shows that it does not grow with the table's files
        self.details["driver_peak_rss_mib"] = driver_peak_rss_mib()

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)

    def emit(self, output: str | None, storage_options: dict[str, Any] | None = None) -> None:
        """Print the record to stdout, or write it to `output` (any fsspec URL, e.g. s3://...)."""
        text = self.to_json() + "\n"
        if output:
            with fsspec.open(output, "w", encoding="utf-8", **(storage_options or {})) as handle:
                handle.write(text)
        else:
            try:
                sys.stdout.write(text)
                sys.stdout.flush()
            except BrokenPipeError:  # the reader stopped early (`| head`): no trace, no second error
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class ProgressLogger:
    """Logs a running count at most every `interval_s` seconds, and always at the end.

    Long phases (listing millions of files, deleting them) must show they are alive in the driver
    log without one line per file.
    """

    def __init__(
        self, logger: logging.Logger | logging.LoggerAdapter, what: str, interval_s: float = 10.0
    ) -> None:
        self._logger = logger
        self._what = what
        self._interval = interval_s
        self._last = time.monotonic()
        self.total = 0
        self.bytes = 0

    def add(self, count: int, nbytes: int = 0) -> None:
        self.total += int(count)
        self.bytes += int(nbytes)
        now = time.monotonic()
        if now - self._last >= self._interval:
            self._last = now
            self._logger.info("%s: %s so far", self._what, self._summary())

    def done(self) -> None:
        self._logger.info("%s: %s in total", self._what, self._summary())

    def _summary(self) -> str:
        return f"{self.total:,}" + (f" ({self.bytes:,} bytes)" if self.bytes else "")


def driver_peak_rss_mib() -> int:
    """This process's own peak resident memory in MiB. Linux's VmHWM, not getrusage's ru_maxrss: a
    process started by fork+exec inherits its parent's high-water mark in ru_maxrss (a driver launched
    by a 2 GiB benchmark reported the benchmark's 2,375 MiB as its own)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024)
    except OSError:
        pass  # not Linux: ru_maxrss is the best there is
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
