"""Partition directory names, escaping, Java number formatting and file-name classification (spec §1)."""

from __future__ import annotations

import datetime as dt
import math
import struct
from decimal import Decimal

import pytest

from paimon_format.errors import UnsupportedOperationError
from paimon_format.model.types import DataType
from paimon_format.storage import paths
from paimon_format.storage.paths import (
    bucket_dir,
    classify_file,
    escape_path_name,
    java_double_to_string,
    java_float_to_string,
    new_data_file_name,
    parse_partition_dir,
    partition_dir,
    partition_value_text,
    table_path,
    unescape_path_name,
)

UUID = "0b9c7c5e-3f0e-4a8e-9d6a-2f1e5c7b8a90"


def t(root: str, precision: int | None = None, scale: int | None = None) -> DataType:
    return DataType(root=root, precision=precision, scale=scale)


def legacy(value, data_type: DataType) -> str:
    return partition_value_text(value, data_type, legacy=True)


def cast(value, data_type: DataType) -> str:
    return partition_value_text(value, data_type, legacy=False)


# -- layout -------------------------------------------------------------------------------------


def test_table_path() -> None:
    assert table_path("s3://bucket/wh/", "db", "orders") == "s3://bucket/wh/db.db/orders"
    assert table_path("/wh", "db", "t") == "/wh/db.db/t"
    assert table_path("memory://", "db", "t") == "memory:///db.db/t"
    with pytest.raises(ValueError):
        table_path("/wh", "", "t")


def test_bucket_dir() -> None:
    assert bucket_dir("dt=2024-01-01/hr=01", 3) == "dt=2024-01-01/hr=01/bucket-3"
    assert bucket_dir("", 0) == "bucket-0"
    assert bucket_dir("dt=x", -2) == "dt=x/bucket-postpone"
    with pytest.raises(ValueError):
        bucket_dir("", -1)


def test_new_data_file_name() -> None:
    assert new_data_file_name("data-", UUID, 0, "parquet") == f"data-{UUID}-0.parquet"
    assert new_data_file_name("changelog-", UUID, 2, ".zstd.orc") == f"changelog-{UUID}-2.zstd.orc"
    with pytest.raises(ValueError):
        new_data_file_name("data-", UUID, 0, "")


# -- escaping -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("plain-value_1.5", "plain-value_1.5"),
        ("a b", "a b"),  # space is not escaped
        ("日本", "日本"),  # neither is non-ASCII
        ("2024-01-01T10:00", "2024-01-01T10%3A00"),
        ("a/b", "a%2Fb"),
        ("k=v", "k%3Dv"),
        ("%", "%25"),
        ("\"#'*?\\", "%22%23%27%2A%3F%5C"),
        ("{}[]^", "%7B%7D%5B%5D%5E"),
        ("\x00\x1f\x7f", "%00%1F%7F"),
        ("\t\n", "%09%0A"),
    ],
)
def test_escape_round_trip(raw: str, escaped: str) -> None:
    assert escape_path_name(raw) == escaped
    assert unescape_path_name(escaped) == raw


def test_escape_rejects_empty() -> None:
    with pytest.raises(ValueError):
        escape_path_name("")


def test_unescape_leaves_invalid_sequences() -> None:
    assert unescape_path_name("100%") == "100%"
    assert unescape_path_name("%zz") == "%zz"
    assert unescape_path_name("%4") == "%4"
    assert unescape_path_name("%41%4a") == "AJ"


# -- partition values ---------------------------------------------------------------------------


def test_partition_dir_legacy_default() -> None:
    values = [dt.date(2024, 1, 1), 1, "a:b"]
    types = [t("DATE"), t("INT"), t("VARCHAR")]
    assert partition_dir(values, ["dt", "hr", "s"], types) == "dt=19723/hr=1/s=a%3Ab"


def test_partition_dir_non_legacy() -> None:
    values = [dt.date(2024, 1, 1), dt.datetime(2024, 1, 1, 10, 0, 0)]
    types = [t("DATE"), t("TIMESTAMP", precision=0)]
    assert (
        partition_dir(values, ["dt", "ts"], types, legacy=False) == "dt=2024-01-01/ts=2024-01-01 10%3A00%3A00"
    )


def test_partition_dir_unpartitioned_and_mismatch() -> None:
    assert partition_dir([], [], []) == ""
    with pytest.raises(ValueError):
        partition_dir([1], ["a", "b"], [t("INT")])


def test_partition_keys_are_escaped() -> None:
    assert partition_dir(["v"], ["we:ird"], [t("STRING")]) == "we%3Aird=v"


@pytest.mark.parametrize("value", [None, "", " ", "\t\n", "\u2003"])
def test_default_partition_name(value) -> None:
    assert legacy(value, t("VARCHAR")) == "__DEFAULT_PARTITION__"
    assert cast(value, t("VARCHAR")) == "__DEFAULT_PARTITION__"
    assert partition_dir([value], ["p"], [t("VARCHAR")], default_name="nul") == "p=nul"


def test_java_non_whitespace_is_a_value() -> None:
    # Character.isWhitespace is false for no-break spaces (Python's isspace says true)
    assert legacy("\u00a0", t("VARCHAR")) == "\u00a0"
    assert legacy(None, t("INT")) == "__DEFAULT_PARTITION__"


def test_date_and_time() -> None:
    assert legacy(dt.date(2024, 1, 1), t("DATE")) == "19723"
    assert legacy(dt.date(1969, 12, 31), t("DATE")) == "-1"
    assert cast(dt.date(2024, 1, 1), t("DATE")) == "2024-01-01"
    assert legacy(dt.time(10, 0, 5, 123000), t("TIME")) == str(36_005_123)
    assert cast(dt.time(10, 0, 5, 123000), t("TIME")) == "10:00:05"
    assert cast(dt.time(10, 0, 5, 120000), t("TIME", precision=3)) == "10:00:05.12"
    assert cast(dt.time(10, 0, 5), t("TIME", precision=3)) == "10:00:05.0"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (dt.datetime(2024, 1, 1, 10, 0), "2024-01-01T10:00"),
        (dt.datetime(2024, 1, 1, 10, 0, 5), "2024-01-01T10:00:05"),
        (dt.datetime(2024, 1, 1, 10, 0, 5, 123000), "2024-01-01T10:00:05.123"),
        (dt.datetime(2024, 1, 1, 10, 0, 0, 1000), "2024-01-01T10:00:00.001"),
        (dt.datetime(2024, 1, 1, 10, 0, 5, 123456), "2024-01-01T10:00:05.123456"),
        (dt.datetime(2024, 1, 1, 0, 0, 0, 100), "2024-01-01T00:00:00.000100"),
    ],
)
def test_timestamp_legacy_is_local_date_time_to_string(value: dt.datetime, expected: str) -> None:
    assert legacy(value, t("TIMESTAMP", precision=6)) == expected


def test_timestamp_cast_pads_to_precision() -> None:
    value = dt.datetime(2024, 1, 1, 10, 0, 0)
    assert cast(value, t("TIMESTAMP", precision=0)) == "2024-01-01 10:00:00"
    assert cast(value, t("TIMESTAMP", precision=3)) == "2024-01-01 10:00:00.000"
    assert cast(value, t("TIMESTAMP")) == "2024-01-01 10:00:00.000000"  # default precision 6
    assert (
        cast(dt.datetime(2024, 1, 1, 10, 0, 0, 120000), t("TIMESTAMP", precision=3))
        == "2024-01-01 10:00:00.120"
    )
    assert cast(dt.datetime(2024, 1, 1, 10, 0, 0, 123456), t("TIMESTAMP", precision=3)) == (
        "2024-01-01 10:00:00.123456"
    )


def test_timestamp_ltz_legacy_prints_utc_fields() -> None:
    aware = dt.datetime(2024, 1, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert legacy(aware, t("TIMESTAMP_LTZ", precision=3)) == "2024-01-01T10:00"
    assert legacy(dt.datetime(2024, 1, 1, 10, 0), t("TIMESTAMP_LTZ", precision=3)) == "2024-01-01T10:00"


def test_decimal_is_plain_at_type_scale() -> None:
    assert legacy(Decimal("1.5"), t("DECIMAL", precision=10, scale=2)) == "1.50"
    assert legacy(Decimal("1E-7"), t("DECIMAL", precision=10, scale=8)) == "0.00000010"
    assert (
        legacy(Decimal("12345678901234567890"), t("DECIMAL", precision=38, scale=0)) == "12345678901234567890"
    )
    assert cast(Decimal("-0.5"), t("DECIMAL", precision=5, scale=1)) == "-0.5"


def test_boolean_and_integers() -> None:
    assert legacy(True, t("BOOLEAN")) == "true"
    assert cast(False, t("BOOLEAN")) == "false"
    assert legacy(-7, t("BIGINT")) == "-7"
    assert legacy(3, t("TINYINT")) == "3"


def test_unsupported_partition_types() -> None:
    with pytest.raises(UnsupportedOperationError):
        legacy(b"ab", t("VARBINARY"))
    assert cast(b"ab", t("VARBINARY")) == "ab"
    with pytest.raises(UnsupportedOperationError):
        legacy([1], t("ARRAY"))


# -- Java Double.toString / Float.toString --------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1.0"),
        (-1.0, "-1.0"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1e10, "1.0E10"),
        (1e-5, "1.0E-5"),
        (1.5e-5, "1.5E-5"),
        (0.001, "0.001"),
        (9.999e-4, "9.999E-4"),
        (0.1, "0.1"),
        (100.0, "100.0"),
        (1234567.0, "1234567.0"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (123.456, "123.456"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (4.9e-324, "4.9E-324"),
        (1e23, "1.0E23"),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
    ],
)
def test_java_double_to_string(value: float, expected: str) -> None:
    assert java_double_to_string(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1.0"),
        (0.1, "0.1"),
        (1e10, "1.0E10"),
        (1e-5, "1.0E-5"),
        (3.4028234663852886e38, "3.4028235E38"),
        (1.401298464324817e-45, "1.4E-45"),
        (16777216.0, "1.6777216E7"),
        (0.3, "0.3"),
        (1.1, "1.1"),
    ],
)
def test_java_float_to_string(value: float, expected: str) -> None:
    assert java_float_to_string(value) == expected


@pytest.mark.parametrize("value", [0.1, 1 / 3, 2 / 3, 1e-300, 123456.789e100, 5e-324, 2.5])
def test_double_text_round_trips(value: float) -> None:
    text = java_double_to_string(value)
    assert float(text.replace("E", "e")) == value


@pytest.mark.parametrize("value", [0.1, 1 / 3, 1e-30, 7.0e-45, 65504.0, 1.17549435e-38])
def test_float_text_round_trips(value: float) -> None:
    single = struct.unpack(">f", struct.pack(">f", value))[0]
    text = java_float_to_string(value)
    assert struct.unpack(">f", struct.pack(">f", float(text.replace("E", "e"))))[0] == single


def test_float_partition_value() -> None:
    assert legacy(0.1, t("FLOAT")) == "0.1"
    assert legacy(1e10, t("DOUBLE")) == "1.0E10"
    assert partition_dir([1.5], ["f"], [t("DOUBLE")]) == "f=1.5"


# -- parse_partition_dir ------------------------------------------------------------------------


def test_parse_partition_dir() -> None:
    assert parse_partition_dir("dt=2024-01-01/hr=01") == {"dt": "2024-01-01", "hr": "01"}
    assert parse_partition_dir("ts=2024-01-01T10%3A00/") == {"ts": "2024-01-01T10:00"}
    assert parse_partition_dir("a=x%3Dy") == {"a": "x=y"}
    assert parse_partition_dir("") == {}
    with pytest.raises(ValueError):
        parse_partition_dir("dt=1/bucket-0")


def test_parse_inverts_partition_dir() -> None:
    values = ["a/b", None, "x=y"]
    types = [t("VARCHAR")] * 3
    directory = partition_dir(values, ["p", "q", "r"], types)
    assert parse_partition_dir(directory) == {"p": "a/b", "q": "__DEFAULT_PARTITION__", "r": "x=y"}


# -- patterns and classification ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "kind"),
    [
        ("snapshot/snapshot-1", "snapshot"),
        ("snapshot/snapshot-123456", "snapshot"),
        ("snapshot/LATEST", "snapshot-hint"),
        ("snapshot/EARLIEST", "snapshot-hint"),
        ("schema/schema-0", "schema"),
        (f"manifest/manifest-{UUID}-0", "manifest"),
        (f"manifest/manifest-list-{UUID}-1", "manifest-list"),
        (f"manifest/manifest-list-{UUID}-changelog", "manifest-list"),
        (f"manifest/index-manifest-{UUID}-0", "index-manifest"),
        (f"index/index-{UUID}-3", "index"),
        (f"statistics/stat-{UUID}-0", "statistics"),
        ("tag/tag-2024-01-01", "tag"),
        ("consumer/consumer-my_group", "consumer"),
        ("changelog/changelog-5", "changelog-metadata"),
        ("changelog/LATEST", "changelog-hint"),
        ("branch/branch-dev/snapshot/snapshot-2", "snapshot"),
        ("branch/branch-dev/schema/schema-1", "schema"),
        ("branch/branch-dev/tag/tag-t1", "tag"),
        (f"dt=1/bucket-0/data-{UUID}-0.parquet", "data"),
        (f"dt=1/hr=2/bucket-12/data-{UUID}-7.zstd.parquet", "data"),
        (f"bucket-0/data-{UUID}-0.orc", "data"),
        (f"dt=1/bucket-postpone/data-{UUID}-0.avro", "data"),
        (f"dt=1/bucket-0/data-{UUID}-0.parquet.index", "data"),
        (f"dt=1/bucket-0/changelog-{UUID}-0.parquet", "changelog-data"),
        (f"dt=1/bucket-0/index-{UUID}-0", "index"),
        ("dt=1/_SUCCESS", "success-file"),
        (f"snapshot/.snapshot-3.{UUID}.tmp", "temp"),
        (f"dt=1/bucket-0/.data-x.parquet.{UUID}.tmp", "temp"),
    ],
)
def test_classify_file(relative: str, kind: str) -> None:
    assert classify_file(relative) == kind


@pytest.mark.parametrize(
    "relative",
    [
        "",
        "snapshot/snapshot-x",
        "snapshot/latest",
        "snapshot/snapshot-1/extra",
        "schema/schema-",
        "manifest/manifest-abc-0",
        f"manifest/data-{UUID}-0.parquet",
        f"data-{UUID}-0.parquet",  # data files live in bucket dirs
        f"dt=1/data-{UUID}-0.parquet",
        f"dt=1/bucket-0/data-{UUID}-0",  # no extension
        f"dt=1/bucket-x/data-{UUID}-0.parquet",
        "dt=1/bucket-0/part-0000.parquet",
        "dt=1/bucket-0/.hidden.tmp",
        "index/global-btree.index",
        "README",
        "tag/other",
        "branch/branch-dev/dt=1/bucket-0/x",
        "other/_SUCCESS",
    ],
)
def test_classify_rejects_non_paimon_names(relative: str) -> None:
    assert classify_file(relative) is None


def test_classify_with_custom_prefixes() -> None:
    name = f"dt=1/bucket-0/part-{UUID}-0.parquet"
    assert classify_file(name) is None
    assert classify_file(name, data_file_prefix="part-") == "data"
    assert classify_file(f"bucket-0/cl-{UUID}-0.orc", changelog_file_prefix="cl-") == "changelog-data"


def test_patterns_match_generated_names() -> None:
    assert paths.DATA_FILE_RE.fullmatch(new_data_file_name("data-", UUID, 12, "parquet"))
    assert paths.CHANGELOG_FILE_RE.fullmatch(new_data_file_name("changelog-", UUID, 0, "orc"))
    assert paths.SNAPSHOT_RE.fullmatch("snapshot-42").group("id") == "42"
    assert paths.SCHEMA_RE.fullmatch("schema-3").group("id") == "3"
    assert not paths.MANIFEST_RE.fullmatch(f"manifest-list-{UUID}-0")
    assert paths.TAG_RE.fullmatch("tag-x").group("name") == "x"
    assert paths.BUCKET_DIR_RE.fullmatch("bucket-postpone")
