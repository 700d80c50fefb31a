"""The warehouse health page (`python -m jobs report`, maintain's `report:` block), issue #31.

The page is parsed with html.parser (its figures sit in `data-figure` / `data-value` attributes),
and its figures are compared with `python -m paimon_format inspect --files-per-partition`'s, read
the usual way (every live entry merged), for an append table, a primary-key table with tags, a
branch, a consumer and a compaction (DELETE entries), and a metadata-only table of 240 files of
many sizes. No Spark: the page reads metadata in the driver.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tracemalloc
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs.__main__ import main
from jobs.report.table_health import live_files
from paimon_format.commit import SnapshotCommit
from paimon_format.errors import InvalidTableStateError
from paimon_format.inspect import describe_table, files_per_partition
from paimon_format.manifest.codec import write_manifest, write_manifest_list
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.table import Table
from tests.s3.proxy import ThrottlingProxy
from tests.support.factories import data_file, make_table, message
from tests.support.health_tables import (
    MARKUP,
    build_health_warehouse,
    truncate_latest_manifest,
    write_run_records,
)
from tests.support.table_states import build_sample_table, copy_warehouse

CHROMIUM = Path("/usr/bin/chromium")
TABLES = ("db.events", "db.orders", "db.t")


@dataclass
class Section:
    """What the page shows of one table."""

    cards: dict[str, str] = field(default_factory=dict)
    partitions: dict[str, dict[str, int]] = field(default_factory=dict)
    histogram: dict[str, int] = field(default_factory=dict)
    advice: list[str] = field(default_factory=list)
    error: str = ""
    runs: list[dict[str, Any]] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    branches: list[str] = field(default_factory=list)
    consumers: list[str] = field(default_factory=list)


class PageParser(HTMLParser):
    """Collects each table section's figures and texts, and every tag name the document has."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, Section] = {}
        self.tags_seen: set[str] = set()
        self.record_errors: list[str] = []
        self._section: Section | None = None
        self._row: dict[str, Any] | None = None  # the partition or run row we are in
        self._text_into: tuple[Any, Any] | None = None  # (container, key) text goes to
        self._option: str | None = None
        self._cells = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags_seen.add(tag)
        a = {key: value or "" for key, value in attrs}
        classes = a.get("class", "").split()
        if tag == "section" and "table-health" in classes:
            self._section = self.sections.setdefault(a["data-table"], Section())
            return
        section = self._section
        if section is None:
            if "records-error" in classes:
                self.record_errors.append("")
                self._text_into = (self.record_errors, -1)
            return
        if tag == "tr" and "data-partition" in a:
            self._row = section.partitions.setdefault(a["data-partition"], {})
        elif tag == "tr" and "run" in classes:
            self._row = {"started": a["data-started"]}
            section.runs.append(self._row)
        elif tag == "tr" and "data-option" in a:
            self._option, self._cells = a["data-option"], 0
        elif tag == "tr":
            for kind, target in (("data-tag", section.tags), ("data-consumer", section.consumers)):
                if kind in a:
                    target.append(a[kind])
        elif tag == "li" and "data-branch" in a:
            section.branches.append(a["data-branch"])
        if tag == "td" and self._option is not None:
            self._cells += 1
            if self._cells == 2:
                section.options[self._option] = ""
                self._text_into = (section.options, self._option)
        if "data-figure" in a:
            value = a["data-value"]
            if self._row is not None:
                self._row[a["data-figure"]] = int(value)
            else:
                section.cards[a["data-figure"]] = value
        if tag == "rect" and "data-bucket" in a:
            section.histogram[a["data-bucket"]] = int(a["data-value"])
        if tag == "div" and "table-error" in classes:
            self._text_into = (section, "error")
        if tag == "li" and "data-branch" not in a:
            section.advice.append("")
            self._text_into = (section.advice, -1)

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self._section = None
        if tag == "tr":
            self._row, self._option = None, None
        if tag in ("li", "div", "td"):
            self._text_into = None

    def handle_data(self, data: str) -> None:
        if self._text_into is None:
            return
        container, key = self._text_into
        if isinstance(container, Section):
            setattr(container, key, getattr(container, key) + data)
        else:
            container[key] += data


def parse(html: str) -> PageParser:
    parser = PageParser()
    parser.feed(html)
    parser.close()
    return parser


def write_config(tmp_path: Path, warehouse: str, **report: Any) -> str:
    path = tmp_path / "maintain.yaml"
    document: dict[str, Any] = {"warehouse": warehouse, "tables": ["db.*"]}
    if report:
        document["report"] = report
    path.write_text(yaml.safe_dump(document))
    return str(path)


def run_report(capsys: pytest.CaptureFixture[str], config: str, *extra: str) -> tuple[int, dict]:
    code = main(["report", "--config", config, *extra])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The health warehouse (tests/support/health_tables.py) and its run records, built once."""
    root = tmp_path_factory.mktemp("health")
    build_health_warehouse(str(root / "wh"))
    write_run_records(str(root / "runs"))
    return root


@pytest.fixture
def warehouse(template: Path, tmp_path: Path) -> str:
    shutil.copytree(template / "runs", tmp_path / "runs")
    return copy_warehouse(str(template / "wh"), str(tmp_path / "wh"))


def inspect_figures(warehouse: str, identifier: str) -> tuple[dict[str, Any], dict[str, Any]]:
    table = Table.open(warehouse, identifier)
    description = describe_table(table)
    return description, files_per_partition(table, description["files"])


def test_the_page_shows_what_inspect_shows_for_every_table(warehouse, tmp_path, capsys):
    out = tmp_path / "report.html"
    code, record = run_report(capsys, write_config(tmp_path, warehouse), "--out", str(out))
    assert code == 0, record["error"]
    assert record["counts"]["tables"] == 3 and record["counts"]["tables_unreadable"] == 0
    page = parse(out.read_text())
    assert sorted(page.sections) == list(TABLES)
    for identifier in TABLES:
        section = page.sections[identifier]
        description, summary = inspect_figures(warehouse, identifier)
        totals = description["totals"]
        assert int(section.cards["live_files"]) == totals["files"], identifier
        assert int(section.cards["live_bytes"]) == totals["bytes"], identifier
        assert int(section.cards["live_rows"]) == totals["rows"], identifier
        assert int(section.cards["small_files"]) == summary["small_files"], identifier
        assert int(section.cards["snapshots"]) == len(description["snapshots"]), identifier
        assert int(section.cards["partitions"]) == len(summary["partitions"]), identifier
        assert section.histogram == summary["size_histogram"], identifier
        top = sorted(summary["partitions"], key=lambda p: (-p["files"], -p["bytes"]))[:10]
        assert {p["partition"] for p in top} == set(section.partitions), identifier
        for p in top:
            shown = section.partitions[p["partition"]]
            assert shown == {k: p[k] for k in ("files", "small_files", "rows", "bytes")}, identifier
        assert sorted(section.tags) == sorted(description["tags"]), identifier
        assert section.consumers == [c["id"] for c in description["consumers"]], identifier
        assert section.advice, identifier
    events = page.sections["db.events"]
    assert len([count for count in events.histogram.values() if count]) >= 4  # sizes of every kind
    assert int(events.cards["live_files"]) == 240
    orders = page.sections["db.orders"]
    assert orders.branches == ["audit"] and orders.tags == ["daily-2", "daily-1"]  # newest first
    assert any("DELETE entries" in line for line in orders.advice)  # the compaction's manifest


def test_markup_in_options_and_records_is_shown_as_text(warehouse, tmp_path, capsys):
    out = tmp_path / "report.html"
    config = write_config(tmp_path, warehouse, out=str(out), records=[str(tmp_path / "runs")])
    code, _record = run_report(capsys, config)
    assert code == 0
    page = parse(out.read_text())
    assert "script" not in page.tags_seen
    orders = page.sections["db.orders"]
    assert orders.options["x.owner-note"] == MARKUP
    assert orders.runs[0]["started"].startswith("2026-11-26")
    assert "<script>" not in out.read_text() and "&lt;script&gt;" in out.read_text()


def test_last_runs_come_from_the_run_records_newest_first(warehouse, tmp_path, capsys):
    out = tmp_path / "report.html"
    config = write_config(tmp_path, warehouse, out=str(out), records=[str(tmp_path / "runs" / "*.json")])
    assert run_report(capsys, config)[0] == 0
    page = parse(out.read_text())
    (t_run,) = page.sections["db.t"].runs
    # expire-snapshots: 3 snapshots, 12 files + 5 manifests; compact: 9 files rewritten into 2
    assert t_run["snapshots_expired"] == 3
    assert t_run["files_removed"] == 12 + 5 + 9
    assert t_run["bytes_removed"] == 100000 + 23456 + 5
    failed, dry_compact = page.sections["db.orders"].runs
    assert failed["started"] > dry_compact["started"]
    assert dry_compact["files_removed"] == 6  # the dry run's files_before
    assert page.sections["db.events"].runs == []


def test_a_broken_table_gets_an_error_block_and_the_others_still_render(warehouse, tmp_path, capsys):
    copy_warehouse(f"{warehouse}/db.db/t", f"{warehouse}/db.db/broken")
    manifest = truncate_latest_manifest(f"{warehouse}/db.db/broken")
    out = tmp_path / "report.html"
    code, record = run_report(capsys, write_config(tmp_path, warehouse), "--out", str(out))
    assert code == 2
    assert record["counts"]["tables_unreadable"] == 1
    assert manifest in record["details"]["tables"]["db.broken"]["error"]
    page = parse(out.read_text())
    broken = page.sections["db.broken"]
    assert manifest in broken.error and not broken.cards
    for identifier in TABLES:
        assert page.sections[identifier].cards["live_files"], identifier
        assert not page.sections[identifier].error


def test_a_file_that_is_no_run_record_is_shown_and_exits_2(warehouse, tmp_path, capsys):
    (tmp_path / "runs" / "garbage.json").write_text("{not json")
    out = tmp_path / "report.html"
    config = write_config(tmp_path, warehouse, out=str(out), records=[str(tmp_path / "runs")])
    code, record = run_report(capsys, config)
    assert code == 2 and "garbage.json" in record["error"]
    page = parse(out.read_text())
    assert any("garbage.json" in error for error in page.record_errors)
    assert page.sections["db.t"].runs  # the good records are still read


@pytest.mark.parametrize(
    ("document", "extra", "message"),
    [
        ({"warehouse": "/nonexistent/wh", "tables": ["db.*"]}, ["--out", "x.html"], "does not exist"),
        ({"warehouse": "WH", "tables": ["db.*"]}, [], "give --out or set report.out"),
        ({"warehouse": "WH", "tables": ["db.*"], "report": {"outt": "x"}}, [], "report.outt"),
        ({"warehouse": "WH", "tables": ["db.*"], "report": {"top_partitions": 0}}, [], "top_partitions"),
    ],
)
def test_bad_input_exits_2_with_a_message_and_writes_no_page(
    warehouse, tmp_path, capsys, document, extra, message
):
    document = json.loads(json.dumps(document).replace('"WH"', json.dumps(warehouse)))
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(document))
    code, record = run_report(
        capsys, str(path), *[str(tmp_path / e) if e.endswith(".html") else e for e in extra]
    )
    assert code == 2 and message in record["error"]
    assert not list(tmp_path.glob("*.html"))


def test_a_delete_without_its_add_is_an_error_not_a_smaller_count(tmp_path):
    """Net counting must not hide inconsistent metadata: a manifest added to the latest list that
    deletes two files no manifest ever added (more DELETEs than ADDs in the partition)."""
    table = make_table(str(tmp_path / "db.db" / "x"), partition_keys=(), options={})
    snapshot = SnapshotCommit(table).append([message(table, [], data_file("data-a.parquet", size=10))])
    ghosts = [data_file(f"data-ghost-{n}.parquet", size=10) for n in range(2)]
    ghost = message(table, [], deleted=ghosts).entries()
    size = write_manifest(table.file_io, table.manifest_path("manifest-ghost-0"), ghost)
    metas = table.manifest_list(snapshot.delta_manifest_list)
    metas.append(
        replace(
            metas[0], file_name="manifest-ghost-0", file_size=size, num_added_files=0, num_deleted_files=1
        )
    )
    write_manifest_list(table.file_io, table.manifest_path(snapshot.delta_manifest_list), metas)
    fresh = Table(table.file_io, table.path)
    with pytest.raises(InvalidTableStateError, match="delete files they never added"):
        live_files(fresh, fresh.snapshot_manager.latest(), 100)


def metadata_only_table(root: str, commits: int, files_per_commit: int = 50) -> Table:
    """An append table of `commits` commits of `files_per_commit` files each (manifests only)."""
    table = make_table(root, options={"manifest.merge-min-count": "100000"})
    for commit in range(commits):
        files = [data_file(f"data-{commit}-{n}.parquet", size=1000 + n) for n in range(files_per_commit)]
        SnapshotCommit(table).append([message(table, [f"d{commit % 7}"], *files)])
    return Table(table.file_io, table.path)


def peak_bytes(table: Table) -> int:
    tracemalloc.start()
    try:
        live = live_files(table, table.snapshot_manager.latest(), 10)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        assert live.files == int(table.snapshot_manager.latest().id) * 50


def test_memory_grows_with_partitions_not_with_files(tmp_path):
    """Ten times the files in the same 7 partitions (manifests of one size): the peak stays put,
    where holding every entry (as `inspect` does) grows tenfold."""
    small = metadata_only_table(str(tmp_path / "db.db" / "small"), commits=5)
    large = metadata_only_table(str(tmp_path / "db.db" / "large"), commits=50)
    peak_bytes(small)  # warm-up: imports and caches are not the table's
    assert peak_bytes(large) < 2 * peak_bytes(small)


def test_maintain_writes_the_page_with_its_own_run(warehouse, tmp_path, capsys):
    out = tmp_path / "after-maintain.html"
    config = write_config(tmp_path, warehouse, out=str(out))
    code = main(["maintain", "--config", config])
    record = json.loads(capsys.readouterr().out)
    assert code == 0, record["error"]
    assert record["details"]["report"] == {"out": str(out), "written": True, "unreadable_tables": []}
    page = parse(out.read_text())
    (run,) = page.sections["db.t"].runs
    assert run["started"] == record["started"]


def test_a_page_maintain_cannot_write_makes_a_clean_run_exit_2_after_the_work(warehouse, tmp_path, capsys):
    out = tmp_path / "no-such-directory" / "health.html"
    code = main(["maintain", "--config", write_config(tmp_path, warehouse, out=str(out))])
    record = json.loads(capsys.readouterr().out)
    assert code == 2 and "no-such-directory" in record["error"]
    assert record["details"]["report"]["written"] is False
    assert record["counts"]["tables_done"] == 3  # every table was maintained first


def test_a_maintain_dry_run_writes_no_page(warehouse, tmp_path, capsys):
    out = tmp_path / "dry.html"
    code = main(["maintain", "--config", write_config(tmp_path, warehouse, out=str(out)), "--dry-run"])
    record = json.loads(capsys.readouterr().out)
    assert code == 0 and record["details"]["report"]["written"] is False
    assert not out.exists()


def test_on_s3_the_page_reads_each_metadata_file_once_and_no_data_file(moto_s3, tmp_path, capsys):
    """Through the proxy's ledger: every GET is a metadata file (schema, snapshot, tag, manifest
    list, manifest), each read once, and the page is written to S3 in one PUT."""
    endpoint, bucket, _ = moto_s3
    with ThrottlingProxy(endpoint) as proxy:
        options = {"endpoint_url": proxy.endpoint_url, "client_kwargs": {"region_name": "us-east-1"}}
        prefix = f"s3://{bucket}/report-{uuid.uuid4().hex[:12]}"
        table = build_sample_table(f"{prefix}/wh", storage_options=options)
        data_files = {
            table.data_file_path(entry) for entry in live_entries(table, table.snapshot_manager.latest())
        }
        config = tmp_path / "report.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "warehouse": f"{prefix}/wh",
                    "tables": ["db.*"],
                    "storage_options": options,
                    "report": {"out": f"{prefix}/health.html"},
                }
            )
        )
        proxy.reset()
        code, record = run_report(capsys, str(config))
        requests = list(proxy.requests)
    assert code == 0, record["error"]
    gets = [r.path for r in requests if r.kind == "GET"]
    assert not [path for path in gets if any(path.endswith(name.split(bucket, 1)[1]) for name in data_files)]
    assert all(
        any(f"/{folder}/" in path for folder in ("schema", "snapshot", "tag", "manifest")) for path in gets
    ), gets
    assert sorted(set(gets)) == sorted(gets), Counter(gets).most_common(3)
    assert (
        len([path for path in gets if "/manifest/manifest-" in path and "list" not in path]) == 4
    )  # 4 commits
    assert [r.path for r in requests if r.kind == "PUT"] == [
        f"/{bucket}/{prefix.split(bucket + '/', 1)[1]}/health.html"
    ]


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install chromium)")
def test_chromium_loads_the_page_without_console_errors_and_shows_inspects_numbers(
    warehouse, tmp_path, capsys
):
    out = tmp_path / "report.html"
    assert run_report(capsys, write_config(tmp_path, warehouse), "--out", str(out))[0] == 0
    result = subprocess.run(
        [
            str(CHROMIUM),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            out.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    console = [line for line in result.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == []
    page = parse(result.stdout)  # the DOM as Chromium built it
    for identifier in TABLES:
        description, summary = inspect_figures(warehouse, identifier)
        section = page.sections[identifier]
        assert int(section.cards["live_files"]) == description["totals"]["files"]
        assert int(section.cards["live_bytes"]) == description["totals"]["bytes"]
        assert section.histogram == summary["size_histogram"]


CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
