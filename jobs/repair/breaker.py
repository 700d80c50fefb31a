"""The ratio breaker the repair jobs share.

A repair that finds a large part of a table's files missing is far more often looking at a wrong
path, a permissions problem or a storage outage than at a real loss, and its commit would silently
empty the table. So both repair jobs refuse (exit 3, nothing committed) beyond a ratio.
"""

from __future__ import annotations

from jobs.runtime.errors import SafetyRefusal


def refuse_beyond_ratio(table_path: str, missing: int, total: int, max_ratio: float, what: str) -> float:
    """The missing ratio (0 when there is nothing); SafetyRefusal when it exceeds `max_ratio`.
    `what` names the files counted ("live files", "manifests") and the key (`max_missing_ratio`)."""
    ratio = missing / total if total else 0.0
    if ratio > max_ratio:
        raise SafetyRefusal(
            f"{table_path}: {missing} of {total} {what} ({ratio:.1%}) are missing, more "
            f"than max_missing_ratio {max_ratio:.1%}: a wrong path or a storage outage rather "
            "than a loss? Nothing was committed; check the storage, or raise max_missing_ratio"
        )
    return ratio
