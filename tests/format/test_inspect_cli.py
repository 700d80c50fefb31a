"""`python -m paimon_format inspect`: what a user sees, and clear errors for broken tables."""

from __future__ import annotations

import json

from paimon_format.__main__ import main
from paimon_format.commit import SnapshotCommit
from tests.support.factories import data_file, make_table, message


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


def test_files_per_partition_counts_sizes_and_small_files(tmp_path, capsys):
    root = str(tmp_path / "db.db" / "t")
    table = make_table(root, options={"target-file-size": "4 mb"})
    mib = 1024 * 1024
    committer = SnapshotCommit(table)
    committer.append(
        [
            message(table, ["a"], data_file("data-a1.parquet", rows=5, size=100)),
            message(table, ["a"], data_file("data-a2.parquet", rows=6, size=3 * mib)),
        ]
    )
    committer.append([message(table, ["b"], data_file("data-b1.parquet", rows=7, size=20 * mib))])

    assert main(["inspect", root, "--files-per-partition", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["files_per_partition"]
    assert summary["small_file_below"] == 2 * mib and summary["small_files"] == 1
    assert summary["partitions"] == [
        {"partition": "dt=a", "files": 2, "bytes": 100 + 3 * mib, "rows": 11, "small_files": 1},
        {"partition": "dt=b", "files": 1, "bytes": 20 * mib, "rows": 7, "small_files": 0},
    ]
    assert summary["size_histogram"] == {
        "< 1 MiB": 1,
        "1-16 MiB": 1,
        "16-64 MiB": 1,
        "64-128 MiB": 0,
        ">= 128 MiB": 0,
    }
    assert main(["inspect", root, "--files-per-partition"]) == 0
    text = capsys.readouterr().out
    assert "files per partition (2 partitions" in text and "data-a1.parquet" not in text
    assert any(line.split()[:3] == ["dt=a", "2", "1"] for line in text.splitlines())


def test_inspect_into_a_closed_pipe_prints_no_traceback(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = str(tmp_path / "db.db" / "t")
    table = make_table(root)
    SnapshotCommit(table).append([message(table, ["p"], data_file("data-1.parquet"))])
    repo = Path(__file__).resolve().parents[2]
    inspect = subprocess.Popen(
        [sys.executable, "-m", "paimon_format", "inspect", root],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=repo,
    )
    inspect.stdout.close()  # the reader is gone before the output comes, as `| head -1` is after a line
    stderr = inspect.stderr.read().decode()
    assert inspect.wait(timeout=60) == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr
