"""expire-snapshots on tables whose changelog outlives snapshots (`changelog.num-retained.*`,
`changelog.time-retained`): Paimon's decoupled changelog retention.
"""

from __future__ import annotations

import pytest

from jobs.errors import BadInputError
from jobs.expire_snapshots import expire_snapshots
from paimon_format.expire import ChangelogSettings, ExpireSettings, decoupled_cause
from tests.factories import make_table
from tests.table_states import TABLE_OPTIONS, append_rows, batch, fingerprint, table_root

FUTURE = "2100-01-01 00:00:00"  # every snapshot is older than this cutoff
NOW = 10_000_000


# -- when is a table decoupled (Paimon's ExpireConfig.isChangelogDecoupled) ---------------------------


@pytest.mark.parametrize(
    ("changelog", "word"),
    [
        (ChangelogSettings(3, 30, NOW, 50), "changelog.num-retained.max=30"),
        (ChangelogSettings(5, 10, NOW, 50), "changelog.num-retained.min=5"),
        (ChangelogSettings(3, 10, NOW - 7_200_000, 50), "changelog.time-retained"),
    ],
)
def test_any_longer_changelog_bound_decouples(changelog, word):
    snapshot = ExpireSettings(retain_min=3, retain_max=10, cutoff_ms=NOW, max_deletes=50)
    assert word in decoupled_cause(changelog, snapshot)


def test_equal_or_shorter_changelog_bounds_are_not_decoupled():
    snapshot = ExpireSettings(retain_min=3, retain_max=10, cutoff_ms=NOW, max_deletes=50)
    assert decoupled_cause(ChangelogSettings(3, 10, NOW, 50), snapshot) is None
    assert decoupled_cause(ChangelogSettings(1, 5, NOW + 1, 50), snapshot) is None


def test_refused_while_long_lived_changelogs_are_not_written(spark_session, tmp_path):
    options = {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "3"}
    table = make_table(
        table_root(str(tmp_path / "wh")),
        options={**TABLE_OPTIONS, **options, "changelog.num-retained.max": "30"},
    )
    for i in range(6):
        append_rows(table, batch(10 * i, 6))
    before = fingerprint(table.path)
    with pytest.raises(BadInputError, match="changelog.num-retained.max=30"):
        expire_snapshots(spark_session, table, retain_min=1, older_than=FUTURE)
    assert fingerprint(table.path) == before
