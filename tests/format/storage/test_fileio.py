"""FileIO on local disk, file:// URLs, memory:// and a real moto S3 server."""

from __future__ import annotations

import errno
import os
import pickle
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import paimon_format.storage.fileio as fileio_module
from paimon_format.errors import MissingFileError, StorageError, UnsupportedOperationError
from paimon_format.storage.fileio import FileIO
from paimon_format.storage.urls import join_path, protocol_of


@dataclass
class Backend:
    name: str
    io: FileIO
    root: str


@pytest.fixture(params=["local", "file-url", "memory", "s3", "s3a"])
def backend(request: pytest.FixtureRequest, tmp_path) -> Iterator[Backend]:
    name = request.param
    if name == "local":
        root = str(tmp_path / "table")
        yield Backend(name, FileIO.for_path(root), root)
    elif name == "file-url":
        root = f"file://{tmp_path}/table"
        yield Backend(name, FileIO.for_path(root), root)
    elif name == "memory":
        root = f"memory://fileio-{uuid.uuid4().hex}/table"
        yield Backend(name, FileIO.for_path(root), root)
        prefix = "/" + root.removeprefix("memory://")
        for key in [k for k in MemoryFileSystem.store if k.startswith(prefix)]:
            MemoryFileSystem.store.pop(key)
    else:
        _, bucket, options = request.getfixturevalue("moto_s3")
        root = f"{name}://{bucket}/fileio-{uuid.uuid4().hex}/table"
        yield Backend(name, FileIO.for_path(root, options), root)


def _path(backend: Backend, *parts: str) -> str:
    return backend.io.join(backend.root, *parts)


# -- read / write -------------------------------------------------------------------------------


def test_write_read_exists_size(backend: Backend) -> None:
    path = _path(backend, "snapshot", "LATEST")
    assert not backend.io.exists(path)
    backend.io.write_bytes(path, b"12")
    assert backend.io.read_bytes(path) == b"12"
    assert backend.io.exists(path)
    assert backend.io.size(path) == 2
    backend.io.write_bytes(path, b"3")  # overwrite (hints)
    assert backend.io.read_bytes(path) == b"3"
    assert backend.io.exists(_path(backend, "snapshot"))


def test_read_missing_raises_missing_file_error(backend: Backend) -> None:
    path = _path(backend, "manifest", "manifest-nope-0")
    with pytest.raises(MissingFileError) as info:
        backend.io.read_bytes(path)
    assert path in str(info.value)
    with pytest.raises(MissingFileError):
        backend.io.size(path)


def test_empty_file_reads_as_empty(backend: Backend) -> None:
    path = _path(backend, "empty")
    backend.io.write_bytes(path, b"")
    assert backend.io.read_bytes(path) == b""


def test_path_of_another_scheme_is_rejected(backend: Backend) -> None:
    other = "memory://x/y" if backend.io.protocol != "memory" else "/tmp/y"
    with pytest.raises(ValueError, match="not a"):
        backend.io.read_bytes(other)


# -- listing ------------------------------------------------------------------------------------


def _populate(backend: Backend) -> None:
    for relative in ("snapshot/snapshot-1", "snapshot/LATEST", "dt=1/bucket-0/data-a.parquet", "dt=1/x.txt"):
        backend.io.write_bytes(_path(backend, relative), relative.encode())


def test_list_dir_one_level_in_callers_form(backend: Backend) -> None:
    _populate(backend)
    listing = {FileIO.relative_to(backend.root, s.path): s for s in backend.io.list_dir(backend.root)}
    assert set(listing) == {"snapshot", "dt=1"}
    assert all(s.is_dir for s in listing.values())
    assert all(s.path.startswith(backend.root + "/") for s in listing.values())

    files = {
        FileIO.relative_to(backend.root, s.path): s for s in backend.io.list_dir(_path(backend, "snapshot"))
    }
    assert set(files) == {"snapshot/snapshot-1", "snapshot/LATEST"}
    latest = files["snapshot/LATEST"]
    assert not latest.is_dir and latest.size == len(b"snapshot/LATEST")
    assert latest.modification_time_ms > 1_600_000_000_000


def test_list_dir_trailing_slash(backend: Backend) -> None:
    _populate(backend)
    names = {s.path for s in backend.io.list_dir(_path(backend, "snapshot") + "/")}
    assert _path(backend, "snapshot", "LATEST") in names


def test_list_missing_dir_raises(backend: Backend) -> None:
    _populate(backend)
    with pytest.raises(MissingFileError):
        backend.io.list_dir(_path(backend, "tag"))
    with pytest.raises(MissingFileError):
        list(backend.io.list_files_recursive(_path(backend, "tag")))


def test_list_a_file_is_an_error(backend: Backend) -> None:
    """Never an empty listing. On S3 a key and a prefix of one name are independent, so the prefix
    of a file's name holding nothing is an absent directory (one LIST, no second look at the parent)."""
    _populate(backend)
    on_s3 = backend.name.startswith("s3")
    with pytest.raises(MissingFileError if on_s3 else StorageError, match="exist" if on_s3 else "not a dir"):
        backend.io.list_dir(_path(backend, "snapshot", "LATEST"))


def test_list_files_recursive_yields_files_only(backend: Backend) -> None:
    _populate(backend)
    statuses = list(backend.io.list_files_recursive(backend.root))
    assert all(not s.is_dir for s in statuses)
    assert {FileIO.relative_to(backend.root, s.path) for s in statuses} == {
        "snapshot/snapshot-1",
        "snapshot/LATEST",
        "dt=1/bucket-0/data-a.parquet",
        "dt=1/x.txt",
    }
    sizes = {FileIO.relative_to(backend.root, s.path): s.size for s in statuses}
    assert sizes["dt=1/x.txt"] == len(b"dt=1/x.txt")


def test_escaped_partition_names_survive_listing(backend: Backend) -> None:
    relative = "dt=2024-01-01T10%3A00/bucket-0/data-x.parquet"
    backend.io.write_bytes(_path(backend, relative), b"x")
    assert [
        FileIO.relative_to(backend.root, s.path) for s in backend.io.list_files_recursive(backend.root)
    ] == [relative]
    assert backend.io.read_bytes(_path(backend, relative)) == b"x"


def test_empty_local_dir_lists_empty(tmp_path) -> None:
    (tmp_path / "tag").mkdir()
    io = FileIO.for_path(str(tmp_path))
    assert io.list_dir(str(tmp_path / "tag")) == []


# -- delete -------------------------------------------------------------------------------------


def test_delete(backend: Backend) -> None:
    path = _path(backend, "manifest", "manifest-a-0")
    backend.io.write_bytes(path, b"m")
    assert backend.io.delete(path) is True
    assert not backend.io.exists(path)
    assert backend.io.delete(path) is False


def test_delete_refuses_directories(backend: Backend) -> None:
    _populate(backend)
    with pytest.raises(StorageError):
        backend.io.delete(_path(backend, "snapshot"))
    assert backend.io.exists(_path(backend, "snapshot", "LATEST"))


def test_delete_many(backend: Backend) -> None:
    paths = [_path(backend, "dt=1", "bucket-0", f"data-{i}.parquet") for i in range(5)]
    for path in paths:
        backend.io.write_bytes(path, b"d")
    missing = _path(backend, "dt=1", "bucket-0", "data-missing.parquet")
    deleted = backend.io.delete_many([*paths, missing])
    assert set(paths) <= set(deleted)
    # S3 DeleteObjects reports absent keys as deleted; the other backends skip them.
    assert (missing in deleted) == backend.name.startswith("s3")
    assert not any(backend.io.exists(p) for p in paths)
    assert backend.io.delete_many([]) == []


def test_delete_many_reports_failures_after_trying_all(tmp_path) -> None:
    io = FileIO.for_path(str(tmp_path))
    (tmp_path / "a").write_bytes(b"a")
    (tmp_path / "adir").mkdir()
    (tmp_path / "b").write_bytes(b"b")
    with pytest.raises(StorageError, match="failed to delete 1 of 3") as info:
        io.delete_many([str(tmp_path / "a"), str(tmp_path / "adir"), str(tmp_path / "b")])
    assert info.value.deleted_paths == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert (tmp_path / "adir").is_dir()


def test_s3_delete_many_batches(moto_s3, monkeypatch) -> None:
    _, bucket, options = moto_s3
    root = f"s3://{bucket}/batches-{uuid.uuid4().hex}"
    io = FileIO.for_path(root, options)
    paths = [io.join(root, f"f{i}") for i in range(7)]
    for path in paths:
        io.write_bytes(path, b"x")
    monkeypatch.setattr(fileio_module, "_S3_DELETE_BATCH", 3)
    calls = []
    original = FileIO._s3_delete_batch

    def spy(self, bucket_name, batch):
        calls.append(len(batch))
        return original(self, bucket_name, batch)

    monkeypatch.setattr(FileIO, "_s3_delete_batch", spy)
    assert sorted(io.delete_many(paths)) == sorted(paths)
    assert sorted(calls) == [1, 3, 3]  # the batches run in flight, in any order
    with pytest.raises(MissingFileError):
        io.list_dir(root)


def test_s3_recursive_listing_paginates(moto_s3, monkeypatch) -> None:
    _, bucket, options = moto_s3
    root = f"s3://{bucket}/pages-{uuid.uuid4().hex}"
    io = FileIO.for_path(root, options)
    for i in range(5):
        io.write_bytes(io.join(root, f"d{i % 2}", f"f{i}"), b"x")
    monkeypatch.setattr(fileio_module, "_S3_LIST_PAGE", 2)
    listed = sorted(FileIO.relative_to(root, s.path) for s in io.list_files_recursive(root))
    assert listed == sorted(f"d{i % 2}/f{i}" for i in range(5))


def test_s3_list_dir_skips_directory_markers(moto_s3) -> None:
    """Zero-byte "dir/" keys (S3 console folders, Hadoop S3A mkdirs) are the listed prefix itself."""
    import boto3

    endpoint_url, bucket, options = moto_s3
    key = f"markers-{uuid.uuid4().hex}/table"
    client = boto3.client("s3", endpoint_url=endpoint_url, region_name="us-east-1")
    for marker in ("", "dt=1/", "dt=1/bucket-0/", "tag/"):
        client.put_object(Bucket=bucket, Key=f"{key}/{marker}", Body=b"")
    root = f"s3://{bucket}/{key}"
    io = FileIO.for_path(root, options)
    io.write_bytes(io.join(root, "dt=1", "bucket-0", "data-0.parquet"), b"x")
    assert [(s.path, s.is_dir) for s in io.list_dir(root)] == [
        (io.join(root, "dt=1"), True),
        (io.join(root, "tag"), True),
    ]
    assert [s.path for s in io.list_dir(io.join(root, "dt=1"))] == [io.join(root, "dt=1", "bucket-0")]
    assert [s.path for s in io.list_dir(io.join(root, "dt=1", "bucket-0"))] == [
        io.join(root, "dt=1", "bucket-0", "data-0.parquet")
    ]
    assert io.list_dir(io.join(root, "tag")) == []  # a marker alone: an empty directory
    with pytest.raises(MissingFileError):  # nothing under a file's name: an absent directory
        io.list_dir(io.join(root, "dt=1", "bucket-0", "data-0.parquet"))


# -- create_if_absent ---------------------------------------------------------------------------


def test_create_if_absent_never_overwrites(backend: Backend) -> None:
    path = _path(backend, "snapshot", "snapshot-1")
    assert backend.io.create_if_absent(path, b"first") is True
    assert backend.io.create_if_absent(path, b"second") is False
    assert backend.io.read_bytes(path) == b"first"


def test_create_if_absent_race_has_one_winner(backend: Backend) -> None:
    path = _path(backend, "snapshot", "snapshot-7")
    contenders = 8
    barrier = threading.Barrier(contenders)
    results: dict[int, bool] = {}
    errors: list[BaseException] = []

    def attempt(i: int) -> None:
        io = pickle.loads(pickle.dumps(backend.io)) if i % 2 else backend.io
        barrier.wait()
        try:
            results[i] = io.create_if_absent(path, f"writer-{i}".encode())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    winners = [i for i, won in results.items() if won]
    assert len(winners) == 1
    assert backend.io.read_bytes(path) == f"writer-{winners[0]}".encode()


def test_local_create_leaves_no_temp_files(tmp_path) -> None:
    io = FileIO.for_path(str(tmp_path))
    target = str(tmp_path / "snapshot" / "snapshot-1")
    assert io.create_if_absent(target, b"a")
    assert not io.create_if_absent(target, b"b")
    assert os.listdir(tmp_path / "snapshot") == ["snapshot-1"]


def test_local_create_without_hard_links_uses_exclusive_create(tmp_path, monkeypatch) -> None:
    def no_link(src, dst):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_link)
    io = FileIO.for_path(str(tmp_path))
    target = str(tmp_path / "snapshot-1")
    assert io.create_if_absent(target, b"a") is True
    assert io.create_if_absent(target, b"b") is False
    assert io.read_bytes(target) == b"a"
    assert os.listdir(tmp_path) == ["snapshot-1"]


def test_s3_create_counts_identical_existing_object_as_success(moto_s3) -> None:
    """A botocore retry of a put that did land gets 412; identical bytes mean the commit was ours."""
    _, bucket, options = moto_s3
    io = FileIO.for_path(f"s3://{bucket}", options)
    path = f"s3://{bucket}/retry-{uuid.uuid4().hex}/snapshot-1"
    assert io.create_if_absent(path, b"same")
    assert io.create_if_absent(path, b"same") is True
    assert io.create_if_absent(path, b"other") is False


class _PlainStoreFS(MemoryFileSystem):
    """A backend FileIO has no create-if-absent primitive for."""

    protocol = "plainstore"
    store: dict = {}
    pseudo_dirs = [""]


fsspec.register_implementation("plainstore", _PlainStoreFS, clobber=True)


def test_unsupported_backend_refuses_create_without_opt_in() -> None:
    io = FileIO.for_path("plainstore://t")
    with pytest.raises(UnsupportedOperationError, match="allow_unsafe_overwrite_commit"):
        io.create_if_absent("plainstore://t/snapshot/snapshot-1", b"x")
    assert not io.exists("plainstore://t/snapshot/snapshot-1")
    # the refusal does not depend on the backend library being installed
    with pytest.raises(UnsupportedOperationError):
        FileIO.for_path("gs://bucket/t").create_if_absent("gs://bucket/t/snapshot/snapshot-1", b"x")


def test_unsupported_backend_with_opt_in_checks_then_writes() -> None:
    io = FileIO.for_path("plainstore://t2", allow_unsafe_overwrite_commit=True)
    path = "plainstore://t2/snapshot/snapshot-1"
    assert io.create_if_absent(path, b"x") is True
    assert io.create_if_absent(path, b"y") is False
    assert io.read_bytes(path) == b"x"


# -- errors -------------------------------------------------------------------------------------


def test_read_a_directory_is_a_storage_error(tmp_path) -> None:
    io = FileIO.for_path(str(tmp_path))
    with pytest.raises(StorageError) as info:
        io.read_bytes(str(tmp_path))
    assert str(tmp_path) in str(info.value)
    assert not isinstance(info.value, MissingFileError)


def test_missing_backend_library_is_reported() -> None:
    io = FileIO.for_path("nosuchproto://bucket/t")
    with pytest.raises(UnsupportedOperationError):
        io.read_bytes("nosuchproto://bucket/t/x")


# -- pickling, paths ----------------------------------------------------------------------------


def test_pickle_round_trip_after_use(backend: Backend) -> None:
    path = _path(backend, "schema", "schema-0")
    backend.io.write_bytes(path, b"{}")
    backend.io.read_bytes(path)  # the filesystem now exists in this process
    clone = pickle.loads(pickle.dumps(backend.io))
    assert clone == backend.io
    assert clone.__getstate__()["_fs"] is None
    assert clone.read_bytes(path) == b"{}"


def test_repr_hides_option_values(moto_s3) -> None:
    _, bucket, options = moto_s3
    text = repr(FileIO.for_path(f"s3://{bucket}", options))
    assert "secret" in text and "testing" not in text


def test_protocol_of() -> None:
    assert protocol_of("/tmp/x") == "file"
    assert protocol_of("file:///tmp/x") == "file"
    assert protocol_of("s3a://b/k") == "s3"
    assert protocol_of("S3://b/k") == "s3"
    assert protocol_of("gs://b/k") == "gcs"
    assert protocol_of("abfs://c@a.dfs.core.windows.net/k") == "abfs"
    assert protocol_of("memory://x") == "memory"


def test_join_and_relative_to() -> None:
    assert join_path("s3://b/t/", "dt=1", "", "bucket-0/") == "s3://b/t/dt=1/bucket-0"
    assert join_path("memory://", "x", "y") == "memory://x/y"
    assert join_path("/", "a") == "/a"
    assert join_path("/") == "/"
    assert FileIO.relative_to("s3://b/t", "s3://b/t/dt=1/x") == "dt=1/x"
    assert FileIO.relative_to("s3://b/t/", "s3://b/t") == ""
    assert FileIO.relative_to("memory://", "memory://a/b") == "a/b"
    with pytest.raises(ValueError):
        FileIO.relative_to("s3://b/t", "s3://b/tt/x")


def test_mkdirs_local(tmp_path) -> None:
    io = FileIO.for_path(str(tmp_path))
    io.mkdirs(str(tmp_path / "a" / "b"))
    assert io.list_dir(str(tmp_path / "a" / "b")) == []
