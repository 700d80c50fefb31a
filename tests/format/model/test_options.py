"""CoreOptions defaults and parsing, and Java's MemorySize / TimeUtils rules."""

from __future__ import annotations

import pytest

from paimon_format.errors import PaimonFormatError
from paimon_format.model.options import (
    INT_MAX,
    CoreOptions,
    InvalidOptionError,
    options_to_strings,
    parse_duration_ms,
    parse_memory_size,
)

MB = 1024 * 1024


def test_defaults_match_paimon():
    options = CoreOptions({})
    assert options.bucket == -1
    assert options.bucket_key is None
    assert options.file_format == "parquet"
    assert options.file_compression == "zstd"
    assert options.file_compression_zstd_level == 1
    assert options.manifest_format == "avro"
    assert options.manifest_compression == "zstd"
    assert options.manifest_target_file_size == 8 * MB
    assert options.manifest_full_compaction_threshold_size == 16 * MB
    assert options.manifest_merge_min_count == 30
    assert options.target_file_size(True) == 128 * MB
    assert options.target_file_size(False) == 256 * MB
    assert options.partition_default_name == "__DEFAULT_PARTITION__"
    assert options.partition_legacy_name is True
    assert options.partition_expiration_time_ms is None
    assert options.partition_expiration_check_interval_ms == 3_600_000
    assert options.snapshot_num_retained_min == 10
    assert options.snapshot_num_retained_max == INT_MAX
    assert options.snapshot_time_retained_ms == 3_600_000
    assert options.snapshot_expire_limit == 50
    assert options.snapshot_ignore_empty_commit is None
    assert options.commit_max_retries == 10
    assert options.commit_timeout_ms is None
    assert options.commit_min_retry_wait_ms == 10
    assert options.commit_max_retry_wait_ms == 10_000
    assert options.merge_engine == "deduplicate"
    assert options.changelog_producer == "none"
    assert options.deletion_vectors_enabled is False
    assert options.data_file_thin_mode is False
    assert options.primary_key_nullable is False
    assert options.sequence_field == []
    assert options.metadata_stats_mode == "truncate(16)"
    assert options.metadata_stats_dense_store is True
    assert options.num_sorted_run_compaction_trigger == 5
    assert options.write_only is False
    assert options.dynamic_bucket_target_row_num == 2_000_000
    assert options.data_file_prefix == "data-"
    assert options.changelog_file_prefix == "changelog-"
    assert options.data_file_path_directory is None
    assert options.file_index_in_manifest_threshold == 500
    options.validate()


def test_explicit_values_are_parsed():
    options = CoreOptions(
        {
            "bucket": "4",
            "bucket-key": "a,b",
            "file.format": "ORC",
            "manifest.target-file-size": "2 mb",
            "target-file-size": "64MB",
            "snapshot.time-retained": "30 min",
            "snapshot.num-retained.max": "20",
            "commit.timeout": "1 h",
            "commit.max-retry-wait": "5s",
            "merge-engine": "Partial-Update",
            "changelog-producer": "LOOKUP",
            "deletion-vectors.enabled": "TRUE",
            "partition.legacy-name": "False",
            "sequence.field": " ts , seq ",
            "data-file.path-directory": "data",
        }
    )
    assert options.bucket == 4
    assert options.bucket_key == ["a", "b"]
    assert options.file_format == "orc"
    assert options.manifest_target_file_size == 2 * MB
    assert options.target_file_size(True) == options.target_file_size(False) == 64 * MB
    assert options.snapshot_time_retained_ms == 30 * 60_000
    assert options.snapshot_num_retained_max == 20
    assert options.commit_timeout_ms == 3_600_000
    assert options.commit_max_retry_wait_ms == 5_000
    assert options.merge_engine == "partial-update"
    assert options.changelog_producer == "lookup"
    assert options.deletion_vectors_enabled is True
    assert options.partition_legacy_name is False
    assert options.sequence_field == ["ts", "seq"]
    assert options.data_file_path_directory == "data"
    options.validate()


def test_changelog_retention_falls_back_to_snapshot_retention():
    options = CoreOptions({"snapshot.num-retained.min": "3", "snapshot.time-retained": "2 h"})
    assert options.changelog_num_retained_min == 3
    assert options.changelog_time_retained_ms == 7_200_000
    assert CoreOptions({"changelog.num-retained.min": "7"}).changelog_num_retained_min == 7


def test_unknown_options_are_kept():
    raw = {"bucket": "2", "my.custom.key": "anything", "fields.a.aggregate-function": "sum"}
    options = CoreOptions(raw)
    assert options["my.custom.key"] == "anything"
    assert options.to_map() == raw
    assert len(options) == 3 and set(options) == set(raw)
    assert {**options} == raw
    options.validate()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("bucket", "abc"),
        ("bucket", "1.5"),
        ("bucket", "99999999999"),
        ("manifest.target-file-size", "8 parsecs"),
        ("snapshot.time-retained", "1 fortnight"),
        ("deletion-vectors.enabled", "yes"),
        ("merge-engine", "latest"),
        ("changelog-producer", "always"),
        ("commit.max-retries", ""),
    ],
)
def test_invalid_value_names_the_option(key, value):
    options = CoreOptions({key: value})
    with pytest.raises(InvalidOptionError) as raised:
        options.validate()
    message = str(raised.value)
    assert key in message and repr(value) in message
    assert raised.value.key == key
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, PaimonFormatError)


def test_invalid_value_fails_only_when_read():
    options = CoreOptions({"bucket": "abc"})
    assert options.file_format == "parquet"
    with pytest.raises(InvalidOptionError, match="'bucket'"):
        _ = options.bucket


def test_validate_checks_retention_bounds():
    with pytest.raises(InvalidOptionError, match="snapshot.num-retained.min"):
        CoreOptions({"snapshot.num-retained.min": "0"}).validate()
    with pytest.raises(InvalidOptionError, match="larger than"):
        CoreOptions({"snapshot.num-retained.min": "20", "snapshot.num-retained.max": "5"}).validate()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8 mb", 8 * MB),
        ("128MB", 128 * MB),
        ("1 gb", 1024 * MB),
        ("64kb", 64 * 1024),
        ("1024", 1024),
        ("0", 0),
        ("  2 k ", 2048),
        ("3 b", 3),
        ("5 bytes", 5),
        ("1 m", MB),
        ("2 Mebibytes", 2 * MB),
        ("1 G", 1024 * MB),
        ("1 tb", 1024 * 1024 * MB),
        ("7 kibibytes", 7 * 1024),
        ("9223372036854775807", 2**63 - 1),
    ],
)
def test_parse_memory_size(text, expected):
    assert parse_memory_size(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "mb",
        "abc",
        "1.5 mb",
        "-1",
        "+1",
        "10 xb",
        "1 mbs",
        "99999999999999999999",
        "9223372036854775807 kb",
    ],
)
def test_parse_memory_size_rejects(text):
    with pytest.raises(ValueError):
        parse_memory_size(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 h", 3_600_000),
        ("1h", 3_600_000),
        ("2 hours", 7_200_000),
        ("30 min", 1_800_000),
        ("30min", 1_800_000),
        ("2 m", 120_000),
        ("3 minutes", 180_000),
        ("10 s", 10_000),
        ("10s", 10_000),
        ("5 secs", 5_000),
        ("1 second", 1_000),
        ("1 d", 86_400_000),
        ("7 days", 7 * 86_400_000),
        ("100 ms", 100),
        ("100 millis", 100),
        ("500", 500),
        ("1 MIN", 60_000),
        ("1 H", 3_600_000),
        ("1500 µs", 1),
        ("2500 micros", 2),
        ("999999 ns", 0),
        ("3000000 nanos", 3),
    ],
)
def test_parse_duration_ms(text, expected):
    assert parse_duration_ms(text) == expected


@pytest.mark.parametrize("text", ["", "h", "1 week", "1.5 h", "-1 s", "1 hh", "P1D"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration_ms(text)


def test_options_to_strings():
    converted = options_to_strings(
        {"bucket": 4, "write-only": True, "x": False, "file.format": "orc", "r": 0.5}
    )
    assert converted == {"bucket": "4", "write-only": "true", "x": "false", "file.format": "orc", "r": "0.5"}
    with pytest.raises(InvalidOptionError, match="'bucket'"):
        options_to_strings({"bucket": None})
    with pytest.raises(InvalidOptionError):
        options_to_strings({"k": ["a"]})
