"""A task's finished data files stored in the background while it encodes the next ones.

Why: on an object store a PUT of a data file waits a round trip (and its bytes' transfer) before it
answers; a task that stores each file before encoding the next spends that time idle, so a write or
compaction task with many small output files (one per bucket) was bound by latency. Here a finished
file's bytes go to a thread (the I/O releases the GIL) and the task goes on encoding.

Bounds: at most the storage's `io_parallelism` files (narrowed by the process's throttle window)
and `AHEAD_BYTES` of encoded bytes wait or upload at once; `put` blocks until an upload finished
when either is full, so an executor's memory stays bounded however many files a task writes.

Crash ordering: a file is named in a commit only after its upload finished. `wait` returns once
every upload did, raising the first failure; a writer's owner calls it before the files' metadata
leaves the task (a task returns its results only after it), so a commit never names a file still
uploading and a failed upload fails the task. `drain` (for abort) waits without raising, so the
files are deleted only after no upload can recreate them. Local disk stores in the caller's thread.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType

from paimon_format.data.prefetch import AHEAD_BYTES
from paimon_format.data.spool import Payload, SpooledFile, discard, payload_size, store
from paimon_format.storage.fileio import FileIO
from paimon_format.storage.in_flight import allowed_in_flight, note_completed


class Uploads:
    """Stores files in the background, bounded by count and bytes; `wait` before naming them anywhere."""

    def __init__(
        self, file_io: FileIO, *, max_bytes: int = AHEAD_BYTES, parallelism: int | None = None
    ) -> None:
        self.file_io = file_io
        self._parallelism = file_io.io_parallelism if parallelism is None else max(1, parallelism)
        self._max_bytes = max_bytes
        self._pending: deque[tuple[Future[None], int]] = deque()
        self._pending_bytes = 0
        self._failure: BaseException | None = None
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        if file_io.protocol != "file" and self._parallelism > 1:
            self._pool = ThreadPoolExecutor(max_workers=self._parallelism, thread_name_prefix="paimon-upload")

    @property
    def pending_files(self) -> int:
        """Files handed to `put` whose upload has not been waited for."""
        return len(self._pending)

    def put(self, path: str, data: Payload) -> None:
        """Store `data` (bytes, or a spool on local disk: `data.spool`) at `path`, in the background
        on an object store. Raises an earlier upload's failure instead of starting this one (a spool
        is then removed)."""
        try:
            self._raise_failure()
        except BaseException:
            discard(data if isinstance(data, SpooledFile) else None)
            raise
        if self._pool is None:
            store(self.file_io, path, data)
            return
        size = payload_size(data)
        while self._pending and (
            len(self._pending) >= allowed_in_flight(self._parallelism)
            or self._pending_bytes + size > self._max_bytes
        ):
            self._settle_oldest()
            if self._failure is not None:
                discard(data if isinstance(data, SpooledFile) else None)
            self._raise_failure()
        future = self._pool.submit(self._upload, path, data)
        self._pending.append((future, size))
        self._pending_bytes += size

    def wait(self) -> None:
        """Return once every upload finished; the first failure is raised (the files are then not
        to be named in a commit)."""
        while self._pending:
            self._settle_oldest()
        self._raise_failure()

    def drain(self) -> None:
        """Wait for every upload to end, successful or not, without raising (before deleting them)."""
        while self._pending:
            self._settle_oldest()

    def close(self) -> None:
        """Drain and stop the threads."""
        self.drain()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _upload(self, path: str, data: Payload) -> None:
        try:
            store(self.file_io, path, data)
        finally:
            note_completed(self._parallelism)

    def _settle_oldest(self) -> None:
        future, size = self._pending.popleft()
        self._pending_bytes -= size
        error = future.exception()
        if error is not None:
            with self._lock:
                self._failure = self._failure or error

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def __enter__(self) -> Uploads:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
