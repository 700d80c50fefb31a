"""Table options: a typed, read-only view of `schema.options` with Paimon's defaults (spec §8).

A schema stores only the options a user set explicitly, always as strings. Every consumer needs the
*effective* value (explicit or Paimon's default) in a usable type, and must agree with Java on both
the default and the parsing rules, otherwise two writers of one table behave differently. This
module is that single place.

Parsing follows Java: memory sizes like `MemorySize.parseBytes`, durations like
`TimeUtils.parseDuration` (a bare number is milliseconds), booleans `true`/`false` in any case,
enums by their value in any case. Unknown option keys are kept untouched (`options`), because
Paimon's option space is open (connector options, `fields.*`, user keys) and a re-implementation
must never drop what it does not understand. A value that does not parse raises
`InvalidOptionError` naming the key and the value, at the time the option is read; `validate()`
checks every option this module knows at once (used when a table is created).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from paimon_format.errors import PaimonFormatError

T = TypeVar("T")

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)

# Option keys this module interprets (Java names).
BUCKET = "bucket"
BUCKET_KEY = "bucket-key"
FILE_FORMAT = "file.format"
FILE_COMPRESSION = "file.compression"
FILE_COMPRESSION_ZSTD_LEVEL = "file.compression.zstd-level"
FILE_SUFFIX_INCLUDE_COMPRESSION = "file.suffix.include.compression"
MANIFEST_FORMAT = "manifest.format"
MANIFEST_COMPRESSION = "manifest.compression"
MANIFEST_TARGET_FILE_SIZE = "manifest.target-file-size"
MANIFEST_FULL_COMPACTION_THRESHOLD_SIZE = "manifest.full-compaction-threshold-size"
MANIFEST_MERGE_MIN_COUNT = "manifest.merge-min-count"
TARGET_FILE_SIZE = "target-file-size"
PARTITION_DEFAULT_NAME = "partition.default-name"
PARTITION_LEGACY_NAME = "partition.legacy-name"
PARTITION_EXPIRATION_TIME = "partition.expiration-time"
PARTITION_EXPIRATION_CHECK_INTERVAL = "partition.expiration-check-interval"
SNAPSHOT_NUM_RETAINED_MIN = "snapshot.num-retained.min"
SNAPSHOT_NUM_RETAINED_MAX = "snapshot.num-retained.max"
SNAPSHOT_TIME_RETAINED = "snapshot.time-retained"
SNAPSHOT_EXPIRE_LIMIT = "snapshot.expire.limit"
SNAPSHOT_IGNORE_EMPTY_COMMIT = "snapshot.ignore-empty-commit"
CHANGELOG_NUM_RETAINED_MIN = "changelog.num-retained.min"
CHANGELOG_NUM_RETAINED_MAX = "changelog.num-retained.max"
CHANGELOG_TIME_RETAINED = "changelog.time-retained"
CONSUMER_EXPIRATION_TIME = "consumer.expiration-time"
CONSUMER_CHANGELOG_ONLY = "consumer.changelog-only"
COMMIT_MAX_RETRIES = "commit.max-retries"
COMMIT_TIMEOUT = "commit.timeout"
COMMIT_MIN_RETRY_WAIT = "commit.min-retry-wait"
COMMIT_MAX_RETRY_WAIT = "commit.max-retry-wait"
MERGE_ENGINE = "merge-engine"
CHANGELOG_PRODUCER = "changelog-producer"
DELETION_VECTORS_ENABLED = "deletion-vectors.enabled"
DATA_FILE_THIN_MODE = "data-file.thin-mode"
PRIMARY_KEY_NULLABLE = "primary-key.nullable"
SEQUENCE_FIELD = "sequence.field"
METADATA_STATS_MODE = "metadata.stats-mode"
METADATA_STATS_DENSE_STORE = "metadata.stats-dense-store"
NUM_SORTED_RUN_COMPACTION_TRIGGER = "num-sorted-run.compaction-trigger"
WRITE_ONLY = "write-only"
DYNAMIC_BUCKET_TARGET_ROW_NUM = "dynamic-bucket.target-row-num"
DATA_FILE_PREFIX = "data-file.prefix"
CHANGELOG_FILE_PREFIX = "changelog-file.prefix"
DATA_FILE_PATH_DIRECTORY = "data-file.path-directory"
FILE_INDEX_IN_MANIFEST_THRESHOLD = "file-index.in-manifest-threshold"
ROW_TRACKING_ENABLED = "row-tracking.enabled"
DATA_EVOLUTION_ENABLED = "data-evolution.enabled"

MERGE_ENGINES = ("deduplicate", "partial-update", "aggregation", "first-row")
CHANGELOG_PRODUCERS = ("none", "input", "full-compaction", "lookup")

_MIB = 1024 * 1024


class InvalidOptionError(PaimonFormatError, ValueError):
    """An option value does not parse (e.g. `bucket` = 'abc'); names the key and the value.

    Also a `ValueError`, so callers that validate user input generically catch it too.
    """

    def __init__(self, key: str, value: Any, reason: str) -> None:
        super().__init__(f"invalid value {value!r} for table option '{key}': {reason}")
        self.key = key
        self.value = value
        self.reason = reason


# -- Java MemorySize / TimeUtils ------------------------------------------------------------------

_MEMORY_UNITS: dict[str, int] = {}
for _labels, _multiplier in (
    (("b", "bytes"), 1),
    (("k", "kb", "kibibytes"), 1 << 10),
    (("m", "mb", "mebibytes"), 1 << 20),
    (("g", "gb", "gibibytes"), 1 << 30),
    (("t", "tb", "tebibytes"), 1 << 40),
):
    for _label in _labels:
        _MEMORY_UNITS[_label] = _multiplier

_NANOS_PER_MS = 1_000_000
# TimeUtils.TimeUnit labels: singular labels as-is, "plural" labels also with an "s".
_DURATION_UNITS_NANOS: dict[str, int] = {}
for _singular, _plural, _nanos in (
    (("d",), ("day",), 86_400 * 10**9),
    (("h",), ("hour",), 3_600 * 10**9),
    (("min", "m"), ("minute",), 60 * 10**9),
    (("s",), ("sec", "second"), 10**9),
    (("ms",), ("milli", "millisecond"), 10**6),
    (("µs",), ("micro", "microsecond"), 10**3),
    (("ns",), ("nano", "nanosecond"), 1),
):
    for _label in _singular:
        _DURATION_UNITS_NANOS[_label] = _nanos
    for _label in _plural:
        _DURATION_UNITS_NANOS[_label] = _nanos
        _DURATION_UNITS_NANOS[_label + "s"] = _nanos


def _split_number(text: str, what: str) -> tuple[int, str]:
    """Leading ASCII digits and the (trimmed, lower-cased) rest, as Java's parsers split them."""
    if text is None:
        raise ValueError(f"{what} must not be None")
    trimmed = str(text).strip()
    if not trimmed:
        raise ValueError(f"{what} is an empty or whitespace-only string")
    pos = 0
    while pos < len(trimmed) and "0" <= trimmed[pos] <= "9":
        pos += 1
    number, unit = trimmed[:pos], trimmed[pos:].strip().lower()
    if not number:
        raise ValueError(f"{what} {text!r} does not start with a number")
    value = int(number)
    if value > LONG_MAX:
        raise ValueError(f"the value '{number}' cannot be represented as a 64-bit number (numeric overflow)")
    return value, unit


def parse_memory_size(text: str) -> int:
    """Bytes of a memory size such as '8 mb', '128MB', '1 gb', '64kb' or '1024' (plain bytes).

    Java `MemorySize.parseBytes` rules: non-negative integer, optional unit after optional spaces,
    units case-insensitive and binary (k = 1024): b/bytes, k/kb/kibibytes, m/mb/mebibytes,
    g/gb/gibibytes, t/tb/tebibytes. No fractions, no sign; the result must fit in a Java long.
    """
    value, unit = _split_number(text, "memory size")
    if not unit:
        return value
    multiplier = _MEMORY_UNITS.get(unit)
    if multiplier is None:
        raise ValueError(
            f"memory size unit '{unit}' in {text!r} is not one of b, bytes, k, kb, kibibytes, m, mb, "
            "mebibytes, g, gb, gibibytes, t, tb, tebibytes"
        )
    result = value * multiplier
    if result > LONG_MAX:
        raise ValueError(
            f"the value {text!r} cannot be represented as a 64-bit number of bytes (numeric overflow)"
        )
    return result


def parse_duration_ms(text: str) -> int:
    """Milliseconds of a duration such as '1 h', '1h', '30 min', '10 s', '1 d', '100 ms' or '500'.

    Java `TimeUtils.parseDuration` rules: non-negative integer then an optional unit, case-insensitive:
    d/day(s), h/hour(s), m/min/minute(s), s/sec(s)/second(s), ms/milli(s)/millisecond(s),
    µs/micro(s)/microsecond(s), ns/nano(s)/nanosecond(s). A bare number is milliseconds. Sub-millisecond
    results are truncated like `Duration.toMillis()`.
    """
    value, unit = _split_number(text, "duration")
    if not unit:
        return value
    nanos_per_unit = _DURATION_UNITS_NANOS.get(unit)
    if nanos_per_unit is None:
        raise ValueError(
            f"time unit '{unit}' in {text!r} is not one of d, day, h, hour, m, min, minute, s, sec, second, "
            "ms, milli, millisecond, µs, micro, microsecond, ns, nano, nanosecond (or their plurals)"
        )
    millis = value * nanos_per_unit // _NANOS_PER_MS
    if millis > LONG_MAX:
        raise ValueError(
            f"the duration {text!r} cannot be represented in 64-bit milliseconds (numeric overflow)"
        )
    return millis


_INT_RE = re.compile(r"[+-]?[0-9]+")


def _parse_integer(text: str, low: int, high: int) -> int:
    trimmed = str(text).strip()
    if not _INT_RE.fullmatch(trimmed):
        raise ValueError("not an integer")
    value = int(trimmed)
    if not low <= value <= high:
        raise ValueError(f"out of range [{low}, {high}]")
    return value


def _parse_int(text: str) -> int:
    return _parse_integer(text, INT_MIN, INT_MAX)


def _parse_long(text: str) -> int:
    return _parse_integer(text, LONG_MIN, LONG_MAX)


def _parse_bool(text: str) -> bool:
    lowered = str(text).strip().lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise ValueError("expected true or false (case-insensitive)")


def _enum_parser(allowed: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        lowered = str(text).strip().lower()
        if lowered not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}")
        return lowered

    return parse


def _parse_list(text: str) -> list[str]:
    """Comma-separated names, trimmed, empty items dropped (Java `sequence.field` style)."""
    return [item.strip() for item in str(text).split(",") if item.strip()]


class CoreOptions(Mapping[str, str]):
    """Effective table options: explicit values from the schema, else Paimon's defaults.

    Behaves as a read-only mapping of the *explicit* options (unknown keys included), and adds typed
    properties for the options the format layer acts on. Reading a property whose value is invalid
    raises `InvalidOptionError`; construction never fails, so an odd option in an existing table only
    hurts the code paths that actually need it (as in Java).
    """

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        self._options: dict[str, str] = {str(k): str(v) for k, v in (options or {}).items()}

    # -- mapping of the explicit options -----------------------------------------------------------

    def __getitem__(self, key: str) -> str:
        return self._options[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._options)

    def __len__(self) -> int:
        return len(self._options)

    def __repr__(self) -> str:
        return f"CoreOptions({self._options!r})"

    def to_map(self) -> dict[str, str]:
        """A copy of the explicit options (what a schema file stores)."""
        return dict(self._options)

    def _typed(self, key: str, parser: Callable[[str], T], default: T) -> T:
        raw = self._options.get(key)
        if raw is None:
            return default
        try:
            return parser(raw)
        except ValueError as error:
            raise InvalidOptionError(key, raw, str(error)) from None

    def _text(self, key: str, default: str | None) -> str | None:
        raw = self._options.get(key)
        return default if raw is None else raw

    # -- bucketing and keys ------------------------------------------------------------------------

    @property
    def bucket(self) -> int:
        """-1 = dynamic (PK) / unaware (append), -2 = postpone (PK), >0 = fixed bucket count."""
        return self._typed(BUCKET, _parse_int, -1)

    @property
    def bucket_key(self) -> list[str] | None:
        """Explicit `bucket-key` columns, split on ',' without trimming (as Java does); None when unset."""
        raw = self._options.get(BUCKET_KEY)
        if raw is None or not raw.strip():
            return None
        return raw.split(",")

    @property
    def sequence_field(self) -> list[str]:
        return self._typed(SEQUENCE_FIELD, _parse_list, [])

    @property
    def dynamic_bucket_target_row_num(self) -> int:
        return self._typed(DYNAMIC_BUCKET_TARGET_ROW_NUM, _parse_long, 2_000_000)

    # -- files -------------------------------------------------------------------------------------

    @property
    def file_format(self) -> str:
        """Data file format, lower-cased (`parquet` unless set; old schemas get `orc` on read)."""
        return (self._text(FILE_FORMAT, "parquet") or "parquet").strip().lower()

    @property
    def file_compression(self) -> str:
        return (self._text(FILE_COMPRESSION, "zstd") or "zstd").strip().lower()

    @property
    def file_compression_zstd_level(self) -> int:
        return self._typed(FILE_COMPRESSION_ZSTD_LEVEL, _parse_int, 1)

    @property
    def file_suffix_include_compression(self) -> bool:
        return self._typed(FILE_SUFFIX_INCLUDE_COMPRESSION, _parse_bool, False)

    @property
    def manifest_format(self) -> str:
        return (self._text(MANIFEST_FORMAT, "avro") or "avro").strip().lower()

    @property
    def manifest_compression(self) -> str:
        return (self._text(MANIFEST_COMPRESSION, "zstd") or "zstd").strip().lower()

    @property
    def manifest_target_file_size(self) -> int:
        return self._typed(MANIFEST_TARGET_FILE_SIZE, parse_memory_size, 8 * _MIB)

    @property
    def manifest_full_compaction_threshold_size(self) -> int:
        return self._typed(MANIFEST_FULL_COMPACTION_THRESHOLD_SIZE, parse_memory_size, 16 * _MIB)

    @property
    def manifest_merge_min_count(self) -> int:
        return self._typed(MANIFEST_MERGE_MIN_COUNT, _parse_int, 30)

    def target_file_size(self, has_primary_key: bool) -> int:
        """`target-file-size`, else 128 MB for primary-key tables and 256 MB for append tables."""
        return self._typed(TARGET_FILE_SIZE, parse_memory_size, (128 if has_primary_key else 256) * _MIB)

    @property
    def data_file_prefix(self) -> str:
        return self._text(DATA_FILE_PREFIX, "data-") or ""

    @property
    def changelog_file_prefix(self) -> str:
        return self._text(CHANGELOG_FILE_PREFIX, "changelog-") or ""

    @property
    def data_file_path_directory(self) -> str | None:
        """Optional sub-directory of the table root that holds partition/bucket directories."""
        value = self._text(DATA_FILE_PATH_DIRECTORY, None)
        return value if value else None

    @property
    def file_index_in_manifest_threshold(self) -> int:
        return self._typed(FILE_INDEX_IN_MANIFEST_THRESHOLD, parse_memory_size, 500)

    @property
    def metadata_stats_mode(self) -> str:
        return self._text(METADATA_STATS_MODE, "truncate(16)") or "truncate(16)"

    @property
    def metadata_stats_dense_store(self) -> bool:
        return self._typed(METADATA_STATS_DENSE_STORE, _parse_bool, True)

    @property
    def data_file_thin_mode(self) -> bool:
        return self._typed(DATA_FILE_THIN_MODE, _parse_bool, False)

    # -- partitions --------------------------------------------------------------------------------

    @property
    def partition_default_name(self) -> str:
        return self._text(PARTITION_DEFAULT_NAME, "__DEFAULT_PARTITION__") or "__DEFAULT_PARTITION__"

    @property
    def partition_legacy_name(self) -> bool:
        return self._typed(PARTITION_LEGACY_NAME, _parse_bool, True)

    @property
    def partition_expiration_time_ms(self) -> int | None:
        return self._typed(PARTITION_EXPIRATION_TIME, parse_duration_ms, None)

    @property
    def partition_expiration_check_interval_ms(self) -> int:
        return self._typed(PARTITION_EXPIRATION_CHECK_INTERVAL, parse_duration_ms, 3_600_000)

    # -- snapshots and changelogs ------------------------------------------------------------------

    @property
    def snapshot_num_retained_min(self) -> int:
        return self._typed(SNAPSHOT_NUM_RETAINED_MIN, _parse_int, 10)

    @property
    def snapshot_num_retained_max(self) -> int:
        return self._typed(SNAPSHOT_NUM_RETAINED_MAX, _parse_int, INT_MAX)

    @property
    def snapshot_time_retained_ms(self) -> int:
        return self._typed(SNAPSHOT_TIME_RETAINED, parse_duration_ms, 3_600_000)

    @property
    def snapshot_expire_limit(self) -> int:
        return self._typed(SNAPSHOT_EXPIRE_LIMIT, _parse_int, 50)

    @property
    def snapshot_ignore_empty_commit(self) -> bool | None:
        """None when unset: Paimon then ignores empty batch commits and keeps empty streaming ones."""
        return self._typed(SNAPSHOT_IGNORE_EMPTY_COMMIT, _parse_bool, None)

    @property
    def changelog_num_retained_min(self) -> int:
        """Falls back to the snapshot setting, as in Java."""
        return self._typed(CHANGELOG_NUM_RETAINED_MIN, _parse_int, self.snapshot_num_retained_min)

    @property
    def changelog_num_retained_max(self) -> int:
        return self._typed(CHANGELOG_NUM_RETAINED_MAX, _parse_int, self.snapshot_num_retained_max)

    @property
    def changelog_time_retained_ms(self) -> int:
        return self._typed(CHANGELOG_TIME_RETAINED, parse_duration_ms, self.snapshot_time_retained_ms)

    @property
    def consumer_expiration_time_ms(self) -> int | None:
        """None when unset: consumers never expire (Paimon's default)."""
        return self._typed(CONSUMER_EXPIRATION_TIME, parse_duration_ms, None)

    @property
    def consumer_changelog_only(self) -> bool:
        """True: consumers hold long-lived changelogs only, never snapshots (as Java)."""
        return self._typed(CONSUMER_CHANGELOG_ONLY, _parse_bool, False)

    # -- commit ------------------------------------------------------------------------------------

    @property
    def commit_max_retries(self) -> int:
        return self._typed(COMMIT_MAX_RETRIES, _parse_int, 10)

    @property
    def commit_timeout_ms(self) -> int | None:
        """None = no time limit (Paimon's default); only the retry count bounds a commit."""
        return self._typed(COMMIT_TIMEOUT, parse_duration_ms, None)

    @property
    def commit_min_retry_wait_ms(self) -> int:
        return self._typed(COMMIT_MIN_RETRY_WAIT, parse_duration_ms, 10)

    @property
    def commit_max_retry_wait_ms(self) -> int:
        return self._typed(COMMIT_MAX_RETRY_WAIT, parse_duration_ms, 10_000)

    @property
    def write_only(self) -> bool:
        return self._typed(WRITE_ONLY, _parse_bool, False)

    # -- primary-key tables ------------------------------------------------------------------------

    @property
    def merge_engine(self) -> str:
        return self._typed(MERGE_ENGINE, _enum_parser(MERGE_ENGINES), "deduplicate")

    @property
    def changelog_producer(self) -> str:
        return self._typed(CHANGELOG_PRODUCER, _enum_parser(CHANGELOG_PRODUCERS), "none")

    @property
    def deletion_vectors_enabled(self) -> bool:
        return self._typed(DELETION_VECTORS_ENABLED, _parse_bool, False)

    @property
    def primary_key_nullable(self) -> bool:
        return self._typed(PRIMARY_KEY_NULLABLE, _parse_bool, False)

    @property
    def num_sorted_run_compaction_trigger(self) -> int:
        return self._typed(NUM_SORTED_RUN_COMPACTION_TRIGGER, _parse_int, 5)

    @property
    def row_tracking_enabled(self) -> bool:
        return self._typed(ROW_TRACKING_ENABLED, _parse_bool, False)

    @property
    def data_evolution_enabled(self) -> bool:
        return self._typed(DATA_EVOLUTION_ENABLED, _parse_bool, False)

    # -- validation --------------------------------------------------------------------------------

    def validate(self) -> None:
        """Parse every option this class knows, so a bad value fails at table creation, not later.

        Also checks the cross-option rules Java enforces on schemas (retention min <= max, >= 1).
        """
        for name in dir(type(self)):
            attribute = getattr(type(self), name)
            if isinstance(attribute, property):
                getattr(self, name)
        self.target_file_size(True)
        if self.snapshot_num_retained_min < 1:
            raise InvalidOptionError(
                SNAPSHOT_NUM_RETAINED_MIN, self.snapshot_num_retained_min, "should be at least 1"
            )
        if self.snapshot_num_retained_min > self.snapshot_num_retained_max:
            raise InvalidOptionError(
                SNAPSHOT_NUM_RETAINED_MIN,
                self.snapshot_num_retained_min,
                f"should not be larger than {SNAPSHOT_NUM_RETAINED_MAX} ({self.snapshot_num_retained_max})",
            )
        if self.changelog_num_retained_min < 1:
            raise InvalidOptionError(
                CHANGELOG_NUM_RETAINED_MIN, self.changelog_num_retained_min, "should be at least 1"
            )
        if self.changelog_num_retained_min > self.changelog_num_retained_max:
            raise InvalidOptionError(
                CHANGELOG_NUM_RETAINED_MIN,
                self.changelog_num_retained_min,
                f"should not be larger than {CHANGELOG_NUM_RETAINED_MAX} ({self.changelog_num_retained_max})",
            )
        if self.commit_max_retries < 0:
            raise InvalidOptionError(COMMIT_MAX_RETRIES, self.commit_max_retries, "must not be negative")


def options_to_strings(options: Mapping[str, Any] | None) -> dict[str, str]:
    """Option values as the strings a schema stores: booleans as 'true'/'false', numbers via str().

    Why: callers pass Python values (`{"bucket": 4, "write-only": True}`) but Java reads only
    strings, and `str(True)` would be 'True', which Java's boolean parser accepts but other tools
    may not. None values are refused: Paimon has no "unset" marker in a schema file.
    """
    result: dict[str, str] = {}
    for key, value in (options or {}).items():
        if not isinstance(key, str):
            raise InvalidOptionError(str(key), value, "option keys must be strings")
        if value is None:
            raise InvalidOptionError(key, value, "option values must not be None (leave the key out instead)")
        if isinstance(value, bool):
            result[key] = "true" if value else "false"
        elif isinstance(value, (int, float, str)):
            result[key] = str(value)
        else:
            raise InvalidOptionError(key, value, "option values must be strings, numbers or booleans")
    return result
