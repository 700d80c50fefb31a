"""Data files are encoded into a spool on local disk, not memory (`paimon_format.data.spool`): a writer's
memory stays at its row group whatever the file size; the file appears at its destination only
complete; no spool outlives its file, a failed upload or an abort."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from paimon_format.data.uploads import Uploads
from paimon_format.data.writer import BucketWriter, primary_key_input_rows
from paimon_format.errors import StorageError
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema, new_table_schema
from paimon_format.model.type_parsing import parse_type
from paimon_format.storage.fileio import FileIO

ROWS_PER_GROUP = 20_000


def schema() -> TableSchema:
    """A primary-key table: its writer encodes each merged batch as it comes (`write_key_values`,
    what compaction writes with), so the open file is what grows."""
    columns = [("id", "BIGINT NOT NULL"), ("payload", "STRING")]
    return new_table_schema(
        [(name, parse_type(t)) for name, t in columns],
        primary_keys=["id"],
        options={"file.compression": "none", "bucket": "1"},
    )


def group(start: int) -> pa.Table:
    """Rows in file layout that do not compress (random text): the file is about as large as they."""
    ids = pa.array(range(start, start + ROWS_PER_GROUP), pa.int64())
    text = pa.array([uuid.uuid4().hex * 4 for _ in range(ROWS_PER_GROUP)])
    rows = pa.table({"id": ids, "payload": text})
    return primary_key_input_rows(rows, schema(), start, CoreOptions(schema().options))


def writer(file_io: FileIO, root: str, uploads: Uploads | None = None) -> BucketWriter:
    return BucketWriter(file_io, root, schema(), [], 0, 0, target_file_size=1 << 30, uploads=uploads)


def spools(directory: Path) -> list[Path]:
    return [path for path in directory.rglob(".*.tmp")]


@pytest.fixture
def scratch(tmp_path, monkeypatch) -> Path:
    """Spark's local directories, where spools of files bound for an object store go."""
    directory = tmp_path / "scratch"
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(directory))
    return directory


def test_a_growing_file_is_held_on_disk_not_in_memory(tmp_path):
    root = str(tmp_path / "db.db" / "t")
    bucket_writer = writer(FileIO.for_path(root), root)
    pool = pa.default_memory_pool()
    before = pool.bytes_allocated()
    for index in range(10):
        bucket_writer.write_key_values(group(index * ROWS_PER_GROUP))
    (spool,) = spools(tmp_path)
    encoded = spool.stat().st_size
    assert encoded > 8 * ROWS_PER_GROUP * 128  # most of ten row groups are on disk already
    # what Arrow holds is about the one row group being encoded, not the file (in memory before)
    assert pool.bytes_allocated() - before < encoded / 3
    (meta,) = bucket_writer.close()
    assert spools(tmp_path) == []
    (stored,) = Path(root).rglob(meta.file_name)
    assert stored.stat().st_size == meta.file_size >= encoded
    assert pq.ParquetFile(stored).metadata.num_rows == meta.row_count == 10 * ROWS_PER_GROUP


def test_an_aborted_writer_leaves_neither_its_files_nor_its_spool(tmp_path):
    root = str(tmp_path / "db.db" / "t")
    bucket_writer = writer(FileIO.for_path(root), root)
    bucket_writer.write_key_values(group(0))
    assert len(spools(tmp_path)) == 1
    bucket_writer.abort()
    assert spools(tmp_path) == []
    assert [path for path in Path(root).rglob("*") if path.is_file()] == []


def test_a_file_for_s3_is_spooled_in_spark_local_dirs_and_uploaded(moto_s3, scratch):
    _, bucket, options = moto_s3
    root = f"s3://{bucket}/spool-{uuid.uuid4().hex}/db.db/t"
    file_io = FileIO.for_path(root, options)
    with Uploads(file_io) as uploads:
        bucket_writer = writer(file_io, root, uploads)
        bucket_writer.write_key_values(group(0))
        assert len(spools(scratch)) == 1  # encoded there, not in memory
        (meta,) = bucket_writer.close()
        uploads.wait()
    assert spools(scratch) == []
    path = file_io.join(root, bucket_writer.relative_dir, meta.file_name)
    assert file_io.size(path) == meta.file_size
    with file_io.open_input(path, meta.file_size) as handle:
        assert pq.ParquetFile(handle).read().column("id").to_pylist() == list(range(ROWS_PER_GROUP))


class RefusedUploads(FileIO):
    """An S3 FileIO whose uploads of spooled files are refused."""

    def put_local_file(self, path: str, local_path: str) -> None:
        assert os.path.exists(local_path)
        raise StorageError(f"write {path}: refused")


def test_a_refused_upload_fails_the_write_and_removes_the_spool(moto_s3, scratch):
    _, bucket, options = moto_s3
    root = f"s3://{bucket}/spool-{uuid.uuid4().hex}/db.db/t"
    file_io = RefusedUploads("s3", options)
    bucket_writer = writer(file_io, root)
    bucket_writer.write_key_values(group(0))
    with pytest.raises(StorageError, match="refused"):
        bucket_writer.close()
    assert spools(scratch) == []


def test_an_uploaded_spool_keeps_the_storage_options_extra_arguments(moto_s3, scratch):
    """`s3_additional_kwargs` (server-side encryption here) reach the upload of a spooled file, as
    they reached the in-memory PUT before: pyarrow's own S3 file system dropped them silently."""
    _, bucket, options = moto_s3
    root = f"s3://{bucket}/spool-{uuid.uuid4().hex}/db.db/t"
    file_io = FileIO.for_path(root, {**options, "s3_additional_kwargs": {"ServerSideEncryption": "AES256"}})
    bucket_writer = writer(file_io, root)
    bucket_writer.write_key_values(group(0))
    (meta,) = bucket_writer.close()
    key = file_io.join(root, bucket_writer.relative_dir, meta.file_name)[len("s3://") :].split("/", 1)[1]
    head = file_io.fs.call_s3("head_object", Bucket=bucket, Key=key)
    assert head["ServerSideEncryption"] == "AES256"


def test_a_file_that_cannot_be_finished_leaves_no_spool(tmp_path, monkeypatch):
    """A failure as the footer is written (a full disk) removes the spool before it is raised."""
    root = str(tmp_path / "db.db" / "t")
    bucket_writer = writer(FileIO.for_path(root), root)
    bucket_writer.write_key_values(group(0))
    assert len(spools(tmp_path)) == 1

    calls: list[int] = []

    def full_disk() -> None:  # the first close fails; later ones (discard, the writer's __del__) pass
        calls.append(1)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(bucket_writer._file.encoder._writer, "close", full_disk)
    with pytest.raises(OSError, match="No space"):
        bucket_writer.close()
    assert spools(tmp_path) == []
