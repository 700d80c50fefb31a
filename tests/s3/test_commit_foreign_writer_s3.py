"""Commits on S3 next to other writers (issue #28): no read-back, a warning when Java may be live.

Our conditional put never replaces a snapshot, so the read-back that local disk needs (Paimon's Java
LocalFileIO can move its file over ours) costs nothing here. What S3 cannot give is protection from
Paimon's Java commit, which renames by copy under a lock we do not take: a commit on top of a
snapshot another writer made within the hour warns (docs/safety.md, concurrent writers).
"""

from __future__ import annotations

import json
import logging
import time

from tests.support.table_states import append_rows, batch, build_sample_table

FOREIGN = "replace the snapshot this job creates"


def _foreign_snapshot(table, age_s: float) -> None:
    """A snapshot as Paimon's Java writer leaves it: no writerVersion, its own commit user."""
    latest = table.snapshot_manager.latest()
    data = json.loads(latest.to_json())
    data.pop("writerVersion", None)
    data.update(id=latest.id + 1, commitUser="java-writer", timeMillis=int((time.time() - age_s) * 1000))
    path = table.snapshot_manager.snapshot_path(latest.id + 1)
    assert table.file_io.create_if_absent(path, json.dumps(data).encode())


def test_s3_commit_reads_nothing_back_and_warns_about_a_live_foreign_writer(s3, caplog):
    prefix, options, proxy = s3
    table = build_sample_table(f"{prefix}/wh", commits=1, storage_options=options)

    proxy.reset()
    with caplog.at_level(logging.WARNING, logger="paimon_format.commit"):
        assert append_rows(table, batch(100, 3)) == 2
    created = [r for r in proxy.requests if r.conditional and r.path.endswith("/snapshot/snapshot-2")]
    read_back = [r for r in proxy.requests if r.kind == "GET" and r.path.endswith("/snapshot/snapshot-2")]
    assert [r.status for r in created] == [200] and read_back == []
    assert not [r for r in caplog.records if FOREIGN in r.getMessage()]  # our own snapshot 1

    _foreign_snapshot(table, age_s=2 * 3600)  # snapshot 3: a writer that stopped hours ago
    with caplog.at_level(logging.WARNING, logger="paimon_format.commit"):
        assert append_rows(table, batch(200, 3)) == 4
    assert not [r for r in caplog.records if FOREIGN in r.getMessage()]

    _foreign_snapshot(table, age_s=60)  # snapshot 5: committed a minute ago
    with caplog.at_level(logging.WARNING, logger="paimon_format.commit"):
        assert append_rows(table, batch(300, 3)) == 6
    warnings = [r.getMessage() for r in caplog.records if FOREIGN in r.getMessage()]
    assert len(warnings) == 1 and "snapshot 5" in warnings[0] and "java-writer" in warnings[0]
