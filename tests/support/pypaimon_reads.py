"""Reading tables with the official pypaimon reader (test oracle only; the product never imports it)."""

from __future__ import annotations

from typing import Any


def pypaimon_rows(warehouse: str, identifier: str, snapshot_id: int | None = None) -> list[dict[str, Any]]:
    """Every row pypaimon reads at a snapshot (default: latest), sorted for comparison."""
    import pypaimon

    catalog = pypaimon.CatalogFactory.create({"warehouse": warehouse})
    table = catalog.get_table(identifier)
    if snapshot_id is not None:
        table = table.copy({"scan.snapshot-id": str(snapshot_id)})
    builder = table.new_read_builder()
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
    return sorted(rows, key=lambda row: [str(row[k]) for k in sorted(row)])
