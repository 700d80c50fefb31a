"""Differential: on identical copies of Java-written tables, our expire-snapshots and Java's expiry with
the same settings leave the same snapshot files and the same data, changelog and index files; our
remove-orphan-files and Java's OrphanFilesClean remove the same orphans.

Both run on Spark (`local: never`): these small tables would otherwise take the driver path, which
the maintain run of test_jobs_on_java_tables.py covers on every Java table."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import uuid

import pytest

from tests.java.helpers import (
    assert_reads_kept,
    files_under,
    lists_java_orphan_cleaning_loses,
    run_job,
)

pytestmark = pytest.mark.java

METADATA_DIRS = ("snapshot/", "schema/", "tag/", "changelog/", "branch/", "manifest/")

# Tables and the changelog retention their options ask for (Java gets the same settings).
DIFFERENTIAL_TABLES = {
    "pk_changelog": {"changelog_retain_min": 1, "changelog_retain_max": 5},
    "pk_lookup_dv": {},
    "pk_first_row": {},
    "pk_aggregation": {},
    "pk_dynamic": {},
    "types_orc": {},
}


def _data_files(files: set[str]) -> set[str]:
    """Data, changelog and index files (everything outside the metadata directories)."""
    return {f for f in files if not f.startswith(METADATA_DIRS)}


def _two_copies(java_templates, tmp_path) -> tuple[str, str]:
    ours = shutil.copytree(java_templates[0], str(tmp_path / "ours"))
    javas = shutil.copytree(java_templates[0], str(tmp_path / "java"))
    return ours, javas


def test_expire_snapshots_matches_javas_expiry(spark_session, java_paimon, java_templates, tmp_path):
    ours, javas = _two_copies(java_templates, tmp_path)
    for name, changelog in DIFFERENTIAL_TABLES.items():
        table = java_templates[1][name]
        code, record = run_job(
            tmp_path / name,
            "expire-snapshots",
            {
                "warehouse": ours,
                "table": table.identifier,
                "retain_min": 1,
                "retain_max": 1,
                "older_than": "0s",
                "local": "never",
            },
        )
        assert code == 0, f"{name}: {record.get('error')}"
        java_paimon.expire_snapshots(
            table.path(javas), retain_min=1, retain_max=1, time_retained_ms=0, **changelog
        )
        if changelog:
            java_paimon.expire_changelog(
                table.path(javas), retain_min=1, retain_max=1, time_retained_ms=0, **changelog
            )
        our_files, java_files = files_under(table.path(ours)), files_under(table.path(javas))
        snapshots = {f for f in java_files if f.startswith(("snapshot/snapshot-", "changelog/changelog-"))}
        assert {f for f in our_files if f.startswith(("snapshot/snapshot-", "changelog/changelog-"))} == (
            snapshots
        ), name
        assert _data_files(our_files) == _data_files(java_files), (
            f"{name}: only ours {sorted(_data_files(our_files) - _data_files(java_files))}, "
            f"only Java's {sorted(_data_files(java_files) - _data_files(our_files))}"
        )
        assert_reads_kept(java_paimon, table, ours)


def _plant_orphans(table_path: str) -> None:
    """Files no snapshot, tag, branch or changelog names, in the places Paimon writes them."""
    old = 946684800  # 2000-01-01: older than any cutoff
    bucket_dirs = sorted(
        d for d, _, names in os.walk(table_path) if os.path.basename(d).startswith("bucket-")
    )
    planted = [
        os.path.join(bucket_dirs[0], f"data-{uuid.uuid4()}-0.parquet"),
        os.path.join(bucket_dirs[-1], f"changelog-{uuid.uuid4()}-0.parquet"),
        os.path.join(table_path, "manifest", f"manifest-{uuid.uuid4()}-0"),
        os.path.join(table_path, "manifest", f"manifest-list-{uuid.uuid4()}-0"),
        os.path.join(table_path, "manifest", f"index-manifest-{uuid.uuid4()}-0"),
    ]
    for path in planted:
        with open(path, "wb") as handle:
            handle.write(b"orphan")
        os.utime(path, (old, old))


def test_remove_orphan_files_matches_javas_orphan_cleaning(
    spark_session, java_paimon, java_templates, tmp_path
):
    ours, javas = _two_copies(java_templates, tmp_path)
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    for name, table in java_templates[1].items():
        _plant_orphans(table.path(ours))
        shutil.rmtree(table.path(javas))
        shutil.copytree(table.path(ours), table.path(javas))
        code, record = run_job(
            tmp_path / name,
            "remove-orphan-files",
            {
                "warehouse": ours,
                "table": table.identifier,
                "older_than": "0s",
                "force": True,
                "local": "never",
            },
        )
        assert code == 0, f"{name}: {record.get('error')}"
        java_bug = lists_java_orphan_cleaning_loses(table.path(javas))
        found = java_paimon.remove_orphan_files(table.path(javas), future)
        assert len(found - java_bug) == 5, f"{name}: Java found {found}"
        our_files, java_files = files_under(table.path(ours)), files_under(table.path(javas))
        lost = {os.path.relpath(p, table.path(javas)) for p in java_bug}
        assert our_files - lost == java_files, (
            f"{name}: only ours {sorted(our_files - java_files)}, "
            f"only Java's {sorted(java_files - our_files)}"
        )
        assert_reads_kept(java_paimon, table, ours)
