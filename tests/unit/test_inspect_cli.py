"""`python -m paimon_format inspect`: what a user sees, and clear errors for broken tables."""

from __future__ import annotations

import json

from paimon_format.__main__ import main
from paimon_format.commit import SnapshotCommit
from tests.factories import data_file, make_table, message


def test_inspect_lists_schema_snapshots_and_live_files(tmp_path, capsys):
    root = str(tmp_path / "db.db" / "t")
    table = make_table(root)
    committer = SnapshotCommit(table)
    committer.append([message(table, ["2024-01-01"], data_file("data-a.parquet", rows=5, size=50))])
    committer.append([message(table, ["2024-01-02"], data_file("data-b.parquet", rows=7, size=70))])

    assert main(["inspect", root, "--json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert [s["id"] for s in described["snapshots"]] == [1, 2]
    assert described["snapshot"] == 2
    assert [(f["partition"], f["file"], f["rows"]) for f in described["files"]] == [
        ("dt=2024-01-01", "data-a.parquet", 5),
        ("dt=2024-01-02", "data-b.parquet", 7),
    ]
    assert described["totals"] == {"files": 2, "bytes": 120, "rows": 12}

    assert main(["inspect", root, "--snapshot", "1"]) == 0
    text = capsys.readouterr().out
    assert "live files of snapshot 1: 1 files, 5 rows" in text and "data-b.parquet" not in text


def test_inspect_errors_exit_2_with_the_cause(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "nothing")]) == 2
    assert "not a Paimon table" in capsys.readouterr().err

    root = str(tmp_path / "db.db" / "t")
    table = make_table(root)
    SnapshotCommit(table).append([message(table, ["x"], data_file("data-a.parquet"))])
    assert main(["inspect", root, "--snapshot", "7"]) == 2
    assert "snapshot-7" in capsys.readouterr().err

    (tmp_path / "db.db" / "t" / "snapshot" / "snapshot-1").write_text("{not json")
    assert main(["inspect", root]) == 2
    assert "snapshot-1" in capsys.readouterr().err
