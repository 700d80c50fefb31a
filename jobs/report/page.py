"""The health page as one HTML document: inline CSS and SVG, no script, nothing loaded from anywhere.

Every text that comes from a table (names, option keys and values, partition values, tag, branch and
consumer names, error messages, run record fields) passes through `html.escape`, so a value such as
`<script>` is shown as text. Figures carry `data-figure` / `data-value` attributes with the exact
number next to the human text, which is what the tests (and anyone scraping the page) read.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from jobs.report.figures import duration_text, instant_text, share_text, size_text, time_text
from jobs.report.run_records import RunSummary
from jobs.report.svg import partition_bars, size_histogram
from jobs.report.table_health import TableHealth
from paimon_format.inspect import SIZE_BUCKETS

_CSS = """
:root { --ink: #1d2330; --muted: #5d6677; --line: #dfe3ea; --card: #f6f8fb; --bad: #b3261e;
  --warn: #e8a33d; --ok: #2e7d32; --accent: #3d7be8; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
  margin: 0; padding: 24px 32px 48px; background: #fff; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 0; }
h3 { font-size: 14px; margin: 18px 0 6px; text-transform: uppercase; letter-spacing: .04em;
  color: var(--muted); }
.meta, .path { color: var(--muted); margin: 2px 0 0; word-break: break-all; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: 12px; }
td.num, th.num { text-align: right; } td.num, td.when { white-space: nowrap; }
section.table-health { border: 1px solid var(--line); border-radius: 8px; padding: 18px 20px;
  margin: 22px 0; }
section.overview { margin-top: 18px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 8px;
  margin: 14px 0 0; }
.card { background: var(--card); border-radius: 6px; padding: 8px 10px; }
.card dt { font-size: 12px; color: var(--muted); }
.card dd { margin: 2px 0 0; font-size: 17px; font-weight: 600; }
.card dd small { display: block; font-size: 12px; font-weight: 400; color: var(--muted); }
.card.warn { box-shadow: inset 4px 0 0 var(--warn); }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(430px, 1fr)); gap: 16px; }
figure { margin: 0; } figcaption { font-size: 12px; color: var(--muted); }
svg.chart text { font-size: 11px; fill: var(--ink); text-anchor: middle; }
svg.chart text.label { text-anchor: end; } svg.chart text.after { text-anchor: start; }
svg.chart text.count { fill: var(--muted); }
svg.chart line.axis { stroke: var(--line); }
.advice li { margin: 2px 0; }
.advice { border-left: 4px solid var(--accent); padding: 2px 12px; margin-top: 14px; }
.error { border-left: 4px solid var(--bad); background: #fdecea; padding: 8px 12px; margin-top: 12px; }
.error p { margin: 4px 0 0; white-space: pre-wrap; word-break: break-word; }
.status-done { color: var(--ok); } .status-failed, .status-unreadable { color: var(--bad); font-weight: 600; }
.status-refused, .status-skipped { color: #8a5a00; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.legend span { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 10px; border-radius: 2px; }
details summary { cursor: pointer; color: var(--muted); margin-top: 14px; }
code { font-size: 12px; }
"""


def render_page(
    warehouse: str, tables: Sequence[TableHealth], record_errors: Sequence[str], generated_ms: int
) -> str:
    """The whole page: a header, the record errors, an overview row per table, a section per table."""
    unreadable = sum(1 for health in tables if health.error)
    header = (
        f'<header><h1>Paimon warehouse health</h1><p class="meta">{escape(warehouse)} · generated '
        f"{escape(time_text(generated_ms))} · {len(tables)} tables"
        + (f", {unreadable} unreadable" if unreadable else "")
        + "</p></header>"
    )
    errors = "".join(
        f'<div class="error records-error" role="alert"><strong>run records</strong><p>{escape(e)}</p></div>'
        for e in record_errors
    )
    body = [header, errors, _overview(tables)]
    body.extend(_table_section(index, health, generated_ms) for index, health in enumerate(tables))
    body.append(
        '<footer class="meta">Read from metadata only: snapshots, tags, consumers, manifests.</footer>'
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Paimon warehouse health: {escape(warehouse)}</title><style>{_CSS}</style></head>"
        f"<body>{''.join(body)}</body></html>\n"
    )


def _overview(tables: Sequence[TableHealth]) -> str:
    head = (
        "<tr><th>table</th><th class=num>snapshots</th><th>latest commit</th><th class=num>live files</th>"
        "<th class=num>live bytes</th><th class=num>small files</th><th class=num>partitions</th>"
        "<th class=num>tags</th><th>next</th></tr>"
    )
    rows = []
    for index, health in enumerate(tables):
        name = f'<a href="#table-{index}">{escape(health.identifier)}</a>'
        if health.error:
            rows.append(
                f'<tr data-table="{escape(health.identifier)}"><td>{name}</td>'
                '<td colspan=8 class="status-unreadable">'
                f"unreadable: {escape(_first_line(health.error))}</td></tr>"
            )
            continue
        live = health.live
        latest = time_text(health.latest.time_millis) if health.latest else "-"
        rows.append(
            f'<tr data-table="{escape(health.identifier)}"><td>{name}</td>'
            f'<td class=num>{health.snapshot_count:,}</td><td class="when">{escape(latest)}</td>'
            f"<td class=num>{(live.files if live else 0):,}</td>"
            f"<td class=num>{escape(size_text(live.bytes if live else 0))}</td>"
            f"<td class=num>{share_text(live.small_files, live.files) if live else '-'}</td>"
            f"<td class=num>{(live.partition_count if live else 0):,}</td>"
            f"<td class=num>{health.tag_count:,}</td>"
            f"<td>{escape(_first_line(health.advice[0]) if health.advice else '')}</td></tr>"
        )
    return f'<section class="overview"><h2>Tables</h2><table>{head}{"".join(rows)}</table></section>'


def _first_line(text: str, limit: int = 90) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _table_section(index: int, health: TableHealth, now_ms: int) -> str:
    parts = [
        f'<section class="table-health" id="table-{index}" data-table="{escape(health.identifier)}">',
        f'<h2>{escape(health.identifier)}</h2><p class="path">{escape(health.path)}</p>',
    ]
    if health.error:
        parts.append(
            f'<div class="error table-error" role="alert" data-exit-code="{health.exit_code}">'
            f"<strong>This table could not be read (exit code {health.exit_code})</strong>"
            f"<p>{escape(health.error)}</p></div>"
        )
        parts.append(_runs(health.runs))
        parts.append("</section>")
        return "".join(parts)
    parts.append(_cards(health, now_ms))
    parts.append(
        '<div class="advice"><h3>What the options ask for next</h3><ul>'
        + "".join(f"<li>{escape(line)}</li>" for line in health.advice)
        + "</ul></div>"
    )
    parts.append(_charts(health))
    parts.append(
        f'<div class="pair"><div>{_tags(health)}</div><div>{_branches_consumers(health)}</div></div>'
    )
    parts.append(_runs(health.runs))
    parts.append(_options(health))
    parts.append("</section>")
    return "".join(parts)


def _card(label: str, figure: str, value: int | str, text: str, note: str = "", warn: bool = False) -> str:
    klass = "card warn" if warn else "card"
    small = f"<small>{escape(note)}</small>" if note else ""
    return (
        f'<div class="{klass}"><dt>{escape(label)}</dt>'
        f'<dd data-figure="{figure}" data-value="{escape(str(value))}">{escape(text)}{small}</dd></div>'
    )


def _cards(health: TableHealth, now_ms: int) -> str:
    live, earliest, latest = health.live, health.earliest, health.latest
    kind = "primary key " + ", ".join(health.primary_keys) if health.primary_keys else "append"
    cards = [
        _card("snapshots", "snapshots", health.snapshot_count, f"{health.snapshot_count:,}", kind),
        _card(
            "earliest commit",
            "earliest_commit_ms",
            earliest.time_millis if earliest else "",
            f"#{earliest.id}" if earliest else "-",
            f"{time_text(earliest.time_millis)}, {duration_text(now_ms - earliest.time_millis)} ago"
            if earliest
            else "",
        ),
        _card(
            "latest commit",
            "latest_commit_ms",
            latest.time_millis if latest else "",
            f"#{latest.id} {latest.commit_kind}" if latest else "-",
            time_text(latest.time_millis) if latest else "",
        ),
    ]
    if live is not None:
        small_warn = live.files > 1 and live.small_files * 2 > live.files
        cards += [
            _card("live files", "live_files", live.files, f"{live.files:,}", f"{live.rows:,} rows"),
            _card("live bytes", "live_bytes", live.bytes, size_text(live.bytes), f"{live.bytes:,} B"),
            _card("rows", "live_rows", live.rows, f"{live.rows:,}"),
            _card(
                "small files",
                "small_files",
                live.small_files,
                share_text(live.small_files, live.files),
                f"{live.small_files:,} under {size_text(health.small_file_below)}",
                small_warn,
            ),
            _card("partitions", "partitions", live.partition_count, f"{live.partition_count:,}"),
            _card("manifests", "manifests", live.manifests, f"{live.manifests:,}"),
        ]
    cards += [
        _card("tags", "tags", health.tag_count, f"{health.tag_count:,}"),
        _card("branches", "branches", len(health.branches), f"{len(health.branches):,}"),
        _card("consumers", "consumers", len(health.consumers), f"{len(health.consumers):,}"),
    ]
    if health.changelog_count:
        cards.append(_card("changelogs", "changelogs", health.changelog_count, f"{health.changelog_count:,}"))
    return f'<dl class="cards">{"".join(cards)}</dl>'


def _charts(health: TableHealth) -> str:
    live = health.live
    if live is None:
        return ""
    buckets = [
        (label, live.histogram.get(label, 0), bound <= health.small_file_below)
        for label, bound in SIZE_BUCKETS
    ]
    legend = (
        f'<span style="background:#e8a33d"></span>under {escape(size_text(health.small_file_below))} '
        '(small)<span style="background:#3d7be8"></span>larger'
    )
    rows = [(name, t.files, t.small_files, t.bytes) for name, t in live.top_partitions]
    table_rows = "".join(
        f'<tr data-partition="{escape(name)}"><td>{escape(name or "(unpartitioned)")}</td>'
        f'<td class=num data-figure="files" data-value="{t.files}">{t.files:,}</td>'
        f'<td class=num data-figure="small_files" data-value="{t.small_files}">{t.small_files:,}</td>'
        f'<td class=num data-figure="rows" data-value="{t.rows}">{t.rows:,}</td>'
        f'<td class=num data-figure="bytes" data-value="{t.bytes}">{escape(size_text(t.bytes))}</td></tr>'
        for name, t in live.top_partitions
    )
    shown = f"top {len(rows)} of {live.partition_count:,}" if live.partition_count > len(rows) else "all"
    return (
        '<div class="charts"><figure>'
        f"<h3>File sizes (snapshot {live.snapshot_id})</h3>{size_histogram(buckets)}"
        f'<figcaption class="legend">{legend}; target-file-size {escape(size_text(health.target_file_size))}'
        "</figcaption></figure><figure>"
        f"<h3>Files per partition ({shown})</h3>{partition_bars(rows)}</figure></div>"
        '<table class="partitions"><tr><th>partition</th><th class=num>files</th><th class=num>small</th>'
        f"<th class=num>rows</th><th class=num>bytes</th></tr>{table_rows}</table>"
    )


def _tags(health: TableHealth) -> str:
    if not health.tags:
        return "<h3>Tags</h3><p class=meta>none</p>"
    rows = "".join(
        f'<tr data-tag="{escape(tag.name)}"><td>{escape(tag.name)}</td><td class=num>{tag.snapshot_id}</td>'
        f"<td>{escape(time_text(tag.commit_time_ms))}</td><td>{escape(tag.created or '-')}</td></tr>"
        for tag in health.tags
    )
    more = health.tag_count - len(health.tags)
    tail = f"<p class=meta>and {more:,} older tags</p>" if more > 0 else ""
    return (
        f"<h3>Tags ({health.tag_count:,})</h3><table><tr><th>tag</th><th class=num>snapshot</th>"
        f"<th>snapshot committed</th><th>tag created</th></tr>{rows}</table>{tail}"
    )


def _branches_consumers(health: TableHealth) -> str:
    branches = "".join(f'<li data-branch="{escape(name)}">{escape(name)}</li>' for name in health.branches)
    consumers = "".join(
        f'<tr data-consumer="{escape(c.consumer_id)}"><td>{escape(c.consumer_id)}</td>'
        f"<td class=num>{c.next_snapshot}</td><td>{escape(time_text(c.modified_ms))}</td></tr>"
        for c in health.consumers
    )
    return (
        f"<h3>Branches ({len(health.branches)})</h3>"
        + (f"<ul>{branches}</ul>" if branches else "<p class=meta>none</p>")
        + f"<h3>Consumers ({len(health.consumers)})</h3>"
        + (
            "<table><tr><th>consumer</th><th class=num>next snapshot</th><th>last written</th></tr>"
            f"{consumers}</table>"
            if consumers
            else "<p class=meta>none</p>"
        )
    )


def _runs(runs: Sequence[RunSummary]) -> str:
    if not runs:
        return "<h3>Last maintenance runs</h3><p class=meta>no run record of this table</p>"
    rows = []
    for run in runs:
        compacted = f"{run.compacted[0]:,} → {run.compacted[1]:,}" if run.compacted else "-"
        what = escape(run.operation + (" (dry run)" if run.dry_run else ""))
        steps = f"<br><small>{escape(', '.join(run.steps))}</small>" if run.steps else ""
        reason = f"<br><small>{escape(run.reason)}</small>" if run.reason else ""
        rows.append(
            f'<tr class="run" data-started="{escape(run.started)}">'
            f"<td>{escape(instant_text(run.started))}</td>"
            f'<td>{what}{steps}</td><td class="status-{escape(run.status)}">'
            f"{escape(run.status)}{reason}</td>"
            f'<td class=num data-figure="snapshots_expired" data-value="{run.snapshots_expired}">'
            f"{run.snapshots_expired:,}</td>"
            f'<td class=num data-figure="files_removed" data-value="{run.files_removed}">'
            f"{run.files_removed:,}</td>"
            f'<td class=num data-figure="bytes_removed" data-value="{run.bytes_removed}">'
            f"{escape(size_text(run.bytes_removed))}</td><td class=num>{compacted}</td></tr>"
        )
    return (
        "<h3>Last maintenance runs</h3><table><tr><th>started</th><th>run</th><th>status</th>"
        "<th class=num>snapshots expired</th><th class=num>files removed</th><th class=num>bytes removed</th>"
        f"<th class=num>compaction files before → after</th></tr>{''.join(rows)}</table>"
    )


def _options(health: TableHealth) -> str:
    rows = "".join(
        f'<tr data-option="{escape(key)}"><td><code>{escape(key)}</code></td>'
        f"<td><code>{escape(value)}</code></td></tr>"
        for key, value in sorted(health.options.items())
    )
    keys = f"partition keys: {', '.join(health.partition_keys) or 'none'}; schema {health.schema_id}"
    return (
        f"<details><summary>Options ({len(health.options)}) · {escape(keys)}</summary>"
        f"<table><tr><th>option</th><th>value</th></tr>{rows}</table></details>"
    )
