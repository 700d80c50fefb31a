"""Compaction benchmark: the compact job against Paimon's own Java compaction and Spark's plain rewrite
of the same table, each run as a whole process.

    .venv/bin/python scripts/bench_compact.py --rounds 3                        # the issue's sizes (10M)
    .venv/bin/python scripts/bench_compact.py --sizes 1000000,10000000          # memory as buckets grow
    .venv/bin/python scripts/bench_compact.py --sizes 20000 --java-max-file-num 5   # proof that it runs

Tables, built with our writers for each size N of `--sizes` (else `--append-rows` / `--pk-rows`):
(1) append (`bucket: -1`): N rows in N / 2,000 small files (5,000 at 10M); (2) primary key:
`--pk-buckets` (8) buckets written in `--pk-runs` (20) upsert runs, each upserting N / runs keys drawn
at random from N, so every bucket holds 20 sorted runs. Each peer compacts its own copy of the table
(data files hard-linked, metadata copied):
(a) ours: `python -m jobs compact` with `strategy: full` as a process (Spark `local[2]`, its start-up
    included);
(b) Paimon's Java: a fresh oracle JVM (`-Xmx4g`, Java's default compilers and collector) doing what
    Paimon's compact procedure does, on `--java-threads` (2, as `local[2]`) threads
    (`JavaPaimon.compact_procedure`): every bucket through `compact(partition, bucket, full)` of a
    `BatchTableWrite`, one `BatchTableCommit`. An unaware-bucket append table's writes never compact
    in Paimon 1.0; its compaction is the tasks of `UnawareAppendTableCompactionCoordinator` run by
    `AppendOnlyFileStoreWrite`: files below 70% of `target-file-size` in bins of
    `compaction.max.file-num` (50) files or of `target-file-size` bytes, and a batch run leaves a
    partition's last, smaller bin alone (the files it left are printed);
(c) Spark's plain rewrite of the same files as a process of its own:
    `spark.read.parquet(files).repartition(n).write.parquet`, n = the files ours wrote.
With `--rounds N` every peer runs N times, each time on a fresh copy, the peers' order turned around
every round; the medians count (Java's own time moved by 10.0-13.8 s between runs on this 2-core VM).
Checks, for ours and Java's copies: our reader and Java's (no rows shipped) read the row count and
column sums the table had before (Java reads ours, and ours Java's). Prints each whole process's wall
seconds and CPU-seconds, the speed ratios java/ours and plain/ours (>= 1.0: ours at least as fast),
and peak memory: our Python workers' (the executors running the compaction tasks, VmHWM sampled
every 0.2 s), the Spark JVM's, and the Java peer's JVM.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from paimon_format.scan.snapshot_scan import live_entries  # noqa: E402
from paimon_format.scan.split_read import read_split  # noqa: E402
from paimon_format.scan.splits import plan_splits  # noqa: E402
from paimon_format.storage.fileio import FileIO  # noqa: E402
from paimon_format.table import Table  # noqa: E402
from scripts.bench_peers import (  # noqa: E402
    ProcessTiming,
    copy_table,
    describe_ratio,
    java_unavailable,
    job_config,
    load_average,
    run_java,
    run_job_process,
)
from scripts.bench_tables import commit_files, create_table  # noqa: E402
from scripts.generate_events import events  # noqa: E402

ROWS_PER_APPEND_FILE = 2_000  # 10M rows in 5,000 files, the append table
SUMS = ("id", "amount")  # columns whose sums every peer's result must keep


@dataclass(frozen=True)
class Shape:
    """One benchmark table: what builds it and how the peers compact it."""

    label: str
    rows: int
    files: int = 0  # append: small files
    runs: int = 0  # primary key: upsert runs
    buckets: int = 0


@dataclass
class PeakMemory:
    """Peak resident memory (MiB) of our job's processes, by role, sampled from /proc."""

    workers: float = 0.0  # Python workers: the executors that run the compaction tasks
    spark_jvm: float = 0.0
    driver: float = 0.0
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def sample_children_of(self, root: int) -> None:
        """Every 0.2 s until stopped: each descendant's VmHWM (its own peak so far) by its role. A
        worker that exits between two samples loses at most its last 0.2 s, so this is a lower bound."""
        while not self._stop.wait(0.2):
            for pid, command in _descendants(root):
                peak = _vm_hwm_mib(pid)
                if command.split(" ", 1)[0].endswith("java"):  # before "pyspark": the JVM names it too
                    self.spark_jvm = max(self.spark_jvm, peak)
                elif "pyspark" in command:
                    self.workers = max(self.workers, peak)
                elif "-m jobs" in command:
                    self.driver = max(self.driver, peak)
            self.samples += 1

    def stop(self) -> None:
        self._stop.set()


def _descendants(root: int) -> list[tuple[int, str]]:
    """(pid, command line) of every live descendant of `root` (Linux /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    tree, grown = {root}, True
    while grown:
        grown = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grown = True
    found = []
    for pid in tree - {root}:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                found.append((pid, cmdline.read().replace(b"\0", b" ").decode(errors="replace")))
        except OSError:
            continue
    return found


def _vm_hwm_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# -- tables --------------------------------------------------------------------------------------


def build(shape: Shape, root: Path) -> Table:
    """The benchmark table at `root` (`<warehouse>/db.db/t`), written with our writers."""
    started = time.perf_counter()
    if shape.files:
        data = events(shape.rows, 1, 0).drop_columns(["dt"])
        table = create_table(str(root), data, [], {"bucket": "-1"})
        per_file = max(shape.rows // shape.files, 1)
        commit_files(table, [data.slice(start, per_file) for start in range(0, data.num_rows, per_file)], 0)
    else:
        keys = shape.rows // shape.runs
        base = events(keys, 1, 1).drop_columns(["dt"])
        table = create_table(str(root), base, ["id"], {"bucket": str(shape.buckets)})
        rng = np.random.default_rng(7)
        for run in range(shape.runs):
            ids = rng.choice(shape.rows, size=keys, replace=False).astype(np.int64)
            part = events(keys, 1, run + 2).drop_columns(["dt"]).set_column(0, "id", pa.array(ids))
            commit_files(table, [part], run * keys)
    files = len(live_entries(table, table.snapshot_manager.latest()))
    print(f"{shape.label}: built {files:,} files in {time.perf_counter() - started:.1f} s", flush=True)
    return table


def our_counts(path: str) -> dict[str, Any]:
    """What our reader reads at the latest snapshot (merged by key): the row count and the column sums
    in the oracle's spelling (doubles in hundredths, each rounded)."""
    table = Table(FileIO.for_path(path), path)
    rows, sums = 0, dict.fromkeys(SUMS, 0)
    for split in plan_splits(table, table.snapshot_manager.latest()):
        for batch in read_split(table, split):
            rows += batch.num_rows
            sums["id"] += int(pc.sum(batch.column("id")).as_py() or 0)
            cents = np.round(batch.column("amount").to_numpy(zero_copy_only=False) * 100).astype(np.int64)
            sums["amount"] += int(cents.sum())
    return {"rows": rows, "sums": sums}


def data_paths(path: str) -> list[str]:
    table = Table(FileIO.for_path(path), path)
    entries = live_entries(table, table.snapshot_manager.latest())
    return [table.full_path(table.data_file_relpaths(e.partition, e.bucket, e.file)[0]) for e in entries]


# -- peers ---------------------------------------------------------------------------------------


def run_ours(root: Path, target_file_size: str, workdir: Path) -> tuple[ProcessTiming, dict, PeakMemory]:
    memory = PeakMemory()
    sampler = threading.Thread(target=memory.sample_children_of, args=(os.getpid(),), daemon=True)
    sampler.start()
    try:
        config = job_config(str(root), {"strategy": "full", "target_file_size": target_file_size})
        timing, record = run_job_process("compact", config, workdir)
    finally:
        memory.stop()
        sampler.join()
    return timing, record, memory


def run_java_peer(root: Path, threads: int, options: dict[str, str]) -> tuple[ProcessTiming, dict, float]:
    """Paimon's compaction in a fresh JVM; (timing, its answer, the JVM's peak RSS in MiB)."""
    found: dict[str, Any] = {}

    def request(oracle: Any) -> dict:
        answer = oracle.compact_procedure(str(root), full=True, threads=threads, options=options)
        found["peak"] = _vm_hwm_mib(oracle._process.pid)  # the JVM's peak so far, read before it exits
        return answer

    timing = run_java(request)
    return timing, timing.result, found.get("peak", 0.0)


def run_plain_rewrite(paths: list[str], out: Path, partitions: int, workdir: Path) -> float:
    """Spark's plain Parquet rewrite of the same files, as a process of its own; its wall seconds."""
    listing = workdir / "plain-files.txt"
    listing.write_text("\n".join(paths))
    command = [sys.executable, __file__, "--plain-rewrite", str(listing), str(out), str(partitions)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    started = time.perf_counter()
    subprocess.run(command, check=True, env=env, capture_output=True)
    return time.perf_counter() - started


def plain_rewrite_main(listing: str, out: str, partitions: int) -> None:
    """The plain rewrite's process: a Spark session as the job's (`local[2]`), one read and write."""
    from jobs.runtime.spark import get_or_create_spark, stop_session  # Spark only in this mode

    # moves_rows: Spark's own rewrite converts every row in the JVM, so it gets the C2 compiler that a
    # Spark user's session has by default (the compact job itself is faster without it)
    spark = get_or_create_spark(
        "bench-plain-rewrite", {"spark.sql.shuffle.partitions": "8"}, "WARN", moves_rows=True
    )
    paths = Path(listing).read_text().split("\n")
    spark.read.parquet(*paths).repartition(partitions).write.mode("overwrite").parquet(out)
    stop_session(spark)


def settle() -> None:
    """Flush the page cache's dirty pages before a peer starts: the table just built and copied
    (hundreds of MiB) is otherwise still being written back while the first peer runs, and our
    writer's fsync per file waits behind that write-back, so the first peer would pay for the
    build and the others not."""
    os.sync()


def check(label: str, expected: dict, found: dict) -> None:
    """Stop the benchmark when a peer's result reads other rows than the table before it."""
    if found != expected:
        raise SystemExit(f"{label} reads {found}, the table before {expected}: the rows changed")


def median_run(runs: list[ProcessTiming]) -> ProcessTiming:
    """The run of median wall time (the lower middle one of an even count)."""
    return sorted(runs, key=lambda run: run.total_s)[(len(runs) - 1) // 2]


def times_text(runs: list[ProcessTiming] | list[float]) -> str:
    seconds = [run.total_s if isinstance(run, ProcessTiming) else run for run in runs]
    return ", ".join(f"{second:.2f}" for second in seconds)


def compare(shape: Shape, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Build one table, let every peer compact a fresh copy of it `--rounds` times (the order of the
    peers turned around each round, so a drift of the machine does not favour one), check, print; the
    figures, each peer's the median of its rounds."""
    source = work / "source" / "db.db" / "t"
    build(shape, source)
    before = our_counts(str(source))
    paths = data_paths(str(source))
    peers = ["ours"] + ([] if args.skip_java else ["java"]) + ([] if args.skip_plain else ["plain"])
    runs: dict[str, list[Any]] = {peer: [] for peer in peers}
    row: dict[str, Any] = {"label": shape.label, "rows": shape.rows, "files": len(paths)}
    peers_run = PeerRun(args, work, source, before, paths, row)
    for round_index in range(args.rounds):
        for peer in peers if round_index % 2 == 0 else peers[::-1]:
            settle()
            runs[peer].append(RUNNERS[peer](peers_run, round_index))
    ours = row["ours"] = median_run(runs["ours"])
    print(f"  ours {times_text(runs['ours'])} s: median {ours.total_s:.2f} s, {ours.cpu_s or 0:.1f} CPU-s")
    if "java" in runs:
        java = row["java"] = median_run(runs["java"])
        print(f"  Java {times_text(runs['java'])} s: median {java.total_s:.2f} s", flush=True)
        print(f"      {describe_ratio(ours, java)}", flush=True)
    if "plain" in runs:
        plain = row["plain"] = sorted(runs["plain"])[(len(runs["plain"]) - 1) // 2]
        print(
            f"  plain {times_text(runs['plain'])} s: median {plain:.2f} s, "
            f"plain/ours = {plain / ours.total_s:.2f}"
        )
    memory = row["memory"]
    print(
        f"      peak RSS over the rounds: our Python workers {memory.workers:,.0f} MiB, Spark JVM "
        f"{memory.spark_jvm:,.0f} MiB, driver {row['driver']:,} MiB (record; sampled {memory.driver:,.0f})"
        + (f"; Java JVM {row['java_peak']:,.0f} MiB" if "java_peak" in row else ""),
        flush=True,
    )
    for peer in ("source", "ours", "java", "plain"):
        shutil.rmtree(work / peer, ignore_errors=True)
    return row


@dataclass
class PeerRun:
    """What every peer's round of one table shares: the options, where things are, the table's
    counts before (every result must read the same), its data files, and the row of figures."""

    args: argparse.Namespace
    work: Path
    source: Path
    before: dict
    paths: list[str]
    row: dict[str, Any]


def _fresh_copy(source: Path, work: Path, peer: str) -> Path:
    root = work / peer / "db.db" / "t"
    shutil.rmtree(work / peer, ignore_errors=True)
    copy_table(source, root)
    settle()
    return root


def _ours_round(peers: PeerRun, round_index: int) -> ProcessTiming:
    args, before, paths, row = peers.args, peers.before, peers.paths, peers.row
    root = _fresh_copy(peers.source, peers.work, "ours")
    timing, record, memory = run_ours(root, args.target_file_size, peers.work)
    written = len(data_paths(str(root)))
    print(
        f"  (a) ours   {timing.total_s:8.2f} s  {timing.cpu_s or 0:7.1f} CPU-s  files {len(paths):,} -> "
        f"{written:,}  ({timing.load})",
        flush=True,
    )
    check("ours (our reader)", before, our_counts(str(root)))
    row["written"] = max(record.get("counts", {}).get("files_written", 1), 1)
    row["driver"] = max(row.get("driver", 0), record.get("details", {}).get("driver_peak_rss_mib", 0))
    if "memory" not in row:
        row["memory"] = memory
    else:
        kept = row["memory"]
        kept.workers, kept.spark_jvm = (
            max(kept.workers, memory.workers),
            max(kept.spark_jvm, memory.spark_jvm),
        )
        kept.driver = max(kept.driver, memory.driver)
    if round_index == 0 and not args.skip_java:  # Java's reader reads our result once
        check(
            "ours (Java's reader)", before, run_java(lambda oracle: oracle.count_rows(str(root), SUMS)).result
        )
    return timing


def _java_round(peers: PeerRun, round_index: int) -> ProcessTiming:
    args, before, paths, row = peers.args, peers.before, peers.paths, peers.row
    root = _fresh_copy(peers.source, peers.work, "java")
    options = {"target-file-size": args.target_file_size}
    if args.java_max_file_num:
        options["compaction.max.file-num"] = str(args.java_max_file_num)
    settle()
    java, answer, java_peak = run_java_peer(root, args.java_threads, options)
    left = len(paths) - answer["files_removed"]
    print(
        f"  (b) Java   {java.total_s:8.2f} s  {java.cpu_s or 0:7.1f} CPU-s  files {len(paths):,} -> "
        f"{len(data_paths(str(root))):,} ({answer['units']:,} buckets/tasks; "
        f"{left:,} files left uncompacted)  ({java.load})",
        flush=True,
    )
    check("Java's result (our reader)", before, our_counts(str(root)))
    if round_index == 0:
        check(
            "Java's result (Java's reader)",
            before,
            run_java(lambda oracle: oracle.count_rows(str(root), SUMS)).result,
        )
    row["java_peak"], row["java_left"] = max(row.get("java_peak", 0.0), java_peak), left
    return java


def _plain_round(peers: PeerRun, round_index: int) -> float:
    paths, row, work = peers.paths, peers.row, peers.work
    shutil.rmtree(work / "plain", ignore_errors=True)
    plain = run_plain_rewrite(paths, work / "plain", row.get("written", 8), work)
    print(f"  (c) plain  {plain:8.2f} s  ({load_average()})", flush=True)
    return plain


RUNNERS = {"ours": _ours_round, "java": _java_round, "plain": _plain_round}


def shapes(args: argparse.Namespace) -> list[Shape]:
    """The tables to run: for each size of `--sizes` (else the explicit row counts) an append and a
    primary-key table."""
    found: list[Shape] = []
    sizes = [int(size) for size in args.sizes.split(",")] if args.sizes else [None]
    for size in sizes:
        append_rows, pk_rows = (size, size) if size else (args.append_rows, args.pk_rows)
        append_files = max(append_rows // ROWS_PER_APPEND_FILE, 2) if size else args.append_files
        if not args.skip_append:
            found.append(Shape(f"append {append_rows:,} rows", append_rows, files=append_files))
        if not args.skip_pk:
            found.append(
                Shape(f"primary-key {pk_rows:,} rows", pk_rows, runs=args.pk_runs, buckets=args.pk_buckets)
            )
    return found


def summary(rows: list[dict[str, Any]]) -> None:
    print(
        "\n| table | files | ours s | Java s | java/ours | plain s | plain/ours | worker peak MiB "
        "| Java peak MiB |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        ours = row["ours"].total_s
        java = row.get("java")
        plain = row.get("plain")
        print(
            f"| {row['label']} | {row['files']:,} | {ours:.2f} | "
            + (f"{java.total_s:.2f} | {java.total_s / ours:.2f} | " if java else "- | - | ")
            + (f"{plain:.2f} | {plain / ours:.2f} | " if plain else "- | - | ")
            + f"{row['memory'].workers:,.0f} | "
            + (f"{row['java_peak']:,.0f} |" if java else "- |")
        )
    print(f"({load_average()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=None, help="comma-separated row counts, e.g. 1000000,10000000")
    parser.add_argument("--append-rows", type=int, default=10_000_000)
    parser.add_argument("--append-files", type=int, default=5_000)
    parser.add_argument("--pk-rows", type=int, default=10_000_000)
    parser.add_argument("--pk-runs", type=int, default=20)
    parser.add_argument("--pk-buckets", type=int, default=8)
    parser.add_argument("--target-file-size", default="128 mb")
    parser.add_argument("--java-threads", type=int, default=2, help="as many as Spark's local[2] cores")
    parser.add_argument(
        "--java-max-file-num", type=int, default=None, help="compaction.max.file-num (Paimon's default: 50)"
    )
    parser.add_argument("--skip-append", action="store_true")
    parser.add_argument("--skip-pk", action="store_true")
    parser.add_argument("--skip-java", action="store_true")
    parser.add_argument("--skip-plain", action="store_true")
    parser.add_argument(
        "--rounds", type=int, default=1, help="runs of each peer on fresh copies; the medians count"
    )
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--plain-rewrite", nargs=3, metavar=("LISTING", "OUT", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_rewrite:
        plain_rewrite_main(args.plain_rewrite[0], args.plain_rewrite[1], int(args.plain_rewrite[2]))
        return
    if not args.skip_java and (why := java_unavailable()):
        print(f"Java peer skipped: {why}", flush=True)
        args.skip_java = True
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-compact-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    summary([compare(shape, args, work) for shape in shapes(args)])


if __name__ == "__main__":
    main()
