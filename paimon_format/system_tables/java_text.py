"""Values as Paimon's Java system tables print them into their text columns.

Several columns of Paimon's system tables are strings built by Java: `$files`' `partition` is the
partition row cast to a string (`{2024-01-01, 3}`), `min_key`/`max_key` are `Arrays.toString` of the
key's internal values (`[1, a]`), the value statistics are a `TreeMap.toString` (`{id=0, v=null}`) of
internal values, `$partitions` spells a partition `dt=2024-01-01/hr=3`, a tag's retention is a
`java.time.Duration` (`PT1H`). A user's SQL filters and groups by these strings, so they must be the
same text Paimon writes; this module renders them from the Python values the format layer decodes.

Two spellings exist because Java has two: the SQL cast to STRING (partition texts: a DATE is
`2024-01-02`, a TIMESTAMP `2024-01-02 03:04:05`) and `Object.toString` of Paimon's internal values
(keys and statistics: a DATE is its epoch day, a TIME its millisecond of the day, a TIMESTAMP a
`LocalDateTime` such as `2024-01-02T03:04`).
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import struct
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from paimon_format.model.types import DataType
from paimon_format.storage.paths import local_date_time_text

_EPOCH_DATE = dt.date(1970, 1, 1)


def java_double_text(value: float) -> str:
    """Java's `Double.toString`: plain between 1e-3 and 1e7 (always with a fraction digit), else
    computerized scientific notation (`1.0E10`, `1.5E-4`); the digits are the shortest that read
    back as the same double."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digit_tuple, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    digits = "".join(str(d) for d in digit_tuple)
    scientific = len(digits) - 1 + int(exponent)
    prefix = "-" if sign else ""
    if -3 <= scientific < 7:
        plain = format(Decimal(repr(float(abs(value)))).normalize(), "f")
        return prefix + (plain if "." in plain else plain + ".0")
    return f"{prefix}{digits[0]}.{digits[1:] or '0'}E{scientific}"


def java_float_text(value: float) -> str:
    """Java's `Float.toString` for the shortest decimal that rounds to the same 32-bit float."""
    if math.isnan(value) or math.isinf(value) or value == 0:
        return java_double_text(value)
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        if _as_float32(candidate) == _as_float32(value):
            return java_double_text(candidate)
    return java_double_text(value)


def _as_float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def internal_text(value: Any, data_type: DataType) -> str:
    """`String.valueOf` of Paimon's internal value (keys and statistics)."""
    if value is None:
        return "null"
    root = data_type.root
    if root == "BOOLEAN":
        return "true" if value else "false"
    if root == "DATE":
        return str((value - _EPOCH_DATE).days)
    if root == "TIME":
        return str((value.hour * 3600 + value.minute * 60 + value.second) * 1000 + value.microsecond // 1000)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return local_date_time_text(value)
    if root == "FLOAT":
        return java_float_text(value)
    if root == "DOUBLE":
        return java_double_text(value)
    if root == "DECIMAL":
        return _plain_decimal(value)
    if isinstance(value, bytes):
        # Java prints a byte[] by identity ("[B@1b6d3586"), which means nothing; base64 says the bytes.
        return base64.b64encode(value).decode("ascii")
    return str(value)


def cast_text(value: Any, data_type: DataType) -> str:
    """Paimon's SQL cast of a value to STRING (how partition values are spelled)."""
    if value is None:
        return "null"
    root = data_type.root
    if root == "BOOLEAN":
        return "true" if value else "false"
    if root == "DATE":
        return value.isoformat()
    if root == "TIME":
        return _time_text(value, data_type.precision or 0)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return value.strftime("%Y-%m-%d %H:%M:%S") + _fraction(value, data_type.precision or 0)
    if root == "FLOAT":
        return java_float_text(value)
    if root == "DOUBLE":
        return java_double_text(value)
    if root == "DECIMAL":
        return _plain_decimal(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _time_text(value: dt.time, precision: int) -> str:
    """Paimon's TIME cast: `HH:mm:ss`, then with a precision the millisecond digits up to the last
    non-zero one (at least one: `.0`), never more than the precision."""
    text = value.strftime("%H:%M:%S")
    if precision <= 0:
        return text
    digits = f"{value.microsecond // 1000:03d}"[:precision].rstrip("0") or "0"
    return f"{text}.{digits}"


def _fraction(value: dt.datetime, precision: int) -> str:
    """Paimon's TIMESTAMP cast: the nine nanosecond digits without trailing zeros, but never fewer
    digits than the precision (`.100` at precision 3, `.123456` beyond it; none at precision 0
    when zero)."""
    fraction = f"{value.microsecond * 1000 + int(getattr(value, 'nanosecond', 0) or 0):09d}"
    while len(fraction) > precision and fraction.endswith("0"):
        fraction = fraction[:-1]
    return f".{fraction}" if fraction else ""


def _plain_decimal(value: Decimal) -> str:
    """`BigDecimal.toPlainString`: no exponent, the scale's digits kept."""
    return format(value, "f")


def row_cast_text(values: Sequence[Any], types: Sequence[DataType]) -> str:
    """A row cast to STRING: `{v1, v2}` (`$files`, `$buckets`, `$manifests` partition columns)."""
    return "{" + ", ".join(cast_text(v, t) for v, t in zip(values, types, strict=True)) + "}"


def array_text(values: Sequence[Any], types: Sequence[DataType]) -> str:
    """`Arrays.toString` of internal values: `[1, a]` (`$files` keys)."""
    return "[" + ", ".join(internal_text(v, t) for v, t in zip(values, types, strict=True)) + "]"


def tree_map_text(items: Sequence[tuple[str, str]]) -> str:
    """`TreeMap.toString` of name -> already rendered value: `{a=1, b=null}`, sorted by name."""
    return "{" + ", ".join(f"{name}={text}" for name, text in sorted(items)) + "}"


def partition_path_text(
    values: Sequence[Any], keys: Sequence[str], types: Sequence[DataType], default_name: str
) -> str:
    """`$partitions`' spelling: `dt=2024-01-01/hr=3`, a null value as the default partition name."""
    return "/".join(
        f"{key}={default_name if value is None else cast_text(value, data_type)}"
        for key, value, data_type in zip(keys, values, types, strict=True)
    )


def duration_text(millis: int) -> str:
    """`java.time.Duration.toString` of a duration in milliseconds: `PT1H`, `PT1H30M`, `PT0.5S`,
    `PT48H` (hours never roll into days), `PT0S` for zero."""
    if millis == 0:
        return "PT0S"
    negative = millis < 0
    total = abs(millis)
    hours, rest = divmod(total, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, fraction = divmod(rest, 1000)
    sign = "-" if negative else ""
    text = "PT"
    if hours:
        text += f"{sign}{hours}H"
    if minutes:
        text += f"{sign}{minutes}M"
    if seconds or fraction:
        text += f"{sign}{seconds}"
        if fraction:
            text += "." + f"{fraction:03d}".rstrip("0")
        text += "S"
    return text
