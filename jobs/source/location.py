"""Which table a `spark.read/write.format("paimon")` call means, from Spark's string options.

Spark hands a data source only strings: `load("db.t")` / `save("db.t")` arrive as option `path`,
everything else as `.option(key, value)`. One place turns them into a `Table` so the reader, the writer
and the stream reader agree on what a name, a path and a `$system` suffix mean.

- `path` = `db.name` (with option `warehouse`), or a table directory URL (`s3://b/w/db.db/t`, `/x/t`).
- `db.name$snapshots` (or `<dir>$snapshots`) names a system table of that table.
- `branch`: the branch to read or write (default main).
- Storage options: `storage_options` as a JSON object, and/or `storage.<key>` per key (strings).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table


class SourceOptionError(ValueError):
    """A data-source option is missing or wrong; the message names the option."""


@dataclass(frozen=True)
class TableLocation:
    """Where the table is: its root URL, its storage options, the branch and a system-table name."""

    root: str
    storage_options: dict[str, Any]
    branch: str | None = None
    system_table: str | None = None

    def open(self) -> Table:
        """The table handle (it may not exist yet: the writer can create it)."""
        table = Table(FileIO.for_path(self.root, self.storage_options or None), self.root)
        return table.for_branch(self.branch) if self.branch else table


def table_location(options: Mapping[str, str]) -> TableLocation:
    """The table an options map names; `SourceOptionError` naming the option when it cannot tell."""
    lowered = {key.lower(): value for key, value in options.items()}
    name = lowered.get("path") or lowered.get("table")
    if not name:
        raise SourceOptionError("say which table: load('db.name') with option 'warehouse', or a table path")
    name, _, system = name.partition("$")
    storage = _storage_options(lowered)
    if "/" in name or "://" in name:
        root = name.rstrip("/")
    else:
        warehouse = lowered.get("warehouse")
        if not warehouse:
            raise SourceOptionError(f"table {name!r} is a 'db.name': option 'warehouse' is required with it")
        database, _, table = name.partition(".")
        if not database or not table or "." in table:
            raise SourceOptionError(f"table name must look like 'db.name' or be a path, got {name!r}")
        root = f"{warehouse.rstrip('/')}/{database}.db/{table}"
    return TableLocation(root, storage, lowered.get("branch") or None, system or None)


def _storage_options(options: Mapping[str, str]) -> dict[str, Any]:
    storage: dict[str, Any] = {}
    raw = options.get("storage_options")
    if raw:
        try:
            storage = dict(json.loads(raw))
        except (ValueError, TypeError) as error:
            raise SourceOptionError(f"option 'storage_options' must be a JSON object: {error}") from None
    for key, value in options.items():
        if key.startswith("storage."):
            storage[key[len("storage.") :]] = value
    return storage
