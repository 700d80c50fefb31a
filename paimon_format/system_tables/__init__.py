"""Paimon's system tables (`t$snapshots`, `t$files`, ...) as Arrow tables; owned by helper H5.

Interface the Spark source (jobs/source) relies on:
- `SYSTEM_TABLES`: the names supported.
- `system_table_schema(table, name) -> pa.Schema`
- `system_table(table, name) -> pa.Table`
"""
