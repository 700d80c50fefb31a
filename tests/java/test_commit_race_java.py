"""Our commit and Paimon's Java commit of the same snapshot id at the same moment (issue #28).

Java's LocalFileIO claims `snapshot-N` by exists() then an atomic move, under a lock that holds only
in its own JVM; ours by a hard link, which never replaces. So Java can replace a snapshot we created
between its check and its move, never the other way round; our commit reads its snapshot back and
retries when it was replaced. The rounds and checks are tests/java/commit_race.py;
`scripts/commit_race.py --rounds 1000` is the long run (docs/safety.md has its figures).
"""

from __future__ import annotations

import logging

import pytest

from tests.java.commit_race import (
    CLAIM,
    COMMIT,
    DETECTED,
    FORCED,
    JAVA_WON,
    OURS_WON,
    OUTCOMES,
    check_table,
    create_race_table,
    race_round,
)

pytestmark = pytest.mark.java

ROUNDS = 40


def test_rounds_of_the_same_snapshot_id_lose_nothing(java_paimon, tmp_path):
    """Each round both sides claim the same id (commits started together, or claims released
    together); every commit lands once, ids stay contiguous, and Java and our reader read every
    row (race_round raises on a lost, doubled or silently replaced commit)."""
    race = create_race_table(java_paimon, str(tmp_path / "db.db" / "t"), hooked=True)

    modes = [(COMMIT, CLAIM)[n % 2] for n in range(ROUNDS)]
    outcomes = [
        race_round(java_paimon, race, n, str(tmp_path), mode=mode, jitter_us=8000)
        for n, mode in enumerate(modes)
    ]

    assert set(outcomes) <= set(OUTCOMES) and len(outcomes) == ROUNDS
    assert race.table.snapshot_manager.latest_id() == 2 * ROUNDS
    assert check_table(java_paimon, race) == 2 * ROUNDS
    # released together at the claim, both had read the same latest snapshot: exactly one lost it
    claims = [outcome for outcome, mode in zip(outcomes, modes, strict=True) if mode == CLAIM]
    assert set(claims) <= {OURS_WON, JAVA_WON, DETECTED}


def test_a_snapshot_java_replaces_is_detected_and_committed_again(java_paimon, tmp_path, caplog):
    """Java stops between its exists() check and its move; our commit creates snapshot-3; Java's
    move replaces it. Our read-back sees Java's snapshot, logs it, and commits again as snapshot 4;
    both rows stay readable and snapshot 3 is Java's."""
    race = create_race_table(java_paimon, str(tmp_path / "db.db" / "t"), hooked=True)
    race_round(java_paimon, race, 0, str(tmp_path))  # snapshots 1 and 2, in either order

    with caplog.at_level(logging.WARNING, logger="paimon_format.commit"):
        outcome = race_round(java_paimon, race, 1, str(tmp_path), mode=FORCED)

    assert outcome == DETECTED
    assert race.committer.replaced_snapshots == [3]
    assert race.java_ids.get(3) == 2 and race.our_ids.get(4) == 3
    warning = [r.getMessage() for r in caplog.records if "replaced by another writer" in r.getMessage()]
    assert len(warning) == 1 and "snapshot/snapshot-3" in warning[0]
    assert check_table(java_paimon, race) == 4
