"""The write job: a DataFrame (files or a query) into a Paimon table, committed as one snapshot.

Plan on the driver (create or check the table, find where sequence numbers continue), write data
files on the executors with pyarrow inside mapInArrow, collect only the new files' metadata, and
commit once through `SnapshotCommit`. A failed commit removes the data files this run wrote.

Spark-submit entry: `spark-submit jobs/write.py --config conf/write.yaml`.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
from pydantic import Field, model_validator

from jobs.runtime.config import StrictModel, TableJobConfig
from jobs.runtime.errors import BadInputError
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.writing.dynamic_bucket import (
    WRITTEN_FILE_SCHEMA,
    check_base_index,
    check_bucket_mode,
    index_relpath,
    is_dynamic_bucket,
)
from jobs.writing.level0 import compact_written_buckets, compacts_level0
from paimon_format.commit import CommitMessage, IndexUpdate, SnapshotCommit
from paimon_format.data.conform import conform, fit_string_lengths
from paimon_format.data.writer import write_bucket_outputs, write_table_files
from paimon_format.errors import PaimonFormatError
from paimon_format.manifest.codec import read_manifest
from paimon_format.manifest.entries import ADD
from paimon_format.model.arrow_types import from_arrow
from paimon_format.model.options import CoreOptions
from paimon_format.model.partition_spec import partition_bytes
from paimon_format.model.schema import TableSchema, new_table_schema
from paimon_format.model.types import DataType
from paimon_format.scan.snapshot_scan import data_manifests
from paimon_format.table import Table

RECORD_PARTITION_LIMIT = 100

ORDER_COLUMN = "__paimon_order"
BUCKET_COLUMN = "__paimon_bucket"
_RESULT_SCHEMA = (
    "partition binary, bucket int, meta binary, rows long, size long, path string, changelog boolean"
)


class SourceConfig(StrictModel):
    """Where the rows come from: files Spark can read, or a SQL query."""

    format: str = "parquet"
    path: str | None = None
    query: str | None = None
    options: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_source(self) -> SourceConfig:
        if (self.path is None) == (self.query is None):
            raise ValueError("give exactly one of source.path or source.query")
        return self


class CreateConfig(StrictModel):
    """How to create the table when it does not exist yet (ignored otherwise)."""

    partition_keys: list[str] = Field(default_factory=list)
    primary_keys: list[str] = Field(default_factory=list)
    options: dict[str, Any] = Field(default_factory=dict)


class WriteConfig(TableJobConfig):
    mode: Literal["append", "overwrite"] = "append"
    source: SourceConfig
    create: CreateConfig | None = None
    overwrite_scope: Literal["touched", "table", "partitions"] = Field(
        default="touched",
        description="overwrite: the partitions the input touches, the whole table, or `partitions`",
    )
    partitions: list[dict[str, Any]] = Field(
        default_factory=list, description="for overwrite_scope: partitions"
    )
    strict_create: bool = Field(
        default=False,
        description="a `create:` block that differs from the existing table (keys, bucket): exit 2, "
        "not a warning",
    )


CONFIG_MODEL = WriteConfig


def run(context: JobContext, config: WriteConfig) -> None:
    source = config.source
    files = None
    if source.path is not None and source.format == "parquet" and not source.options:
        files = parquet_files(source.path, config.storage_options)
    if files is not None:
        context.log.info(
            "source: %d Parquet files under %s (read by the executors)", len(files.paths), source.path
        )
    else:
        context.log.info("source: %s", f"{source.format} at {source.path}" if source.path else "a query")
    df = files if files is not None else load_source(context.spark, source)
    create = config.create
    write_dataframe(
        df,
        config.warehouse,
        config.table,
        mode=config.mode,
        partition_keys=create.partition_keys if create else None,
        primary_keys=create.primary_keys if create else None,
        options=create.options if create else None,
        strict_create=config.strict_create,
        overwrite_scope=config.overwrite_scope,
        overwrite_partitions=config.partitions,
        storage_options=config.storage_options,
        allow_unsafe_overwrite_commit=config.allow_unsafe_overwrite_commit,
        dry_run=context.dry_run,
        record=context.record,
        log=context.log,
        spark=context.spark,
    )


def load_source(spark: Any, source: SourceConfig) -> Any:
    """The source DataFrame; a missing path or a bad query is the user's input, not a crash."""
    from pyspark.errors import AnalysisException, ParseException

    try:
        if source.query is not None:
            return spark.sql(source.query)
        return spark.read.format(source.format).options(**source.options).load(source.path)
    except (AnalysisException, ParseException) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        where = f"source.path {source.path}" if source.path is not None else "source.query"
        raise BadInputError(f"{where}: {first_line}") from None


@dataclass(frozen=True)
class ParquetFiles:
    """A Parquet file source that executors read themselves with pyarrow.

    Rows then never cross the JVM: the driver lists the files, each task reads some of them and
    writes data files directly. Used for append tables with `bucket: -1`; anything else goes
    through a Spark DataFrame of the same files.
    """

    paths: tuple[str, ...]
    storage_options: dict[str, Any]
    arrow_schema: pa.Schema


def parquet_files(path: str, storage_options: dict[str, Any]) -> ParquetFiles | None:
    """The Parquet files under `path`, or None when Spark must read them (Hive-style dirs, no files)."""
    import fsspec
    import pyarrow.parquet as pq

    try:
        fs, root = fsspec.core.url_to_fs(path, **storage_options)
        if fs.isfile(root):
            found = [root]
        else:
            found = sorted(fs.find(root))
    except (FileNotFoundError, OSError, ValueError):
        return None
    files = []
    for file_path in found:
        relative = file_path[len(root) :].strip("/").split("/") if file_path != root else [file_path]
        if any(part.startswith(("_", ".")) for part in relative) or not file_path.endswith(".parquet"):
            continue
        if any("=" in part for part in relative[:-1]):
            return None  # partition values live in directory names: Spark's reader adds those columns
        files.append(file_path)
    if not files:
        return None
    with fs.open(files[0], "rb") as handle:
        parquet = pq.ParquetFile(handle)
        columns = parquet.schema
        if any(columns.column(i).physical_type == "INT96" for i in range(len(columns))):
            return None  # Spark's default `timestamp` encoding: instants only Spark's reader knows as such
        schema = parquet.schema_arrow
    return ParquetFiles(tuple(fs.unstrip_protocol(f) for f in files), dict(storage_options), schema)


# -- planning ------------------------------------------------------------------------------------


def dataframe_arrow_schema(df: Any) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    time_zone = df.sparkSession.conf.get("spark.sql.session.timeZone")
    try:  # Spark 4 needs the zone of `timestamp` (TIMESTAMP_LTZ) columns: the session's, as mapInArrow
        return to_arrow_schema(df.schema, timezone=time_zone)
    except TypeError:  # Spark 3.5: no timezone argument, `timestamp` is always UTC-adjusted there
        return to_arrow_schema(df.schema)


_WIDENING = {
    "TINYINT": ("SMALLINT", "INT", "BIGINT"),
    "SMALLINT": ("INT", "BIGINT"),
    "INT": ("BIGINT",),
    "FLOAT": ("DOUBLE",),
    "CHAR": ("VARCHAR",),
}


def _fits(source: DataType, target: DataType) -> bool:
    """Whether values of `source` can be stored as `target` without loss (same type or a safe widening)."""
    if source.root == target.root:
        if source.root == "DECIMAL":
            return (source.scale == target.scale) and (source.precision or 0) <= (target.precision or 0)
        if source.root == "TIME":
            return (source.precision or 0) <= (target.precision or 0)
        # TIMESTAMP(p < 6): Spark has only microsecond timestamps, so a Java table's TIMESTAMP(3) takes
        # them cut to its precision, as Paimon's own Spark writer stores them. VARCHAR(n): a Spark
        # string, checked against n when the files are written (`writer.fit_string_lengths`).
        return True  # nested types: element types are checked by the cast when the files are written
    if source.root == "VARCHAR" and target.root == "CHAR":
        return True  # Spark has no CHAR: a string, checked and padded to the length when written
    return target.root in _WIDENING.get(source.root, ())


def check_compatible(arrow_schema: pa.Schema, schema: TableSchema, table: str) -> None:
    """An existing table takes the DataFrame only if every column matches or widens safely."""
    table_columns = {f.name: f.type for f in schema.fields}
    missing = [name for name in table_columns if name not in arrow_schema.names]
    extra = [name for name in arrow_schema.names if name not in table_columns]
    mismatched = []
    for arrow_field in arrow_schema:
        if arrow_field.name in table_columns:
            source = from_arrow(arrow_field.type, arrow_field.nullable)
            target = table_columns[arrow_field.name]
            if not _fits(source, target):
                mismatched.append(f"{arrow_field.name} ({source.sql()} -> table {target.sql()})")
    problems = []
    if missing:
        problems.append(f"missing columns: {', '.join(missing)}")
    if extra:
        problems.append(f"columns not in the table: {', '.join(extra)}")
    if mismatched:
        problems.append(f"incompatible types: {', '.join(mismatched)}")
    if problems:
        raise BadInputError(f"input does not match table {table}: {'; '.join(problems)}")


def next_sequence_number(spark: Any, table: Table) -> int:
    """One more than the largest sequence number of any live file, read from manifests on executors."""
    latest = table.snapshot_manager.latest()
    if latest is None:
        return 0
    names = [meta.file_name for meta in data_manifests(table, latest)]
    if not names:
        return 0

    def max_in_manifest(name: str) -> int:
        entries = read_manifest(table.file_io, table.manifest_path(name))
        return max((e.file.max_sequence_number for e in entries if e.kind == ADD), default=-1)

    slices = min(len(names), max(spark.sparkContext.defaultParallelism, 1) * 4)
    return spark.sparkContext.parallelize(names, slices).map(max_in_manifest).fold(-1, max) + 1


# -- the distributed write ---------------------------------------------------------------------


def _writer_task(table: Table, schema: TableSchema, first_sequence: int):
    """The function each Spark task runs: its rows -> data files -> one result row per file."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        collected = [b for b in batches if b.num_rows]
        if not collected:
            return
        data = pa.Table.from_batches(collected)
        if ORDER_COLUMN in data.column_names:  # keep the input order for "last write wins"
            data = data.sort_by(ORDER_COLUMN)
        data = fit_string_lengths(conform(data, schema), schema)
        outputs = write_bucket_outputs(table.file_io, table.path, schema, data, first_sequence)
        rows = []
        for out in outputs:
            files = [(meta, False) for meta in out.files] + [(meta, True) for meta in out.changelog_files]
            for meta, changelog in files:
                relative = f"{table.bucket_relpath(out.partition, out.bucket)}/{meta.file_name}"
                rows.append(
                    {
                        "partition": out.partition,
                        "bucket": out.bucket,
                        "meta": pickle.dumps(meta),
                        "rows": meta.row_count,
                        "size": meta.file_size,
                        "path": relative,
                        "changelog": changelog,
                    }
                )
        yield pa.RecordBatch.from_pylist(rows, schema=WRITTEN_FILE_SCHEMA)

    return write


def _bucket_task(schema: TableSchema):
    """Adds each row's Paimon bucket, so the shuffle can send a whole bucket to one task."""
    from paimon_format.data.bucket import bucket_array, bucket_key_columns

    keys = bucket_key_columns(schema)
    key_types = [schema.field(k).type for k in keys]
    num_buckets = int(schema.options["bucket"])

    def add_bucket(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            buckets = bucket_array([batch.column(k) for k in keys], key_types, num_buckets)
            yield batch.append_column(BUCKET_COLUMN, pa.array(buckets, pa.int32()))

    return add_bucket


def write_dataframe(
    df: Any,
    warehouse: str,
    table: str,
    mode: str = "append",
    partition_keys: list[str] | None = None,
    primary_keys: list[str] | None = None,
    options: dict[str, Any] | None = None,
    overwrite_scope: str = "touched",
    overwrite_partitions: list[dict[str, Any]] | None = None,
    storage_options: dict[str, Any] | None = None,
    allow_unsafe_overwrite_commit: bool = False,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: Any = None,
    spark: Any = None,
    strict_create: bool = False,
) -> RunRecord:
    """Write `df` into `warehouse`/`table` (`db.name`); creates the table from the DataFrame if missing.

    `df` is a Spark DataFrame, or `ParquetFiles` (then `spark` is needed) for the direct path.
    `partition_keys`, `primary_keys` and `options` describe the table to create; for an existing
    table, given keys or a `bucket` that differ from the table's are a warning (`strict_create`:
    BadInputError). A table this call created is removed again when its first commit fails, so a
    corrected definition takes effect on the next run.
    """
    import logging

    log = log or logging.getLogger("jobs.write")
    record = record or RunRecord(operation="write", table=table, dry_run=dry_run)
    if mode not in ("append", "overwrite"):
        raise BadInputError(f"mode must be append or overwrite, got {mode!r}")
    try:
        target = Table.open(warehouse, table, storage_options, allow_unsafe_overwrite_commit)
    except ValueError as error:
        raise BadInputError(str(error)) from None
    files = df if isinstance(df, ParquetFiles) else None
    spark = spark if files is not None else df.sparkSession
    arrow_schema = files.arrow_schema if files is not None else dataframe_arrow_schema(df)

    existing = target.schema_manager.latest()
    if existing is None:
        try:
            schema = new_table_schema(
                [(f.name, from_arrow(f.type, f.nullable)) for f in arrow_schema],
                partition_keys=partition_keys or [],
                primary_keys=primary_keys or [],
                options={k: str(v) for k, v in (options or {}).items()},
            )
        except (ValueError, PaimonFormatError) as error:
            raise BadInputError(f"cannot create table {table}: {error}") from None
        check_bucket_mode(schema, table)
        compact_level0 = compacts_level0(schema, table)
        record.details["created_table"] = True
        if not dry_run:
            target.schema_manager.create_table(schema)
            target.refresh()
            log.info("created table %s at %s", table, target.path)
    else:
        schema = existing
        _check_create_matches(
            schema, table, partition_keys, primary_keys, options, strict_create, record, log
        )
        check_bucket_mode(schema, table)
        compact_level0 = compacts_level0(schema, table)
        if compact_level0:
            from jobs.compaction.refusals import check_supported

            check_supported(target, None)  # what the compaction after the commit would refuse: now
        check_compatible(arrow_schema, schema, table)
    num_buckets = int(schema.options.get("bucket", "-1"))
    overwrite_filter = _overwrite_filter(mode, overwrite_scope, overwrite_partitions or [], schema, table)
    previous = target.snapshot_manager.latest_id() if existing is not None else None
    record.snapshot_ids["base"] = previous

    if previous is not None:  # a snapshot naming a schema that is gone is a broken table: refuse
        target.check_metadata()

    direct = files is not None and not schema.primary_keys and num_buckets <= 0
    if files is not None and not direct:
        df = spark.read.parquet(*files.paths)
    # before the dry-run exit: reading every manifest of the latest snapshot is the check that the
    # dry run must share with the real run (a corrupt or missing manifest fails both, with exit 2)
    if existing is not None:
        log.info("reading the manifests of snapshot %s for the next sequence number", previous)
    first_sequence = next_sequence_number(spark, target) if existing is not None else 0
    if compact_level0:
        record.details["compacts_written_buckets"] = True
    if is_dynamic_bucket(schema) and previous is not None:
        record.count("hash_index_files_before", check_base_index(target, previous))
    if dry_run:
        record.count("input_rows", _count_rows(spark, files) if direct else df.count())
        log.info("dry run: would write %d rows", record.counts["input_rows"])
        return record

    log.info(
        "writing data files on the executors (%s%s)",
        "primary-key table" if schema.primary_keys else "append table",
        f", {num_buckets} buckets" if num_buckets > 0 else "",
    )
    created = bool(record.details.get("created_table"))
    index = None
    try:
        if direct:
            written = _write_files_directly(spark, files, target, schema, first_sequence)
            record.details["path"] = "direct (executors read the Parquet source with pyarrow)"
        elif is_dynamic_bucket(schema):
            from jobs.writing.dynamic_bucket import write_dynamic

            written, index = write_dynamic(
                df, target, schema, first_sequence, previous, mode, overwrite_filter
            )
            record.details["dynamic_bucket"] = True
            record.count("hash_index_files_written", len(index.add) if index else 0)
        else:
            written = _write_through_spark(df, target, schema, num_buckets, first_sequence)
        log.info(
            "wrote %d data files (%s bytes); committing",
            len(written),
            f"{sum(row['size'] for row in written):,}",
        )
        _commit_written(
            written,
            target,
            schema,
            num_buckets,
            mode,
            overwrite_scope,
            overwrite_filter,
            previous,
            record,
            log,
            index,
        )
    except BaseException:
        if created:
            _remove_created_table(target, log)
            record.details["created_table"] = False
        raise
    if compact_level0 and record.snapshot_ids.get("committed") is not None:
        touched = {(bytes(row["partition"]), row["bucket"]) for row in written}
        compact_written_buckets(spark, target, touched, record, log)
    return record


def _write_through_spark(
    df: Any, target: Table, schema: TableSchema, num_buckets: int, first_sequence: int
) -> list:
    from pyspark.sql import functions as F

    frame = df.select(*[F.col(f.name) for f in schema.fields])
    if schema.primary_keys:
        frame = frame.withColumn(ORDER_COLUMN, F.monotonically_increasing_id())
    if num_buckets > 0:
        from pyspark.sql.types import IntegerType, StructField, StructType

        # a new StructType: `schema.add` would mutate the DataFrame's cached schema
        bucket_schema = StructType([*frame.schema.fields, StructField(BUCKET_COLUMN, IntegerType(), False)])
        frame = frame.mapInArrow(_bucket_task(schema), bucket_schema)
        frame = frame.repartition(*[F.col(k) for k in schema.partition_keys], F.col(BUCKET_COLUMN))
    return frame.mapInArrow(_writer_task(target, schema, first_sequence), _RESULT_SCHEMA).collect()


def _count_rows(spark: Any, files: ParquetFiles) -> int:
    def count(path: str) -> int:
        import fsspec
        import pyarrow.parquet as pq

        with fsspec.open(path, "rb", **files.storage_options) as handle:
            return pq.ParquetFile(handle).metadata.num_rows

    return (
        spark.sparkContext.parallelize(list(files.paths), max(1, min(len(files.paths), 64))).map(count).sum()
    )


def _write_files_directly(
    spark: Any, files: ParquetFiles, target: Table, schema: TableSchema, first_sequence: int
) -> list[dict[str, Any]]:
    """Each task reads its share of the source files with pyarrow and writes data files, flushing at
    `target-file-size` of buffered rows so memory stays bounded."""
    flush_bytes = CoreOptions(schema.options).target_file_size(False)
    storage_options = files.storage_options

    def write(paths: Iterator[str]) -> Iterator[dict[str, Any]]:
        import fsspec
        import pyarrow.parquet as pq

        pending: list[pa.Table] = []
        pending_bytes = 0

        def flush() -> Iterator[dict[str, Any]]:
            data = pa.concat_tables(pending)
            pending.clear()
            for partition, bucket, metas in write_table_files(
                target.file_io, target.path, schema, data, first_sequence
            ):
                for meta in metas:
                    yield {
                        "partition": partition,
                        "bucket": bucket,
                        "meta": pickle.dumps(meta),
                        "rows": meta.row_count,
                        "size": meta.file_size,
                        "path": f"{target.bucket_relpath(partition, bucket)}/{meta.file_name}",
                        "changelog": False,  # append tables have no changelog files
                    }

        for path in paths:
            with fsspec.open(path, "rb", **storage_options) as handle:
                data = conform(pq.read_table(handle), schema)
                data = fit_string_lengths(data, schema)
            pending.append(data)
            pending_bytes += data.nbytes
            if pending_bytes >= flush_bytes:
                yield from flush()
                pending_bytes = 0
        if pending:
            yield from flush()

    # several tasks per core: one task's reading overlaps another's encoding
    slices = max(1, min(len(files.paths), spark.sparkContext.defaultParallelism * 4))
    return spark.sparkContext.parallelize(list(files.paths), slices).mapPartitions(write).collect()


def _commit_written(
    written: list,
    target: Table,
    schema: TableSchema,
    num_buckets: int,
    mode: str,
    overwrite_scope: str,
    overwrite_filter: Any,
    previous: int | None,
    record: RunRecord,
    log: Any,
    index: IndexUpdate | None = None,
) -> RunRecord:
    """One commit of everything the executors wrote; their files are removed if it definitely fails.

    `index`: the HASH index files a dynamic-bucket write made, committed in the same snapshot."""
    messages: dict[tuple[bytes, int], CommitMessage] = {}
    changelog_files = 0
    for row in written:
        key = (bytes(row["partition"]), row["bucket"])
        message = messages.setdefault(
            key, CommitMessage(key[0], key[1], num_buckets if num_buckets > 0 else -1)
        )
        if row["changelog"]:
            message.changelog_files.append(pickle.loads(row["meta"]))
            changelog_files += 1
            record.count("changelog_rows_written", row["rows"])
            record.add_bytes("changelog_written", row["size"])
            continue
        message.new_files.append(pickle.loads(row["meta"]))
        record.count("rows_written", row["rows"])
        record.add_bytes("written", row["size"])
    record.count("files_written", len(written) - changelog_files)
    if changelog_files:
        record.count("changelog_files_written", changelog_files)
    record.count("partitions_written", len({key[0] for key in messages}))
    record.sample("files_written", [row["path"] for row in written if not row["changelog"]])
    if not written:
        log.info("the input is empty: nothing to commit, no snapshot created")
        return record

    committer = SnapshotCommit(target)
    try:
        if mode == "append":
            snapshot = committer.append(list(messages.values()), index=index)
        else:
            touched = {key[0] for key in messages}
            partition_filter = overwrite_filter if overwrite_scope != "touched" else (lambda p: p in touched)
            snapshot = committer.overwrite(
                list(messages.values()), partition_filter=partition_filter, index=index
            )
    except BaseException:
        index_paths = [index_relpath(target, entry) for entry in index.add] if index else []
        _remove_unless_landed(
            target, committer, previous, [row["path"] for row in written] + index_paths, log
        )
        raise
    record.snapshot_ids["committed"] = None
    if snapshot is not None:
        record.committed(snapshot.id)
        if mode == "overwrite":
            _record_replaced(target, snapshot, overwrite_scope, record)
    log.info(
        "committed snapshot %s: %d files, %d rows",
        record.snapshot_ids["committed"],
        len(written),
        record.counts.get("rows_written", 0),
    )
    if mode == "overwrite" and snapshot is not None:
        log.info(
            "the overwrite replaced %d files (%d rows) in %d partitions",
            record.counts["files_replaced"],
            record.counts["rows_replaced"],
            record.details["replaced"]["partition_count"],
        )
    return record


def _record_replaced(target: Table, snapshot: Any, scope: str, record: RunRecord) -> None:
    """What the overwrite replaced, from its snapshot's delta (the DELETE entries it committed).

    The delta is streamed; the driver keeps counts and the distinct partitions (which a table has
    far fewer of than files), of which the record names the first RECORD_PARTITION_LIMIT.
    """
    from paimon_format.manifest.entries import DELETE
    from paimon_format.scan.snapshot_scan import read_entries, read_list

    partitions: set[bytes] = set()
    files = rows = size = 0
    for entry in read_entries(target, read_list(target, snapshot.delta_manifest_list)):
        if entry.kind == DELETE:
            files += 1
            rows += entry.file.row_count
            size += entry.file.file_size
            partitions.add(bytes(entry.partition))
    record.count("files_replaced", files)
    record.count("rows_replaced", rows)
    record.add_bytes("replaced", size)
    names = sorted(target.partition_dir(p) or "(the whole table)" for p in partitions)
    record.details["replaced"] = {
        "scope": scope,
        "partition_count": len(partitions),
        "partitions": names[:RECORD_PARTITION_LIMIT],
    }


def _check_create_matches(
    schema: TableSchema,
    table: str,
    partition_keys: list[str] | None,
    primary_keys: list[str] | None,
    options: dict[str, Any] | None,
    strict: bool,
    record: RunRecord,
    log: Any,
) -> None:
    """A `create:` block is used only for a new table; for an existing one, say where it differs.

    A user who changed the block expects the table to change; silently ignoring it hides that the
    table keeps its old keys and bucket count (recreating a table is a decision we never take).
    """
    differences = []
    if partition_keys is not None and list(partition_keys) != list(schema.partition_keys):
        differences.append(f"partition_keys {list(partition_keys)} (table: {list(schema.partition_keys)})")
    if primary_keys is not None and list(primary_keys) != list(schema.primary_keys):
        differences.append(f"primary_keys {list(primary_keys)} (table: {list(schema.primary_keys)})")
    if options and "bucket" in options and str(options["bucket"]) != schema.options.get("bucket", "-1"):
        differences.append(f"bucket {options['bucket']} (table: {schema.options.get('bucket', '-1')})")
    if not differences:
        return
    message = (
        f"create: differs from the existing table {table}: {'; '.join(differences)}; "
        "create: applies only to a new table"
    )
    if strict:
        raise BadInputError(f"{message} (strict_create: true)")
    record.details["create_mismatch"] = differences
    log.warning("%s; the table is written as it is", message)


def _remove_created_table(target: Table, log: Any) -> None:
    """Remove the table this run created (its schema-0) after its first commit failed.

    Crash ordering: the data files went first (`_remove_unless_landed`), the schema goes last, so a
    crash in between leaves an empty table, as before this cleanup existed. Only a table with no
    snapshot at all and no schema but schema-0 is removed: a table another writer committed to
    meanwhile is theirs too and stays.
    """
    try:
        if target.snapshot_manager.latest_id() is not None or target.schema_manager.list_ids() != [0]:
            log.warning("not removing table %s: it has snapshots or newer schemas now", target.path)
            return
        target.file_io.delete(target.schema_manager.schema_path(0))
        if target.file_io.protocol == "file":
            _remove_empty_dirs(target.file_io.fs, target.path)
        log.info("removed table %s created by this run (its first commit failed)", target.path)
    except Exception:  # the commit's own error is what the user must see
        log.warning("could not remove the table %s this run created", target.path, exc_info=True)


def _remove_empty_dirs(fs: Any, root: str) -> None:
    """Remove the empty directories under a local `root`, and `root` if it ends empty; never a file."""
    import os

    local_root = root[len("file://") :] if root.startswith("file://") else root
    for directory, _, _ in sorted(os.walk(local_root), key=lambda item: -len(item[0])):
        try:
            os.rmdir(directory)
        except OSError:
            pass  # not empty


def _overwrite_filter(
    mode: str, scope: str, partitions: list[dict[str, Any]], schema: TableSchema, table: str
):
    """The partitions an overwrite replaces (None = the whole table)."""
    if mode != "overwrite" or scope == "table":
        return None
    if scope == "partitions":
        if not partitions:
            raise BadInputError("overwrite_scope: partitions needs a non-empty `partitions` list")
        if not schema.partition_keys:
            raise BadInputError(f"table {table} is not partitioned: use overwrite_scope: table")
        try:
            chosen = {partition_bytes(spec, schema) for spec in partitions}
        except ValueError as error:
            raise BadInputError(f"partitions: {error}") from None
        return lambda p: p in chosen
    return None  # "touched": decided after the write, from the partitions written


def _remove_unless_landed(
    target: Table, committer: SnapshotCommit, previous: int | None, paths: list[str], log
) -> None:
    """After a failed commit, delete our data files, unless a snapshot of ours landed after all."""
    manager = target.snapshot_manager
    latest = manager.latest_id() or 0
    for snapshot_id in range((previous or 0) + 1, latest + 1):
        if (
            manager.snapshot_exists(snapshot_id)
            and manager.snapshot(snapshot_id).commit_user == committer.commit_user
        ):
            log.warning("commit raised but snapshot %d of this run exists: keeping its files", snapshot_id)
            return
    target.file_io.delete_many([target.full_path(p) for p in paths])
    log.info("commit failed: removed the %d data files this run wrote", len(paths))


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry("write")
