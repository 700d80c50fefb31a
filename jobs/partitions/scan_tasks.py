"""The executor side of the partition scan (`jobs.partitions.scan`): what each Spark task runs.

1. `scan_manifests_task` reads each manifest once (fastavro records, no ManifestEntry) and ships a
   wanted partition's entries as one pickled `RawEntry` list per (manifest, partition), an unwanted
   one as net counts. Scan tasks read their next manifests while decoding one (`read_ahead`).
2. `merge_partitions_task` cancels ADD/DELETE pairs per partition (`EntryMerger`), summarises the
   live partitions and, when asked, writes the DELETE manifests of their live files in the same task.
3. Without DELETE entries, `scan_and_drop_task` scans and writes in one task (no shuffle), and
   `check_identities_task` brings the dropped files' name hashes together to notice a file added
   twice.

These are plain functions over Arrow batches: they run the same under Spark's `mapInArrow` and in
the driver's local session (`jobs.runtime.local_frame`), and the unit tests call them directly.
"""

from __future__ import annotations

import hashlib
import pickle
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_format.errors import CorruptFileError, InvalidTableStateError, PaimonFormatError
from paimon_format.manifest.codec import gc_paused
from paimon_format.manifest.entries import ADD
from paimon_format.manifest.files import rolling_write_raw_manifests
from paimon_format.manifest.raw import RawEntry, iter_raw_records, iter_wanted_deletes, raw_entry
from paimon_format.manifest.read_ahead import sized_bytes
from paimon_format.model.options import CoreOptions
from paimon_format.scan.snapshot_scan import EntryMerger
from paimon_format.table import Table

SCANNED = "partition binary, ord long, payload binary, files long, bytes long, rows long"
MERGED = "partition binary, files long, bytes long, rows long, created long, meta binary, error string"
# the direct path's rows: summaries and written manifests (hashes null), and per task and hash
# range the sorted stable 64-bit hashes of the names of the files it drops (for the duplicate
# check: `check_identities_task`)
DIRECT = MERGED + ", hash_range int, hashes binary"
CHECKED = MERGED + ", repeats long"
# Hash ranges (by the top bits) the duplicate check spreads over: a check task holds its ranges' hashes.
HASH_RANGE_BITS = 2
_SCANNED_SCHEMA = pa.schema(
    [
        ("partition", pa.binary()),
        ("ord", pa.int64()),
        ("payload", pa.binary()),
        ("files", pa.int64()),
        ("bytes", pa.int64()),
        ("rows", pa.int64()),
    ]
)
_MERGED_SCHEMA = pa.schema(
    [
        ("partition", pa.binary()),
        ("files", pa.int64()),
        ("bytes", pa.int64()),
        ("rows", pa.int64()),
        ("created", pa.int64()),
        ("meta", pa.binary()),
        ("error", pa.string()),
    ]
)
_DIRECT_SCHEMA = _MERGED_SCHEMA.append(pa.field("hash_range", pa.int32())).append(
    pa.field("hashes", pa.binary())
)
_CHECKED_SCHEMA = _MERGED_SCHEMA.append(pa.field("repeats", pa.int64()))
_HASH_DTYPE = np.dtype("<i8")  # a name hash: 8 digest bytes as a little-endian int64 (see _hash_rows)


# -- 1. the scan task: every manifest read once -------------------------------------------------


def scan_manifests_task(
    batches: Iterable[pa.RecordBatch],
    table: Table,
    wanted: Callable[[bytes], bool],
    count_others: bool = True,
) -> Iterator[pa.RecordBatch]:
    """Per manifest: pickled record lists of wanted partitions, net counts of the others (none
    without `count_others`: when manifests were skipped by their stats, an unwanted partition's
    ADDs and DELETEs may be in different ones, so its counts would be wrong, even negative).

    The per-entry work is a fastavro decode, a dict lookup by partition bytes and a list append
    (wanted) or three additions (unwanted); `wanted` runs once per distinct partition.
    """
    decided: dict[bytes, bool] = {}
    for (index, name, size), data in _manifests_in_flight(table, batches):
        yield _scan_manifest(table, index, name, size, data, wanted, decided, count_others)


def _manifests_in_flight(
    table: Table, batches: Iterable[pa.RecordBatch]
) -> Iterator[tuple[tuple[int, str, int | None], bytes]]:
    """((idx, name, size), the manifest's bytes) for the task's manifest rows, in order, the next
    manifests read while one is decoded (`read_ahead`): a task's reads one after another would be
    bound by the store's latency. The rows (names only) are taken first, to size the window."""
    rows: list[tuple[int, str, int | None]] = []
    for batch in batches:
        rows.extend(zip(*(batch.column(c).to_pylist() for c in ("idx", "name", "size")), strict=True))
    files = [(table.manifest_path(name), size) for _index, name, size in rows]
    return zip(rows, sized_bytes(table.file_io, files), strict=True)


def _scan_manifest(
    table: Table,
    index: int,
    name: str,
    size: int | None,
    data: bytes,
    wanted: Callable[[bytes], bool],
    decided: dict[bytes, bool],
    count_others: bool,
) -> pa.RecordBatch:
    path = table.manifest_path(name)
    chunks: dict[bytes, list[RawEntry]] = {}
    counts: dict[bytes, list[int]] = {}
    try:
        with gc_paused():
            for record, datum in iter_raw_records(data, path):
                partition = record["_PARTITION"]
                chunk = chunks.get(partition)
                if chunk is not None:
                    chunk.append(raw_entry(record, datum))
                    continue
                net = counts.get(partition)
                if net is None:
                    want = decided.get(partition)
                    if want is None:
                        want = decided[partition] = bool(wanted(partition))
                    if want:
                        chunks[partition] = [raw_entry(record, datum)]
                        continue
                    if not count_others:
                        continue
                    net = counts[partition] = [0, 0, 0]
                sign = 1 if record["_KIND"] == ADD else -1  # iter_raw_records refuses other kinds
                file = record["_FILE"]
                net[0] += sign
                net[1] += sign * file["_FILE_SIZE"]
                net[2] += sign * file["_ROW_COUNT"]
            payloads = {p: pickle.dumps(chunk, pickle.HIGHEST_PROTOCOL) for p, chunk in chunks.items()}
    except KeyError as error:
        raise CorruptFileError(path, f"required field {error} is missing from a manifest entry") from None
    partitions = list(payloads) + list(counts)
    nets = [[0, 0, 0]] * len(payloads) + list(counts.values())
    return pa.RecordBatch.from_arrays(
        [
            pa.array(partitions, pa.binary()),
            pa.array([index] * len(partitions), pa.int64()),
            pa.array(list(payloads.values()) + [None] * len(counts), pa.binary()),
            pa.array([n[0] for n in nets], pa.int64()),
            pa.array([n[1] for n in nets], pa.int64()),
            pa.array([n[2] for n in nets], pa.int64()),
        ],
        schema=_SCANNED_SCHEMA,
    )


# -- 2. the merge task: summaries, and DELETE manifests written in the same task ----------------


@dataclass(frozen=True)
class ManifestTarget:
    """Where and how the merge tasks write DELETE manifests (small and picklable)."""

    manifest_dir: str
    target_size: int
    compression: str
    schema_id: int

    @staticmethod
    def of(table: Table) -> ManifestTarget:
        options = CoreOptions(table.schema.options)
        return ManifestTarget(
            table.file_io.join(table.path, "manifest"),
            options.manifest_target_file_size,
            options.manifest_compression,
            table.schema.id,
        )


def _partition_runs(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[bytes, list[bytes], list[int]]]:
    """(partition, payloads in manifest order, summed net counts) per partition of sorted rows."""
    current: bytes | None = None
    payloads: list[bytes] = []
    net = [0, 0, 0]
    for batch in batches:
        columns = [batch.column(c).to_pylist() for c in ("partition", "payload", "files", "bytes", "rows")]
        for partition, payload, files, size, rows in zip(*columns, strict=True):
            if partition != current:
                if current is not None:
                    yield current, payloads, net
                current, payloads, net = partition, [], [0, 0, 0]
            if payload is not None:
                payloads.append(payload)
            net[0] += files
            net[1] += size
            net[2] += rows
    if current is not None:
        yield current, payloads, net


def merge_partitions_task(
    batches: Iterable[pa.RecordBatch],
    table: Table,
    source: str,
    target: ManifestTarget | None,
    chosen: frozenset[bytes] | None,
) -> Iterator[pa.RecordBatch]:
    """Cancel ADD/DELETE pairs per partition; summarise live partitions and/or write their DELETEs.

    `chosen` None: one summary row per live partition, and (with `target`) the DELETE manifests of
    every wanted partition. `chosen` given: only the DELETE manifests of those partitions. A task
    that meets inconsistent metadata writes nothing and answers one error row.
    """
    summaries: list[dict[str, Any]] = []
    deletes: list[RawEntry] = []
    try:
        for partition, payloads, net in _partition_runs(batches):
            if chosen is not None and partition not in chosen:
                continue
            if not payloads:  # an unwanted partition: net counts only
                if net[0] < 0:
                    raise InvalidTableStateError(
                        f"{source}: partition {table.partition_dir(partition)} deletes {-net[0]} "
                        "more files than it adds"
                    )
                if net[0] > 0 and chosen is None:
                    summaries.append(_summary(partition, net[0], net[1], net[2], None))
                continue
            merger = EntryMerger(source)
            for payload in payloads:
                merger.add_all(pickle.loads(payload))
            live = merger.live()
            if not live:
                continue
            if chosen is None:
                summaries.append(
                    _summary(
                        partition,
                        len(live),
                        sum(e.file_size for e in live),
                        sum(e.row_count for e in live),
                        max((e.created for e in live if e.created is not None), default=None),
                    )
                )
            if target is not None:
                deletes.extend(entry.as_delete() for entry in live)
    except (PaimonFormatError, KeyError, ValueError) as error:
        text = str(error) if isinstance(error, PaimonFormatError) else f"{source}: {error}"
        yield pa.RecordBatch.from_pylist([{"error": text}], schema=_MERGED_SCHEMA)
        return
    written = _write_deletes(table, target, deletes) if target is not None and deletes else []
    if summaries or written:
        yield pa.RecordBatch.from_pylist(summaries + written, schema=_MERGED_SCHEMA)


def _summary(partition: bytes, files: int, size: int, rows: int, created: int | None) -> dict[str, Any]:
    return {"partition": partition, "files": files, "bytes": size, "rows": rows, "created": created}


def _write_deletes(table: Table, target: ManifestTarget, deletes: Iterable[RawEntry]) -> list[dict[str, Any]]:
    """Write DELETE entries (a list or a stream) into manifests: one row per manifest, with its file
    count; its byte and row counts when `deletes` is a list (a stream's caller fills them in)."""
    prefix = str(uuid.uuid4())
    counter = iter(range(1 << 30))
    metas = rolling_write_raw_manifests(
        table.file_io,
        target.manifest_dir,
        lambda: f"manifest-{prefix}-{next(counter)}",
        deletes,
        target.target_size,
        target.compression,
        table.partition_types,
        target.schema_id,
    )
    rows = []
    first = 0
    for meta in metas:
        chunk = deletes[first : first + meta.num_deleted_files] if isinstance(deletes, list) else []
        first += meta.num_deleted_files
        rows.append(
            {
                "meta": pickle.dumps(meta),
                "files": meta.num_deleted_files,
                "bytes": sum(e.file_size for e in chunk),
                "rows": sum(e.row_count for e in chunk),
            }
        )
    return rows


# -- without DELETE entries: every ADD is live, no shuffle ------------------------------------


def scan_and_drop_task(
    batches: Iterable[pa.RecordBatch],
    table: Table,
    wanted: Callable[[bytes], bool],
    target: ManifestTarget | None,
    summarize_others: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Scan and write in one task, for a snapshot whose manifests hold no DELETE entry (their list
    records say so): every ADD is a live file, so nothing needs bringing together to cancel, and
    each task writes the DELETEs of the wanted partitions' files it reads. One summary row per
    wanted partition and task (the driver adds them up); unwanted partitions are skipped, or with
    `summarize_others` counted as well (files, bytes, rows; no creation time, as the merge path
    counts them). Every dropped file's name is hashed (stable, 64 bits): a file added twice
    (broken metadata, which the merge path refuses) shows as a repeated hash across all tasks.
    `target` None (a dry run): the same, writing nothing."""
    decided: dict[bytes, bool] = {}
    sums: dict[bytes, list[Any]] = {}  # partition -> [files, bytes, rows, newest creation]
    others: dict[bytes, list[Any]] = {}  # the same for unwanted partitions (summarize_others)
    hashes = bytearray()  # 8 bytes per dropped file (a task in the driver may drop many)
    blake2b = hashlib.blake2b

    def count_other(record: dict[str, Any]) -> None:
        file = record["_FILE"]
        total = others.get(record["_PARTITION"])
        if total is None:
            total = others[record["_PARTITION"]] = [0, 0, 0, None]
        total[0] += 1
        total[1] += file["_FILE_SIZE"]
        total[2] += file["_ROW_COUNT"]

    def selected_deletes() -> Iterator[RawEntry]:
        """The DELETE of every selected file, streamed into the manifest writer (one new manifest's
        entries are held at a time); the summaries and name hashes fill as it goes."""
        for (_index, name, _size), data in _manifests_in_flight(table, batches):
            path = table.manifest_path(name)
            with gc_paused():
                deletes = iter_wanted_deletes(
                    data, path, wanted, decided, count_other if summarize_others else None
                )
                for entry in deletes:
                    hashes.extend(blake2b(entry.file_name.encode(), digest_size=8).digest())
                    total = sums.get(entry.partition)
                    if total is None:
                        total = sums[entry.partition] = [0, 0, 0, None]
                    total[0] += 1
                    total[1] += entry.file_size
                    total[2] += entry.row_count
                    created = entry.created
                    if created is not None and (total[3] is None or created > total[3]):
                        total[3] = created
                    yield entry

    if target is None:
        for _delete in selected_deletes():
            pass
        written: list[dict[str, Any]] = []
    else:
        written = _write_deletes(table, target, selected_deletes())
        if written:  # the task's byte and row totals ride on its last manifest's row
            written[-1]["bytes"] = sum(total[1] for total in sums.values())
            written[-1]["rows"] = sum(total[2] for total in sums.values())
    summaries = [_summary(partition, *total) for partition, total in (*sums.items(), *others.items())]
    if summaries or written:
        yield pa.RecordBatch.from_pylist(summaries + written, schema=_DIRECT_SCHEMA)
    yield from _hash_rows(hashes)


def _hash_rows(digests: bytes | bytearray) -> Iterator[pa.RecordBatch]:
    """The task's name hashes, sorted, as one row per hash range (their top HASH_RANGE_BITS):
    a few binary rows instead of a row per file, which Spark would have to shuffle one by one.

    A hash is 8 bytes of blake2b of a dropped file's name, read as a little-endian int64: the same
    in every process (Python's hash() is salted). The name, not the whole identity: it is cheaper,
    and a repeat only sends the scan down the merge path, which compares whole identities. Equal
    identities always repeat (a file added twice: refused there); a repeat that is not one (a name
    in two buckets, a 64-bit collision) costs that second scan and is dropped as usual."""
    if not digests:
        return
    hashes = np.sort(np.frombuffer(digests, dtype=_HASH_DTYPE))
    ranges = hashes >> (64 - HASH_RANGE_BITS)  # signed: non-decreasing along the sorted hashes
    present = np.unique(ranges)
    bounds = np.searchsorted(ranges, present, side="left").tolist() + [len(hashes)]
    count = len(present)
    yield pa.RecordBatch.from_arrays(
        [pa.nulls(count, field.type) for field in _MERGED_SCHEMA]
        + [
            pa.array(present.tolist(), pa.int32()),
            pa.array([hashes[bounds[i] : bounds[i + 1]].tobytes() for i in range(count)], pa.binary()),
        ],
        schema=_DIRECT_SCHEMA,
    )


def check_identities_task(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The direct path's second stage: the hash rows become one count of the hashes that repeat
    within each hash range this task got (a range's rows all come to one task): a repeat is a file
    added twice, or a name in two places, or a 64-bit collision. The other rows (no hash range: all
    in one task) pass through, the scan tasks' summaries added up to one row per partition, so the
    driver gets as many rows as there are partitions, however many tasks scanned."""
    by_range: dict[int, list[np.ndarray]] = {}
    totals: dict[bytes, list[Any]] = {}  # partition -> [files, bytes, rows, newest creation]
    for batch in batches:
        is_hashes = batch.column("hashes").is_valid()
        passed = batch.filter(pc.invert(is_hashes))
        is_summary = pc.and_(passed.column("meta").is_null(), passed.column("error").is_null())
        other = passed.filter(pc.invert(is_summary))
        if other.num_rows:
            yield pa.RecordBatch.from_arrays(
                [other.column(name) for name in _MERGED_SCHEMA.names]
                + [pa.nulls(other.num_rows, pa.int64())],
                schema=_CHECKED_SCHEMA,
            )
        for row in passed.filter(is_summary).to_pylist():
            total = totals.setdefault(row["partition"], [0, 0, 0, None])
            total[0] += row["files"]
            total[1] += row["bytes"] or 0
            total[2] += row["rows"] or 0
            created = row["created"]
            if created is not None and (total[3] is None or created > total[3]):
                total[3] = created
        hashed = batch.filter(is_hashes)
        ranges = hashed.column("hash_range").to_pylist()
        for hash_range, blob in zip(ranges, hashed.column("hashes").to_pylist(), strict=True):
            by_range.setdefault(hash_range, []).append(np.frombuffer(blob, dtype=_HASH_DTYPE))
    repeats = 0
    for parts in by_range.values():
        hashes = np.sort(np.concatenate(parts))
        repeats += int(np.count_nonzero(hashes[1:] == hashes[:-1]))
    if totals:
        summaries = [_summary(partition, *total) for partition, total in totals.items()]
        yield pa.RecordBatch.from_pylist(summaries, schema=_CHECKED_SCHEMA)
    if by_range:
        yield pa.RecordBatch.from_arrays(
            [pa.nulls(1, field.type) for field in _MERGED_SCHEMA] + [pa.array([repeats], pa.int64())],
            schema=_CHECKED_SCHEMA,
        )
