"""`FileIO.delete_many` off S3: single deletes in flight (`io_parallelism`), the same result as one
after another; every path is still attempted and failures are reported after. Concurrency is
counted in the FileIO (`tests.support.peak_io`), never timed."""

from __future__ import annotations

from pathlib import Path

import pytest

from paimon_format.errors import StorageError
from paimon_format.storage.fileio import FileIO
from tests.support.peak_io import probing


def _planted(root: Path, count: int) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        (root / f"f-{i:03d}").write_bytes(b"x")
        paths.append(str(root / f"f-{i:03d}"))
    return paths


@pytest.mark.parametrize("parallelism", [1, 8])
def test_local_deletes_are_in_flight_with_the_same_result(tmp_path, parallelism):
    paths = _planted(tmp_path / "t", 40)
    absent = str(tmp_path / "t" / "never-written")
    with probing() as probe:
        file_io = FileIO.for_path(str(tmp_path), io_parallelism=parallelism)
        if parallelism > 1:
            probe.holding("delete")
        deleted = file_io.delete_many([*paths[:20], absent, *paths[20:]])
    assert not probe.gave_up
    assert deleted == paths  # in the given order, the absent file skipped
    assert not list((tmp_path / "t").iterdir())
    assert probe.calls["delete"] == 41
    if parallelism == 1:
        assert probe.peak["delete"] == 1
    else:
        assert probe.peak["delete"] > 1


def test_a_failure_in_flight_stops_no_other_delete(tmp_path):
    paths = _planted(tmp_path / "t", 30)
    (tmp_path / "t" / "adir").mkdir()
    blocked = str(tmp_path / "t" / "adir")
    file_io = FileIO.for_path(str(tmp_path), io_parallelism=8)
    with pytest.raises(StorageError, match="failed to delete 1 of 31 files") as info:
        file_io.delete_many([*paths[:15], blocked, *paths[15:]])
    assert info.value.deleted_paths == paths
    assert [p.name for p in (tmp_path / "t").iterdir()] == ["adir"]
