"""Instants given as text: a duration ago, or a UTC timestamp."""

from __future__ import annotations

import pytest

from paimon_format.model.instants import instant_ms, iso_utc

NOW = 1_715_644_800_000  # 2024-05-14 00:00:00 UTC


def test_a_duration_counts_back_from_now():
    assert instant_ms("1 h", NOW) == NOW - 3_600_000
    assert instant_ms(" 7d ", NOW) == NOW - 7 * 86_400_000
    assert instant_ms("500", NOW) == NOW - 500


def test_a_timestamp_without_a_zone_is_utc_and_one_with_a_zone_keeps_it():
    assert instant_ms("2024-05-14 00:00:00", 0) == NOW
    assert instant_ms("2024-05-14T02:00:00+02:00", 0) == NOW


def test_anything_else_names_both_accepted_forms():
    with pytest.raises(ValueError, match="neither a duration .* nor a timestamp"):
        instant_ms("yesterday", NOW)


def test_iso_utc_writes_epoch_ms_back():
    assert iso_utc(NOW) == "2024-05-14T00:00:00+00:00"
    assert iso_utc(NOW + 1500, "seconds") == "2024-05-14T00:00:01+00:00"
