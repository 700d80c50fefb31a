"""The retention keys of expire-snapshots and expire-changelogs, and how a run's request resolves
over the table's options.

Both jobs take `retain_min`, `retain_max`, `older_than` and `max_deletes` over a table option each
(`snapshot.num-retained.*` / `snapshot.time-retained`, or their `changelog.` twins, which fall back
to the snapshot ones), plus the pace of their deletes; a key left out takes the option, and the
option Paimon's default. One model and one resolution, so that the two jobs read the same YAML the
same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from jobs.deletion.context import DeletePace
from jobs.runtime.config import check_instant
from paimon_format.model.instants import instant_ms


def retention_keys(kind: str) -> type[BaseModel]:
    """The keys mixed into the job's config model; `kind` names the options their defaults are
    (`snapshot` or `changelog`)."""
    return create_model(
        f"{kind.capitalize()}RetentionKeys",
        __config__=ConfigDict(extra="forbid"),
        __validators__={"_older_than": field_validator("older_than")(_older_than)},
        retain_min=(int | None, Field(default=None, ge=1, description=f"default: {kind}.num-retained.min")),
        retain_max=(int | None, Field(default=None, ge=1, description=f"default: {kind}.num-retained.max")),
        older_than=(
            str | None,
            Field(
                default=None,
                description="duration (1h, 7d) or UTC timestamp ('2024-05-14 00:00:00'); "
                f"default: {kind}.time-retained",
            ),
        ),
        max_deletes=(int | None, Field(default=None, ge=1, description="default: snapshot.expire.limit")),
        delete_batch_size=(int, Field(default=1000, ge=1, le=1000, description="files per delete call")),
        max_deletes_per_second=(
            float | None,
            Field(default=None, gt=0, description="overall file delete rate"),
        ),
    )


def _older_than(cls: type[BaseModel], value: str | None) -> str | None:
    return check_instant(value)


class RetentionKeys(Protocol):
    retain_min: int | None
    retain_max: int | None
    older_than: str | None
    max_deletes: int | None
    delete_batch_size: int
    max_deletes_per_second: float | None


@dataclass(frozen=True)
class RetentionRequest:
    """What a run asks for; None takes the table's option (and Paimon's default where that is unset)."""

    retain_min: int | None = None
    retain_max: int | None = None
    older_than: str | None = None  # a duration ago, or a UTC timestamp (`instant_ms`)
    max_deletes: int | None = None
    pace: DeletePace = DeletePace()

    @staticmethod
    def keys_of(config: RetentionKeys) -> dict[str, Any]:
        """The request's fields as a config gives them (for `of` of the request classes)."""
        return {
            "retain_min": config.retain_min,
            "retain_max": config.retain_max,
            "older_than": config.older_than,
            "max_deletes": config.max_deletes,
            "pace": DeletePace.of(config),
        }

    def over(
        self, retain_min: int, retain_max: int, time_retained_ms: int, max_deletes: int, now_ms: int
    ) -> dict[str, int]:
        """The settings' `retain_min`, `retain_max`, `cutoff_ms`, `max_deletes`: each asked value,
        else the table's (given here)."""
        cutoff_ms = (
            instant_ms(self.older_than, now_ms) if self.older_than is not None else now_ms - time_retained_ms
        )
        return {
            "retain_min": _or(self.retain_min, retain_min),
            "retain_max": _or(self.retain_max, retain_max),
            "cutoff_ms": cutoff_ms,
            "max_deletes": _or(self.max_deletes, max_deletes),
        }


def _or(asked: int | None, option: int) -> int:
    return asked if asked is not None else option
