"""Race our commit against Paimon's Java commit for the same snapshot id, round after round (issue #28).

    .venv/bin/python scripts/commit_race.py --rounds 1000 [--forced 10] [--jitter-us 5000]
        [--warehouse DIR]

One JVM (the test oracle, Paimon 1.0's own write and commit path) and this process commit one row
each per round to one append table on local disk, from the same latest snapshot, so both claim the
same next snapshot id (tests/java/commit_race.py). Half the rounds start both commits together, the
other half release both claims together (Java's after a random 0 to `--jitter-us` µs, so either
side may create the file first and our link may land inside Java's exists/move window). `--forced
N` adds N rounds where Java is stopped between its exists() check and its move, so it replaces the
snapshot our commit just created: each must be detected and committed again. Every round is
checked at once (two new snapshots, one each, ours not replaced unnoticed) and the table at the end
(ids contiguous, every row read back by Java and by our reader). Prints the outcome counts per kind
of round; exit 1 when anything was lost, doubled or replaced unnoticed. With `--warehouse` the table
stays there for inspection.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.java.commit_race import (  # noqa: E402 - after the path set-up above
    CLAIM,
    COMMIT,
    DETECTED,
    FORCED,
    OUTCOMES,
    RaceError,
    RaceTable,
    check_table,
    create_race_table,
    race_round,
)
from tests.java.oracle import JavaPaimon  # noqa: E402

LABELS = {COMMIT: "commits started together", CLAIM: "claims released together", FORCED: "forced"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1000, help="rounds where both sides race freely")
    parser.add_argument("--forced", type=int, default=10, help="rounds where Java replaces our snapshot")
    parser.add_argument("--jitter-us", type=int, default=8000, help="Java's random pause at the claim")
    parser.add_argument("--warehouse", help="keep the table here (default: a temporary directory)")
    args = parser.parse_args(argv)
    if args.warehouse:
        os.makedirs(args.warehouse, exist_ok=True)
        return _run(args, args.warehouse)
    with tempfile.TemporaryDirectory(prefix="commit-race-") as warehouse:
        return _run(args, warehouse)


def _run(args: argparse.Namespace, warehouse: str) -> int:
    java = JavaPaimon(os.path.join(warehouse, "jvm.log"))
    fifo_dir = tempfile.mkdtemp(prefix="fifos-", dir=warehouse)
    counts: dict[str, collections.Counter[str]] = {mode: collections.Counter() for mode in LABELS}
    started = time.monotonic()
    try:
        race = create_race_table(java, os.path.join(warehouse, "db.db", "race"), hooked=True)
        for n, mode in enumerate(_schedule(args.rounds, args.forced)):
            outcome = race_round(java, race, n, fifo_dir, mode=mode, jitter_us=args.jitter_us)
            counts[mode][outcome] += 1
            if mode == FORCED and outcome != DETECTED:
                raise RaceError(f"round {n}, forced: Java's replacement went unnoticed ({outcome})")
        rows = check_table(java, race)
    except RaceError as error:
        print(f"LOST: {error}")
        return 1
    finally:
        java.close()
        os.rmdir(fifo_dir)
    _print(counts, race, rows, time.monotonic() - started)
    return 0


def _schedule(rounds: int, forced: int) -> list[str]:
    """Free rounds alternating COMMIT and CLAIM, with the forced ones spread evenly among them."""
    modes = [(COMMIT, CLAIM)[n % 2] for n in range(rounds)]
    for k in range(forced):
        modes.insert((k + 1) * len(modes) // (forced + 1), FORCED)
    return modes


def _print(counts: dict[str, collections.Counter[str]], race: RaceTable, rows: int, seconds: float) -> None:
    print(f"{sum(sum(c.values()) for c in counts.values())} rounds in {seconds:.0f} s")
    print(f"{'outcome':54}" + "".join(f"{LABELS[mode]:>28}" for mode in LABELS))
    for outcome in OUTCOMES:
        print(f"{outcome:54}" + "".join(f"{counts[mode][outcome]:28d}" for mode in LABELS))
    print(
        f"snapshots {race.table.snapshot_manager.latest_id()} (ids contiguous), rows checked {rows} by Java "
        "and by our reader: 0 lost, 0 doubled, 0 replaced unnoticed"
    )


if __name__ == "__main__":
    sys.exit(main())
