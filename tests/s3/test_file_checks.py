"""A file check on S3 is one HEAD: a missing snapshot or tag costs no "is it a directory?" LIST."""

from __future__ import annotations

import pytest

from paimon_format.errors import MissingFileError, StorageError
from paimon_format.storage.fileio import FileIO


def test_file_exists_is_one_head_for_a_present_and_for_a_missing_file(s3):
    prefix, options, proxy = s3
    file_io = FileIO.for_path(prefix, options)
    file_io.write_bytes(f"{prefix}/snapshot/snapshot-1", b"{}")
    proxy.reset()

    assert file_io.file_exists(f"{prefix}/snapshot/snapshot-1")
    assert not file_io.file_exists(f"{prefix}/snapshot/snapshot-2")
    assert not file_io.file_exists(f"{prefix}/snapshot")  # a prefix with keys below it is no file

    assert proxy.count("HEAD") == 3 and len(proxy.requests) == 3
    assert file_io.exists(f"{prefix}/snapshot")  # `exists` still answers for directories


def test_a_failed_file_check_is_an_error_not_a_missing_file(s3):
    prefix, options, proxy = s3
    file_io = FileIO.for_path(prefix, options)
    proxy.reset(deny=lambda method, path, query: method == "HEAD")
    with pytest.raises(StorageError, match="snapshot-3"):
        file_io.file_exists(f"{prefix}/snapshot/snapshot-3")
    proxy.reset()


def test_listing_a_directory_is_one_request_even_when_it_is_absent(s3):
    """s3fs answered an empty prefix by listing the parent too (the table root, for a table's
    branch/ or consumer/): one LIST each now, and an absent directory is still an error."""
    prefix, options, proxy = s3
    file_io = FileIO.for_path(prefix, options)
    file_io.write_bytes(f"{prefix}/snapshot/snapshot-1", b"{}")
    file_io.write_bytes(f"{prefix}/snapshot/LATEST", b"1")
    proxy.reset()

    assert sorted(s.path.rsplit("/", 1)[-1] for s in file_io.list_dir(f"{prefix}/snapshot")) == [
        "LATEST",
        "snapshot-1",
    ]
    with pytest.raises(MissingFileError):
        file_io.list_dir(f"{prefix}/consumer")
    assert proxy.count("GET", query="list-type") == 2 and len(proxy.requests) == 2


def test_a_failed_listing_is_an_error_not_an_absent_directory(s3):
    prefix, options, proxy = s3
    file_io = FileIO.for_path(prefix, options)
    proxy.reset(deny=lambda method, path, query: "list-type" in query)
    with pytest.raises(StorageError, match="consumer") as raised:
        file_io.list_dir(f"{prefix}/consumer")
    assert not isinstance(raised.value, MissingFileError)
    proxy.reset()
