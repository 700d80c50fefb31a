"""Fault injection for storage: fail, or end the process at, the N-th read, write, list, delete or create.

Why: every job promises that a failed or killed run leaves a table that readers can read and that a
rerun repairs. Storage operations are where a real run dies (a 500 from S3, a full disk, a killed
container between two writes), so the tests and `scripts/chaos.py` inject failures exactly there.

A plan is a comma-separated list of rules `operation:N[+][:action]`:

* operation: `read` (read_bytes), `write` (write_bytes), `list` (one directory listing, or one flat
  recursive listing on S3), `delete` (delete, or one delete_many call), `create` (create_if_absent,
  the commit primitive).
* N: the N-th such operation (1-based) is hit; `N+` hits the N-th and every later one.
* action: `fail` (default) raises `InjectedFault`, a `StorageError`, as a transient I/O error would;
  `crash` ends the process at once with exit code 137 (as SIGKILL would), leaving storage exactly as
  it was; `halt` is the in-process form of a crash for tests that cannot lose their process (a shared
  SparkSession): it raises `SimulatedCrash`, a BaseException that `except Exception` does not catch,
  and from then on every storage operation of this plan raises it too, so no cleanup code can change
  what the "dead" process left behind.

A failing `delete_many` deletes the first half of its paths, then raises (a partially applied S3
batch); the deleted ones are in the error's `deleted_paths`, as `FileIO.delete_many` reports them.

Plans come from code (`with injected("write:2"):`) or from the environment variable `PAIMON_FAULTS`
(e.g. `PAIMON_FAULTS="delete:3,write:1"`), which reaches subprocesses and spark-submit runs:
`FileIO.for_path` wraps every FileIO it makes in `FaultyFileIO` while a plan is active. FileIO does
not know this module: importing it installs `maybe_inject` as a FileIO wrapper, and
`paimon_format.storage` imports it in every process started with PAIMON_FAULTS set (a test's
subprocess, a spark-submit driver, its executors' Python workers). A wrapped
FileIO carries its plan when pickled to Spark executors. Counts are per process, unless the plan has a
state directory (`PAIMON_FAULTS_STATE` or `state_dir=`): then every process using the plan (driver
and executors) counts together, under a file lock, and shares the halted state.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from paimon_format.errors import StorageError
from paimon_format.storage import crash_points
from paimon_format.storage.file_status import FileStatus
from paimon_format.storage.fileio import FileIO, install_wrapper

FAULTS_ENV = "PAIMON_FAULTS"
FAULTS_STATE_ENV = "PAIMON_FAULTS_STATE"
OPERATIONS = ("read", "write", "list", "delete", "create")
ACTIONS = ("fail", "crash", "halt")
CRASH_EXIT_CODE = 137


class InjectedFault(StorageError):
    """A storage failure injected by a fault plan (looks like any other StorageError to callers)."""


class SimulatedCrash(BaseException):
    """The in-process stand-in for a killed process; a BaseException so that `except Exception`
    handlers, like a real crash, do not get to run their recovery."""


@dataclass(frozen=True)
class FaultRule:
    """Hit the `nth` `operation` (and every later one if `onward`) with `action`."""

    operation: str
    nth: int
    action: str = "fail"
    onward: bool = False

    def hits(self, count: int) -> bool:
        return count >= self.nth if self.onward else count == self.nth

    def __str__(self) -> str:
        return f"{self.operation}:{self.nth}{'+' if self.onward else ''}:{self.action}"


@dataclass(frozen=True)
class FaultPlan:
    """Rules plus where the counts live (None: in this process only)."""

    rules: tuple[FaultRule, ...]
    state_dir: str | None = None

    @staticmethod
    def parse(spec: str, state_dir: str | None = None, source: str = FAULTS_ENV) -> FaultPlan:
        """`"delete:3,write:1+,create:2:crash"` -> a plan ("none": count only, e.g. to halt at a
        named step); ValueError naming the bad rule otherwise."""
        rules = []
        for text in (part.strip() for part in spec.split(",")):
            if not text or text == "none":
                continue
            rules.append(_parse_rule(text, source))
        if not rules and spec.strip() not in ("none", ""):
            raise ValueError(f"{source}: no fault rules in {spec!r}")
        return FaultPlan(tuple(rules), state_dir)

    @property
    def spec(self) -> str:
        return ",".join(str(rule) for rule in self.rules)

    def rule_for(self, operation: str, count: int) -> FaultRule | None:
        for rule in self.rules:
            if rule.operation == operation and rule.hits(count):
                return rule
        return None


def _parse_rule(text: str, source: str) -> FaultRule:
    parts = text.split(":")
    usage = "expected operation:N[+][:action], e.g. delete:3 or write:2+:halt"
    if len(parts) not in (2, 3):
        raise ValueError(f"{source}: {text!r}: {usage}")
    operation, count = parts[0].strip(), parts[1].strip()
    action = parts[2].strip() if len(parts) == 3 else "fail"
    if operation not in OPERATIONS:
        raise ValueError(
            f"{source}: {text!r}: unknown operation {operation!r} (one of {', '.join(OPERATIONS)})"
        )
    if action not in ACTIONS:
        raise ValueError(f"{source}: {text!r}: unknown action {action!r} (one of {', '.join(ACTIONS)})")
    onward = count.endswith("+")
    digits = count[:-1] if onward else count
    if not digits.isdigit() or int(digits) < 1:
        raise ValueError(f"{source}: {text!r}: N must be a whole number >= 1, got {count!r}")
    return FaultRule(operation, int(digits), action, onward)


# -- the active plan and its counters -------------------------------------------------------------

_lock = threading.Lock()
_installed: FaultPlan | None = None
_local_counts: dict[tuple[str, str], int] = {}
_local_halted: set[str] = set()
_hits: list[str] = []  # what was injected in this process, for reports


def active_plan() -> FaultPlan | None:
    """The plan installed from code, else the one in PAIMON_FAULTS, else None."""
    if _installed is not None:
        return _installed
    spec = os.environ.get(FAULTS_ENV, "").strip()
    if not spec:
        return None
    return _env_plan(spec, os.environ.get(FAULTS_STATE_ENV) or None)


_env_cache: dict[tuple[str, str | None], FaultPlan] = {}


def _env_plan(spec: str, state_dir: str | None) -> FaultPlan:
    key = (spec, state_dir)
    if key not in _env_cache:
        _env_cache[key] = FaultPlan.parse(spec, state_dir)
    return _env_cache[key]


def maybe_inject(file_io: FileIO) -> FileIO:
    """`file_io` wrapped in FaultyFileIO when a plan is active (installed below as the wrapper of
    `FileIO.for_path`)."""
    plan = active_plan()
    if plan is None or isinstance(file_io, FaultyFileIO):
        return file_io
    return FaultyFileIO.wrapping(file_io, plan)


@contextmanager
def injected(spec: str | FaultPlan, state_dir: str | None = None) -> Iterator[FaultPlan]:
    """Install a plan for this process (and, with `state_dir`, for the executors its FileIOs reach).

    Counts and the halted state start from zero and are cleared again on exit.
    """
    global _installed
    plan = spec if isinstance(spec, FaultPlan) else FaultPlan.parse(spec, state_dir, source="injected()")
    reset(plan)
    previous, _installed = _installed, plan
    try:
        yield plan
    finally:
        _installed = previous
        reset(plan)


def reset(plan: FaultPlan | None = None) -> None:
    """Forget counts, hits and the halted state (of `plan`'s state dir too)."""
    with _lock:
        _local_counts.clear()
        _local_halted.clear()
        _hits.clear()
    if plan is not None and plan.state_dir:
        os.makedirs(plan.state_dir, exist_ok=True)
        for name in ("counts.json", "halted", "hits"):
            try:
                os.remove(os.path.join(plan.state_dir, name))
            except FileNotFoundError:
                pass


def hits(plan: FaultPlan | None = None) -> list[str]:
    """The faults injected so far: in this process, or across processes for a plan with a state dir."""
    if plan is not None and plan.state_dir:
        try:
            with open(os.path.join(plan.state_dir, "hits"), encoding="utf-8") as handle:
                return [line.strip() for line in handle if line.strip()]
        except FileNotFoundError:
            return []
    with _lock:
        return list(_hits)


def is_halted(plan: FaultPlan) -> bool:
    if plan.state_dir:
        return os.path.exists(os.path.join(plan.state_dir, "halted"))
    with _lock:
        return plan.spec in _local_halted


def _count(plan: FaultPlan, operation: str) -> int:
    """Count one more `operation` and return its number (shared across processes with a state dir)."""
    if not plan.state_dir:
        with _lock:
            key = (plan.spec, operation)
            _local_counts[key] = _local_counts.get(key, 0) + 1
            return _local_counts[key]
    os.makedirs(plan.state_dir, exist_ok=True)
    with open(os.path.join(plan.state_dir, "lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = os.path.join(plan.state_dir, "counts.json")
        try:
            with open(path, encoding="utf-8") as handle:
                counts = json.load(handle)
        except FileNotFoundError:
            counts = {}
        counts[operation] = counts.get(operation, 0) + 1
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(counts, handle)
        return counts[operation]


def _record_hit(plan: FaultPlan, text: str, halt: bool) -> None:
    if plan.state_dir:
        with open(os.path.join(plan.state_dir, "hits"), "a", encoding="utf-8") as handle:
            handle.write(text + "\n")
        if halt:
            with open(os.path.join(plan.state_dir, "halted"), "a", encoding="utf-8"):
                pass
    with _lock:
        _hits.append(text)
        if halt:
            _local_halted.add(plan.spec)


def _before(plan: FaultPlan, operation: str, path: str) -> FaultRule | None:
    """Called before each storage operation: dead plans stop everything; a matching rule fires."""
    if is_halted(plan):
        raise SimulatedCrash(f"storage is frozen after a simulated crash ({operation} {path})")
    count = _count(plan, operation)
    rule = plan.rule_for(operation, count)
    if rule is None:
        return None
    text = f"{operation} #{count} ({rule.action}) {path}"
    if rule.action == "crash":
        _record_hit(plan, text, halt=False)
        sys.stderr.write(f"injected crash at {text} ({FAULTS_ENV}): ending the process\n")
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)
    if rule.action == "halt":
        _record_hit(plan, text, halt=True)
        raise SimulatedCrash(f"simulated crash at {text}")
    _record_hit(plan, text, halt=False)
    return rule


@contextmanager
def halt_at_step(step: str, plan: FaultPlan) -> Iterator[None]:
    """In-process crash at a named `crash_point(step)`: raise SimulatedCrash there and freeze `plan`'s
    storage (install the plan with `injected` too, so the jobs' FileIOs obey the freeze).

    `step` may end in `#N` to crash at its N-th pass (PAIMON_CRASH_SKIP=N-1).
    """
    name, _, nth = step.partition("#")

    def halt(reached: str) -> None:
        _record_hit(plan, f"step {reached} (halt)", halt=True)
        raise SimulatedCrash(f"simulated crash at step {reached}")

    saved = {key: os.environ.get(key) for key in (crash_points.CRASH_ENV, crash_points.SKIP_ENV)}
    os.environ[crash_points.CRASH_ENV] = name
    os.environ[crash_points.SKIP_ENV] = str(int(nth) - 1 if nth else 0)
    crash_points.reset_passes()
    previous = crash_points.set_crash_handler(halt)
    try:
        yield
    finally:
        crash_points.set_crash_handler(previous)
        crash_points.reset_passes()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _fail(operation: str, path: str) -> InjectedFault:
    return InjectedFault(f"{operation} {path}: injected fault ({FAULTS_ENV})")


class FaultyFileIO(FileIO):
    """A FileIO whose operations are counted and hit according to a FaultPlan.

    Only the five counted operations (and `exists`/`size`, which stop once halted) are intercepted;
    everything else is the plain FileIO, so a job behaves exactly as without faults until one hits.
    """

    def __init__(
        self,
        protocol: str,
        storage_options: dict[str, Any] | None = None,
        allow_unsafe_overwrite_commit: bool = False,
        plan: FaultPlan | None = None,
    ) -> None:
        super().__init__(protocol, storage_options, allow_unsafe_overwrite_commit)
        if plan is None:
            raise ValueError("FaultyFileIO needs a FaultPlan")
        self.plan = plan

    @staticmethod
    def wrapping(file_io: FileIO, plan: FaultPlan) -> FaultyFileIO:
        faulty = FaultyFileIO(
            file_io.protocol, file_io.storage_options, file_io.allow_unsafe_overwrite_commit, plan
        )
        faulty.configured_parallelism = file_io.configured_parallelism
        return faulty

    def __repr__(self) -> str:
        return f"Faulty{super().__repr__()[:-1]}, faults={self.plan.spec!r})"

    def _check_alive(self, operation: str, path: str) -> None:
        if is_halted(self.plan):
            raise SimulatedCrash(f"storage is frozen after a simulated crash ({operation} {path})")

    def read_bytes(self, path: str) -> bytes:
        if _before(self.plan, "read", path):
            raise _fail("read", path)
        return super().read_bytes(path)

    def write_bytes(self, path: str, data: bytes) -> None:
        if _before(self.plan, "write", path):
            raise _fail("write", path)
        super().write_bytes(path, data)

    def put_local_file(self, path: str, local_path: str) -> None:
        """A data file encoded on local disk (`data.spool`) is a write like any other."""
        if _before(self.plan, "write", path):
            raise _fail("write", path)
        super().put_local_file(path, local_path)

    def create_if_absent(self, path: str, data: bytes) -> bool:
        if _before(self.plan, "create", path):
            raise _fail("create", path)
        return super().create_if_absent(path, data)

    def list_dir(self, path: str) -> list[FileStatus]:
        if _before(self.plan, "list", path):
            raise _fail("list", path)
        return super().list_dir(path)

    def list_files_recursive(self, path: str) -> Iterator[FileStatus]:
        if self.protocol == "s3" and _before(self.plan, "list", path):
            raise _fail("list", path)  # S3 lists flat in one call; elsewhere each list_dir counts
        yield from super().list_files_recursive(path)

    def delete(self, path: str, *, just_read: bool = False) -> bool:
        if _before(self.plan, "delete", path):
            raise _fail("delete", path)
        return super().delete(path, just_read=just_read)

    def delete_many(self, paths: Sequence[str]) -> list[str]:
        first = paths[0] if paths else "(no paths)"
        if not _before(self.plan, "delete", f"{first} (+{max(len(paths) - 1, 0)} more)"):
            return self._plain_delete_many(paths)
        half = list(paths[: len(paths) // 2])
        deleted = self._plain_delete_many(half) if half else []
        error = _fail("delete", f"{first} (+{max(len(paths) - 1, 0)} more)")
        error.deleted_paths = deleted  # type: ignore[attr-defined]
        raise error

    def _plain_delete_many(self, paths: Sequence[str]) -> list[str]:
        # FileIO.delete_many deletes one by one through self.delete off S3: that must not count again.
        if self.protocol == "s3":
            return super().delete_many(paths)
        plain = FileIO(self.protocol, self.storage_options, self.allow_unsafe_overwrite_commit)
        return plain.delete_many(paths)

    def exists(self, path: str) -> bool:
        self._check_alive("stat", path)
        return super().exists(path)

    def file_exists(self, path: str) -> bool:
        self._check_alive("stat", path)
        return super().file_exists(path)

    def size(self, path: str) -> int:
        self._check_alive("stat", path)
        return super().size(path)


install_wrapper(maybe_inject)
