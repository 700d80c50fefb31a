"""Primary-key tables written by pypaimon 2.1.0, one per merge engine it can both write and read back,
each with four commits (one level-0 sorted run per commit; upserts and, where pypaimon allows, -D/-U
rows through `rowkind.field`). The oracle tables of the merge and merge-on-read interop tests."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa

from tests.interop import oracle

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("amount", pa.int64()),
        pa.field("price", pa.float64()),
        pa.field("flag", pa.bool_()),
        pa.field("ts", pa.int32()),
        pa.field("op", pa.string()),
    ]
)

CASES: dict[str, dict[str, str]] = {
    "dedup": {},
    "dedup_seq": {"sequence.field": "ts"},
    "partial": {"merge-engine": "partial-update"},
    "agg": {
        "merge-engine": "aggregation",
        "fields.name.aggregate-function": "listagg",
        "fields.amount.aggregate-function": "sum",
        "fields.price.aggregate-function": "max",
        "fields.flag.aggregate-function": "bool_or",
        "fields.ts.aggregate-function": "first_non_null_value",
        "fields.op.aggregate-function": "last_value",
    },
}
WITH_RETRACTIONS = {"dedup", "dedup_seq"}  # pypaimon 2.1.0 refuses to write -D/-U under aggregation


def _commits(case: str, rng: random.Random) -> list[list[dict[str, Any]]]:
    commits = []
    for commit in range(4):
        rows = []
        for key in rng.sample(range(60), 35):
            op = "+I"
            if case in WITH_RETRACTIONS and commit and rng.random() < 0.25:
                op = rng.choice(["-D", "-U"])
            rows.append(
                {
                    "id": key,
                    "name": rng.choice([None, f"n{commit}", "x"]),
                    "amount": rng.choice([None, rng.randint(-5, 50)]),
                    "price": rng.choice([None, rng.random()]),
                    "flag": rng.choice([None, True, False]),
                    "ts": rng.choice([None, rng.randint(0, 5)]),
                    "op": op,
                }
            )
        commits.append(rows)
    return commits


def write_merge_tables(warehouse: str) -> dict[str, str]:
    """One pypaimon table per case of `CASES` in `warehouse`: {case: table directory}."""
    import pypaimon  # the tests that call this skip without pypaimon (pytest.importorskip)

    catalog = oracle.catalog(warehouse)
    catalog.create_database(oracle.DATABASE, True)
    paths = {}
    for index, (case, options) in enumerate(CASES.items()):
        identifier = f"{oracle.DATABASE}.{case}"
        schema = pypaimon.Schema.from_pyarrow_schema(
            SCHEMA, primary_keys=["id"], options={"bucket": "1", "rowkind.field": "op", **options}
        )
        catalog.create_table(identifier, schema, False)
        table = catalog.get_table(identifier)
        for rows in _commits(case, random.Random(index)):
            builder = table.new_batch_write_builder()
            write, commit = builder.new_write(), builder.new_commit()
            try:
                write.write_arrow(pa.Table.from_pylist(rows, schema=SCHEMA))
                commit.commit(write.prepare_commit())
            finally:
                write.close()
                commit.close()
        paths[case] = str(table.table_path)
    return paths
