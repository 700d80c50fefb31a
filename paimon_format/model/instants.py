"""Instants given as text: "a duration ago" or "this UTC time", as the jobs' `older_than` and
`timestamp` keys take them, and epoch milliseconds written back as ISO-8601 UTC.

A bare duration (`7d`, `1 h`, `30 min`, `500`) follows Paimon's duration rules
(`options.parse_duration_ms`) and counts back from a given "now"; anything else must be an ISO-8601
timestamp (`2024-05-14 00:00:00`, `2024-05-14T00:00:00+02:00`), read as UTC when it names no zone.
"""

from __future__ import annotations

import datetime as dt

from paimon_format.model.options import parse_duration_ms


def instant_ms(text: str, now_ms: int) -> int:
    """The instant `text` names, in epoch ms: `now_ms` minus a duration, or an absolute timestamp
    (UTC unless it says otherwise); ValueError for anything else."""
    stripped = text.strip()
    try:
        return now_ms - parse_duration_ms(stripped)
    except ValueError:
        pass
    try:
        moment = dt.datetime.fromisoformat(stripped)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither a duration (30 min, 1h, 7d) nor a timestamp (2024-05-14 00:00:00)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return int(moment.timestamp() * 1000)


def iso_utc(epoch_ms: int, timespec: str = "auto") -> str:
    """Epoch milliseconds as an ISO-8601 UTC timestamp (`2024-05-14T00:00:00+00:00`)."""
    return dt.datetime.fromtimestamp(epoch_ms / 1000, dt.timezone.utc).isoformat(timespec=timespec)
