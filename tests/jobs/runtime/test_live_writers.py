"""A missing file while another writer committed during the run is a race (exit 3), not bad input."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

from jobs.runtime.errors import EXIT_BAD_INPUT, EXIT_REFUSED
from jobs.runtime.live_writers import race_or_bad_input
from paimon_format.errors import CorruptFileError, MissingFileError
from tests.support.table_states import IDENTIFIER, append_rows, batch, build_sample_table


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")


def test_a_missing_file_is_a_race_only_when_another_writer_committed_during_the_run(tmp_path) -> None:
    table = build_sample_table(str(tmp_path), commits=2)
    config = SimpleNamespace(warehouse=str(tmp_path), table=IDENTIFIER, storage_options=None)
    before = table.snapshot_manager.latest()
    missing = MissingFileError(f"{table.path}/manifest/manifest-x-0")

    started = iso(before.time_millis + 1)  # the run started after the last commit: nobody raced it
    assert race_or_bad_input(missing, EXIT_BAD_INPUT, "gone", config, started) == (EXIT_BAD_INPUT, "gone")

    append_rows(table, batch(100, 2))  # a writer commits while the run reads
    rival = table.snapshot_manager.latest()
    code, message = race_or_bad_input(missing, EXIT_BAD_INPUT, "gone", config, iso(rival.time_millis))
    assert code == EXIT_REFUSED
    assert message.startswith("gone -- ") and f"snapshot {rival.id} was committed" in message


def test_other_failures_keep_their_exit_code_under_a_live_writer(tmp_path) -> None:
    table = build_sample_table(str(tmp_path), commits=2)
    config = SimpleNamespace(warehouse=str(tmp_path), table=IDENTIFIER, storage_options=None)
    started = iso(table.snapshot_manager.latest().time_millis)
    corrupt = CorruptFileError(f"{table.path}/manifest/m-0", "truncated")
    assert race_or_bad_input(corrupt, EXIT_BAD_INPUT, "bad", config, started) == (EXIT_BAD_INPUT, "bad")
    assert race_or_bad_input(MissingFileError("x"), 1, "boom", config, started) == (1, "boom")
    no_config = race_or_bad_input(MissingFileError("x"), EXIT_BAD_INPUT, "m", None, started)
    assert no_config == (EXIT_BAD_INPUT, "m")
