"""File encoders: one data file built in memory in the table's format (Parquet, ORC or Avro).

Split out of the writer: the writer decides which rows go into which file; an encoder only turns
row groups into the exact bytes of one file, configured as Java's writers configure theirs.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from typing import Any, Protocol

import fastavro
import fastavro.write
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as orc
import pyarrow.parquet as pq

from paimon_format.data.spool import Payload, SpooledFile, discard
from paimon_format.errors import UnsupportedOperationError, missing_codec_library
from paimon_format.manifest.codec import avro_codec
from paimon_format.model.file_layout import file_arrow_schema, file_fields
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.model.types import DataType

_AVRO_RECORD = "org.apache.paimon.avro.generated.record"
# Java HadoopCompressionType.fileExtension; other names are used as they are, "none" adds nothing.
_COMPRESSION_EXTENSIONS = {
    "zstd": "zst",
    "gzip": "gz",
    "bzip2": "bz2",
    "deflate": "deflate",
    "snappy": "snappy",
    "lz4": "lz4",
    "none": None,
    "": None,
}
_PARQUET_CODECS = {
    "none": "none",
    "uncompressed": "none",
    "zstd": "zstd",
    "snappy": "snappy",
    "gzip": "gzip",
    "lz4": "lz4",
    "brotli": "brotli",
}
_ORC_CODECS = {
    "none": "uncompressed",
    "uncompressed": "uncompressed",
    "zstd": "zstd",
    "snappy": "snappy",
    "lz4": "lz4",
    "zlib": "zlib",
    "gzip": "zlib",
    "deflate": "zlib",
}


def _codec_for(options: CoreOptions, codecs: dict[str, str], file_format: str) -> str:
    """The writer's codec for the table's `file.compression`; UnsupportedOperationError naming
    the ones `file_format` takes when this one has no codec there."""
    codec = codecs.get(options.file_compression)
    if codec is None:
        raise UnsupportedOperationError(
            f"file.compression={options.file_compression!r} is not supported for {file_format} "
            f"({', '.join(sorted(codecs))})"
        )
    return codec


class FileEncoder(Protocol):
    """Builds one data file: row groups in, exact bytes out (or a spool on local disk, `data.spool`)."""

    def write(self, chunk: pa.Table) -> None: ...

    def size(self) -> int:
        """Bytes so far (encoded, or estimated where the format buffers internally)."""
        ...

    def finish(self) -> Payload: ...

    def discard(self) -> None:
        """Drop an unfinished file (the writer aborts): its spool, if any, is removed."""
        ...


def _has_nanos(arrow_type: pa.DataType) -> bool:
    if pa.types.is_timestamp(arrow_type):
        return arrow_type.unit == "ns"
    return any(_has_nanos(arrow_type.field(i).type) for i in range(arrow_type.num_fields))


class ParquetEncoder:
    """pyarrow's Parquet writer, configured for Java's layout (spec §7 "Parquet specifics").

    TIMESTAMP p>6 is INT96 in Java's files; pyarrow can only switch INT96 on for a whole file,
    so a file with such a column stores all its timestamps as INT96 (Java reads INT96 at any
    precision). Decimals are INT32/INT64 up to precision 18, as Java writes them.
    """

    def __init__(self, schema: pa.Schema, options: CoreOptions, spool: str | None = None) -> None:
        codec = _codec_for(options, _PARQUET_CODECS, "parquet")
        # `spool`: encode into this local file instead of memory (`data.spool`)
        self._spool = spool
        self._sink: pa.NativeFile = pa.OSFile(spool, "wb") if spool else pa.BufferOutputStream()
        try:
            self._writer = self._parquet_writer(schema, options, codec)
        except BaseException:
            self._sink.close()
            discard(spool)
            raise

    def _parquet_writer(self, schema: pa.Schema, options: CoreOptions, codec: str) -> pq.ParquetWriter:
        return pq.ParquetWriter(
            self._sink,
            schema,
            compression=codec,
            compression_level=options.file_compression_zstd_level if codec == "zstd" else None,
            use_deprecated_int96_timestamps=any(_has_nanos(f.type) for f in schema),
            store_schema=False,
            store_decimal_as_integer=True,
            write_statistics=True,
        )

    def write(self, chunk: pa.Table) -> None:
        self._writer.write_table(chunk, row_group_size=max(chunk.num_rows, 1))

    def size(self) -> int:
        return self._sink.tell()

    def finish(self) -> Payload:
        """The file's bytes, or its spool; a failure (a full disk as the footer is written) removes
        the spool before it is raised."""
        try:
            self._writer.close()
            if self._spool is None:
                return self._sink.getvalue().to_pybytes()
            size = self._sink.tell()
            self._sink.close()
        except BaseException:
            self.discard()
            raise
        return SpooledFile(self._spool, size)

    def discard(self) -> None:
        if self._spool is not None:
            # a half-written file: only its removal matters (each close on its own)
            with contextlib.suppress(Exception):
                self._writer.close()
            with contextlib.suppress(Exception):
                self._sink.close()
            discard(self._spool)


def _orc_type(arrow_type: pa.DataType) -> pa.DataType:
    """ORC has no TIME type: Java stores millis of day as INT."""
    return pa.int32() if pa.types.is_time(arrow_type) else arrow_type


class OrcEncoder:
    """pyarrow's ORC writer.

    It buffers whole stripes, so rolling uses the uncompressed Arrow size as the estimate (files
    come out smaller than the target); pyarrow's ORC writer takes no zstd level.
    """

    def __init__(self, schema: pa.Schema, options: CoreOptions) -> None:
        codec = _codec_for(options, _ORC_CODECS, "orc")
        self._sink = pa.BufferOutputStream()
        self._writer = orc.ORCWriter(self._sink, compression=codec)
        self._schema = pa.schema([f.with_type(_orc_type(f.type)) for f in schema])
        self._estimate = 0

    def write(self, chunk: pa.Table) -> None:
        if not chunk.schema.equals(self._schema):
            chunk = chunk.cast(self._schema)
        self._writer.write(chunk)
        self._estimate += chunk.nbytes

    def size(self) -> int:
        return max(self._sink.tell(), self._estimate)

    def finish(self) -> bytes:
        self._writer.close()
        return self._sink.getvalue().to_pybytes()

    def discard(self) -> None:
        """Nothing on disk: the file is in memory."""


def _avro_type(data_type: DataType, row_name: str) -> Any:
    """Java's `AvroSchemaConverter` mapping (facts: nullable = ["null", T], logical types)."""
    root = data_type.root
    precision = data_type.precision or 0
    simple = {
        "BOOLEAN": "boolean",
        "TINYINT": "int",
        "SMALLINT": "int",
        "INT": "int",
        "BIGINT": "long",
        "FLOAT": "float",
        "DOUBLE": "double",
        "CHAR": "string",
        "VARCHAR": "string",
        "BINARY": "bytes",
        "VARBINARY": "bytes",
        "BLOB": "bytes",
    }
    result: Any
    if root in simple:
        result = simple[root]
    elif root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        if precision > 6:
            raise UnsupportedOperationError(f"Avro data files cannot hold {data_type} (precision > 6)")
        unit = "millis" if precision <= 3 else "micros"
        prefix = "local-timestamp" if root == "TIMESTAMP_LTZ" else "timestamp"
        result = {"type": "long", "logicalType": f"{prefix}-{unit}"}
    elif root == "DATE":
        result = {"type": "int", "logicalType": "date"}
    elif root == "TIME":
        if precision > 3:
            raise UnsupportedOperationError(f"Avro data files cannot hold {data_type} (precision > 3)")
        result = {"type": "int", "logicalType": "time-millis"}
    elif root == "DECIMAL":
        result = {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": data_type.precision,
            "scale": data_type.scale or 0,
        }
    elif root == "ROW":
        result = _avro_record(row_name, [(f.name, f.type) for f in data_type.fields or ()])
    elif root == "ARRAY" and data_type.element is not None:
        result = {"type": "array", "items": _avro_type(data_type.element, row_name)}
    elif root == "MAP" and data_type.key is not None and data_type.value is not None:
        if data_type.key.root in ("CHAR", "VARCHAR"):
            result = {"type": "map", "values": _avro_type(data_type.value, row_name)}
        else:  # Avro maps have string keys only: an array of key/value records
            entry = _avro_record(
                row_name, [("key", data_type.key.with_nullable(False)), ("value", data_type.value)]
            )
            result = {"type": "array", "items": entry, "logicalType": "map"}
    else:
        raise UnsupportedOperationError(f"Avro data files cannot hold {data_type} yet")
    return ["null", result] if data_type.nullable else result


def _avro_record(name: str, fields: Sequence[tuple[str, DataType]]) -> dict[str, Any]:
    avro_fields = []
    for field_name, field_type in fields:
        entry: dict[str, Any] = {"name": field_name, "type": _avro_type(field_type, f"{name}_{field_name}")}
        if field_type.nullable:
            entry["default"] = None
        avro_fields.append(entry)
    return {"type": "record", "name": name, "fields": avro_fields}


def avro_schema(fields: Sequence[tuple[str, DataType]]) -> dict[str, Any]:
    """The Avro schema of a data file with these columns (top-level record, as pypaimon writes)."""
    return _avro_record(_AVRO_RECORD, fields)


def _avro_arrow_type(arrow_type: pa.DataType, data_type: DataType) -> pa.DataType:
    """Arrow type whose Python values fastavro encodes without guessing time zones.

    fastavro reads naive datetimes as local time; epoch numbers are unambiguous.
    """
    t = pa.types
    if t.is_timestamp(arrow_type):
        return pa.int64()
    if t.is_date(arrow_type) or t.is_time(arrow_type):
        return pa.int32()
    if t.is_list(arrow_type) and data_type.element is not None:
        child = arrow_type.value_field
        return pa.list_(child.with_type(_avro_arrow_type(child.type, data_type.element)))
    if t.is_map(arrow_type) and data_type.key is not None and data_type.value is not None:
        key, item = arrow_type.key_field, arrow_type.item_field
        return pa.map_(
            key.with_type(_avro_arrow_type(key.type, data_type.key)),
            item.with_type(_avro_arrow_type(item.type, data_type.value)),
        )
    if t.is_struct(arrow_type) and data_type.fields:
        return pa.struct(
            [
                arrow_type.field(i).with_type(_avro_arrow_type(arrow_type.field(i).type, f.type))
                for i, f in enumerate(data_type.fields)
            ]
        )
    return arrow_type


def _to_avro_epoch(column: pa.ChunkedArray, data_type: DataType) -> pa.ChunkedArray:
    """Timestamps as epoch millis/micros (their Avro logical unit), dates/times as plain ints."""
    if pa.types.is_timestamp(column.type):
        unit = "ms" if (data_type.precision or 0) <= 3 else "us"
        column = pc.cast(column, pa.timestamp(unit, column.type.tz))
    target = _avro_arrow_type(column.type, data_type)
    return column if target.equals(column.type) else column.cast(target)


def _has_map(data_type: DataType) -> bool:
    children = [data_type.element, data_type.key, data_type.value] + [f.type for f in data_type.fields or ()]
    return data_type.root == "MAP" or any(c is not None and _has_map(c) for c in children)


def _avro_value(value: Any, data_type: DataType) -> Any:
    """Python value -> fastavro datum where Arrow's form differs (maps come as (key, value) pairs)."""
    if value is None:
        return None
    root = data_type.root
    if root == "MAP" and data_type.key is not None and data_type.value is not None:
        pairs = [(k, _avro_value(v, data_type.value)) for k, v in value]
        if data_type.key.root in ("CHAR", "VARCHAR"):
            return dict(pairs)
        return [{"key": _avro_value(k, data_type.key), "value": v} for k, v in pairs]
    if root == "ARRAY" and data_type.element is not None:
        return [_avro_value(v, data_type.element) for v in value]
    if root == "ROW":
        return {f.name: _avro_value(value.get(f.name), f.type) for f in data_type.fields or ()}
    return value


class AvroEncoder:
    """fastavro container file with Java's Avro data-file schema; one block flush per row group."""

    def __init__(self, fields: Sequence[tuple[str, DataType]], options: CoreOptions) -> None:
        try:
            codec = avro_codec(options.file_compression)
        except ValueError as error:
            raise UnsupportedOperationError(f"file.compression for avro: {error}") from None
        self._fields = list(fields)
        self._buffer = io.BytesIO()
        level = options.file_compression_zstd_level if codec == "zstandard" else None
        self._writer = fastavro.write.Writer(
            self._buffer,
            fastavro.parse_schema(avro_schema(self._fields)),
            codec=codec,
            compression_level=level,
        )

    def write(self, chunk: pa.Table) -> None:
        columns = [_to_avro_epoch(chunk.column(name), t) for name, t in self._fields]
        values = [column.to_pylist() for column in columns]
        for index, (_, data_type) in enumerate(self._fields):
            if _has_map(data_type):
                values[index] = [_avro_value(v, data_type) for v in values[index]]
        names = [name for name, _ in self._fields]
        for row in zip(*values, strict=True):
            self._writer.write(dict(zip(names, row, strict=True)))
        self._flush()

    def size(self) -> int:
        return self._buffer.tell()

    def finish(self) -> bytes:
        self._flush()
        return self._buffer.getvalue()

    def discard(self) -> None:
        """Nothing on disk: the file is in memory."""

    def _flush(self) -> None:
        """Compress and write the block; fastavro finds a missing codec library only here."""
        try:
            self._writer.flush()
        except ValueError as error:
            missing = missing_codec_library(error, "writing an Avro data file")
            if missing is not None:
                raise missing from None
            raise


def new_encoder(schema: TableSchema, options: CoreOptions, spool: str | None = None) -> FileEncoder:
    """An encoder for the table's `file.format`; a Parquet file is encoded into the local file
    `spool` when given (ORC's and Avro's writers buffer in memory anyway)."""
    file_format = options.file_format
    if file_format == "parquet":
        return ParquetEncoder(file_arrow_schema(schema, options), options, spool)
    if file_format == "orc":
        return OrcEncoder(file_arrow_schema(schema, options), options)
    if file_format == "avro":
        return AvroEncoder([(name, t) for name, t, _ in file_fields(schema, options)], options)
    raise UnsupportedOperationError(f"file.format={file_format!r} is not supported (parquet, orc or avro)")


def data_file_extension(options: CoreOptions) -> str:
    """`.<format>`, or `.<compression ext>.<format>` with `file.suffix.include.compression`."""
    file_format = options.file_format
    if options.file_suffix_include_compression:
        compression = options.file_compression
        suffix = _COMPRESSION_EXTENSIONS.get(compression, compression)
        if suffix:
            return f".{suffix}.{file_format}"
    return f".{file_format}"


def encode_file(data: pa.Table, schema: TableSchema, options: CoreOptions | None = None) -> bytes:
    """One data file's bytes (rows already in file layout), in the table's format and compression."""
    encoder = new_encoder(schema, options or CoreOptions(schema.options))
    if data.num_rows:
        encoder.write(data)
    payload = encoder.finish()
    assert isinstance(payload, bytes)  # no spool was asked for
    return payload
