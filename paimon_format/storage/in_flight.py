"""Keeping many storage requests in flight at once, and fewer when the store says to slow down.

Why: on an object store every request waits 20-100 ms for its first byte, so a job that reads its
manifests, checks files or deletes batches one request after another is bound by latency, not by
CPU or bandwidth. `map_in_flight` runs a function over items on a bounded thread pool (the I/O
releases the GIL; decoding one manifest overlaps reading the next) and yields results in input
order, so callers stay plain loops with the same error semantics: the first failure is raised at
its item's turn and nothing after it is yielded.

Throttling: S3 answers 503 SlowDown when a prefix gets more requests than it serves; an overloaded
store (or the path to it) may also stop answering, so a request times out or loses its connection.
Each such request is retried with back-off (`paimon_format.storage.s3_client.hook_retries`); on top
of that every pool in this process narrows (the allowed share of its limit halves, at most once per
`CUT_INTERVAL_S`) and grows back additively, one call per round of completed calls: the AIMD rule
TCP uses. A throttled or timed-out request fails a job only once its retries are spent;
`throttled_requests()` and `timed_out_requests()` count them for the run record.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Defaults of `FileIO.io_parallelism`: object stores are latency-bound, local disk is not (a few
# threads hide a cold page cache; more only add contention).
OBJECT_STORE_PARALLELISM = 64
LOCAL_PARALLELISM = 4
_LOCAL_PROTOCOLS = frozenset({"file", "memory"})
CUT_INTERVAL_S = 0.2  # throttles closer together than this are one signal, as within one round trip
_MIN_SHARE = 1e-6  # the share never reaches 0: one call is always allowed


def default_parallelism(protocol: str) -> int:
    """The in-flight limit of `protocol` when none is configured."""
    return LOCAL_PARALLELISM if protocol in _LOCAL_PROTOCOLS else OBJECT_STORE_PARALLELISM


class _Window:
    """The process-wide share of every pool's limit that may run now (AIMD), and the throttle count."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.share = 1.0
        self.throttled = 0
        self.timed_out = 0
        self._last_cut = float("-inf")
        self._widest = 1  # the widest pool seen: growth is paced by it, so a small pool's completions
        # do not regrow the share the widest pools use after one round of their own

    def cut(self, kind: str) -> None:
        with self._lock:
            if kind == TIMED_OUT:
                self.timed_out += 1
            else:
                self.throttled += 1
            now = time.monotonic()
            if now - self._last_cut >= CUT_INTERVAL_S:
                self.share = max(_MIN_SHARE, self.share / 2)
                self._last_cut = now

    def grow(self, parallelism: int) -> None:
        with self._lock:
            self._widest = max(self._widest, parallelism)
            if self.share < 1.0:
                allowed = max(1.0, self.share * self._widest)
                self.share = min(1.0, self.share + 1.0 / (self._widest * allowed))

    def allowed(self, parallelism: int) -> int:
        return max(1, int(self.share * parallelism))


_WINDOW = _Window()


# What `note_throttled` / `note_timed_out` tell a listener.
THROTTLED = "throttled"
TIMED_OUT = "timed_out"
_LISTENER: list[Callable[[str], None]] = []  # at most one: see set_throttle_listener


def note_throttled() -> None:
    """The store answered one request with a throttling error (503 SlowDown): narrow every pool."""
    _note(THROTTLED)


def note_timed_out() -> None:
    """One request got no answer (its read or connect timeout fired, or its connection dropped): the
    store or the path to it is overloaded, as with a 503, so every pool narrows the same way."""
    _note(TIMED_OUT)


def _note(kind: str) -> None:
    _WINDOW.cut(kind)
    for listener in _LISTENER:
        listener(kind)


def set_throttle_listener(listener: Callable[[str], None] | None) -> None:
    """Call `listener(kind)` (THROTTLED or TIMED_OUT) on every throttle and every timed-out request
    from now on, instead of the previous listener (None: no listener). The jobs layer counts a Spark
    task's with it, for the driver's run record."""
    _LISTENER[:] = [listener] if listener is not None else []


def throttled_requests() -> int:
    """Throttled requests this process has seen since it started (callers take differences)."""
    return _WINDOW.throttled


def timed_out_requests() -> int:
    """Requests this process saw time out or lose their connection since it started (callers take
    differences)."""
    return _WINDOW.timed_out


def note_completed(parallelism: int) -> None:
    """One call of a pool of `parallelism` finished: the window grows back (AIMD), as in `map_in_flight`;
    for pools of their own, such as a task's data-file read-ahead (`paimon_format.data.prefetch`)."""
    _WINDOW.grow(parallelism)


def allowed_in_flight(parallelism: int) -> int:
    """How many of `parallelism` calls may run now, after the throttles seen so far."""
    return _WINDOW.allowed(parallelism)


def map_in_flight(fn: Callable[[T], R], items: Iterable[T], parallelism: int) -> Iterator[R]:
    """`fn(item)` for every item, up to `parallelism` calls at once, results in input order.

    Items are taken lazily, at most the allowed number ahead of the result being yielded, so a
    caller streaming millions of names holds only a window of them. `parallelism` <= 1 calls `fn`
    inline in this thread (no pool). When the consumer stops early (or a call fails) the calls not
    yet started are cancelled and the running ones are waited for before this returns.
    """
    if parallelism <= 1:
        for item in items:
            yield fn(item)
        return
    pending: deque[Future[R]] = deque()
    iterator = iter(items)
    exhausted = False
    with ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="paimon-io") as pool:
        try:
            while True:
                while not exhausted and len(pending) < _WINDOW.allowed(parallelism):
                    try:
                        item = next(iterator)
                    except StopIteration:
                        exhausted = True
                        break
                    pending.append(pool.submit(fn, item))
                if not pending:
                    return
                result = pending.popleft().result()
                _WINDOW.grow(parallelism)
                yield result
        finally:
            for future in pending:
                future.cancel()


_PUT_POLL_S = 0.05  # how often a producer blocked on a full buffer checks that the consumer left


def stream_in_flight(
    fn: Callable[[T], Iterator[R]], items: Iterable[T], parallelism: int, buffered: int | None = None
) -> Iterator[R]:
    """Every result of every `fn(item)`, up to `parallelism` items in progress at once, results
    yielded as they arrive (NOT in input order) through a buffer of at most `buffered` results.

    Why: an item whose work yields many results one request after another (a key range listed page
    by page) would be held whole by `map_in_flight`, which keeps results in order; when one item is
    far bigger than expected that is unbounded memory. Here a producer blocks on the full buffer, so
    memory is `buffered` + one result per running item, whatever an item holds. Items start while
    fewer than the allowed share of `parallelism` run (the throttle window applies per item).
    The first failure is raised once it reaches the consumer; when the consumer stops early (or a
    call failed) no new item starts, running producers stop at their next result, and this waits for
    them before it returns. `parallelism` <= 1 runs everything inline in this thread.
    """
    if parallelism <= 1:
        for item in items:
            yield from fn(item)
        return
    buffer: queue.Queue[tuple[str, object]] = queue.Queue(maxsize=buffered or 2 * parallelism)
    leaving = threading.Event()

    def offer(entry: tuple[str, object]) -> bool:
        while not leaving.is_set():
            try:
                buffer.put(entry, timeout=_PUT_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    iterator = iter(items)
    running = 0
    exhausted = False
    # every submitted item starts at once (fewer than `parallelism` run), so none waits to be cancelled
    with ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="paimon-io") as pool:
        try:
            while True:
                while not exhausted and running < _WINDOW.allowed(parallelism):
                    try:
                        item = next(iterator)
                    except StopIteration:
                        exhausted = True
                        break
                    pool.submit(_produce, fn, item, offer)
                    running += 1
                if running == 0:
                    return
                kind, value = buffer.get()
                if kind == "result":
                    yield value  # type: ignore[misc]
                elif kind == "done":
                    running -= 1
                    _WINDOW.grow(parallelism)
                else:
                    raise value  # type: ignore[misc]
        finally:
            leaving.set()


def _produce(fn: Callable[[T], Iterator[R]], item: T, offer: Callable[[tuple[str, object]], bool]) -> None:
    """`stream_in_flight`'s producer: offer every result of `fn(item)`, then "done", or the first
    failure (also one raised by the iterator's cleanup: the consumer must hear of it, or it would
    wait for "done"); nothing more once the consumer has left (`offer` returned False)."""
    results: Iterator[R] | None = None
    failure: BaseException | None = None
    left = False
    try:
        results = fn(item)
        for result in results:
            if not offer(("result", result)):
                left = True
                break
    except BaseException as error:  # noqa: BLE001 - handed to the consumer, raised there
        failure = error
    close = getattr(results, "close", None)  # a generator left early runs its cleanup now
    if close is not None:
        try:
            close()
        except BaseException as error:  # noqa: BLE001 - as above
            failure = failure or error
    if not left:
        offer(("error", failure) if failure is not None else ("done", None))


def both(first: Callable[[], T], second: Callable[[], R], parallelism: int) -> tuple[T, R]:
    """`first()` and `second()` at once (two independent storage reads, e.g. two listings, that would
    each wait a round trip on an object store): `second` on a thread while `first` runs here. Both
    have ended when this returns or raises (`first`'s error first). `parallelism` <= 1: one by one."""
    if parallelism <= 1:
        return first(), second()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="paimon-io") as pool:
        pending = pool.submit(second)
        try:
            found = first()
        finally:
            wait([pending])
        return found, pending.result()
