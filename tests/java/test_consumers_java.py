"""Paimon's Java streaming reader with a `consumer-id` against our expire-snapshots (issue #30).

The reader (the oracle's `stream_consumer`: a stream scan with `consumer-id`, read to the latest,
checkpointed, which writes `consumer/consumer-<id>` as Flink's source does) keeps reading without
"snapshot has expired" after our expiry, because its consumer holds its next snapshot; and once
`consumer.expiration-time` has passed since the reader last wrote it, our expiry deletes the consumer
first and no longer keeps those snapshots.

Differentials against the Paimon bundle the oracle uses (paimon-bundle 1.0-SNAPSHOT, 2024-09): our
expire-changelogs against its ExpireChangelogImpl; reset-consumer and clear-consumers against its
ConsumerManager (resetConsumer, deleteConsumer, listAllIds: the bundle has no clearConsumers, so the
oracle applies that method's rule of later versions with them). Rename and replace tag have no
differential: this bundle's TagManager and Table have neither renameTag nor replaceTag (checked with
javap); tests/java/test_tag_procedures_java.py has Java read the renamed and replaced tags instead.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

import pytest

from jobs.expire_snapshots import ExpiryRequest, expire_snapshots
from paimon_format.consumers import ConsumerManager
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.java.helpers import assert_reads_kept, files_under, run_job
from tests.java.oracle import JavaError
from tests.java.tables import copy_warehouse
from tests.support.table_states import append_rows, batch, build_sample_table, missing_needed, open_table

pytestmark = pytest.mark.java

FUTURE = "2100-01-01 00:00:00"  # every snapshot is older than this cutoff


def test_a_java_streaming_consumer_keeps_reading_after_our_expiry_until_it_goes_stale(
    spark_session, java_paimon, tmp_path
):
    warehouse = str(tmp_path / "wh")
    table = build_sample_table(warehouse, commits=4, rows_per_commit=6)
    first = java_paimon.stream_consumer(table.path, "stream-1")
    assert first == {"rows": 24, "next": 5}
    consumers = ConsumerManager(table.file_io, table.path)
    assert consumers.consumers() == {"stream-1": 5}  # Java's consumer file, read by us

    append_rows(table, batch(100, 6))
    append_rows(table, batch(200, 6))
    record = expire_snapshots(spark_session, table, ExpiryRequest(retain_min=1, older_than=FUTURE))
    assert table.snapshot_manager.snapshot_ids() == [5, 6] and record.snapshot_ids["limited_by"] == "consumer"
    assert java_paimon.stream_consumer(table.path, "stream-1") == {"rows": 12, "next": 7}

    # the reader stops; an hour after its last checkpoint its consumer is stale
    schema = table.schema
    altered = dataclasses.replace(
        schema, id=schema.id + 1, options={**schema.options, "consumer.expiration-time": "1 h"}
    )
    assert table.schema_manager.commit_new_schema(altered)
    old = time.time() - 2 * 3600
    os.utime(consumers.consumer_path("stream-1"), (old, old))
    table = open_table(warehouse)
    append_rows(table, batch(300, 6))
    record = expire_snapshots(spark_session, table, ExpiryRequest(retain_min=1, older_than=FUTURE))
    assert record.samples["consumers_expired"] == ["stream-1"] and consumers.consumers() == {}
    assert table.snapshot_manager.snapshot_ids() == [7]
    # a reader with that id starts over from the latest snapshot: nothing was held for it
    assert java_paimon.stream_consumer(table.path, "stream-1") == {"rows": 42, "next": 8}


def test_expire_changelogs_leaves_what_javas_changelog_expiry_leaves(
    spark_session, java_paimon, java_templates, tmp_path
):
    """Differential on the Java-written pk_changelog table (long-lived changelogs 5-7, snapshots 8-9):
    our expire-changelogs and Paimon's ExpireChangelogImpl with the same retention on two copies."""
    template, tables = java_templates
    table = tables["pk_changelog"]
    ours = copy_warehouse(template, str(tmp_path / "ours"))
    java = copy_warehouse(template, str(tmp_path / "java"))
    config = {"warehouse": ours, "table": table.identifier, "retain_max": 3, "retain_min": 1}
    code, record = run_job(tmp_path / "run", "expire-changelogs", config)
    assert code == 0, record.get("error")
    expired = java_paimon.expire_changelog(table.path(java), changelog_retain_max=3, changelog_retain_min=1)
    assert record["counts"]["changelogs_expired"] == expired > 0
    hints = {"changelog/EARLIEST", "changelog/LATEST", "snapshot/EARLIEST", "snapshot/LATEST"}
    assert files_under(table.path(ours)) - hints == files_under(table.path(java)) - hints
    assert_reads_kept(java_paimon, table, ours)
    assert missing_needed(Table(FileIO.for_path(table.path(ours)), table.path(ours))) == set()


def consumer_files(path: str) -> dict[str, dict]:
    """consumer/ of a table: file name -> its parsed JSON (Jackson's layout aside)."""
    root = os.path.join(path, "consumer")
    names = sorted(os.listdir(root)) if os.path.isdir(root) else []
    return {name: json.loads(Path(root, name).read_text()) for name in names}


def test_reset_and_clear_consumers_leave_what_javas_leave(java_paimon, java_templates, tmp_path):
    """Differential on two copies of pk_changelog (snapshots 8-9) with the same five consumers: our
    reset-consumer (set, create, delete, an unknown one with strict: false) and clear-consumers
    (include and exclude) against Paimon's reset_consumer (ResetConsumerAction: the snapshot must
    exist, then ConsumerManager.resetConsumer / deleteConsumer) and clear_consumers' rule; then the
    next snapshots Java's own streaming reader resumes from. Where they differ: Paimon refuses a
    next snapshot that does not exist, we also take the one after the latest (a reader that read
    everything), and an unknown consumer is exit 2 for us unless strict: false."""
    template, tables = java_templates
    table = tables["pk_changelog"]
    ours = table.path(copy_warehouse(template, str(tmp_path / "ours")))
    java = table.path(copy_warehouse(template, str(tmp_path / "java")))
    for path in (ours, java):
        consumers = ConsumerManager(FileIO.for_path(path), path)
        for consumer_id, next_snapshot in (("etl-1", 8), ("etl-2", 8), ("audit-1", 9), ("audit-keep", 9)):
            consumers.reset_consumer(consumer_id, next_snapshot)
    warehouse = str(tmp_path / "ours")
    runs = [
        ("reset-consumer", {"consumer_id": "etl-1", "next_snapshot": 9}),
        ("reset-consumer", {"consumer_id": "stream-new", "next_snapshot": 8}),
        ("reset-consumer", {"consumer_id": "etl-2", "delete": True}),
        ("reset-consumer", {"consumer_id": "nobody", "delete": True, "strict": False}),
        ("clear-consumers", {"include": "audit-.*", "exclude": "audit-keep"}),
    ]
    for i, (operation, keys) in enumerate(runs):
        config = {"warehouse": warehouse, "table": table.identifier, **keys}
        code, record = run_job(tmp_path / f"run-{i}", operation, config)
        assert code == 0, record.get("error")
    java_paimon.reset_consumer(java, "etl-1", 9)
    java_paimon.reset_consumer(java, "stream-new", 8)
    java_paimon.reset_consumer(java, "etl-2")
    java_paimon.reset_consumer(java, "nobody")
    assert java_paimon.clear_consumers(java, "audit-.*", "audit-keep") == ["audit-1"]
    assert consumer_files(ours) == consumer_files(java)
    assert set(consumer_files(ours)) == {"consumer-etl-1", "consumer-stream-new", "consumer-audit-keep"}
    # both refuse a snapshot that is gone (Paimon: its snapshot read fails; ours: exit 2)
    with pytest.raises(JavaError):
        java_paimon.reset_consumer(java, "etl-1", 3)
    config = {"warehouse": warehouse, "table": table.identifier, "consumer_id": "etl-1", "next_snapshot": 3}
    assert run_job(tmp_path / "gone", "reset-consumer", config)[0] == 2
    assert consumer_files(ours) == consumer_files(java)
    # Java's streaming reader resumes where our consumer says, as where Java's says
    assert java_paimon.stream_consumer(ours, "stream-new") == java_paimon.stream_consumer(java, "stream-new")
