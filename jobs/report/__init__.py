"""The warehouse health page: `python -m jobs report` and maintain's `report:` block (issue #31).

Why a page: a nightly maintain run leaves a run record per table, and each table's metadata says
how it is doing (snapshots kept, small files, partitions, tags, consumers holding expiry back), but
nobody reads JSON for a hundred tables. One self-contained HTML file (inline CSS and SVG, no script,
nothing fetched) can be mailed, archived next to the run records, or opened from object storage.

Read-only: the page is built from metadata (snapshot, tag, consumer files, manifest lists and
manifests), never from data files, in the driver, one table at a time per thread, with memory that
grows with partitions, not files (`table_health`). It takes no lock and changes no table.
"""
