"""The `maintain` YAML: tables by name or glob, defaults and per-table overrides per operation.

Every operation block (`expire_snapshots: {...}`) is validated with that operation's own
CONFIG_MODEL, so a typo in a block fails at load time with its key path
(`defaults.expire_snapshots.retain_mni: unknown key`) before any table is listed or Spark starts,
whichever tables the block will apply to. The keys every single-table job has at its top level
(warehouse, storage_options, spark, allow_unsafe_overwrite_commit, lock; table) are given once, at the
top of the maintain file, and refused inside a block.

A block is validated twice: at load time as a *partial* block (the operation's keys may be spread
over defaults and overrides, so a required key may be missing there), and once per table after
merging, as the operation's complete config (`plan_tables`), still before Spark starts.

Merging: for each operation, the `defaults` block first, then every `overrides` entry whose `match`
pattern matches the table, in file order; each key of a later block replaces the earlier value
(last match wins, key by key). An operation runs for a table when some block for it applies and
the merged `enabled` is not false.

A file without a `defaults` section gets the built-in defaults (`BUILT_IN_DEFAULTS`): the table's
own maintenance, each operation with the table's options and Paimon's defaults, some only where a
table option asks for them. Overrides merge over them as over a written `defaults` section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from pydantic import BaseModel, Field, create_model, field_validator, model_validator

from jobs.report.settings import ReportSettings
from jobs.runtime.config import ConfigError, StrictModel, TableJobConfig, validate
from jobs.runtime.local_exec import LocalRunOptions
from jobs.runtime.registry import OPERATIONS as REGISTERED
from jobs.runtime.registry import OperationNotImplemented, load
from jobs.runtime.table_globs import matches, split_pattern
from jobs.runtime.table_lock import LockConfig

# The safe order: automatic tags created first (before any expiry can remove the snapshots they
# tag), partitions dropped next (their files become unreferenced by the new snapshot; the idle ones
# that stay are marked done after them, never one about to be dropped), then tags
# deleted and expired (what only they used goes, so snapshot expiry no longer keeps it), snapshots
# expired next (deletes what only expired snapshots used, including those files), data files
# compacted on what is left (no work on dropped partitions), manifests compacted after that (so
# they also absorb the compaction's DELETE/ADD entries), orphans removed last (after every planned
# deletion). rollback is a one-off decision, never a maintenance step: it has no block.
OPERATIONS: tuple[tuple[str, str], ...] = (
    ("create_tag", "create-tag"),
    ("expire_partitions", "expire-partitions"),
    ("mark_partition_done", "mark-partition-done"),
    ("delete_tag", "delete-tag"),
    ("expire_tags", "expire-tags"),
    ("expire_snapshots", "expire-snapshots"),
    ("compact", "compact"),
    ("compact_manifests", "compact-manifests"),
    ("remove_orphan_files", "remove-orphan-files"),
)
TOP_LEVEL_KEYS = (
    "warehouse",
    "table",
    "storage_options",
    "spark",
    "allow_unsafe_overwrite_commit",
    "io_parallelism",
    "lock",  # maintain's own lock covers its steps: they never take it again
    *LocalRunOptions.model_fields,  # local, local_max_entries, local_max_files: one choice per run
)


@dataclass(frozen=True)
class BuiltInDefault:
    """One operation of the built-in defaults: its block, and the table option it depends on."""

    key: str  # the block key, e.g. expire_partitions
    block: dict[str, Any]  # keys handed to the operation; {} = the table's options, Paimon's defaults
    only_if_options: tuple[str, ...] = ()  # run only on tables whose options ask for it (any of these)


# What `maintain` does when the file has no `defaults` section. Add an operation here (and to
# OPERATIONS) to make it part of every table's default maintenance.
BUILT_IN_DEFAULTS: tuple[BuiltInDefault, ...] = (
    BuiltInDefault("create_tag", {"automatic": True}, only_if_options=("tag.automatic-creation",)),
    BuiltInDefault("expire_partitions", {}, only_if_options=("partition.expiration-time",)),
    # partitions idle for partition.idle-time-to-done marked done (Paimon's _SUCCESS file)
    BuiltInDefault("mark_partition_done", {}, only_if_options=("partition.idle-time-to-done",)),
    BuiltInDefault("expire_tags", {}, only_if_options=("tag.num-retained-max", "tag.default-time-retained")),
    BuiltInDefault("expire_snapshots", {}),
    # write-only tables leave compaction to a dedicated job (Paimon's `write-only` option): this one
    BuiltInDefault("compact", {"skip_unsupported": True}, only_if_options=("write-only",)),
    BuiltInDefault("compact_manifests", {"mode": "auto"}),
    BuiltInDefault("remove_orphan_files", {}),
)

# Option values that mean "not asked for": Paimon's defaults of the options above.
_NOT_ASKED = {"", "false", "none"}


def table_asks_for(options: dict[str, str], names: tuple[str, ...]) -> bool:
    """Whether a table's options ask for a built-in default that runs only on request.

    An option set to its "off" value (`write-only: false`, `tag.automatic-creation: none`) does not
    ask, so a table that spells out Paimon's default is maintained like one that leaves it unset.
    """
    return any(str(options.get(name, "")).strip().lower() not in _NOT_ASKED for name in names)


BUILT_IN = "built-in defaults"


def _refuse_top_level_keys(cls: type[BaseModel], data: Any) -> Any:
    if isinstance(data, dict):
        misplaced = [key for key in TOP_LEVEL_KEYS if key in data]
        if misplaced:
            raise ValueError(
                f"{', '.join(misplaced)}: set at the top level of the maintain config, not per operation"
            )
    return data


def _refuse_unavailable(operation: str, module: str):
    def check(cls: type[BaseModel], data: Any) -> Any:
        if isinstance(data, dict) and data.get("enabled", True) is not False:
            raise ValueError(
                f"operation {operation} is not available in this installation (no module {module}); "
                "remove the block or set enabled: false"
            )
        return data

    return check


def _partial_block_model(key: str, operation: str) -> type[BaseModel]:
    """The operation's CONFIG_MODEL with `enabled` added, top-level keys refused, required keys optional."""
    try:
        base: type[TableJobConfig] = load(operation).CONFIG_MODEL
    except OperationNotImplemented:
        return create_model(
            f"{key}_unavailable",
            __base__=StrictModel,
            __validators__={
                "_unavailable": model_validator(mode="before")(
                    _refuse_unavailable(operation, REGISTERED[operation].module)
                )
            },
            enabled=(bool, Field(default=True, description="false: skip this operation")),
        )
    fields: dict[str, Any] = {
        "enabled": (bool, Field(default=True, description="false: skip this operation"))
    }
    for name, info in base.model_fields.items():
        if name in TOP_LEVEL_KEYS:
            refused = Field(default=None, exclude=True, description="refused in a block: set once at the top")
            fields[name] = (Optional[Any], refused)  # noqa: UP045 - runtime type
        elif info.is_required():
            optional = info._copy() if hasattr(info, "_copy") else info.__copy__()
            optional.default = None
            fields[name] = (Optional[info.annotation], optional)  # noqa: UP045 - runtime type
    return create_model(
        f"{key}_block",
        __base__=base,
        __validators__={"_top_level": model_validator(mode="before")(_refuse_top_level_keys)},
        **fields,
    )


BLOCK_MODELS: dict[str, type[BaseModel]] = {key: _partial_block_model(key, name) for key, name in OPERATIONS}
_BLOCK_FIELDS: dict[str, Any] = {key: (Optional[model], None) for key, model in BLOCK_MODELS.items()}  # noqa: UP045

Defaults = create_model("MaintainDefaults", __base__=StrictModel, **_BLOCK_FIELDS)


def _pattern(value: str) -> str:
    split_pattern(value)
    return value


class _OverrideBase(StrictModel):
    match: str = Field(description="table name or glob, e.g. db.events_*")

    @field_validator("match")
    @classmethod
    def _match(cls, value: str) -> str:
        return _pattern(value)


Override = create_model("MaintainOverride", __base__=_OverrideBase, **_BLOCK_FIELDS)


class MaintainConfig(StrictModel, LocalRunOptions):
    """The whole maintain file."""

    warehouse: str = Field(description="fsspec URL of the warehouse: /path, file://, s3://, memory://")
    storage_options: dict[str, Any] = Field(default_factory=dict, description="handed to fsspec")
    spark: dict[str, Any] | None = Field(
        default=None, description="Spark settings; under spark-submit only those it was not given"
    )
    allow_unsafe_overwrite_commit: bool = Field(
        default=False,
        description="accept exists-check-then-write commits on stores without create-if-absent, for every "
        "table (safe only with a single writer)",
    )
    io_parallelism: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="storage requests each process keeps in flight, for every table; default 64 on "
        "object stores, 4 on local disk",
    )
    tables: list[str] = Field(min_length=1, description="names or globs: db.events, db.*, *.events_*")
    exclude: list[str] = Field(default_factory=list, description="names or globs left out")
    strict: bool = Field(default=False, description="a pattern that matches no table is an error (exit 2)")
    parallelism: int = Field(default=4, ge=1, le=64, description="tables maintained at the same time")
    scheduler_pool: str | None = Field(default=None, description="Spark FAIR scheduler pool for the jobs")
    lock: LockConfig = Field(
        default_factory=LockConfig,
        description="a lock file per table, so that two maintain runs never work on the same table at once",
    )
    defaults: Optional[Defaults] = Field(  # type: ignore[valid-type]  # noqa: UP045 - runtime type
        default=None,
        description="blocks for every table; leave out for the built-in defaults: expire-snapshots, "
        "compact-manifests (auto) and remove-orphan-files with each table's options, expire-partitions "
        "where the table sets partition.expiration-time, mark-partition-done where it sets "
        "partition.idle-time-to-done",
    )
    overrides: list[Override] = Field(  # type: ignore[valid-type]
        default_factory=list,
        description="blocks for the tables `match` names, merged over the defaults key by key in file "
        "order (the last matching entry wins)",
    )
    report: ReportSettings | None = Field(
        default=None,
        description="the warehouse health page (docs/health-report.md): written to `out` after each run, "
        "with the run records of `records`; `python -m jobs report` reads this block too",
    )

    @field_validator("tables", "exclude")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return [_pattern(pattern) for pattern in value]

    @field_validator("warehouse")
    @classmethod
    def _warehouse(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must be a path or URL")
        protocol, separator, rest = value.rpartition("://")
        if separator:
            return f"{protocol}://{rest.rstrip('/') or rest}"
        return value.rstrip("/") or "/"


@dataclass(frozen=True)
class Step:
    """One operation to run on one table, with its complete, validated config."""

    key: str  # expire_snapshots
    operation: str  # expire-snapshots
    config: TableJobConfig
    sources: tuple[str, ...]  # where its keys came from: defaults, overrides[2]
    only_if_options: tuple[str, ...] = ()  # run only if the table's options ask for it (built-in defaults)


@dataclass(frozen=True)
class TablePlan:
    table: str
    steps: tuple[Step, ...]


def merged_block(config: MaintainConfig, table: str, key: str) -> tuple[dict[str, Any], list[str]] | None:
    """The keys the user set for operation `key` on `table`, merged; None when no block applies."""
    merged: dict[str, Any] = {}
    sources: list[str] = []
    if config.defaults is None:
        built_in = next((item for item in BUILT_IN_DEFAULTS if item.key == key), None)
        if built_in is not None:
            merged.update(built_in.block)
            sources.append(BUILT_IN)
        blocks = []
    else:
        blocks = [("defaults", getattr(config.defaults, key))]
    blocks += [
        (f"overrides[{index}]", getattr(override, key))
        for index, override in enumerate(config.overrides)
        if matches(override.match, table)
    ]
    for source, block in blocks:
        if block is None:
            continue
        merged.update(block.model_dump(exclude_unset=True, exclude=set(TOP_LEVEL_KEYS)))
        sources.append(source)
    return (merged, sources) if sources else None


def plan_tables(
    config: MaintainConfig, tables: list[str], source: str = "maintain config"
) -> list[TablePlan]:
    """Each table's steps in the safe order, each config complete; ConfigError listing every problem."""
    plans: list[TablePlan] = []
    problems: list[str] = []
    top_level = {
        "warehouse": config.warehouse,
        "storage_options": config.storage_options,
        "spark": config.spark,
        "allow_unsafe_overwrite_commit": config.allow_unsafe_overwrite_commit,
        "io_parallelism": config.io_parallelism,
    }
    local_keys = {name: getattr(config, name) for name in LocalRunOptions.model_fields}
    for table in tables:
        steps: list[Step] = []
        for key, operation in OPERATIONS:
            block = merged_block(config, table, key)
            if block is None:
                continue
            keys, sources = block
            if not keys.pop("enabled", True):
                continue
            model = load(operation).CONFIG_MODEL
            local = local_keys if issubclass(model, LocalRunOptions) else {}
            try:
                op_config = validate(
                    {**keys, **top_level, **local, "table": table},
                    model,
                    f"{source}: table {table}: {key} (from {' + '.join(sources)})",
                )
            except ConfigError as error:
                problems.append(str(error))
                continue
            condition: tuple[str, ...] = ()
            if sources == [BUILT_IN]:
                condition = next(item.only_if_options for item in BUILT_IN_DEFAULTS if item.key == key)
            steps.append(Step(key, operation, op_config, tuple(sources), condition))
        plans.append(TablePlan(table, tuple(steps)))
    if problems:
        raise ConfigError("\n".join(problems))
    return plans
