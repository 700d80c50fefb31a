"""`python -m paimon_format system-table`: what a user sees, and exit 2 with the cause on bad input."""

from __future__ import annotations

import csv
import io
import json

from paimon_format.__main__ import main
from paimon_format.system_tables import system_table
from tests.support.table_states import build_sample_table


def test_system_table_prints_text_csv_and_json_lines(tmp_path, capsys) -> None:
    table = build_sample_table(str(tmp_path / "wh"))
    files = system_table(table, "files", tag="t2").to_pylist()

    assert main(["system-table", table.path, "$files", "--tag", "t2", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["file_path"], int(r["record_count"])) for r in rows] == [
        (f["file_path"], f["record_count"]) for f in files
    ]

    assert main(["system-table", table.path, "snapshots", "--format", "json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["snapshot_id"] for line in lines] == table.snapshot_manager.snapshot_ids()

    assert main(["system-table", table.path, "partitions"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].split() == [
        "partition",
        "record_count",
        "file_size_in_bytes",
        "file_count",
        "last_update_time",
        "created_at",
        "created_by",
        "updated_by",
        "options",
    ]
    assert text[1].startswith("dt=2024-01-01 ") and text[-1] == "(3 rows)"


def test_system_table_bad_input_exits_2_naming_the_cause(tmp_path, capsys) -> None:
    table = build_sample_table(str(tmp_path / "wh"), commits=1)
    assert main(["system-table", table.path, "audit_log"]) == 2
    assert "no system table 'audit_log'" in capsys.readouterr().err
    assert main(["system-table", table.path, "files", "--snapshot", "7"]) == 2
    assert "snapshot 7 does not exist" in capsys.readouterr().err
    assert main(["system-table", str(tmp_path / "none"), "files"]) == 2
    assert "not a Paimon table" in capsys.readouterr().err
