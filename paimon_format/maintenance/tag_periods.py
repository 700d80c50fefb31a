"""Automatic tag names: Paimon's TagPeriodHandler for `tag.creation-period` daily and hourly.

A table with `tag.automatic-creation` (process-time, watermark, batch) names its automatic tags after
the period they close, formatted by `tag.period-formatter`:

| period | with_dashes (default) | without_dashes | without_dashes_and_spaces |
| --- | --- | --- | --- |
| daily | 2024-05-14 | 20240514 | 20240514 |
| hourly | 2024-05-14 10 | 20240514 10 | 2024051410 |

A tag is *automatic* when its name parses with the table's format (strictly: exact digit counts, a
real date), as `isAutoTag` decides; `tag.num-retained-max` applies to those tags only.
`missing_automatic_tags` replays Paimon's creation rules over a table's snapshot history.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from paimon_format.model.options import parse_duration_ms

if TYPE_CHECKING:
    from paimon_format.snapshot import Snapshot
    from paimon_format.table import Table

AUTOMATIC_CREATION = "tag.automatic-creation"
CREATION_PERIOD = "tag.creation-period"
PERIOD_FORMATTER = "tag.period-formatter"
CREATION_DELAY = "tag.creation-delay"
NUM_RETAINED_MAX = "tag.num-retained-max"
DEFAULT_TIME_RETAINED = "tag.default-time-retained"

_FORMATS = {
    ("daily", "with_dashes"): (r"(\d{4})-(\d{2})-(\d{2})", "{y:04d}-{m:02d}-{d:02d}"),
    ("daily", "without_dashes"): (r"(\d{4})(\d{2})(\d{2})", "{y:04d}{m:02d}{d:02d}"),
    ("daily", "without_dashes_and_spaces"): (r"(\d{4})(\d{2})(\d{2})", "{y:04d}{m:02d}{d:02d}"),
    ("hourly", "with_dashes"): (r"(\d{4})-(\d{2})-(\d{2}) (\d{2})", "{y:04d}-{m:02d}-{d:02d} {h:02d}"),
    ("hourly", "without_dashes"): (r"(\d{4})(\d{2})(\d{2}) (\d{2})", "{y:04d}{m:02d}{d:02d} {h:02d}"),
    ("hourly", "without_dashes_and_spaces"): (
        r"(\d{4})(\d{2})(\d{2})(\d{2})",
        "{y:04d}{m:02d}{d:02d}{h:02d}",
    ),
}


@dataclass(frozen=True)
class TagPeriod:
    """One period kind with its name format."""

    period: str  # daily | hourly
    formatter: str  # with_dashes | without_dashes | without_dashes_and_spaces

    @staticmethod
    def of(options: dict[str, str]) -> TagPeriod:
        """The table's period; ValueError naming the option for a value Paimon would refuse or we
        do not support (two-hours)."""
        period = options.get(CREATION_PERIOD, "daily").strip().lower()
        formatter = options.get(PERIOD_FORMATTER, "with_dashes").strip().lower().replace("-", "_")
        if period not in ("daily", "hourly"):
            raise ValueError(f"{CREATION_PERIOD}: {period!r} is not supported (daily, hourly)")
        if (period, formatter) not in _FORMATS:
            raise ValueError(
                f"{PERIOD_FORMATTER}: {formatter!r} is not one of with_dashes, without_dashes, "
                "without_dashes_and_spaces"
            )
        return TagPeriod(period, formatter)

    @property
    def length(self) -> dt.timedelta:
        return dt.timedelta(days=1) if self.period == "daily" else dt.timedelta(hours=1)

    def tag_to_time(self, name: str) -> dt.datetime | None:
        """The period start a name stands for, or None when it is no automatic tag of this format."""
        pattern, _ = _FORMATS[(self.period, self.formatter)]
        match = re.fullmatch(pattern, name)
        if match is None:
            return None
        numbers = [int(group) for group in match.groups()] + [0]
        try:
            return dt.datetime(numbers[0], numbers[1], numbers[2], numbers[3])
        except ValueError:
            return None

    def is_auto_tag(self, name: str) -> bool:
        return self.tag_to_time(name) is not None

    def time_to_tag(self, moment: dt.datetime) -> str:
        _, template = _FORMATS[(self.period, self.formatter)]
        return template.format(y=moment.year, m=moment.month, d=moment.day, h=moment.hour)

    def period_start(self, moment: dt.datetime) -> dt.datetime:
        """The start of the period holding `moment`."""
        if self.period == "daily":
            return moment.replace(hour=0, minute=0, second=0, microsecond=0)
        return moment.replace(minute=0, second=0, microsecond=0)


BATCH_CUSTOMIZED_NAME = "tag.batch.customized-name"
BATCH_TAG_PREFIX = "batch-write-"


def missing_automatic_tags(table: Table) -> list[tuple[str, Snapshot, bool]]:
    """The automatic tags the table's options ask for that do not exist: [(name, snapshot, replace)].

    Paimon creates them while writing; a table written by other means (or by a writer without the
    option) gets them here, from the snapshot history, with Paimon's rules:
    - `process-time`: replaying TagAutoCreation over the snapshots after the newest automatic tag,
      the first snapshot committed at or after the end of period P plus `tag.creation-delay` is
      tagged with P's name (commit times read in local time, as Paimon's process time);
    - `batch`: the latest snapshot tagged `batch-write-<its local date>` (or
      `tag.batch.customized-name`), replacing a tag of that name on an older snapshot.
    ValueError names the option for modes and values not supported (watermark, two-hours).
    """
    options = table.schema.options
    mode = options.get(AUTOMATIC_CREATION, "none").strip().lower()
    manager = table.snapshot_manager
    tags = table.tag_manager
    if mode == "none":
        return []
    if mode == "batch":
        latest = manager.latest()
        if latest is None:
            return []
        local = dt.datetime.fromtimestamp(latest.time_millis / 1000)
        name = options.get(BATCH_CUSTOMIZED_NAME) or f"{BATCH_TAG_PREFIX}{local:%Y-%m-%d}"
        if tags.tag_exists(name):
            return [] if tags.tag(name).id == latest.id else [(name, latest, True)]
        return [(name, latest, False)]
    if mode != "process-time":
        raise ValueError(f"{AUTOMATIC_CREATION}: {mode!r} is not supported here (none, process-time, batch)")
    period = TagPeriod.of(options)
    delay = dt.timedelta(milliseconds=parse_duration_ms(options.get(CREATION_DELAY, "0 ms")))
    if delay >= period.length:
        raise ValueError(f"{CREATION_DELAY}: {options[CREATION_DELAY]!r} must be shorter than one period")
    automatic = sorted(
        (name for name in tags.tag_names() if period.is_auto_tag(name)), key=lambda n: period.tag_to_time(n)
    )
    next_tag: dt.datetime | None = None
    first = manager.earliest_id()
    if automatic:
        newest = automatic[-1]
        first = tags.tag(newest).id + 1
        next_tag = period.tag_to_time(newest) + period.length  # type: ignore[operator]
    planned: list[tuple[str, Snapshot, bool]] = []
    existing = set(tags.tag_names())
    for snapshot_id in manager.snapshot_ids():
        if first is None or snapshot_id < first:
            continue
        snapshot = manager.snapshot(snapshot_id)
        moment = dt.datetime.fromtimestamp(snapshot.time_millis / 1000)
        if next_tag is None or moment - delay >= next_tag + period.length:
            this_tag = period.period_start(moment) - period.length
            name = period.time_to_tag(this_tag)
            if name not in existing:
                planned.append((name, snapshot, False))
                existing.add(name)
            next_tag = this_tag + period.length
    return planned
