"""BinaryRow: Paimon's binary row layout, used for partitions, keys and stats in manifests (spec §5).

Java compares these rows byte for byte (a DELETE cancels an ADD only if the partition bytes are
identical) and hashes them for bucket assignment, so every byte matters: zeroed padding, RowKind 0,
inline short strings, and the space reserved even for null decimals and timestamps.

Framing in manifests: a 4-byte big-endian arity, then the row bytes (little-endian inside).
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from paimon_format.errors import PaimonFormatError
from paimon_format.types import DataType

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_ARITY = struct.Struct(">i")
_I8 = struct.Struct("<b")
_I16 = struct.Struct("<h")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")
_SLOT = struct.Struct("<II")  # (length or nanos, offset) as two little-endian words

_COMPACT_DECIMAL_PRECISION = 18
_COMPACT_TIMESTAMP_PRECISION = 3


class BinaryRowError(PaimonFormatError, ValueError):
    """A value that does not fit its column type, or bytes that are not a BinaryRow."""


def bitset_width(arity: int) -> int:
    """Bytes of header + null bits: RowKind in the first byte, then one bit per field."""
    return ((arity + 63 + 8) // 64) * 8


def _pad8(length: int) -> int:
    return (length + 7) & ~7


def _is_compact(data_type: DataType) -> bool:
    if data_type.root == "DECIMAL":
        return (data_type.precision or 0) <= _COMPACT_DECIMAL_PRECISION
    if data_type.root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return (data_type.precision or 0) <= _COMPACT_TIMESTAMP_PRECISION
    return True


def _epoch_millis_and_nanos(value: dt.datetime) -> tuple[int, int]:
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    delta = value - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    millis, micros_of_milli = divmod(micros, 1000)
    return millis, micros_of_milli * 1000


def _unscaled(value: Any, data_type: DataType) -> int:
    decimal = value if isinstance(value, Decimal) else Decimal(str(value))
    scaled = decimal.scaleb(data_type.scale or 0)
    if scaled != scaled.to_integral_value():
        raise BinaryRowError(f"{value} has more than {data_type.scale} decimal places for {data_type}")
    unscaled = int(scaled)
    if len(str(abs(unscaled))) > (data_type.precision or 38):
        raise BinaryRowError(f"{value} does not fit {data_type}")
    return unscaled


def _text_bytes(value: Any, data_type: DataType) -> bytes:
    if data_type.is_string():
        if not isinstance(value, str):
            raise BinaryRowError(f"expected a string for {data_type}, got {value!r}")
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise BinaryRowError(f"expected bytes for {data_type}, got {value!r}")


def encode_row(values: Sequence[Any], types: Sequence[DataType]) -> bytes:
    """The row bytes (no arity prefix) of `values` typed by `types`."""
    if len(values) != len(types):
        raise BinaryRowError(f"{len(values)} values for {len(types)} types")
    arity = len(types)
    header = bitset_width(arity)
    fixed = bytearray(header + 8 * arity)
    variable = bytearray()
    var_start = len(fixed)

    for index, (value, data_type) in enumerate(zip(values, types, strict=True)):
        slot = header + 8 * index
        root = data_type.root
        if value is None:
            fixed[(index + 8) >> 3] |= 1 << ((index + 8) & 7)
            if not _is_compact(data_type):  # Java still reserves the variable-part space
                offset = var_start + len(variable)
                variable += bytes(16 if root == "DECIMAL" else 8)
                _SLOT.pack_into(fixed, slot, 0, offset)
            continue
        try:
            if root == "BOOLEAN":
                fixed[slot] = 1 if value else 0
            elif root == "TINYINT":
                _I8.pack_into(fixed, slot, value)
            elif root == "SMALLINT":
                _I16.pack_into(fixed, slot, value)
            elif root == "INT":
                _I32.pack_into(fixed, slot, value)
            elif root == "DATE":
                days = value if isinstance(value, int) else (value - _EPOCH_DATE).days
                _I32.pack_into(fixed, slot, days)
            elif root == "TIME":
                millis = (
                    value
                    if isinstance(value, int)
                    else (
                        ((value.hour * 60 + value.minute) * 60 + value.second) * 1000
                        + value.microsecond // 1000
                    )
                )
                _I32.pack_into(fixed, slot, millis)
            elif root == "BIGINT":
                _I64.pack_into(fixed, slot, value)
            elif root == "FLOAT":
                _F32.pack_into(fixed, slot, value)
            elif root == "DOUBLE":
                _F64.pack_into(fixed, slot, value)
            elif root == "DECIMAL":
                unscaled = _unscaled(value, data_type)
                if _is_compact(data_type):
                    _I64.pack_into(fixed, slot, unscaled)
                else:
                    width = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
                    offset = var_start + len(variable)
                    variable += unscaled.to_bytes(width, "big", signed=True).ljust(16, b"\0")
                    _SLOT.pack_into(fixed, slot, width, offset)
            elif root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
                millis, nanos = _epoch_millis_and_nanos(value)
                if _is_compact(data_type):
                    _I64.pack_into(fixed, slot, millis)
                else:
                    offset = var_start + len(variable)
                    variable += _I64.pack(millis)
                    _SLOT.pack_into(fixed, slot, nanos, offset)
            elif root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
                data = _text_bytes(value, data_type)
                if len(data) <= 7:
                    fixed[slot : slot + len(data)] = data
                    fixed[slot + 7] = 0x80 | len(data)
                else:
                    offset = var_start + len(variable)
                    variable += data + bytes(_pad8(len(data)) - len(data))
                    _SLOT.pack_into(fixed, slot, len(data), offset)
            else:
                raise BinaryRowError(f"BinaryRow encoding of {data_type} values is not supported")
        except (struct.error, TypeError, AttributeError) as error:
            raise BinaryRowError(
                f"field {index}: value {value!r} does not fit {data_type}: {error}"
            ) from None
    return bytes(fixed) + bytes(variable)


def serialize_row(values: Sequence[Any], types: Sequence[DataType]) -> bytes:
    """The manifest framing: 4-byte big-endian arity, then the row bytes."""
    return _ARITY.pack(len(types)) + encode_row(values, types)


def row_arity(data: bytes) -> int:
    if len(data) < 4:
        raise BinaryRowError(f"a serialized BinaryRow needs at least 4 bytes, got {len(data)}")
    return _ARITY.unpack_from(data, 0)[0]


def deserialize_row(data: bytes, types: Sequence[DataType]) -> list[Any]:
    """Decode `serialize_row` bytes into Python values (None for nulls)."""
    arity = row_arity(data)
    if arity != len(types):
        raise BinaryRowError(f"row has arity {arity}, expected {len(types)} fields")
    row = memoryview(data)[4:]
    header = bitset_width(arity)
    if len(row) < header + 8 * arity:
        raise BinaryRowError(f"row of arity {arity} is truncated ({len(row)} bytes)")
    values: list[Any] = []
    for index, data_type in enumerate(types):
        if row[(index + 8) >> 3] & (1 << ((index + 8) & 7)):
            values.append(None)
            continue
        values.append(_read_field(row, header + 8 * index, data_type))
    return values


def _read_field(row: memoryview, slot: int, data_type: DataType) -> Any:
    root = data_type.root
    if root == "BOOLEAN":
        return row[slot] != 0
    if root == "TINYINT":
        return _I8.unpack_from(row, slot)[0]
    if root == "SMALLINT":
        return _I16.unpack_from(row, slot)[0]
    if root == "INT":
        return _I32.unpack_from(row, slot)[0]
    if root == "DATE":
        return _EPOCH_DATE + dt.timedelta(days=_I32.unpack_from(row, slot)[0])
    if root == "TIME":
        millis = _I32.unpack_from(row, slot)[0]
        return (dt.datetime.min + dt.timedelta(milliseconds=millis)).time()
    if root == "BIGINT":
        return _I64.unpack_from(row, slot)[0]
    if root == "FLOAT":
        return _F32.unpack_from(row, slot)[0]
    if root == "DOUBLE":
        return _F64.unpack_from(row, slot)[0]
    if root == "DECIMAL":
        if _is_compact(data_type):
            unscaled = _I64.unpack_from(row, slot)[0]
        else:
            length, offset = _SLOT.unpack_from(row, slot)
            unscaled = int.from_bytes(row[offset : offset + length], "big", signed=True)
        return Decimal(unscaled).scaleb(-(data_type.scale or 0))
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        if _is_compact(data_type):
            millis, nanos = _I64.unpack_from(row, slot)[0], 0
        else:
            nanos, offset = _SLOT.unpack_from(row, slot)
            millis = _I64.unpack_from(row, offset)[0]
        return _EPOCH + dt.timedelta(milliseconds=millis, microseconds=nanos // 1000)
    if root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        marker = row[slot + 7]
        if marker & 0x80:
            data = bytes(row[slot : slot + (marker & 0x7F)])
        else:
            length, offset = _SLOT.unpack_from(row, slot)
            if offset + length > len(row):
                raise BinaryRowError(f"variable-length field points past the row end ({offset}+{length})")
            data = bytes(row[offset : offset + length])
        return data.decode("utf-8") if data_type.is_string() else data
    raise BinaryRowError(f"BinaryRow decoding of {data_type} values is not supported")


EMPTY_ROW: bytes = serialize_row([], [])
