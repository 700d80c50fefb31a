"""Which partitions have expired: Paimon's `partition.expiration-*` rules as pure planning logic.

Two strategies, as in Paimon:
- `values-time`: the partition's time comes from its values. `partition.timestamp-pattern` says how
  the partition columns form a timestamp text (`$dt`, `$dt $hr:00:00`, `$year-$month-$day`; default:
  the first partition column's value), `partition.timestamp-formatter` how to read that text (a
  Java DateTimeFormatter pattern such as `yyyyMMdd` or `yyyy-MM-dd HH:mm:ss`; default: `y-M-d` with
  an optional ` H:m:s[.fraction]`). A partition whose time cannot be read, or with a null (default
  partition) value, never expires by value: Paimon logs it and leaves it for a manual drop.
- `update-time`: the time of the newest file in the partition (its creation time).
A partition expires when its time is strictly before `now - partition.expiration-time`, with `now` in
local wall-clock time as Paimon does. `partition.expiration-check-interval` only paces writers that
expire partitions as they commit; a maintenance job checks every time it runs.

The expired partitions are ordered by their values' text (Paimon's order) and capped at
`partition.expiration-max-num` per run.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from paimon_format.errors import PaimonFormatError
from paimon_format.model.partition_spec import PartitionStats
from paimon_format.scan.partition_predicate import PartitionColumns
from paimon_format.storage.paths import partition_value_text

VALUES_TIME = "values-time"
UPDATE_TIME = "update-time"
STRATEGIES = (VALUES_TIME, UPDATE_TIME)
DEFAULT_MAX_EXPIRES = 100


class ExpiryConfigError(PaimonFormatError, ValueError):
    """An expiration setting that cannot be used (bad formatter, unknown strategy, ...)."""


# -- Java DateTimeFormatter patterns (the subset partition values use) ----------------------------

# letter -> (field, digits when the letter is written once, digits when repeated)
_FIELDS = {"y": "year", "u": "year", "M": "month", "d": "day", "H": "hour", "m": "minute", "s": "second"}


@dataclass(frozen=True)
class TimestampFormatter:
    """A compiled Java DateTimeFormatter pattern: `yyyy`, `MM`, `dd`, `HH`, `mm`, `ss`, `S...`, literals.

    Like Java's `ofPattern`, a repeated letter means that many digits (`MM` = exactly two), a single
    letter one or two digits, `yyyy` four digits; text in single quotes and any non-letter are
    literals. The whole text must match. Year, month and day are required; the time defaults to
    midnight (Java falls back to `LocalDate` when the pattern has no time).
    """

    pattern: str
    regex: re.Pattern[str]
    fields: tuple[str, ...]

    @staticmethod
    def compile(pattern: str) -> TimestampFormatter:
        parts: list[str] = []
        fields: list[str] = []
        index = 0
        while index < len(pattern):
            char = pattern[index]
            run = 1
            while index + run < len(pattern) and pattern[index + run] == char:
                run += 1
            if char == "'":
                end = pattern.find("'", index + 1)
                if run == 2:  # '' is a literal quote
                    parts.append(re.escape("'"))
                    index += 2
                    continue
                if end < 0:
                    raise ExpiryConfigError(
                        f"timestamp formatter {pattern!r}: unclosed quote at position {index + 1}"
                    )
                parts.append(re.escape(pattern[index + 1 : end]))
                index = end + 1
                continue
            if char in _FIELDS:
                field = _FIELDS[char]
                if field in fields:
                    raise ExpiryConfigError(f"timestamp formatter {pattern!r}: {char!r} appears twice")
                if field == "year":
                    digits = r"\d{2}" if run == 2 else (r"\d{4}" if run == 4 else rf"\d{{{run},9}}")
                    if run == 2:
                        field = "year2"
                else:
                    if run > 2:
                        raise ExpiryConfigError(
                            f"timestamp formatter {pattern!r}: {char * run!r} is too wide"
                        )
                    digits = r"\d{2}" if run == 2 else r"\d{1,2}"
                parts.append(f"({digits})")
                fields.append(field)
            elif char == "S":
                parts.append(rf"(\d{{{run}}})")
                fields.append("fraction")
            elif char.isalpha():
                raise ExpiryConfigError(
                    f"timestamp formatter {pattern!r}: pattern letter {char!r} at position {index + 1} is "
                    "not supported (use y, M, d, H, m, s, S and literals)"
                )
            else:
                parts.append(re.escape(char * run))
            index += run
        missing = [name for name in ("month", "day") if name not in fields]
        if not ({"year", "year2"} & set(fields)):
            missing.insert(0, "year")
        if missing:
            raise ExpiryConfigError(
                f"timestamp formatter {pattern!r} has no {', '.join(missing)}: a partition time needs a date"
            )
        return TimestampFormatter(pattern, re.compile("".join(parts)), tuple(fields))

    def parse(self, text: str) -> dt.datetime | None:
        """The local date-time the text stands for, or None when it does not match or is no valid date."""
        match = self.regex.fullmatch(text)
        if match is None:
            return None
        values = dict(zip(self.fields, match.groups(), strict=True))
        year = int(values["year"]) if "year" in values else 2000 + int(values["year2"])
        fraction = values.get("fraction", "")
        try:
            return dt.datetime(
                year,
                int(values["month"]),
                int(values["day"]),
                int(values.get("hour", 0)),
                int(values.get("minute", 0)),
                int(values.get("second", 0)),
                int((fraction + "000000")[:6]) if fraction else 0,
            )
        except ValueError:
            return None


_DEFAULT_FORMAT = re.compile(
    r"(\d{1,10})-(\d{1,2})-(\d{1,2})(?: (\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,9}))?)?"
)


def parse_default_timestamp(text: str) -> dt.datetime | None:
    """Paimon's default reading when no formatter is set: `y-M-d`, optionally ` H:m:s[.fraction]`."""
    match = _DEFAULT_FORMAT.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction = match.groups()
    try:
        return dt.datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            int(((fraction or "") + "000000")[:6]),
        )
    except ValueError:
        return None


# -- the time of a partition --------------------------------------------------------------------


@dataclass(frozen=True)
class ExpiryRule:
    """The expiration settings of one run, validated."""

    strategy: str
    expiration_ms: int
    formatter: TimestampFormatter | None = None
    pattern: str | None = None

    @staticmethod
    def create(
        strategy: str, expiration_ms: int, formatter: str | None = None, pattern: str | None = None
    ) -> ExpiryRule:
        if strategy not in STRATEGIES:
            raise ExpiryConfigError(
                f"unknown partition expiration strategy {strategy!r} (use {', '.join(STRATEGIES)})"
            )
        if expiration_ms <= 0:
            raise ExpiryConfigError(f"the expiration time must be positive, got {expiration_ms} ms")
        compiled = TimestampFormatter.compile(formatter) if formatter else None
        return ExpiryRule(strategy, expiration_ms, compiled, pattern or None)

    def check_pattern(self, columns: PartitionColumns) -> None:
        """A pattern must name partition columns only; `$nope` would never expire anything."""
        if self.pattern is None:
            return
        unknown = [
            name
            for name in re.findall(r"\$([A-Za-z_][A-Za-z0-9_]*)", self.pattern)
            if not _names_key(name, columns)
        ]
        if unknown:
            raise ExpiryConfigError(
                f"timestamp pattern {self.pattern!r} names ${unknown[0]}, which is not a partition column "
                f"(partition keys: {', '.join(columns.keys)})"
            )


def _names_key(name: str, columns: PartitionColumns) -> bool:
    """`$dt` in a pattern may be followed by text that looks like more name (`$dt_suffix` is not `$dt`)."""
    return any(name == key or name.startswith(key) for key in columns.keys)


def value_text(value: Any, index: int, columns: PartitionColumns) -> str | None:
    """A partition value as Paimon's time extraction reads it; None for null (never expires by value).

    DATE values read as `yyyy-MM-dd` (not the day number of legacy directory names), everything else
    as Java's `toString()` of the value.
    """
    if value is None:
        return None
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value.isoformat()
    return partition_value_text(value, columns.types[index], columns.default_name, legacy=True)


def partition_time(values: Sequence[Any], columns: PartitionColumns, rule: ExpiryRule) -> dt.datetime | None:
    """The time a partition's values stand for, or None when they do not form a readable time."""
    texts = [value_text(value, i, columns) for i, value in enumerate(values)]
    if rule.pattern is None:
        if not texts or texts[0] is None:
            return None
        text = texts[0]
    else:
        text = rule.pattern
        for key, value in zip(columns.keys, texts, strict=True):
            if f"${key}" in text:
                if value is None:
                    return None
                text = text.replace(f"${key}", value)
    if rule.formatter is not None:
        return rule.formatter.parse(text)
    return parse_default_timestamp(text)


def sort_text(values: Sequence[Any], columns: PartitionColumns) -> str:
    """Paimon's order of expired partitions: their values' text joined by commas."""
    return ",".join(
        partition_value_text(value, columns.types[i], columns.default_name, legacy=True)
        for i, value in enumerate(values)
    )


@dataclass(frozen=True)
class ExpiredPartition:
    stats: PartitionStats
    values: tuple[Any, ...]
    time: dt.datetime


@dataclass(frozen=True)
class ExpirySelection:
    """The partitions to expire this run, and what was left out and why (for the run record)."""

    expired: list[ExpiredPartition]
    expired_total: int  # before the max_expires cap
    unreadable: list[tuple[Any, ...]]  # values-time partitions whose time could not be read (a sample)
    unreadable_total: int


def select_expired(
    partitions: Iterable[tuple[PartitionStats, Sequence[Any]]],
    columns: PartitionColumns,
    rule: ExpiryRule,
    now: dt.datetime,
    max_expires: int = DEFAULT_MAX_EXPIRES,
    sample_limit: int = 20,
) -> ExpirySelection:
    """The expired partitions (stats with decoded values), oldest-text first, at most `max_expires`."""
    if max_expires <= 0:
        raise ExpiryConfigError(f"max_expires must be positive, got {max_expires}")
    cutoff = now - dt.timedelta(milliseconds=rule.expiration_ms)
    expired: list[tuple[str, ExpiredPartition]] = []
    unreadable: list[tuple[Any, ...]] = []
    unreadable_total = 0
    for stats, values in partitions:
        if rule.strategy == UPDATE_TIME:
            moment = stats.last_file_creation
        else:
            moment = partition_time(values, columns, rule)
            if moment is None:
                unreadable_total += 1
                if len(unreadable) < sample_limit:
                    unreadable.append(tuple(values))
                continue
        if moment is not None and moment < cutoff:
            expired.append((sort_text(values, columns), ExpiredPartition(stats, tuple(values), moment)))
    expired.sort(key=lambda item: item[0])
    return ExpirySelection(
        [item for _text, item in expired[:max_expires]], len(expired), unreadable, unreadable_total
    )
