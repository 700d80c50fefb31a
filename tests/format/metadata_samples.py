"""A snapshot with every required field, for the metadata tests (snapshots, tags, branches,
consumers); their storage fixtures are in conftest.py."""

from __future__ import annotations

import uuid

from paimon_format.snapshot import Snapshot

LONG_MAX = 2**63 - 1


def make_snapshot(snapshot_id: int, **overrides) -> Snapshot:
    values = dict(
        id=snapshot_id,
        schema_id=0,
        base_manifest_list=f"manifest-list-x-{2 * snapshot_id}",
        delta_manifest_list=f"manifest-list-x-{2 * snapshot_id + 1}",
        commit_user="tester",
        commit_identifier=LONG_MAX,
        commit_kind="APPEND",
        time_millis=1_700_000_000_000 + snapshot_id,
        total_record_count=10 * snapshot_id,
        delta_record_count=10,
        uuid=str(uuid.uuid4()),
    )
    values.update(overrides)
    return Snapshot(**values)
