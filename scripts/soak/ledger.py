"""The soak's tables and the ledger of every row Java's writer committed to them.

Each table gets batches: rows of the writer's current day (sometimes the day before, as late data),
and for primary-key tables updates and deletes of live keys. Every batch also writes a *marker* row
in partition `MARKER_DAY` (never dropped) carrying the batch number: an append table keeps one marker
per batch, a primary-key table one marker key overwritten by each batch. A read of any snapshot or tag
therefore says which batch it ends with, and the ledger folds batches 1..that one into the rows the
read must equal. This is exact whatever the snapshot ids of Java's commits were (our jobs commit in
between, Java's commit may retry at a later id) and catches a lost, doubled or reverted batch.

Partitions our drop-partition removed leave the expected rows by the drop's snapshot window: from the
id our job saw before it ran (exclusive) to the latest after it returned (inclusive) a snapshot may or
may not have the day (the drop's own snapshot is somewhere in between); from the latter on it must
not, before it it must have every row. The writer never writes to a day once it is old enough to drop.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

MARKER_DAY = "9999-12-31"
FIRST_DAY = dt.date(2024, 1, 1)
BATCHES_PER_DAY = 6
# Days this far behind the writer's current day are dropped by our drop-partition; the writer writes
# only to its current day and the one before.
DROP_AGE_DAYS = 3
ID_SPAN = 10**9  # the ids (keys) of writer w: w * ID_SPAN + 1 .. (w + 1) * ID_SPAN - 1

Row = dict[str, Any]

# Java's own expiry on every commit (TableCommitImpl), its compaction in the writer, Java tags.
JAVA_EXPIRY = {
    "snapshot.num-retained.min": "6",
    "snapshot.num-retained.max": "20",
    "snapshot.time-retained": "1 min",
}


@dataclass(frozen=True)
class TableSpec:
    """One soak table: Paimon schema, options, and how its rows merge (`engine`)."""

    name: str
    fields: tuple[tuple[str, str], ...]
    primary_keys: tuple[str, ...]
    options: dict[str, str]
    engine: str  # append | deduplicate | partial-update
    deletes: bool

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.fields)

    @property
    def skips_level0(self) -> bool:
        """Batch reads skip level 0 (deletion vectors): a commit's rows show once compacted."""
        return self.options.get("deletion-vectors.enabled") == "true"


_PK_FIELDS = (
    ("dt", "STRING NOT NULL"),
    ("k", "BIGINT NOT NULL"),
    ("v", "STRING"),
    ("n", "BIGINT"),
    ("batch", "INT"),
)

SPECS: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        TableSpec(
            "events",
            (("id", "BIGINT NOT NULL"), ("dt", "STRING NOT NULL"), ("v", "STRING"), ("batch", "INT")),
            (),
            {**JAVA_EXPIRY, "bucket": "-1"},
            "append",
            False,
        ),
        TableSpec(
            "dedup",
            _PK_FIELDS,
            ("dt", "k"),
            {**JAVA_EXPIRY, "bucket": "2", "num-sorted-run.compaction-trigger": "3"},
            "deduplicate",
            True,
        ),
        TableSpec(
            "partial",
            _PK_FIELDS,
            ("dt", "k"),
            {**JAVA_EXPIRY, "bucket": "1", "merge-engine": "partial-update"},
            "partial-update",
            False,
        ),
        TableSpec("dynamic", _PK_FIELDS, ("dt", "k"), {**JAVA_EXPIRY, "bucket": "-1"}, "deduplicate", True),
        TableSpec(
            "dv_lookup",
            _PK_FIELDS,
            ("dt", "k"),
            {
                **JAVA_EXPIRY,
                "bucket": "2",
                "deletion-vectors.enabled": "true",
                "changelog-producer": "lookup",
            },
            "deduplicate",
            True,
        ),
    )
}


def table_path(warehouse: str, name: str) -> str:
    """Where the soak keeps table `name` (database `soak`) in `warehouse`."""
    return f"{warehouse}/soak.db/{name}"


def day_name(day: int) -> str:
    return (FIRST_DAY + dt.timedelta(days=day)).isoformat()


@dataclass
class Batch:
    """One commit request of Java's writer; `committed` is None until known."""

    number: int
    day: int
    rows: list[Row]
    committed: bool | None = None
    # the latest snapshot id once the writer's commit returned (Java's answer; ours: listed after the
    # write run): the batch is whole in it and in every later snapshot
    latest_after: int | None = None
    first_landed: int | None = None  # the batch's first snapshot when known (our writers: the APPEND)
    runs: list[str] = field(default_factory=list)  # evidence: each attempt's exit code and snapshot ids


@dataclass
class Drop:
    """A partition our drop-partition removed: the snapshot window its commit lies in."""

    day: str
    after: int  # the latest snapshot id before the job ran (the drop's snapshot is later)
    by: int | None = None  # the latest snapshot id after the job returned (None: outcome unknown)


@dataclass
class Ledger:
    """Every batch Java's writer sent to one table, whether it was committed, and the drops."""

    spec: TableSpec
    rng: random.Random
    batches: dict[int, Batch] = field(default_factory=dict)
    drops: dict[str, Drop] = field(default_factory=dict)
    _live: dict[tuple[Any, ...], Row] = field(default_factory=dict)  # state after the last commit
    _next_id: int = 0
    writer: int = 0  # which writer's keys and marker (see the module docstring)
    deletes: bool = True  # False: this writer sends no deletes even where the table would take them
    batches_per_day: int = BATCHES_PER_DAY  # fewer: the writer leaves days (for drop-partition) sooner

    def __post_init__(self) -> None:
        self._next_id = max(self._next_id, self.writer * ID_SPAN)

    @property
    def last_committed(self) -> int:
        return max((b.number for b in self.batches.values() if b.committed), default=0)

    def key(self, row: Row) -> tuple[Any, ...]:
        return tuple(row[k] for k in self.spec.primary_keys)

    def canonical(self, row: Row) -> tuple[Any, ...]:
        return tuple(row.get(name) for name in self.spec.names)

    def new_batch(self) -> Batch:
        """The next batch: new rows, and on primary-key tables updates and deletes of live keys of the
        writer's current day or the day before (never of a day old enough to be dropped)."""
        number = len(self.batches) + 1
        day = number // self.batches_per_day
        rng, rows = self.rng, []
        for _ in range(rng.randint(3, 8)):
            row_day = day - 1 if day > 0 and rng.random() < 0.2 else day
            rows.append(self._new_row(row_day, number))
        recent = []  # an append table only grows
        if self.spec.engine != "append":
            recent = [k for k in self._live if k[0] >= day_name(day - 1) and k[0] != MARKER_DAY]
        touched = rng.sample(recent, min(len(recent), rng.randint(0, 6)))
        for index, key in enumerate(touched):
            old = self._live[key]
            if self.spec.deletes and self.deletes and index % 3 == 2:
                rows.append({**old, "_kind": "-D"})
            elif self.spec.engine == "partial-update":  # a partial row: unset columns keep their value
                column = rng.choice(("v", "n"))
                value = f"u{number}" if column == "v" else rng.randint(0, 10**6)
                rows.append({"dt": key[0], "k": key[1], column: value, "batch": number})
            else:
                rows.append({**old, "v": f"u{number}", "n": rng.randint(0, 10**6), "batch": number})
        rows.append(self._marker(number))
        batch = Batch(number, day, rows)
        self.batches[number] = batch
        return batch

    def _new_row(self, day: int, number: int) -> Row:
        self._next_id += 1
        if self.spec.engine == "append":
            return {"id": self._next_id, "dt": day_name(day), "v": f"r{self._next_id}", "batch": number}
        return {
            "dt": day_name(day),
            "k": self._next_id,
            "v": f"r{self._next_id}",
            "n": number,
            "batch": number,
        }

    def _marker(self, number: int) -> Row:
        if self.spec.engine == "append":
            return {"id": -(self.writer * ID_SPAN + number), "dt": MARKER_DAY, "v": "marker", "batch": number}
        return {"dt": MARKER_DAY, "k": -self.writer, "v": "marker", "n": number, "batch": number}

    def owns(self, row: Row) -> bool:
        """Whether `row` is one of this writer's (its keys or ids, its marker)."""
        value = int(row["id"] if self.spec.engine == "append" else row["k"])
        if row["dt"] == MARKER_DAY:
            return (
                (-value) // ID_SPAN == self.writer if self.spec.engine == "append" else -value == self.writer
            )
        return value // ID_SPAN == self.writer

    def settle(self, batch: Batch, committed: bool, latest: int | None, first: int | None = None) -> None:
        """Record the outcome of a batch; a committed one moves the writer's view of live rows on.
        `first`: the first snapshot the batch's commit made, when it made several."""
        batch.committed, batch.latest_after, batch.first_landed = committed, latest, first
        if committed:
            self._apply(self._live, batch.rows)

    def _apply(self, state: dict[tuple[Any, ...], Row] | Counter, rows: list[Row]) -> None:
        for row in rows:
            values = {k: v for k, v in row.items() if k != "_kind"}
            if self.spec.engine == "append":
                state[self.canonical(values)] = state.get(self.canonical(values), 0) + 1
            elif row.get("_kind") in ("-D", "-U"):
                state.pop(self.key(values), None)
            elif self.spec.engine == "partial-update":
                merged = dict(state.get(self.key(values), {}))
                merged.update({k: v for k, v in values.items() if v is not None})
                state[self.key(values)] = merged
            else:
                state[self.key(values)] = values

    def rows_at(self, marker: int) -> Counter:
        """The rows (canonical tuples, counted) after the committed batches up to `marker`."""
        state: Any = Counter() if self.spec.engine == "append" else {}
        for number in range(1, marker + 1):
            batch = self.batches.get(number)
            if batch is not None and batch.committed:
                self._apply(state, batch.rows)
        if self.spec.engine == "append":
            return state
        return Counter(self.canonical(row) for row in state.values())

    def marker_of(self, rows: list[Row]) -> int:
        """The last batch of this writer a read ends with (0: none yet)."""
        return max((int(r["batch"]) for r in rows if r["dt"] == MARKER_DAY and self.owns(r)), default=0)

    def bad_marker(self, marker: int) -> str | None:
        """A read may only end with a batch that was committed (or whose outcome is unknown)."""
        if marker == 0:
            return None
        batch = self.batches.get(marker)
        if batch is None or batch.committed is False:
            return f"a read ends with batch {marker}, which Java never committed"
        return None

    def expected(self, marker: int, snapshot_id: int, actual: list[Row]) -> Counter:
        """The rows a read of `snapshot_id` ending with batch `marker` must return (see the module
        docstring for dropped days: inside a drop's window the read decides whether the day is there)."""
        expected = self.rows_at(marker)
        present_days = {row["dt"] for row in actual}
        gone: set[str] = set()
        for drop in self.drops.values():
            if snapshot_id <= drop.after:
                continue
            if (drop.by is not None and snapshot_id >= drop.by) or drop.day not in present_days:
                gone.add(drop.day)
        day_index = self.spec.names.index("dt")
        return Counter({row: n for row, n in expected.items() if row[day_index] not in gone})

    def torn_batch(self, snapshot_id: int) -> int | None:
        """The batch whose rows `snapshot_id` may hold only in part, else None.

        On a table whose reads skip level 0 a batch lands as an APPEND of level-0 files (invisible)
        and shows once compacted, by its writer's compaction right after. In between, a compaction by
        anyone else (the other writer's, ours in maintain) may compact some of the buckets the batch
        wrote and not others, so a snapshot inside that window shows the batch in some buckets only,
        as Paimon's own readers would: not a loss, the batch's compaction makes it whole."""
        if not self.spec.skips_level0:
            return None
        for batch in self.batches.values():
            first, last = batch.first_landed, batch.latest_after
            if batch.committed and first is not None and last is not None and first <= snapshot_id < last:
                return batch.number
        return None

    def torn_differences(
        self, torn: int, snapshot_id: int, actual: list[Row], all_rows: list[Row]
    ) -> tuple[Counter, Counter]:
        """(lost, extra) of a read inside batch `torn`'s window: every key must hold its row before
        the batch or after it (absent where that state has none); append tables are checked as a
        range, at least the rows before and at most those after."""
        before = self.expected(torn - 1, snapshot_id, all_rows)
        after = self.expected(torn, snapshot_id, all_rows)
        found = Counter(self.canonical(row) for row in actual)
        if self.spec.engine == "append":
            return before - found, found - after
        index = [self.spec.names.index(k) for k in self.spec.primary_keys]

        def by_key(rows: Counter) -> dict[tuple[Any, ...], tuple[Any, ...]]:
            return {tuple(row[i] for i in index): row for row in rows}

        old, new, got = by_key(before), by_key(after), by_key(found)
        lost, extra = Counter(), found - Counter(got.values())  # a key twice: the second is extra
        for key in old.keys() | new.keys() | got.keys():
            allowed = {old.get(key), new.get(key)}
            if got.get(key) not in allowed:
                if got.get(key) is None:
                    lost[old.get(key) or new.get(key)] += 1
                else:
                    extra[got[key]] += 1
        return lost, extra

    def droppable_days(self) -> list[str]:
        """Days old enough to drop that are not dropped yet (the writer left them for good)."""
        return droppable_days([self])


def droppable_days(ledgers: list[Ledger]) -> list[str]:
    """Days every writer of a table left for good (old enough to drop by the slowest writer's current
    day) that are not dropped yet."""
    newest = min(max((b.day for b in ledger.batches.values()), default=0) for ledger in ledgers)
    days = {row["dt"] for ledger in ledgers for b in ledger.batches.values() if b.committed for row in b.rows}
    old = {d for d in days if d != MARKER_DAY and d < day_name(newest - DROP_AGE_DAYS)}
    dropped = {d for ledger in ledgers for d, drop in ledger.drops.items() if drop.by is not None}
    return sorted(old - dropped)
