"""The loop every soak writer runs (Java's in the local soak, ours on S3): a thread that commits one
batch to each table in turn and can be held between two batches.

`hold()` waits until the writer is between two steps and keeps it there (checkpoints read a table
that stands still); `release()` lets it go on; `stop()` ends the loop after the current step.
`started` is set once every table has its first commit (or the writer gave up), so that the jobs
beside it start on tables that have a snapshot, as in production.
"""

from __future__ import annotations

import threading
import traceback
from collections import Counter


class WriterLoop(threading.Thread):
    """Subclasses define `step(name)` and give `commits` (by table) and `failures`."""

    def __init__(self, name: str, tables: list[str]) -> None:
        super().__init__(name=name, daemon=True)
        self.tables = tables
        self.commits: Counter = Counter()
        self.failures: list[str] = []
        self._cond = threading.Condition()
        self._held = self._busy = self._stopping = False
        self.started = threading.Event()

    def step(self, name: str) -> None:
        raise NotImplementedError

    def hold(self) -> None:
        self.ask_to_hold()
        with self._cond:
            self._cond.wait_for(lambda: not self._busy)

    def ask_to_hold(self) -> None:
        """Start no new step from now on (`hold` also waits for the current one to end). Several
        writers are asked at once first, so that none starts a step while another is waited for."""
        with self._cond:
            self._held = True

    def release(self) -> None:
        with self._cond:
            self._held = False
            self._cond.notify_all()

    def stop(self) -> None:
        self.ask_to_stop()
        self.join()

    def ask_to_stop(self) -> None:
        """End the loop after the current step, without waiting for it (`stop` waits)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def run(self) -> None:
        try:
            while True:
                for name in self.tables:
                    with self._cond:
                        self._cond.wait_for(lambda: not self._held or self._stopping)
                        if self._stopping:
                            return
                        self._busy = True
                    try:
                        self.step(name)
                    finally:
                        with self._cond:
                            self._busy = False
                            self._cond.notify_all()
                if all(self.commits[name] for name in self.tables):
                    self.started.set()
        except Exception:  # noqa: BLE001 - the soak reports it and fails; the thread must not vanish
            self.failures.append(f"{self.name} thread died: {traceback.format_exc(limit=3)}")
        finally:
            self.started.set()
