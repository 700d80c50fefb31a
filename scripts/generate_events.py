"""Generate sample event data as Parquet files (for the demo, tests and benchmarks).

python scripts/generate_events.py --out /tmp/events --rows 100000 --days 7 --files 4
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def events(rows: int, days: int, seed: int, first_id: int = 0) -> pa.Table:
    """`rows` events spread over `days` days: id, dt (partition), user, kind, amount, ts."""
    rng = np.random.default_rng(seed)
    start = dt.date(2024, 1, 1)
    day = rng.integers(0, days, rows)
    dates = np.array([(start + dt.timedelta(days=int(d))).isoformat() for d in range(days)])
    kinds = np.array(["view", "click", "purchase", "refund"])
    seconds = rng.integers(0, 86_400, rows)
    ts = np.datetime64("2024-01-01") + day.astype("timedelta64[D]") + seconds.astype("timedelta64[s]")
    return pa.table(
        {
            "id": pa.array(np.arange(first_id, first_id + rows, dtype=np.int64)),
            "dt": pa.array(dates[day]),
            "user": pa.array(np.char.add("user-", rng.integers(0, 10_000, rows).astype(str))),
            "kind": pa.array(kinds[rng.integers(0, len(kinds), rows)]),
            "amount": pa.array(np.round(rng.random(rows) * 100, 2)),
            "ts": pa.array(ts.astype("datetime64[us]")),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output directory (created)")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--first-id", type=int, default=0)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    per_file = -(-args.rows // args.files)
    for index in range(args.files):
        first = args.first_id + index * per_file
        count = min(per_file, args.rows - index * per_file)
        if count > 0:
            table = events(count, args.days, args.seed + index, first)
            pq.write_table(table, out / f"part-{index:05d}.parquet")
    print(f"wrote {args.rows} rows in {args.files} files to {out}")


if __name__ == "__main__":
    main()
