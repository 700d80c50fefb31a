"""Fixtures of the metadata tests (schemas, snapshots, tags, branches, consumers): a table root and
FileIO on each backend. A test module defining a fixture of the same name keeps its own."""

from __future__ import annotations

import uuid

import pytest

from paimon_format.storage.fileio import FileIO


@pytest.fixture(params=["local", "memory", "s3"])
def storage(request, tmp_path) -> tuple[str, FileIO]:
    """(table root, FileIO) on each backend; S3 is a moto server, where directories are only prefixes."""
    if request.param == "local":
        root = str(tmp_path / "db.db" / "t")
        return root, FileIO.for_path(root)
    if request.param == "memory":
        root = f"memory://metadata-tests/{uuid.uuid4().hex}/db.db/t"
        return root, FileIO.for_path(root)
    _, bucket, options = request.getfixturevalue("moto_s3")
    root = f"s3://{bucket}/metadata-tests-{uuid.uuid4().hex}/db.db/t"
    return root, FileIO.for_path(root, options)


@pytest.fixture
def table_root(storage) -> str:
    return storage[0]


@pytest.fixture
def file_io(storage) -> FileIO:
    return storage[1]
