"""BinaryRow: Paimon's binary row layout, used for partitions, keys and stats in manifests (spec §5).

Java compares these rows byte for byte (a DELETE cancels an ADD only if the partition bytes are
identical) and hashes them for bucket assignment, so every byte matters: zeroed padding, RowKind 0,
inline short strings, and the space reserved even for null decimals and timestamps.

Framing in manifests: a 4-byte big-endian arity, then the row bytes (little-endian inside).

Encoding is table driven (one small writer/reader per type root) because it runs per data file for
statistics and per row where a caller buckets rows one at a time.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from paimon_format.errors import PaimonFormatError, UnsupportedOperationError
from paimon_format.model.types import DataType

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_UTC = dt.timezone.utc
_ONE_MS = dt.timedelta(milliseconds=1)
_MILLIS_PER_DAY = 86_400_000
_ARITY = struct.Struct(">i")
_I8 = struct.Struct("<b")
_I16 = struct.Struct("<h")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")
_SLOT = struct.Struct("<II")  # (length or nano-of-milli, offset): the LE int64 `offset << 32 | size`

COMPACT_DECIMAL_PRECISION = 18
COMPACT_TIMESTAMP_PRECISION = 3
_DECIMAL_VAR_BYTES = 16
_TIMESTAMP_VAR_BYTES = 8
_ZEROS_16 = bytes(16)


class BinaryRowError(PaimonFormatError, ValueError):
    """A value that does not fit its column type, or bytes that are not a BinaryRow."""


class UnsupportedTypeError(BinaryRowError, UnsupportedOperationError):
    """A non-null value of a type we do not encode in BinaryRows (ARRAY/MAP/ROW/VARIANT/BLOB...).

    Keys and partitions cannot have these types (Java refuses them), and statistics store them as
    null, so only a caller bypassing those rules meets this.
    """


class PreciseDatetime(dt.datetime):
    """A datetime that also carries the nanoseconds below its microsecond (0-999), like pandas.

    Returned for TIMESTAMP(7..9) values that have them, so a decoded row re-encodes to the same
    bytes. Comparisons and hashing ignore `nanosecond` (they are datetime's).
    """

    nanosecond: int = 0

    @classmethod
    def of(cls, value: dt.datetime, nanosecond: int) -> PreciseDatetime:
        result = cls(
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
            value.tzinfo,
        )
        result.nanosecond = nanosecond
        return result

    def plain(self) -> dt.datetime:
        """The same instant as a plain datetime (without the sub-microsecond nanos)."""
        return dt.datetime(*self.timetuple()[:6], self.microsecond, self.tzinfo)

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:  # datetime's own would drop `nanosecond`
        return (_precise_datetime, (self.plain(), self.nanosecond))

    def __repr__(self) -> str:
        return f"PreciseDatetime.of({self.plain()!r}, nanosecond={self.nanosecond})"


def _precise_datetime(value: dt.datetime, nanosecond: int) -> PreciseDatetime:
    return PreciseDatetime.of(value, nanosecond)


def bitset_width(arity: int) -> int:
    """Bytes of header + null bits: RowKind in the first byte, then one bit per field."""
    return ((arity + 63 + 8) // 64) * 8


def is_compact(data_type: DataType) -> bool:
    """Whether a value lives entirely in its 8-byte slot (everything but big decimals/timestamps)."""
    root = data_type.root
    if root == "DECIMAL":
        return (data_type.precision or 0) <= COMPACT_DECIMAL_PRECISION
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return (data_type.precision or 0) <= COMPACT_TIMESTAMP_PRECISION
    return True


# -- value conversions ------------------------------------------------------------------------------


def _epoch_millis_and_nanos(value: Any) -> tuple[int, int]:
    """(epoch millis, nano-of-millisecond) the way Java's `TimestampData.fromLocalDateTime` splits them.

    Naive values are wall-clock time stored as if UTC; aware values are converted to UTC first.
    """
    if not isinstance(value, dt.datetime):
        raise TypeError(f"expected a datetime, got {type(value).__name__}")
    if value.tzinfo is not None:
        value = value.astimezone(_UTC).replace(tzinfo=None)
    delta = value - _EPOCH
    millis = delta // _ONE_MS
    micros_of_milli = (delta - millis * _ONE_MS).microseconds
    return millis, micros_of_milli * 1000 + int(getattr(value, "nanosecond", 0) or 0)


def _timestamp_from(millis: int, nanos: int) -> dt.datetime:
    value = _EPOCH + dt.timedelta(milliseconds=millis, microseconds=nanos // 1000)
    return PreciseDatetime.of(value, nanos % 1000) if nanos % 1000 else value


def _unscaled(value: Any, data_type: DataType) -> int:
    """The unscaled integer of a decimal value, exactly (no 28-digit context rounding)."""
    if isinstance(value, bool) or not isinstance(value, (Decimal, int, float, str)):
        raise TypeError(f"expected a Decimal, got {type(value).__name__}")
    decimal = value if isinstance(value, Decimal) else Decimal(str(value))  # str: a float's shortest form
    sign, digits, exponent = decimal.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"{value} is not a finite number")
    coefficient = int("".join(map(str, digits))) if digits else 0
    shift = exponent + (data_type.scale or 0)
    if shift >= 0:
        unscaled = coefficient * 10**shift
    else:
        unscaled, rest = divmod(coefficient, 10**-shift)
        if rest:
            raise ValueError(f"{value} has more than {data_type.scale} decimal places")
    if unscaled >= 10 ** (data_type.precision or 38):
        raise ValueError(f"{value} has more than {data_type.precision} digits")
    return -unscaled if sign else unscaled


def _decimal_from(unscaled: int, data_type: DataType) -> Decimal:
    return Decimal(f"{unscaled}E-{data_type.scale or 0}")


def _time_millis(value: Any) -> int:
    if isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MILLIS_PER_DAY:
        return value
    raise ValueError("expected a datetime.time or milliseconds of the day")


def _date_days(value: Any) -> int:
    if isinstance(value, dt.datetime):
        raise TypeError("expected a datetime.date, got a datetime")
    if isinstance(value, dt.date):
        return (value - _EPOCH_DATE).days
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"expected a datetime.date or days since epoch, got {type(value).__name__}")


# -- writers: (buffer, slot offset, value, type) -> None; variable data is appended to the buffer -------

_Writer = Callable[[bytearray, int, Any, DataType], None]


def _packer(packer: struct.Struct) -> _Writer:
    pack_into = packer.pack_into

    def write(buf: bytearray, slot: int, value: Any, data_type: DataType) -> None:
        pack_into(buf, slot, value)

    return write


def _write_boolean(buf: bytearray, slot: int, value: Any, data_type: DataType) -> None:
    if type(value).__name__ in ("bool", "bool_"):  # Python's and numpy's
        buf[slot] = 1 if value else 0
    elif isinstance(value, int) and value in (0, 1):
        buf[slot] = value
    else:
        raise TypeError(f"expected a bool, got {value!r}")


def _write_date(buf: bytearray, slot: int, value: Any, data_type: DataType) -> None:
    _I32.pack_into(buf, slot, _date_days(value))


def _write_time(buf: bytearray, slot: int, value: Any, data_type: DataType) -> None:
    _I32.pack_into(buf, slot, _time_millis(value))


def _write_float(buf: bytearray, slot: int, value: Any, data_type: DataType) -> None:
    if isinstance(value, (bool, str, bytes, Decimal)):  # struct would take a Decimal via __float__
        raise TypeError(f"expected a float, got {type(value).__name__}")
    (_F32 if data_type.root == "FLOAT" else _F64).pack_into(buf, slot, value)


def _write_decimal(buf: bytearray, slot: int, value: Any, data_type: DataType) -> None:
    unscaled = _unscaled(value, data_type)
    if (data_type.precision or 0) <= COMPACT_DECIMAL_PRECISION:
        _I64.pack_into(buf, slot, unscaled)
        return
    # Java's BigInteger.toByteArray: minimal big-endian two's complement, in 16 reserved bytes
    width = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
    _SLOT.pack_into(buf, slot, width, len(buf))
    buf += unscaled.to_bytes(width, "big", signed=True)
    buf += _ZEROS_16[width:]


def _write_timestamp(buf: bytearray, slot: int, value: Any, data_type: DataType) -> None:
    millis, nanos = _epoch_millis_and_nanos(value)
    if (data_type.precision or 0) <= COMPACT_TIMESTAMP_PRECISION:
        _I64.pack_into(buf, slot, millis)
        return
    _SLOT.pack_into(buf, slot, nanos, len(buf))
    buf += _I64.pack(millis)


def _write_text(buf: bytearray, slot: int, value: Any, data_type: DataType) -> None:
    if data_type.root in ("CHAR", "VARCHAR"):
        if not isinstance(value, str):
            raise TypeError(f"expected a str, got {type(value).__name__}")
        data = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        raise TypeError(f"expected bytes, got {type(value).__name__}")
    size = len(data)
    if size <= 7:
        buf[slot : slot + size] = data
        buf[slot + 7] = 0x80 | size
    else:
        _SLOT.pack_into(buf, slot, size, len(buf))
        buf += data
        if size & 7:
            buf += _ZEROS_16[: 8 - (size & 7)]


def _write_unsupported(buf: bytearray, slot: int, value: Any, data_type: DataType) -> None:
    raise UnsupportedTypeError(f"BinaryRow encoding of non-null {data_type.root} values is not supported")


_WRITERS: dict[str, _Writer] = {
    "BOOLEAN": _write_boolean,
    "TINYINT": _packer(_I8),
    "SMALLINT": _packer(_I16),
    "INT": _packer(_I32),
    "BIGINT": _packer(_I64),
    "FLOAT": _write_float,
    "DOUBLE": _write_float,
    "DATE": _write_date,
    "TIME": _write_time,
    "DECIMAL": _write_decimal,
    "TIMESTAMP": _write_timestamp,
    "TIMESTAMP_LTZ": _write_timestamp,
    "CHAR": _write_text,
    "VARCHAR": _write_text,
    "BINARY": _write_text,
    "VARBINARY": _write_text,
}

_ENCODE_ERRORS = (struct.error, TypeError, ValueError, OverflowError, AttributeError, InvalidOperation)


def encode_row(values: Sequence[Any], types: Sequence[DataType], names: Sequence[str] | None = None) -> bytes:
    """The row bytes (no arity prefix) of `values` typed by `types`.

    `names` (optional) only makes error messages name the column instead of its position.
    """
    arity = len(types)
    if len(values) != arity:
        raise BinaryRowError(f"{len(values)} values for {arity} types")
    header = bitset_width(arity)
    buf = bytearray(header + 8 * arity)
    slot = header
    for index in range(arity):
        value = values[index]
        data_type = types[index]
        if value is None:
            bit = index + 8
            buf[bit >> 3] |= 1 << (bit & 7)
            if not is_compact(data_type):  # Java's RowHelper.writeNulls still reserves the space
                reserved = _DECIMAL_VAR_BYTES if data_type.root == "DECIMAL" else _TIMESTAMP_VAR_BYTES
                _SLOT.pack_into(buf, slot, 0, len(buf))
                buf += _ZEROS_16[:reserved]
        else:
            try:
                _WRITERS.get(data_type.root, _write_unsupported)(buf, slot, value, data_type)
            except UnsupportedTypeError as error:
                raise UnsupportedTypeError(f"{_field_label(index, names)}: {error}") from None
            except _ENCODE_ERRORS as error:
                raise BinaryRowError(
                    f"{_field_label(index, names)}: value {value!r} does not fit {data_type}: {error}"
                ) from None
        slot += 8
    return bytes(buf)


def _field_label(index: int, names: Sequence[str] | None) -> str:
    if names is not None and index < len(names):
        return f"field {names[index]!r}"
    return f"field {index}"


def serialize_row(
    values: Sequence[Any], types: Sequence[DataType], names: Sequence[str] | None = None
) -> bytes:
    """The manifest framing: 4-byte big-endian arity, then the row bytes."""
    return _ARITY.pack(len(types)) + encode_row(values, types, names)


def row_arity(data: bytes) -> int:
    """The arity prefix of a serialized row (the number of fields, whatever their types)."""
    if len(data) < 4:
        raise BinaryRowError(f"a serialized BinaryRow needs at least 4 bytes, got {len(data)}")
    return _ARITY.unpack_from(data, 0)[0]


# -- readers: (data, row start, slot position, type) -> value ------------------------------------------

_Reader = Callable[[bytes, int, int, DataType], Any]


def _unpacker(packer: struct.Struct) -> _Reader:
    unpack_from = packer.unpack_from

    def read(data: bytes, base: int, pos: int, data_type: DataType) -> Any:
        return unpack_from(data, pos)[0]

    return read


def _var_slot(data: bytes, base: int, pos: int, size: int | None = None) -> tuple[int, int]:
    """(first word, absolute offset) of a slot pointing into the variable part.

    The first word is the byte length (strings, decimals) or the nano-of-millisecond (timestamps,
    which then pass their fixed `size`); the span is bounds checked so corrupt bytes fail loudly.
    """
    first, offset = _SLOT.unpack_from(data, pos)
    start = base + offset
    if start + (first if size is None else size) > len(data):
        raise BinaryRowError(f"variable-length field points past the row end ({offset}+{first})")
    return first, start


def _read_boolean(data: bytes, base: int, pos: int, data_type: DataType) -> bool:
    return data[pos] != 0


def _read_date(data: bytes, base: int, pos: int, data_type: DataType) -> dt.date:
    return _EPOCH_DATE + dt.timedelta(days=_I32.unpack_from(data, pos)[0])


def _read_time(data: bytes, base: int, pos: int, data_type: DataType) -> dt.time:
    millis = _I32.unpack_from(data, pos)[0]
    if not 0 <= millis < _MILLIS_PER_DAY:
        raise BinaryRowError(f"TIME value {millis} ms is not a time of day")
    seconds, milli = divmod(millis, 1000)
    return dt.time(seconds // 3600, seconds // 60 % 60, seconds % 60, milli * 1000)


def _read_decimal(data: bytes, base: int, pos: int, data_type: DataType) -> Decimal:
    if (data_type.precision or 0) <= COMPACT_DECIMAL_PRECISION:
        return _decimal_from(_I64.unpack_from(data, pos)[0], data_type)
    size, start = _var_slot(data, base, pos)
    if size > _DECIMAL_VAR_BYTES:
        raise BinaryRowError(f"DECIMAL of {size} bytes (at most 16)")
    return _decimal_from(int.from_bytes(data[start : start + size], "big", signed=True), data_type)


def _read_timestamp(data: bytes, base: int, pos: int, data_type: DataType) -> dt.datetime:
    if (data_type.precision or 0) <= COMPACT_TIMESTAMP_PRECISION:
        return _timestamp_from(_I64.unpack_from(data, pos)[0], 0)
    nanos, start = _var_slot(data, base, pos, _TIMESTAMP_VAR_BYTES)
    return _timestamp_from(_I64.unpack_from(data, start)[0], nanos)


def _read_text(data: bytes, base: int, pos: int, data_type: DataType) -> str | bytes:
    marker = data[pos + 7]
    if marker & 0x80:
        raw = data[pos : pos + (marker & 0x7F)]
    else:
        size, start = _var_slot(data, base, pos)
        raw = data[start : start + size]
    return raw.decode("utf-8") if data_type.root in ("CHAR", "VARCHAR") else raw


def _read_unsupported(data: bytes, base: int, pos: int, data_type: DataType) -> Any:
    raise UnsupportedTypeError(f"BinaryRow decoding of non-null {data_type.root} values is not supported")


_READERS: dict[str, _Reader] = {
    "BOOLEAN": _read_boolean,
    "TINYINT": _unpacker(_I8),
    "SMALLINT": _unpacker(_I16),
    "INT": _unpacker(_I32),
    "BIGINT": _unpacker(_I64),
    "FLOAT": _unpacker(_F32),
    "DOUBLE": _unpacker(_F64),
    "DATE": _read_date,
    "TIME": _read_time,
    "DECIMAL": _read_decimal,
    "TIMESTAMP": _read_timestamp,
    "TIMESTAMP_LTZ": _read_timestamp,
    "CHAR": _read_text,
    "VARCHAR": _read_text,
    "BINARY": _read_text,
    "VARBINARY": _read_text,
}


def deserialize_row(data: bytes, types: Sequence[DataType]) -> list[Any]:
    """Decode `serialize_row` bytes into Python values (None for nulls).

    DATE -> date, TIME -> time, TIMESTAMP/TIMESTAMP_LTZ -> naive datetime (LTZ in UTC; a
    `PreciseDatetime` when there are sub-microsecond nanos), DECIMAL -> Decimal with the type's scale.
    """
    data = bytes(data)
    arity = row_arity(data)
    if arity != len(types):
        raise BinaryRowError(f"row has arity {arity}, expected {len(types)} fields")
    base = 4
    header = bitset_width(arity)
    if len(data) < base + header + 8 * arity:
        raise BinaryRowError(f"row of arity {arity} is truncated ({len(data) - base} bytes)")
    values: list[Any] = []
    pos = base + header
    for index, data_type in enumerate(types):
        bit = index + 8
        if data[base + (bit >> 3)] & (1 << (bit & 7)):
            values.append(None)
        else:
            try:
                values.append(_READERS.get(data_type.root, _read_unsupported)(data, base, pos, data_type))
            except BinaryRowError as error:
                raise type(error)(f"field {index} ({data_type}): {error}") from None
            except (struct.error, ValueError, OverflowError) as error:
                raise BinaryRowError(f"field {index} ({data_type}): cannot decode: {error}") from None
        pos += 8
    return values


EMPTY_ROW: bytes = serialize_row([], [])
