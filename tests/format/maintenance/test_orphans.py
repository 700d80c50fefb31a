"""Orphan rules by name and place, the age cutoff, the ratio breaker, and delete retries (no Spark)."""

from __future__ import annotations

import uuid

import pytest

from jobs.deletion.deleter import delete_with_retries, removable_parents
from paimon_format.errors import StorageError
from paimon_format.maintenance.orphan_rules import (
    DELETABLE,
    FOREIGN,
    PROTECTED,
    FileNaming,
    cutoff_ms,
    directory_judge,
    exceeds_ratio,
    judge_file,
)
from paimon_format.storage.fileio import FileIO

U = str(uuid.uuid4())


JUDGED_PATHS = [
    (f"dt=a/bucket-0/data-{U}-0.parquet", DELETABLE),
    (f"bucket-3/changelog-{U}-2.orc", DELETABLE),
    (f"dt=a/bucket-postpone/data-{U}-0.parquet", DELETABLE),
    (f"dt=a/bucket-1/index-{U}-0", DELETABLE),
    (f"manifest/manifest-{U}-0", DELETABLE),
    (f"manifest/manifest-list-{U}-0", DELETABLE),
    (f"manifest/manifest-list-{U}-changelog", DELETABLE),
    (f"manifest/index-manifest-{U}-0", DELETABLE),
    (f"index/index-{U}-0", DELETABLE),
    (f"statistics/stat-{U}-0", DELETABLE),
    (f"snapshot/.snapshot-5.{U}.tmp", DELETABLE),
    (f"branch/branch-b/tag/.tag-x.{U}.tmp", DELETABLE),
    ("snapshot/snapshot-5", PROTECTED),
    ("snapshot/LATEST", PROTECTED),
    ("snapshot/EARLIEST", PROTECTED),
    ("schema/schema-0", PROTECTED),
    ("tag/tag-2024-01-01", PROTECTED),
    ("consumer/consumer-reader", PROTECTED),
    ("changelog/changelog-3", PROTECTED),
    ("branch/branch-b/snapshot/snapshot-1", PROTECTED),
    (f"branch/branch-b/manifest/manifest-{U}-0", FOREIGN),
    (f"manifest/data-{U}-0.parquet", FOREIGN),
    (f"dt=a/data-{U}-0.parquet", FOREIGN),
    ("dt=a/_SUCCESS", FOREIGN),
    ("dt=a/bucket-0/part-0000.parquet", FOREIGN),
    ("README.md", FOREIGN),
    (f"snapshot/.snapshot-5.{U}.tmp.bak", FOREIGN),
    (f"dt=a/bucket-0/.data-{U}-0.parquet.{U}.tmp", DELETABLE),
    (f"branch/branch-b/bucket-0/data-{U}-0.parquet", FOREIGN),
    (f"branch/branch-b/dt=a/bucket-0/.x.{U}.tmp", DELETABLE),
    (f"dt=a/bucket-x/data-{U}-0.parquet", FOREIGN),
    (f"data-{U}-0.parquet", FOREIGN),
]


@pytest.mark.parametrize(("path", "rule"), JUDGED_PATHS)
def test_judge_file(path: str, rule: str) -> None:
    assert judge_file(path).rule == rule


@pytest.mark.parametrize("naming", [FileNaming(), FileNaming.of({"data-file.prefix": "part-"})])
def test_directory_judge_agrees_with_judge_file(naming: FileNaming) -> None:
    """The listing's per-directory judge gives judge_file's rule and kind for every example."""
    extra = [(f"dt=a/bucket-0/part-{U}-0.parquet", None), (f"bucket-0/index-{U}-1", None)]
    for path, _ in JUDGED_PATHS + extra:
        directory, _, name = path.rpartition("/")
        assert directory_judge(directory, naming)(name) == judge_file(path, naming), path


def test_custom_data_file_prefix_is_honoured() -> None:
    naming = FileNaming.of({"data-file.prefix": "part-"})
    assert judge_file(f"bucket-0/part-{U}-0.parquet", naming).rule == DELETABLE
    assert judge_file(f"bucket-0/data-{U}-0.parquet", naming).rule == FOREIGN


def test_cutoff_has_a_floor_unless_forced() -> None:
    assert cutoff_ms(10_000_000, 3_600_000, force=False) == 6_400_000
    with pytest.raises(ValueError, match="floor"):
        cutoff_ms(10_000_000, 3_599_999, force=False)
    assert cutoff_ms(10_000_000, 0, force=True) == 10_000_000
    with pytest.raises(ValueError):
        cutoff_ms(10_000_000, -1, force=True)


def test_ratio_breaker() -> None:
    assert exceeds_ratio(6, 10, 0.5) and not exceeds_ratio(5, 10, 0.5) and not exceeds_ratio(0, 0, 0.5)


def test_removable_parents_only_data_layout_directories() -> None:
    assert removable_parents("a=1/b=2/bucket-0/data-x.parquet") == ["a=1/b=2/bucket-0", "a=1/b=2", "a=1"]
    assert removable_parents("prefix/bucket-0/data-x.parquet") == ["prefix/bucket-0"]
    assert removable_parents("manifest/manifest-x-0") == []


class FlakyFileIO(FileIO):
    """Fails the first `failures` delete calls, deleting half of the batch each time."""

    def __init__(self, failures: int) -> None:
        super().__init__("file")
        self.failures = failures

    def delete_many(self, paths):  # noqa: ANN001, ANN201
        if self.failures:
            self.failures -= 1
            done = super().delete_many(list(paths)[: len(paths) // 2])
            error = StorageError("SlowDown")
            error.deleted_paths = done
            raise error
        return super().delete_many(paths)


def test_failed_batches_are_retried_until_everything_is_deleted(tmp_path) -> None:
    paths = []
    for i in range(8):
        (tmp_path / f"f{i}").write_bytes(b"x")
        paths.append(str(tmp_path / f"f{i}"))
    deleted, errors = delete_with_retries(FlakyFileIO(2), paths, retries=3, backoff_s=0)
    assert deleted == set(paths) and errors == [] and not list(tmp_path.iterdir())


def test_retries_give_up_with_the_error(tmp_path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    deleted, errors = delete_with_retries(FlakyFileIO(5), [str(tmp_path / "f")], retries=2, backoff_s=0)
    assert deleted == set() and errors == ["SlowDown"] and (tmp_path / "f").exists()
