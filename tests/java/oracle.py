"""Paimon's own Java implementation as a test oracle: one long-lived JVM per test session.

The product never imports this; tests reach it through the session-scoped ``java_paimon`` fixture
(tests/conftest.py), and every test that uses it is marked ``java`` (select with ``-m java``)::

    pytestmark = pytest.mark.java

    def test_x(java_paimon, tmp_path):
        path = str(tmp_path / "t")
        java_paimon.create_table(path, [("k", "INT NOT NULL"), ("v", "STRING")], primary_keys=["k"],
                                 options={"bucket": "1"})
        java_paimon.write(path, [{"k": 1, "v": "a"}])           # -> new snapshot id
        java_paimon.write(path, [{"k": 1, "_kind": "-D"}])       # row kinds: +I -U +U -D
        assert java_paimon.read(path) == []                      # rows at latest, as Python values
        java_paimon.read(path, snapshot_id=1); java_paimon.read(path, tag="t1")
        java_paimon.read(path, branch="b1")

Requests (methods of `JavaPaimon`): ``create_table``, ``alter_table`` (add / rename / widen a column,
set an option), ``write`` (one batch commit, or an overwrite of a partition; a dynamic-bucket table is
written through Paimon's ``HashBucketAssigner`` as Flink does), ``compact`` (Paimon's own compaction of
every partition and bucket, full by default), ``compact_procedure`` (the same as the compact procedure
runs it, on threads, unaware-bucket append tables included: the benchmark's Java peer),
``hilbert_index`` (the Hilbert curve of Paimon's sort compaction), ``count_rows`` (a count and
column sums of a read, no rows shipped), ``read_changelog`` (the changelog
after a snapshot, with row kinds), ``race_write`` (a commit that starts at a FIFO rendezvous, for the
commit race), ``create_tag``, ``create_branch`` (from a tag, or empty),
``expire_snapshots`` / ``expire_changelog`` (Paimon's ``ExpireSnapshotsImpl`` / ``ExpireChangelogImpl``
with an ``ExpireConfig``), ``drop_partitions`` and ``compact_manifests`` (Paimon's partition drop
and manifest full compaction, which the benchmarks time as Java peers), ``remove_orphan_files``
(Paimon's ``OrphanFilesClean``, with ``delete-file.thread-num`` 64: smaller values deadlock on two
partition levels), and ``read`` (a batch read of the table or a branch at the latest snapshot, a
snapshot id or a tag). ``branch=`` is accepted by every request that works on a table. An error in
Java raises `JavaError` with Java's message.

Values: column types are Paimon schema JSON (``"INT NOT NULL"``, ``"DECIMAL(10, 2)"``, ``{"type":
"ARRAY", "element": "INT"}`` ...). Rows go in as dicts of Python values (dates, datetimes, Decimal,
bytes, lists, dicts for ROW; MAP as a dict or a list of pairs) and come back as pypaimon's
``to_pylist`` spells them: naive datetime for TIMESTAMP, UTC-aware for TIMESTAMP_LTZ, a list of
``(key, value)`` tuples for MAP, a dict for ROW. The wire is typed JSON, not Arrow: the bundle lacks
netty, which Arrow's nested vectors need.

The tool (tests/java/PaimonOracle.java) compiles with ``javac`` against the jar shipped in the
``paimon-python-ali`` wheel (a shaded Paimon 1.0 bundle) into ``.venv/java-oracle/<source hash>/``,
so it is recompiled only when the source changes. The JVM runs with ``-Duser.timezone=UTC`` (Java's
ORC reader shifts TIMESTAMP_LTZ by the JVM's zone).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).with_name("PaimonOracle.java")
REPO = SOURCE.parents[2]

Row = dict[str, Any]
FieldSpec = tuple[str, Any]


class JavaError(RuntimeError):
    """Paimon's Java code refused or failed a request; the message is Java's."""


def bridge_jar() -> Path:
    """The shaded Paimon bundle inside the installed paimon-python-ali wheel."""
    import importlib.util

    spec = importlib.util.find_spec("paimon_python_java")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("paimon-python-ali is not installed (bash scripts/setup installs it)")
    jar = Path(spec.origin).parent / "java_dependencies" / "paimon-python-java-bridge.jar"
    if not jar.is_file():
        raise FileNotFoundError(f"{jar}: the Paimon bundle of paimon-python-ali is missing")
    return jar


def compiled_classes(jar: Path, cache_root: Path = REPO / ".venv" / "java-oracle") -> Path:
    """Directory with PaimonOracle.class, compiled once per version of the source."""
    digest = hashlib.sha256(SOURCE.read_bytes() + str(jar).encode()).hexdigest()[:16]
    target = cache_root / digest
    if (target / "PaimonOracle.class").is_file():
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise FileNotFoundError("javac not found (bash scripts/setup installs openjdk-17-jdk-headless)")
    staging = cache_root / f"{digest}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    subprocess.run(
        [javac, "-nowarn", "-encoding", "UTF-8", "-cp", str(jar), "-d", str(staging), str(SOURCE)],
        check=True,
        capture_output=True,
        text=True,
    )
    try:
        os.replace(staging, target)
    except OSError:  # another process (the CI soak beside the suite) compiled it first
        shutil.rmtree(staging, ignore_errors=True)
        if not (target / "PaimonOracle.class").is_file():
            raise
    return target


TEST_JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx512m")


class JavaPaimon:
    """A running PaimonOracle JVM; requests are serialised (one at a time) by a lock."""

    def __init__(self, log_path: Path, jvm_options: tuple[str, ...] | None = None) -> None:
        """`jvm_options` replace the defaults (fast start, small heap: what tests want); benchmarks
        racing Java at a million files give it a larger heap and its normal compilers."""
        jar = bridge_jar()
        classes = compiled_classes(jar)
        java = shutil.which("java") or "java"
        self._log = open(log_path, "ab")  # noqa: SIM115 - lives as long as the JVM
        self._process = subprocess.Popen(
            [
                java,
                "-Duser.timezone=UTC",
                *(jvm_options if jvm_options is not None else TEST_JVM_OPTIONS),
                "--add-opens=java.base/java.nio=ALL-UNNAMED",
                "-cp",
                f"{jar}{os.pathsep}{classes}",
                "PaimonOracle",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**os.environ, "TZ": "UTC"},
        )
        self._lock = threading.Lock()
        self.log_path = log_path
        if self._call({"op": "ping"}) != "pong":
            raise JavaError("PaimonOracle did not answer ping")

    def close(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()

    def _call(self, request: Mapping[str, Any]) -> Any:
        with self._lock:
            assert self._process.stdin is not None and self._process.stdout is not None
            self._process.stdin.write(json.dumps(request, default=_encode).encode() + b"\n")
            self._process.stdin.flush()
            line = self._process.stdout.readline()
        if not line:
            raise JavaError(f"PaimonOracle JVM exited (code {self._process.poll()}); see {self.log_path}")
        answer = json.loads(line)
        if not answer["ok"]:
            raise JavaError(f"{request.get('op')}: {answer['error']}")
        return answer["result"]

    # ----- tables ---------------------------------------------------------------------------------

    def create_table(
        self,
        path: str,
        fields: Sequence[FieldSpec],
        partition_keys: Sequence[str] = (),
        primary_keys: Sequence[str] = (),
        options: Mapping[str, str] | None = None,
    ) -> None:
        """Create a table with Java's SchemaManager; ``fields`` are ``(name, Paimon type JSON)``."""
        self._call(
            {
                "op": "create_table",
                "path": str(path),
                "fields": [{"name": name, "type": type_json} for name, type_json in fields],
                "partition_keys": list(partition_keys),
                "primary_keys": list(primary_keys),
                "table_options": dict(options or {}),
            }
        )

    def alter_table(self, path: str, changes: Iterable[Sequence[Any]], branch: str | None = None) -> None:
        """Schema changes: ``("add_column", name, type)``, ``("rename_column", old, new)``,
        ``("update_column_type", name, type)``, ``("set_option", key, value)``."""
        self._call({"op": "alter_table", "path": str(path), "branch": branch, "changes": list(changes)})

    def write(
        self,
        path: str,
        rows: Iterable[Row],
        branch: str | None = None,
        overwrite: Mapping[str, str] | None = None,
        options: Mapping[str, str] | None = None,
    ) -> int:
        """One batch commit of ``rows`` (``"_kind"`` sets a row's kind); the new latest snapshot id."""
        return self._call(
            {
                "op": "write",
                "path": str(path),
                "branch": branch,
                "rows": list(rows),
                "overwrite": None if overwrite is None else dict(overwrite),
                "options": dict(options or {}),
            }
        )

    def compact(self, path: str, full: bool = True, branch: str | None = None) -> int:
        """Paimon's own compaction of every partition and bucket; the new latest snapshot id."""
        return self._call({"op": "compact", "path": str(path), "full": full, "branch": branch})

    def compact_procedure(
        self,
        path: str,
        full: bool = True,
        threads: int = 1,
        options: Mapping[str, str] | None = None,
    ) -> dict[str, int]:
        """Paimon's batch compaction of the whole table as its compact procedure runs it, on `threads`
        threads: each bucket compacted by `compact(partition, bucket, full)` of a batch write; an
        unaware-bucket append table by the tasks of Paimon's ``UnawareAppendTableCompactionCoordinator``
        (its writes never compact; the coordinator packs files below 70% of ``target-file-size`` into
        tasks of at least ``target-file-size`` bytes and ``compaction.min.file-num`` files, or
        ``compaction.max.file-num`` files, and leaves a partition's last, smaller pack alone in a batch
        run). One commit. ``options``: dynamic table options. Answers ``{"snapshot_id", "units"
        (buckets or tasks), "files_removed", "files_added"}``."""
        return self._call(
            {
                "op": "compact_procedure",
                "path": str(path),
                "full": full,
                "threads": threads,
                "options": dict(options or {}),
            }
        )

    def count_rows(self, path: str, sum_columns: Sequence[str] = ()) -> dict[str, Any]:
        """A batch read of the latest snapshot that ships no rows: ``{"rows": count, "sums": {column:
        sum}}``, INT and BIGINT columns summed as they are, DOUBLE columns in hundredths (each
        rounded), nulls skipped; for checking tables of millions of rows."""
        return self._call({"op": "count_rows", "path": str(path), "sum_columns": list(sum_columns)})

    def hilbert_index(self, points: Sequence[Sequence[int]], bits: int) -> list[int]:
        """The Hilbert curve index Paimon's ``HilbertIndexer`` computes (the bundle's davidmoten curve)
        of each point, at `bits` bits per dimension."""
        return [int(value) for value in self._call({"op": "hilbert_index", "bits": bits, "points": points})]

    def create_tag(self, path: str, name: str, snapshot_id: int, branch: str | None = None) -> None:
        self._call(
            {
                "op": "create_tag",
                "path": str(path),
                "name": name,
                "snapshot_id": snapshot_id,
                "branch": branch,
            }
        )

    def create_branch(self, path: str, name: str, tag: str | None = None) -> None:
        """A branch from a tag (its snapshot becomes the branch's first), or an empty one."""
        self._call({"op": "create_branch", "path": str(path), "name": name, "tag": tag})

    def delete_branch(self, path: str, name: str) -> None:
        """Paimon's deleteBranch: the branch directory goes, its files stay for orphan cleaning."""
        self._call({"op": "delete_branch", "path": str(path), "name": name})

    def fast_forward(self, path: str, name: str) -> None:
        """Paimon's fastForward: main takes the branch's snapshots, schemas and tags."""
        self._call({"op": "fast_forward", "path": str(path), "name": name})

    # ----- maintenance ----------------------------------------------------------------------------

    def expire_snapshots(self, path: str, branch: str | None = None, **config: Any) -> int:
        """Paimon's snapshot expiry; ``config``: retain_min, retain_max, time_retained_ms,
        max_deletes, changelog_retain_min, changelog_retain_max, changelog_time_retained_ms.
        Answers how many snapshots it expired."""
        return self._call({"op": "expire_snapshots", "path": str(path), "branch": branch, **config})

    def expire_changelog(self, path: str, **config: Any) -> int:
        return self._call({"op": "expire_changelog", "path": str(path), **config})

    def remove_orphan_files(self, path: str, older_than: dt.datetime, dry_run: bool = False) -> set[str]:
        """Paimon's OrphanFilesClean: the absolute paths of the orphans (deleted unless dry_run)."""
        found = self._call(
            {
                "op": "remove_orphan_files",
                "path": str(path),
                "older_than": older_than.strftime("%Y-%m-%d %H:%M:%S"),
                "dry_run": dry_run,
                "options": {"delete-file.thread-num": "64"},
            }
        )
        return {os.path.normpath(p) for p in found}

    def drop_partitions(self, path: str, partitions: Sequence[Mapping[str, str]]) -> int:
        """Paimon's partition drop (``FileStoreCommit.dropPartitions``, what ``truncatePartitions``
        does): one OVERWRITE snapshot deleting every live file of the specs; the new snapshot id."""
        return self._call(
            {"op": "drop_partitions", "path": str(path), "partitions": [dict(p) for p in partitions]}
        )

    def compact_manifests(self, path: str) -> int:
        """Paimon's manifest full compaction: an empty commit whose manifest merge runs with
        ``manifest.full-compaction-threshold-size`` 1 b; the new snapshot id."""
        return self._call({"op": "compact_manifests", "path": str(path)})

    def race_write(
        self,
        path: str,
        rows: Iterable[Row],
        barrier: str | None = None,
        window: tuple[str, str] | None = None,
        claim: tuple[str, str] | None = None,
        jitter_us: int = 0,
    ) -> dict[str, Any]:
        """One batch commit to an append table that starts at a rendezvous (tests/java/commit_race.py).

        The rows are written first; with `barrier` (a FIFO) Java then waits until the caller opens it
        for writing and closes it, and commits. With `window` (FIFOs in, go) Java's claim of the
        snapshot file pauses between its exists() check and its move: it opens `in` for writing, then
        waits for `go`. With `claim` (FIFOs ready, go) Java's first snapshot claim starts at a
        rendezvous instead, after a random pause of up to `jitter_us`. Blocks until Java's commit is
        done (call it from a thread). Answers
        ``{"snapshot_id", "commit_user", "lost_claims"}`` (claims Java's rename refused, then retried).
        """
        return self._call(
            {
                "op": "race_write",
                "path": str(path),
                "rows": list(rows),
                "barrier": barrier,
                "window": list(window) if window else None,
                "claim": list(claim) if claim else None,
                "jitter_us": jitter_us,
            }
        )

    # ----- reading --------------------------------------------------------------------------------

    def read_with_fields(
        self,
        path: str,
        snapshot_id: int | None = None,
        tag: str | None = None,
        branch: str | None = None,
    ) -> tuple[list[dict[str, Any]], list[Row]]:
        """(the fields read with, as schema JSON; the rows, unsorted)."""
        answer = self._call(
            {"op": "read", "path": str(path), "snapshot_id": snapshot_id, "tag": tag, "branch": branch}
        )
        fields = answer["fields"]
        return fields, [_decode_row(values, fields) for values in answer["rows"]]

    def read_system_table(
        self,
        path: str,
        name: str,
        snapshot_id: int | None = None,
        tag: str | None = None,
        branch: str | None = None,
    ) -> tuple[list[str], list[Row]]:
        """Paimon's system table `name` (``snapshots``, ``files``, ...) of the table or a branch, at the
        latest snapshot or a snapshot id / tag: (the column names in order, the rows in Java's order)."""
        answer = self._call(
            {
                "op": "read_system_table",
                "path": str(path),
                "name": name,
                "snapshot_id": snapshot_id,
                "tag": tag,
                "branch": branch,
            }
        )
        fields = answer["fields"]
        return [f["name"] for f in fields], [_decode_row(values, fields) for values in answer["rows"]]

    def read_changelog(self, path: str, after: int) -> list[tuple[str, Row]]:
        """The changelog of every snapshot after `after` as a streaming consumer reads it (Java's
        stream scan from snapshot after + 1 to the latest): (row kind, row) pairs, sorted."""
        answer = self._call({"op": "read_changelog", "path": str(path), "after": after})
        fields = answer["fields"]
        pairs = [
            (kind, _decode_row(values, fields))
            for kind, values in zip(answer["kinds"], answer["rows"], strict=True)
        ]
        return sorted(pairs, key=lambda pair: [pair[0], *sort_key(pair[1])])

    def stream_consumer(self, path: str, consumer_id: str) -> dict[str, int]:
        """A streaming reader with `consumer-id` resuming from its consumer, reading to the latest and
        checkpointing (which writes its consumer): {"rows": rows read, "next": its next snapshot}."""
        return self._call({"op": "stream_consumer", "path": str(path), "consumer_id": consumer_id})

    def reset_consumer(
        self, path: str, consumer_id: str, next_snapshot: int | None = None, branch: str | None = None
    ) -> None:
        """Paimon's reset_consumer: the consumer reads `next_snapshot` next (which must exist), or
        (None) it is deleted."""
        self._call(
            {
                "op": "reset_consumer",
                "path": str(path),
                "consumer_id": consumer_id,
                "next_snapshot": next_snapshot,
                "branch": branch,
            }
        )

    def snapshots_around(self, path: str, time_ms: int, watermark: int | None = None) -> dict[str, int]:
        """The snapshot ids Paimon's SnapshotManager gives for `time_ms` (and `watermark`):
        earlier_or_equal_time (rollback_to_timestamp's pick), later_or_equal_time and
        later_or_equal_watermark (create_tag_from_timestamp's / _watermark's); absent when none."""
        request = {"op": "snapshots_around", "path": str(path), "time_ms": time_ms, "watermark": watermark}
        return self._call(request)

    def mark_partition_done(
        self, path: str, partitions: list[str] = (), read: list[str] = ()
    ) -> dict[str, dict[str, int] | None]:
        """Paimon's success-file mark-done action on `partitions` (paths such as "dt=a"), then what
        Paimon's SuccessFile reads from each `read` partition's _SUCCESS (None: none there)."""
        request = {"op": "mark_partition_done", "path": str(path), "partitions": list(partitions)}
        return self._call({**request, "read": list(read)})

    def clear_consumers(
        self, path: str, include: str = ".*", exclude: str | None = None, branch: str | None = None
    ) -> list[str]:
        """Paimon's clear_consumers rule (ids fully matching `include`, not `exclude`) from the 1.0
        bundle's ConsumerManager calls; the ids deleted."""
        return self._call(
            {
                "op": "clear_consumers",
                "path": str(path),
                "include": include,
                "exclude": exclude,
                "branch": branch,
            }
        )

    def read(
        self,
        path: str,
        snapshot_id: int | None = None,
        tag: str | None = None,
        branch: str | None = None,
    ) -> list[Row]:
        """Every row Java reads (merged for primary-key tables), sorted by `sort_key`."""
        return sorted(self.read_with_fields(path, snapshot_id, tag, branch)[1], key=sort_key)


def sort_key(row: Row) -> list[str]:
    """A stable order for rows of any types (as tests/support/pypaimon_reads.py sorts)."""
    return [str(row[k]) for k in sorted(row)]


# ------------------------------------------------------------------------------------------------
# Typed JSON
# ------------------------------------------------------------------------------------------------


def _encode(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot send {type(value).__name__} to Java")


def _type_name(type_json: Any) -> str:
    if isinstance(type_json, dict):
        return type_json["type"].split(" ")[0]
    return str(type_json).split("(")[0].split(" NOT NULL")[0].strip()


def _decode(value: Any, type_json: Any) -> Any:
    if value is None:
        return None
    name = _type_name(type_json)
    if name == "ARRAY":
        return [_decode(v, type_json["element"]) for v in value]
    if name == "MAP":
        return [(_decode(k, type_json["key"]), _decode(v, type_json["value"])) for k, v in value]
    if name == "ROW":
        return _decode_row(value, type_json["fields"])
    text = str(type_json)
    if name in ("BYTES", "BINARY", "VARBINARY"):
        return base64.b64decode(value)
    if name in ("DECIMAL", "NUMERIC", "DEC"):
        return Decimal(value)
    if name == "DATE":
        return dt.date.fromisoformat(value)
    if name == "TIME":
        return dt.time.fromisoformat(value)
    if name in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        parsed = dt.datetime.fromisoformat(_micros(value))
        if "LOCAL TIME ZONE" in text or name == "TIMESTAMP_LTZ":
            return parsed.replace(tzinfo=dt.timezone.utc)
        return parsed
    return value


def _micros(text: str) -> str:
    """Java prints up to nanoseconds; Python keeps microseconds."""
    if "." in text:
        head, fraction = text.split(".", 1)
        return f"{head}.{fraction[:6]}"
    return text


def _decode_row(values: Sequence[Any], fields: Sequence[Mapping[str, Any]]) -> Row:
    return {f["name"]: _decode(v, f["type"]) for f, v in zip(fields, values, strict=True)}
