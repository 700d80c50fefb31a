"""How the page writes sizes, durations and times: short, exact enough, the same everywhere."""

from __future__ import annotations

import datetime as dt

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def size_text(value: float) -> str:
    """1536 -> '1.5 KiB'; whole bytes below 1 KiB."""
    number, unit = float(value), 0
    while abs(number) >= 1024 and unit < len(_UNITS) - 1:
        number /= 1024
        unit += 1
    if unit == 0:
        return f"{int(number)} B"
    return f"{number:.1f} {_UNITS[unit]}" if abs(number) < 100 else f"{number:.0f} {_UNITS[unit]}"


def duration_text(millis: float) -> str:
    """A duration in its two largest units: '3 d 4 h', '12 min 5 s', '800 ms'."""
    if millis < 1000:
        return f"{int(millis)} ms"
    seconds = int(millis // 1000)
    parts = []
    for unit, length in (("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1)):
        if seconds >= length:
            parts.append(f"{seconds // length} {unit}")
            seconds %= length
    return " ".join(parts[:2])


def time_text(millis: int) -> str:
    """Epoch milliseconds as UTC, to the second: '2026-11-26 17:44:48 UTC'."""
    moment = dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def share_text(part: int, whole: int) -> str:
    """'37%' (or '-' of nothing)."""
    return f"{100 * part / whole:.0f}%" if whole else "-"


def instant_text(iso: str) -> str:
    """A run record's ISO time ('2026-11-26T03:00:00.000+00:00') as `time_text` writes times; text
    that is no ISO time is shown as it is."""
    try:
        moment = dt.datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return time_text(int(moment.timestamp() * 1000))
