"""The commit race between Paimon's Java writer and ours on local disk (issue #28), round by round.

Each round both writers commit one row to the same append table from the same latest snapshot, so
both claim the same next snapshot id. Their data files are written first; then they meet at FIFOs
(an open blocks until the other side opens, so nothing waits by sleeping), in one of three modes:
`COMMIT` (both commits start together), `CLAIM` (both stop just before creating snapshot-N and are
released together, Java after a random pause of up to `jitter_us`) and `FORCED` (the rare
interleaving on purpose: Java checks that snapshot-N is absent and stops before its move, our
commit creates snapshot-N, Java's move replaces it). The round's outcome is told from what each side
reports (Java: the snapshot claims its rename refused; ours: `SnapshotCommit.lost_races` and
`replaced_snapshots`) and checked at once: two new snapshots, one each, ours still ours.
`check_table` then reads every row back with Java and with our reader.

Used by tests/java/test_commit_race_java.py (a short run) and scripts/commit_race.py (1,000 rounds).
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.data.reader import read_data_file
from paimon_format.data.writer import write_table_files
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.java.oracle import JavaPaimon

FIELDS = [("id", "BIGINT NOT NULL"), ("w", "STRING")]

OURS_WON = "ours won, Java retried"
JAVA_WON = "Java won, ours retried"
DETECTED = "Java replaced ours (detected), ours retried"
BOTH_RETRIED = "both retried"
NO_CONTENTION = "no contention (one committed before the other read)"
OUTCOMES = (OURS_WON, JAVA_WON, DETECTED, BOTH_RETRIED, NO_CONTENTION)


class RaceError(AssertionError):
    """A round broke a guarantee: a lost, doubled or silently replaced commit."""


@dataclass
class RaceTable:
    """The table both writers commit to, and what each side committed so far."""

    path: str
    table: Table
    committer: SnapshotCommit
    java_ids: dict[int, int] = field(default_factory=dict)  # snapshot id -> row id Java committed
    our_ids: dict[int, int] = field(default_factory=dict)  # snapshot id -> row id we committed
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)


def create_race_table(java: JavaPaimon, path: str, hooked: bool = False) -> RaceTable:
    """An append table (bucket -1) created by Java; with `hooked` our side opens it through a
    `HookedFileIO` (what the `CLAIM` and `FORCED` rounds need)."""
    java.create_table(path, FIELDS, options={"bucket": "-1"})
    table = Table(HookedFileIO("file") if hooked else FileIO.for_path(path), path)
    return RaceTable(path, table, SnapshotCommit(table))


def _our_messages(race: RaceTable, row_id: int) -> list[CommitMessage]:
    """Our batch's data files, written before the round's rendezvous (only the commit races)."""
    table = race.table
    data = pa.table({"id": pa.array([row_id], pa.int64()), "w": ["ours"]})
    written = write_table_files(table.file_io, table.path, table.schema, data, 0)
    return [CommitMessage(partition, bucket, -1, files) for partition, bucket, files in written]


class _JavaCommit:
    """Java's `race_write` in a thread. When Java fails, every FIFO of the round is opened read-write
    (which never blocks) and held, so our side's blocking open of it still returns."""

    def __init__(self, java: JavaPaimon, path: str, row_id: int, fifos: dict[str, Any]) -> None:
        self.answer: dict[str, Any] = {}
        self.error: BaseException | None = None
        self._held: list[int] = []
        self._fifos = [fifos["barrier"]] if fifos.get("barrier") else list(fifos.get("window") or ())
        rows = [{"id": row_id, "w": "java"}]
        self._thread = threading.Thread(target=self._run, args=(java, path, rows, fifos), daemon=True)
        self._thread.start()

    def _run(self, java: JavaPaimon, path: str, rows: list[dict[str, Any]], fifos: dict[str, Any]) -> None:
        try:
            self.answer = java.race_write(path, rows, **fifos)
        except BaseException as error:  # noqa: BLE001 - reported by join()
            self.error = error
            self._held = [os.open(fifo, os.O_RDWR | os.O_NONBLOCK) for fifo in self._fifos]

    def join(self) -> dict[str, Any]:
        self._thread.join()
        for fd in self._held:
            os.close(fd)
        if self.error is not None:
            raise self.error
        return self.answer


COMMIT = "commit"  # both commits start together: Java waits at a FIFO our side opens first
CLAIM = "claim"  # both are paused just before creating snapshot-N, then released together
FORCED = "forced"  # Java checks snapshot-N absent, our commit creates it, Java's move replaces it
MODES = (COMMIT, CLAIM, FORCED)


def race_round(
    java: JavaPaimon, race: RaceTable, round_no: int, fifo_dir: str, mode: str = COMMIT, jitter_us: int = 0
) -> str:
    """Both writers commit one row from the same latest snapshot; returns the round's outcome.

    `mode` says where the two meet (`COMMIT`, `CLAIM`, `FORCED`); `CLAIM` and `FORCED` need a
    table opened with `hooked`. In `CLAIM` Java's claim starts after a random 0 to `jitter_us` µs,
    so either side may create the file first, and our link may land inside Java's exists/move
    window. In `FORCED` our create releases Java's move and waits for Java's commit to end, so the
    replacement happens before our read-back, as in the race it stands for. Raises `RaceError`
    when a commit was lost, doubled or replaced unnoticed.
    """
    base = race.table.snapshot_manager.latest_id() or 0
    java_row, our_row = 2 * round_no, 2 * round_no + 1
    messages = _our_messages(race, our_row)
    first, second = os.path.join(fifo_dir, f"a-{round_no}"), os.path.join(fifo_dir, f"b-{round_no}")
    os.mkfifo(first)
    os.mkfifo(second)
    lost_before, replaced_before = race.committer.lost_races, len(race.committer.replaced_snapshots)
    fifos: dict[str, Any] = {
        COMMIT: {"barrier": first},
        CLAIM: {"claim": (first, second), "jitter_us": jitter_us},
        FORCED: {"window": (first, second)},
    }[mode]
    java_commit = _JavaCommit(java, race.path, java_row, fifos)
    answer: dict[str, Any] = {}
    try:
        _meet(race, java_commit, mode, base, first, second, answer)
        ours = race.committer.append(messages)
        if not answer:
            answer.update(java_commit.join())
    finally:
        if isinstance(race.table.file_io, HookedFileIO):
            race.table.file_io.before_create = race.table.file_io.after_create = None
        if not answer:  # our side failed first: meet Java where it still waits, let it end
            _finish_meeting(race, mode, first, second)
            java_commit.join()
        os.remove(first)
        os.remove(second)
    assert ours is not None
    outcome = _outcome(
        answer["lost_claims"],
        race.committer.lost_races - lost_before,
        len(race.committer.replaced_snapshots) - replaced_before,
    )
    _check_round(race, base, answer, ours.id, ours.uuid)
    race.java_ids[answer["snapshot_id"]] = java_row
    race.our_ids[ours.id] = our_row
    race.outcomes[outcome] += 1
    return outcome


def _meet(
    race: RaceTable,
    java_commit: _JavaCommit,
    mode: str,
    base: int,
    first: str,
    second: str,
    answer: dict[str, Any],
) -> None:
    """Our side of the rendezvous: at once (`COMMIT`), or through hooks on our snapshot's create."""
    if mode == COMMIT:
        with open(first, "wb"):
            pass  # returns once Java waits at the barrier; closing releases it
        return
    file_io = race.table.file_io
    assert isinstance(file_io, HookedFileIO), f"mode {mode} needs create_race_table(hooked=True)"
    snapshot_file = f"/snapshot/snapshot-{base + 1}"
    file_io.pending = True  # until the hook has met Java
    if mode == CLAIM:

        def release_together(path: str) -> None:
            if path.endswith(snapshot_file):
                file_io.before_create = None
                file_io.pending = False
                with open(first, "rb"):
                    pass  # Java is at the start of its claim
                with open(second, "wb"):
                    pass  # and is released now, as we create ours

        file_io.before_create = release_together
        return
    with open(first, "rb"):
        pass  # returns once Java has checked that snapshot-(base+1) is absent

    def release_move(path: str) -> None:
        if path.endswith(snapshot_file):
            file_io.after_create = None
            file_io.pending = False
            with open(second, "wb"):
                pass
            answer.update(java_commit.join())  # Java's move is done: ours is replaced

    file_io.after_create = release_move


def _finish_meeting(race: RaceTable, mode: str, first: str, second: str) -> None:
    """Our remaining steps of the rendezvous when our commit failed before its hook ran (each open
    returns once Java reaches its side, or at once when Java failed and holds the FIFOs open)."""
    file_io = race.table.file_io
    if mode == CLAIM and isinstance(file_io, HookedFileIO) and file_io.pending:
        with open(first, "rb"):
            pass
    if mode in (CLAIM, FORCED) and isinstance(file_io, HookedFileIO) and file_io.pending:
        with open(second, "wb"):
            pass
    if isinstance(file_io, HookedFileIO):
        file_io.pending = False


def _outcome(java_lost: int, ours_lost: int, replaced: int) -> str:
    if replaced:
        return DETECTED
    if java_lost and ours_lost:
        return BOTH_RETRIED
    if java_lost:
        return OURS_WON
    if ours_lost:
        return JAVA_WON
    return NO_CONTENTION


def _check_round(
    race: RaceTable, base: int, answer: dict[str, Any], our_id: int, our_uuid: str | None
) -> None:
    """Two new snapshots, one each: Java's names Java's commit user, ours still carries our uuid."""
    manager = race.table.snapshot_manager
    java_id = answer["snapshot_id"]
    if sorted([java_id, our_id]) != [base + 1, base + 2] or manager.latest_id() != base + 2:
        raise RaceError(
            f"after snapshot {base}: Java committed {java_id}, we committed {our_id}, "
            f"latest is {manager.latest_id()}: a commit was lost or doubled"
        )
    if manager.snapshot(java_id).commit_user != answer["commit_user"]:
        raise RaceError(f"snapshot {java_id} is not Java's commit any more")
    if manager.snapshot(our_id).uuid != our_uuid:
        raise RaceError(f"snapshot {our_id} was replaced after our commit, unnoticed")


class HookedFileIO(FileIO):
    """Local storage that runs `before_create(path)` before each create-if-absent and
    `after_create(path)` after each successful one: the test's hooks into the moments around our
    snapshot's creation. Storage, not commit code: the commit under test is unchanged."""

    before_create: Callable[[str], None] | None = None
    after_create: Callable[[str], None] | None = None
    pending = False  # a round's hook has not met Java yet

    def create_if_absent(self, path: str, data: bytes) -> bool:
        if self.before_create is not None:
            self.before_create(path)
        created = super().create_if_absent(path, data)
        if created and self.after_create is not None:
            self.after_create(path)
        return created


def check_table(java: JavaPaimon, race: RaceTable) -> int:
    """Snapshot ids contiguous from 1, each one's writer as recorded, every row readable by Java and
    by our reader; returns the number of rows checked. Raises `RaceError`."""
    manager = race.table.snapshot_manager
    ids = manager.snapshot_ids()
    committed = {**race.java_ids, **race.our_ids}
    if ids != list(range(1, len(ids) + 1)) or set(committed) != set(ids):
        raise RaceError(f"snapshot ids {ids[:5]}...{ids[-5:]} are not the {len(committed)} commits made")
    expected = sorted(
        [(row, "java") for row in race.java_ids.values()] + [(row, "ours") for row in race.our_ids.values()]
    )
    by_java = sorted((row["id"], row["w"]) for row in java.read(race.path))
    if by_java != expected:
        raise RaceError(f"Java reads {len(by_java)} rows, {len(expected)} were committed")
    by_us = sorted(_our_rows(race.table))
    if by_us != expected:
        raise RaceError(f"our reader reads {len(by_us)} rows, {len(expected)} were committed")
    return len(expected)


def _our_rows(table: Table) -> list[tuple[int, str]]:
    rows = []
    for entry in live_entries(table, table.snapshot_manager.latest()):
        for batch in read_data_file(table, entry.partition, entry.bucket, entry.file):
            rows.extend(zip(batch.column("id").to_pylist(), batch.column("w").to_pylist(), strict=True))
    return rows
