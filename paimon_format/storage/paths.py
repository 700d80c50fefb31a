"""Where every file of a Paimon table lives, and what a file name says it is (spec §1).

Readers recompute a data file's location as `<partition dir>/bucket-<b>/<file name>`, so the partition
directory text must be exactly what Java computes (`InternalRowPartitionComputer` +
`PartitionPathUtils`): one value rendering per type, a default name for null/blank values, and Hive-style
escaping. The file-name patterns let maintenance jobs tell Paimon files from anything else in a table
directory (orphan cleaning only ever considers files whose names Paimon would write).

Relative paths inside a table are plain strings joined with "/"; `FileIO.join` joins them to the root.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import struct
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from paimon_format.errors import UnsupportedOperationError

if TYPE_CHECKING:  # only the attributes root/precision/scale are used, see paimon_format.model.types
    from paimon_format.model.types import DataType

DEFAULT_PARTITION_NAME = "__DEFAULT_PARTITION__"
BUCKET_PREFIX = "bucket-"
POSTPONE_BUCKET = -2
DEFAULT_DATA_FILE_PREFIX = "data-"
DEFAULT_CHANGELOG_FILE_PREFIX = "changelog-"

# ---------------------------------------------------------------------------------------------
# table and bucket directories


def table_path(warehouse: str, database: str, table: str) -> str:
    """`<warehouse>/<database>.db/<table>`, the filesystem-catalog layout."""
    if not database or not table:
        raise ValueError(f"database and table names must not be empty: {database!r}.{table!r}")
    return f"{_strip_trailing_slashes(warehouse)}/{database}.db/{table}"


def bucket_dir(partition_dir: str, bucket: int) -> str:
    """Relative bucket directory: "dt=x/bucket-3", "bucket-0" unpartitioned, "bucket-postpone" for -2.

    Other negative buckets never name a directory (unaware-bucket tables write bucket 0), so they are
    rejected instead of producing "bucket--1".
    """
    if bucket == POSTPONE_BUCKET:
        name = f"{BUCKET_PREFIX}postpone"
    elif bucket >= 0:
        name = f"{BUCKET_PREFIX}{bucket}"
    else:
        raise ValueError(f"bucket {bucket} has no directory (only >= 0 or -2 = postpone)")
    partition_dir = partition_dir.strip("/")
    return f"{partition_dir}/{name}" if partition_dir else name


def new_data_file_name(prefix: str, uuid: str, counter: int, extension: str) -> str:
    """`<prefix><uuid>-<counter>.<extension>`, e.g. "data-<uuid>-0.parquet" (Java DataFilePathFactory).

    `extension` may be given with or without its leading dot ("parquet", ".zstd.parquet").
    """
    if not extension:
        raise ValueError("a data file needs an extension: readers pick the file format from it")
    if not extension.startswith("."):
        extension = "." + extension
    return f"{prefix}{uuid}-{counter}{extension}"


def _strip_trailing_slashes(root: str) -> str:
    """Drop trailing "/" but keep a bare scheme ("memory://") intact."""
    stripped = root.rstrip("/")
    return stripped + "//" if stripped.endswith(":") else stripped


# ---------------------------------------------------------------------------------------------
# escaping (PartitionPathUtils.escapePathName / unescapePathName)

_CHARS_TO_ESCAPE = frozenset(
    [chr(c) for c in range(0x20)] + list("\"#%'*/:=?\\\x7f{}[]^"),
)


def escape_path_name(text: str) -> str:
    """Escape one partition key or value: each char of §1's set becomes "%XX" (upper-case hex).

    Space and non-ASCII stay as they are. An empty text is an error in Java too: the caller substitutes
    the default partition name first.
    """
    if not text:
        raise ValueError("a partition path component must not be empty")
    return "".join(f"%{ord(ch):02X}" if ch in _CHARS_TO_ESCAPE else ch for ch in text)


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def unescape_path_name(text: str) -> str:
    """Inverse of `escape_path_name`: "%XX" with two hex digits becomes that char, anything else stays."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "%" and i + 2 < len(text) and set(text[i + 1 : i + 3]) <= _HEX_DIGITS:
            out.append(chr(int(text[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(ch)
            i += 1
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# partition directories


def partition_dir(
    values: Sequence[Any],
    keys: Sequence[str],
    types: Sequence[DataType],
    default_name: str = DEFAULT_PARTITION_NAME,
    legacy: bool = True,
) -> str:
    """The relative partition directory "k1=v1/k2=v2" ("" when unpartitioned), exactly as Java names it.

    `legacy` is the table option `partition.legacy-name` (default true), `default_name` is
    `partition.default-name`.
    """
    if not (len(values) == len(keys) == len(types)):
        raise ValueError(
            f"partition values, keys and types differ in length: {len(values)}, {len(keys)}, {len(types)}"
        )
    parts = []
    for value, key, data_type in zip(values, keys, types, strict=True):
        text = partition_value_text(value, data_type, default_name=default_name, legacy=legacy)
        parts.append(f"{escape_path_name(key)}={escape_path_name(text)}")
    return "/".join(parts)


def parse_partition_dir(relative_dir: str) -> dict[str, str]:
    """ "dt=x/hr=y" -> {"dt": "x", "hr": "y"} (unescaped texts; typed parsing is the caller's job)."""
    spec: dict[str, str] = {}
    for component in relative_dir.strip("/").split("/"):
        if not component:
            continue
        key, sep, value = component.partition("=")
        if not sep or not key:
            raise ValueError(f"not a partition directory component (k=v): {component!r} in {relative_dir!r}")
        spec[unescape_path_name(key)] = unescape_path_name(value)
    return spec


def partition_value_text(
    value: Any, data_type: DataType, default_name: str = DEFAULT_PARTITION_NAME, legacy: bool = True
) -> str:
    """The unescaped text of one partition value; null, "" and whitespace-only become `default_name`."""
    text = None if value is None else _render_value(value, data_type, legacy)
    if text is None or _is_java_blank(text):
        return default_name
    return text


def _render_value(value: Any, data_type: DataType, legacy: bool) -> str:
    """Java's `field.toString()` (legacy) or cast-to-STRING (non-legacy) of an internal value."""
    root = data_type.root
    if root == "BOOLEAN":
        return "true" if value else "false"
    if root in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
        return str(int(value))
    if root == "FLOAT":
        return java_float_to_string(value)
    if root == "DOUBLE":
        return java_double_to_string(value)
    if root == "DECIMAL":
        return _decimal_text(value, data_type.scale)
    if root in ("CHAR", "VARCHAR", "STRING"):
        return value if isinstance(value, str) else str(value)
    if root == "DATE":
        return str((value - dt.date(1970, 1, 1)).days) if legacy else value.isoformat()
    if root == "TIME":
        return str(_millis_of_day(value)) if legacy else _format_time(value, _precision(data_type, 0))
    if root == "TIMESTAMP":
        return local_date_time_text(value) if legacy else _format_timestamp(value, _precision(data_type, 6))
    if root == "TIMESTAMP_LTZ":
        return _ltz_text(value, data_type, legacy)
    if root in ("BINARY", "VARBINARY"):
        if legacy:
            raise UnsupportedOperationError(
                f"cannot name a partition directory after a {root} value with partition.legacy-name=true "
                "(Java would print the byte array's identity)"
            )
        return bytes(value).decode("utf-8", errors="replace")
    raise UnsupportedOperationError(f"cannot name a partition directory after a {root} value")


def _precision(data_type: DataType, default: int) -> int:
    precision = getattr(data_type, "precision", None)
    return default if precision is None else precision


# Java StringUtils.isNullOrWhitespaceOnly uses Character.isWhitespace: Unicode space separators except
# the non-breaking ones, plus the ASCII controls \t \n \x0b \f \r and \x1c-\x1f (not \x85).
_JAVA_WHITESPACE_CONTROLS = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")
_NON_BREAKING_SPACES = frozenset("\u00a0\u2007\u202f")


def _is_java_whitespace(ch: str) -> bool:
    if ch in _JAVA_WHITESPACE_CONTROLS:
        return True
    return unicodedata.category(ch) in ("Zs", "Zl", "Zp") and ch not in _NON_BREAKING_SPACES


def _is_java_blank(text: str) -> bool:
    return all(_is_java_whitespace(ch) for ch in text)


def _decimal_text(value: Any, scale: int | None) -> str:
    """BigDecimal.toPlainString at the type's scale (Paimon decimals always carry the declared scale)."""
    number = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
    if scale is not None and number.is_finite():
        number = number.quantize(decimal.Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP)
    return format(number, "f")


def _millis_of_day(value: dt.time) -> int:
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def local_date_time_text(value: dt.datetime) -> str:
    """java.time.LocalDateTime.toString: "2024-01-01T10:00", seconds only when not zero, the fraction
    in groups of three digits (nanoseconds from a pandas Timestamp too)."""
    text = f"{value.date().isoformat()}T{value.hour:02d}:{value.minute:02d}"
    nanos = value.microsecond * 1000 + int(getattr(value, "nanosecond", 0) or 0)
    if value.second or nanos:
        text += f":{value.second:02d}"
    if nanos:
        if nanos % 1_000_000 == 0:
            text += f".{nanos // 1_000_000:03d}"
        elif nanos % 1000 == 0:
            text += f".{nanos // 1000:06d}"
        else:
            text += f".{nanos:09d}"
    return text


def _format_timestamp(value: dt.datetime, precision: int) -> str:
    """DateTimeUtils.formatTimestamp: nine fraction digits, trailing zeros cut down to `precision`.

    So TIMESTAMP(0) gives "2024-01-01 10:00:00" and TIMESTAMP(6) gives "2024-01-01 10:00:00.000000".
    """
    text = f"{value.date().isoformat()} {value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    fraction = f"{value.microsecond * 1000:09d}"
    while len(fraction) > precision and fraction.endswith("0"):
        fraction = fraction[:-1]
    return f"{text}.{fraction}" if fraction else text


def _format_time(value: dt.time, precision: int) -> str:
    """DateTimeUtils.formatTimestampMillis: digits of the millis, stopping once only zeros are left."""
    text = f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    if precision <= 0:
        return text
    millis = value.microsecond // 1000
    digits = []
    while precision > 0:
        digits.append(str(millis // 100))
        millis = millis % 100 * 10
        if millis == 0:
            break
        precision -= 1
    return f"{text}.{''.join(digits)}"


def _ltz_text(value: dt.datetime, data_type: DataType, legacy: bool) -> str:
    """TIMESTAMP_LTZ: legacy prints the UTC fields; the cast prints the process's local time zone.

    An aware datetime is an instant; a naive one is taken as UTC wall-clock time (the internal value).
    """
    utc = value.astimezone(dt.timezone.utc) if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if legacy:
        return local_date_time_text(utc.replace(tzinfo=None))
    return _format_timestamp(utc.astimezone().replace(tzinfo=None), _precision(data_type, 6))


# ---------------------------------------------------------------------------------------------
# Java Float.toString / Double.toString (JDK 19+: shortest decimal that round-trips)


def java_double_to_string(value: float) -> str:
    """`Double.toString` as JDK 19+ prints it: "1.0", "1.0E10", "1.0E-5", "0.001", "NaN", "-Infinity".

    JDK <= 18 (FloatingDecimal) sometimes printed one more digit than needed; tables written by such a
    JVM may name a few float/double partitions differently.
    """
    value = float(value)
    return _java_floating_text(value, _shortest_digits(value, single=False))


def java_float_to_string(value: float) -> str:
    """`Float.toString` (JDK 19+) of the float32 nearest to `value`: 0.1 prints "0.1", not "0.100000001"."""
    single = struct.unpack(">f", struct.pack(">f", float(value)))[0]
    return _java_floating_text(single, _shortest_digits(single, single=True))


def _round_trips(text: str, value: float, single: bool) -> bool:
    parsed = float(text)
    if single:
        try:
            return struct.pack(">f", parsed) == struct.pack(">f", value)
        except OverflowError:
            return False
    return parsed == value


def _shortest_digits(value: float, single: bool) -> str:
    """The shortest "%g" text that reads back as `value`; one digit becomes two when that is closer.

    Java picks among decimals of length 1 or 2 when the shortest has one digit (so the smallest float
    prints "1.4E-45", not "1.0E-45").
    """
    if not math.isfinite(value) or value == 0:
        return repr(value)
    text = repr(value)
    if single:
        for precision in range(1, 10):
            candidate = f"{value:.{precision}g}"
            if _round_trips(candidate, value, single=True):
                text = candidate
                break
    if len(decimal.Decimal(text).normalize().as_tuple().digits) == 1:
        two_digits = f"{value:.2g}"
        if _round_trips(two_digits, value, single):
            text = two_digits
    return text


def _java_floating_text(value: float, digits_text: str) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digit_tuple, exponent = decimal.Decimal(digits_text).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    sci_exponent = len(digits) - 1 + exponent  # value = d.ddd * 10^sci_exponent
    prefix = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if sci_exponent >= 0:
            integer = digits[: sci_exponent + 1].ljust(sci_exponent + 1, "0")
            fraction = digits[sci_exponent + 1 :] or "0"
        else:
            integer, fraction = "0", "0" * (-sci_exponent - 1) + digits
        return f"{prefix}{integer}.{fraction}"
    return f"{prefix}{digits[0]}.{digits[1:] or '0'}E{sci_exponent}"


# ---------------------------------------------------------------------------------------------
# file-name patterns (§1) and classification of table-relative paths

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_EXTENSION = r"(?:\.[0-9A-Za-z_-]+)+"  # ".parquet", ".zstd.parquet", ".parquet.index", ".blob"


def data_file_re(prefix: str = DEFAULT_DATA_FILE_PREFIX) -> re.Pattern[str]:
    """Data/changelog file names for a `data-file.prefix` / `changelog-file.prefix` option value."""
    return re.compile(rf"{re.escape(prefix)}{_UUID}-\d+{_EXTENSION}")


DATA_FILE_RE = data_file_re(DEFAULT_DATA_FILE_PREFIX)
CHANGELOG_FILE_RE = data_file_re(DEFAULT_CHANGELOG_FILE_PREFIX)
# "<uuid>-<n>"; pypaimon names changelog manifest lists "<uuid>-changelog".
MANIFEST_RE = re.compile(rf"manifest-{_UUID}-\d+")
MANIFEST_LIST_RE = re.compile(rf"manifest-list-{_UUID}-(?:\d+|changelog)")
INDEX_MANIFEST_RE = re.compile(rf"index-manifest-{_UUID}-\d+")
INDEX_FILE_RE = re.compile(rf"index-{_UUID}-\d+")
STATISTICS_RE = re.compile(rf"stat-{_UUID}-\d+")
SNAPSHOT_RE = re.compile(r"snapshot-(?P<id>\d+)")
SCHEMA_RE = re.compile(r"schema-(?P<id>\d+)")
CHANGELOG_METADATA_RE = re.compile(r"changelog-(?P<id>\d+)")
HINT_RE = re.compile(r"EARLIEST|LATEST")
TAG_RE = re.compile(r"tag-(?P<name>.+)")
CONSUMER_RE = re.compile(r"consumer-(?P<id>.+)")
BRANCH_DIR_RE = re.compile(r"branch-(?P<name>.+)")
BUCKET_DIR_RE = re.compile(r"bucket-(?:\d+|postpone)")
SUCCESS_FILE_RE = re.compile(r"_SUCCESS")
# Hidden temp file of an atomic write (Java/pypaimon and our FileIO): ".<name>.<uuid>.tmp".
TEMP_FILE_RE = re.compile(rf"\.(?P<name>.+)\.{_UUID}\.tmp")

# Kinds returned by classify_file.
SNAPSHOT = "snapshot"
SNAPSHOT_HINT = "snapshot-hint"
SCHEMA = "schema"
MANIFEST = "manifest"
MANIFEST_LIST = "manifest-list"
INDEX_MANIFEST = "index-manifest"
INDEX = "index"
STATISTICS = "statistics"
TAG = "tag"
CONSUMER = "consumer"
CHANGELOG_METADATA = "changelog-metadata"
CHANGELOG_HINT = "changelog-hint"
DATA = "data"
CHANGELOG_DATA = "changelog-data"
SUCCESS_FILE = "success-file"
TEMP = "temp"

# metadata directory -> [(name pattern, kind)]; manifest-list/index-manifest before manifest.
_METADATA_DIRS: dict[str, list[tuple[re.Pattern[str], str]]] = {
    "snapshot": [(SNAPSHOT_RE, SNAPSHOT), (HINT_RE, SNAPSHOT_HINT)],
    "schema": [(SCHEMA_RE, SCHEMA)],
    "manifest": [
        (MANIFEST_LIST_RE, MANIFEST_LIST),
        (INDEX_MANIFEST_RE, INDEX_MANIFEST),
        (MANIFEST_RE, MANIFEST),
    ],
    "index": [(INDEX_FILE_RE, INDEX)],
    "statistics": [(STATISTICS_RE, STATISTICS)],
    "tag": [(TAG_RE, TAG)],
    "consumer": [(CONSUMER_RE, CONSUMER)],
    "changelog": [(CHANGELOG_METADATA_RE, CHANGELOG_METADATA), (HINT_RE, CHANGELOG_HINT)],
}


def classify_file(
    relative_path: str,
    data_file_prefix: str = DEFAULT_DATA_FILE_PREFIX,
    changelog_file_prefix: str = DEFAULT_CHANGELOG_FILE_PREFIX,
) -> str | None:
    """Which kind of Paimon file a table-relative path is, or None when Paimon would not write it there.

    Metadata must sit directly in its directory (optionally under "branch/branch-<name>/"); data,
    changelog and in-data-dir index files must sit in a bucket directory. Leftover temp files of atomic
    writes are "temp" and partition marks "_SUCCESS" are "success-file": neither is referenced by any
    snapshot, so callers decide what to do with them.
    """
    parts = [p for p in relative_path.strip("/").split("/") if p]
    if not parts:
        return None
    name = parts[-1]
    if TEMP_FILE_RE.fullmatch(name):
        return TEMP
    if len(parts) >= 2 and BUCKET_DIR_RE.fullmatch(parts[-2]):
        return classify_in_bucket(name, data_file_prefix, changelog_file_prefix)
    if SUCCESS_FILE_RE.fullmatch(name) and all("=" in p for p in parts[:-1]):
        return SUCCESS_FILE
    if len(parts) == 4 and parts[0] == "branch" and BRANCH_DIR_RE.fullmatch(parts[1]):
        parts = parts[2:]
    if len(parts) != 2:
        return None
    for pattern, kind in _METADATA_DIRS.get(parts[0], ()):
        if pattern.fullmatch(name):
            return kind
    return None


def classify_in_bucket(name: str, data_file_prefix: str, changelog_file_prefix: str) -> str | None:
    """The kind of a (non-temp) file named `name` in a bucket directory, or None (see classify_file)."""
    if _cached_data_re(data_file_prefix).fullmatch(name):
        return DATA
    if _cached_data_re(changelog_file_prefix).fullmatch(name):
        return CHANGELOG_DATA
    if INDEX_FILE_RE.fullmatch(name):  # index-file-in-data-file-dir=true
        return INDEX
    return None


_DATA_RE_CACHE: dict[str, re.Pattern[str]] = {
    DEFAULT_DATA_FILE_PREFIX: DATA_FILE_RE,
    DEFAULT_CHANGELOG_FILE_PREFIX: CHANGELOG_FILE_RE,
}


def _cached_data_re(prefix: str) -> re.Pattern[str]:
    pattern = _DATA_RE_CACHE.get(prefix)
    if pattern is None:
        pattern = _DATA_RE_CACHE[prefix] = data_file_re(prefix)
    return pattern
