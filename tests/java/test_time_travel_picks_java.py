"""Which snapshot a time or a watermark names: ours against Paimon's SnapshotManager (the bundle's).

Paimon's procedures do not agree with each other: `rollback_to_timestamp` / `rollback_to_watermark`
take `earlierOrEqualTimeMills` / `earlierOrEqualWatermark` (the latest snapshot at or before), while
`create_tag_from_timestamp` / `create_tag_from_watermark` take `laterOrEqualTimeMills` /
`laterOrEqualWatermark` (the earliest at or after; Flink and Spark alike, apache/paimon). Our rollback
follows Paimon's; our create-tag keeps issue #30's rule (the latest at or before: the table as it was
at that moment), which docs/operations/create-tag.md states as a difference. This bundle
(1.0-SNAPSHOT) has no earlierOrEqualWatermark, so rollback by watermark is checked by our rule only.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from tests.java.helpers import run_job
from tests.java.oracle import JavaPaimon
from tests.support.table_states import IDENTIFIER, build_sample_table

pytestmark = pytest.mark.java

BASE_MS = 1_700_000_000_000  # snapshot i was committed at BASE_MS + i minutes, with watermark 100 * i


def utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


@pytest.fixture
def table_path(tmp_path) -> str:
    table = build_sample_table(str(tmp_path / "wh"), commits=4)
    for snapshot_id in range(1, 5):
        path = Path(table.snapshot_manager.snapshot_path(snapshot_id))
        snapshot = json.loads(path.read_text())
        snapshot.update(timeMillis=BASE_MS + snapshot_id * 60_000, watermark=100 * snapshot_id)
        path.write_text(json.dumps(snapshot))
    return table.path


def picks(tmp_path: Path, warehouse: str, keys: dict) -> tuple[int, int]:
    """(create-tag's tagged snapshot, rollback's target) for the same moment, both dry runs."""
    base = {"warehouse": warehouse, "table": IDENTIFIER}
    tag_keys = {
        "tag": "at",
        **{("timestamp" if k == "to_timestamp" else "watermark"): v for k, v in keys.items()},
    }
    code, tagged = run_job(tmp_path / "tag", "create-tag", {**base, **tag_keys}, "--dry-run")
    assert code == 0, tagged.get("error")
    code, rolled = run_job(tmp_path / "rollback", "rollback", {**base, **keys}, "--dry-run")
    assert code == 0, rolled.get("error")
    return tagged["snapshot_ids"]["tagged"], rolled["snapshot_ids"]["target"]


@pytest.mark.parametrize("offset_ms", [30_000, 0])
def test_by_time_rollback_picks_as_paimon_and_create_tag_differs_between_snapshots(
    java_paimon: JavaPaimon, table_path, tmp_path, offset_ms
):
    moment = BASE_MS + 2 * 60_000 + offset_ms  # between snapshots 2 and 3, or exactly snapshot 2's
    java = java_paimon.snapshots_around(table_path, moment)
    warehouse = str(Path(table_path).parents[1])
    tagged, target = picks(tmp_path, warehouse, {"to_timestamp": utc(moment)})
    assert target == java["earlier_or_equal_time"] == 2  # rollback_to_timestamp's pick
    assert tagged == 2  # the latest at or before (issue #30)
    # create_tag_from_timestamp's pick: the same snapshot only when one was committed at that moment
    assert java["later_or_equal_time"] == (2 if offset_ms == 0 else 3)


def test_by_watermark_create_tag_takes_the_latest_at_or_before_where_paimon_takes_the_next(
    java_paimon: JavaPaimon, table_path, tmp_path
):
    java = java_paimon.snapshots_around(table_path, BASE_MS, watermark=250)
    warehouse = str(Path(table_path).parents[1])
    tagged, target = picks(tmp_path, warehouse, {"to_watermark": 250})
    assert tagged == target == 2
    assert java["later_or_equal_watermark"] == 3  # create_tag_from_watermark's pick
