"""Data files on S3: our fsspec (s3fs) path against pyarrow's own C++ S3FileSystem, writes and reads.

    .venv/bin/python scripts/bench_s3_files.py --sizes 8,64 --files 4 --rounds 3 --latency-ms 30

Why: data files (Parquet) are written as one in-memory payload (`FileIO.write_bytes`: one s3fs PUT,
a parallel multipart upload only above 100 MB) and read through `FileIO.open_input` with the size
their manifest entry records (no HEAD; up to `fileio.WHOLE_READ_BYTES` in one GET, larger files
through an s3fs file with a 50 MB read-ahead). pyarrow's S3FileSystem uploads parts in the
background and its Parquet reader can fetch coalesced column ranges concurrently (`pre_buffer`).
On object storage each request costs its latency, so the figures are wall seconds and requests.

Everything runs on loopback: moto's S3 server behind the project's proxy (tests/s3/proxy.py) in a
process of its own, which adds `--latency-ms` to every request and keeps the bill. For each file
size and each path it writes `--files` files with our writer (`write_bucket_files`), reads them
back whole with our reader (`read_data_file`) and then a 2-column projection, then moves the same
bytes without encoding (upload, whole download), and prints wall seconds, requests by kind, bytes
and the load; at the end the best round of each (the least disturbed on a shared machine). Path
(b) routes only data files through pyarrow (metadata stays on s3fs, as it would in production);
(b+) also opens Parquet with `pre_buffer=True`, which our reader would need on that path;
"fsspec-unsized" is the fsspec path as before data files were opened with their size. What the
figures decided: docs/benchmarks.md, "Data files: s3fs or pyarrow's S3 file system".
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402
import pyarrow.fs as pafs  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from paimon_format.data import reader as reader_module  # noqa: E402
from paimon_format.data.encoders import encode_file  # noqa: E402
from paimon_format.data.reader import read_data_file  # noqa: E402
from paimon_format.data.writer import write_bucket_files  # noqa: E402
from paimon_format.model.binary_row import serialize_row  # noqa: E402
from paimon_format.model.file_layout import table_arrow_schema  # noqa: E402
from paimon_format.model.schema import new_table_schema  # noqa: E402
from paimon_format.model.type_parsing import parse_type  # noqa: E402
from paimon_format.scan.split_read import projected_schema  # noqa: E402
from paimon_format.storage.fileio import FileIO  # noqa: E402
from paimon_format.table import Table  # noqa: E402
from scripts.generate_events import events  # noqa: E402

BUCKET = "bench"
REGION = "us-east-1"
COLUMNS = (
    ("id", "BIGINT"),
    ("dt", "STRING"),
    ("user", "STRING"),
    ("kind", "STRING"),
    ("amount", "DOUBLE"),
    ("ts", "TIMESTAMP(6)"),
)
PROJECTION = ("id", "amount")
REPO = Path(__file__).resolve().parents[1]


class Store:
    """moto + the project's proxy in a process of their own (`python -m tests.s3.proxy`): the proxy's
    Python must not share this process's GIL with s3fs, or the fsspec path would pay for it."""

    def __init__(self, workdir: str, latency_ms: float) -> None:
        self.latency_ms = latency_ms
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.s3.proxy", "--port-file", f"{workdir}/s3.json"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # printed once moto and the proxy listen
        if not line:
            raise RuntimeError(f"the S3 process ended before it listened (exit {self.process.wait()})")
        urls = json.loads(line)
        self.endpoint_url, self.moto_url = urls["endpoint_url"], urls["moto_url"]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)

    def control(self, name: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        parts = urlsplit(self.endpoint_url)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
        try:
            payload = json.dumps(body or {}).encode()
            connection.request("GET" if body is None else "POST", f"/__proxy__/{name}", body=payload)
            response = connection.getresponse()
            answer = json.loads(response.read())
        finally:
            connection.close()
        if response.status != 200:
            raise RuntimeError(f"proxy control {name}: {response.status} {answer}")
        return answer

    def reset(self) -> None:
        self.control("reset", {"latency_ms": self.latency_ms})

    def ledger(self) -> dict[str, Any]:
        return self.control("ledger")


def arrow_s3(endpoint_url: str) -> pafs.S3FileSystem:
    """pyarrow's S3 file system for the same endpoint and the AWS environment's credentials."""
    parts = urlsplit(endpoint_url)
    return pafs.S3FileSystem(
        access_key=os.environ["AWS_ACCESS_KEY_ID"],
        secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region=REGION,
        scheme=parts.scheme,
        endpoint_override=parts.netloc,
    )


class ArrowDataFileIO(FileIO):
    """FileIO whose data files (under bucket-N/) go through pyarrow; metadata stays on s3fs."""

    arrow: pafs.S3FileSystem

    @staticmethod
    def _is_data(path: str) -> bool:
        return "/bucket-" in path

    def open_input(self, path: str, size: int | None = None) -> Any:
        if not self._is_data(path):
            return super().open_input(path, size)
        # pyarrow 19's open_input_file takes a path only (not a FileInfo with the size): one HEAD each
        return self.arrow.open_input_file(path.removeprefix("s3://"))

    def write_bytes(self, path: str, data: bytes) -> None:
        if not self._is_data(path):
            super().write_bytes(path, data)
            return
        with self.arrow.open_output_stream(path.removeprefix("s3://")) as out:
            out.write(data)

    def put_local_file(self, path: str, local_path: str) -> None:
        """A data file our writer encoded on local disk (`data.spool`), uploaded through pyarrow."""
        if not self._is_data(path):
            super().put_local_file(path, local_path)
            return
        with open(local_path, "rb") as source:
            self.write_bytes(path, source.read())


class UnsizedFileIO(FileIO):
    """The fsspec path as it was before data files were opened with their size: a HEAD, then ranges."""

    def open_input(self, path: str, size: int | None = None) -> Any:
        return super().open_input(path)


@contextmanager
def pre_buffered_parquet() -> Iterator[None]:
    """Our reader with `pq.ParquetFile(..., pre_buffer=True)`: coalesced ranges fetched concurrently."""
    original = pq.ParquetFile

    def opened(source: Any, *args: Any, **kwargs: Any) -> pq.ParquetFile:
        return original(source, *args, pre_buffer=True, **kwargs)

    with mock.patch.object(reader_module.pq, "ParquetFile", opened):
        yield


def make_table(file_io: FileIO, root: str, target_mb: int) -> Table:
    schema = new_table_schema(
        [(name, parse_type(text)) for name, text in COLUMNS],
        partition_keys=["dt"],
        options={"file.format": "parquet", "target-file-size": f"{4 * target_mb} mb"},
    )
    table = Table(file_io, root)
    table.schema_manager.create_table(schema)
    table.refresh()
    return table


def rows_for(megabytes: int) -> pa.Table:
    """About `megabytes` of Parquet, as our encoder writes it, in one partition (events generator).

    Calibrated twice: Parquet compresses a large file better than a sample, so the first guess is
    encoded and the row count scaled by what came out."""
    schema = make_schema_only()
    rows = 200_000
    for _ in range(2):
        data = events(rows, 1, 11).cast(table_arrow_schema(schema))
        rows = int(rows * megabytes * 2**20 / len(encode_file(data, schema)))
    return events(rows, 1, 11).cast(table_arrow_schema(schema))


def make_schema_only() -> Any:
    return new_table_schema([(name, parse_type(text)) for name, text in COLUMNS], partition_keys=["dt"])


def measure(store: Store, label: str, action: Callable[[], Any]) -> dict[str, Any]:
    """Run `action` on a fresh ledger; print and return wall seconds, requests by kind, bytes, load."""
    store.reset()
    load = os.getloadavg()[0]
    start = time.perf_counter()
    action()
    wall = time.perf_counter() - start
    bill = store.ledger()
    kinds = {kind: n for kind, n in bill["by_kind"].items() if n}
    moved = bill["bytes_in"] + bill["bytes_out"]
    by_kind = " ".join(f"{kind}={n}" for kind, n in kinds.items())
    print(
        f"  {label:<40} {wall:7.2f} s  {bill['requests']:4d} req  {by_kind:<40} "
        f"{moved / 2**20:8.1f} MB  peak {bill['peak_in_flight']:2d} in flight  load {load:.2f}",
        flush=True,
    )
    return {"label": label, "wall": wall, "bill": bill, "load": load}


Results = dict[str, list[float]]  # "<size> MB <operation> [<path>]" -> wall seconds per round


def run_path(
    store: Store, path: str, file_io: FileIO, data: pa.Table, size: int, files: int, results: Results
) -> None:
    """Write `files` data files through `file_io`, read them back whole and projected, then move the
    same bytes without encoding (upload, whole-object download) to see the storage library alone."""
    root = f"s3://{BUCKET}/{path}-{size}mb-{uuid.uuid4().hex[:8]}"
    table = make_table(file_io, root, size)
    partition = serialize_row(["2024-01-01"], table.partition_types)
    metas: list[Any] = []

    def write() -> None:
        for _ in range(files):
            metas.extend(write_bucket_files(file_io, root, table.schema, ["2024-01-01"], 0, data, 0))

    def read(columns: tuple[str, ...] | None) -> Callable[[], None]:
        schema = projected_schema(table.schema, columns)

        def run() -> None:
            rows = 0
            for meta in metas:
                for batch in read_data_file(table, partition, 0, meta, read_schema=schema):
                    rows += batch.num_rows
            assert rows == files * data.num_rows, rows

        return run

    def record(operation: str, action: Callable[[], Any], variant: str = path) -> None:
        row = measure(store, f"{variant}: {operation}", action)
        results.setdefault(f"{size} MB {operation} [{variant}]", []).append(row["wall"])

    projection = f"read {','.join(PROJECTION)}"
    record("write (encode + upload)", write)
    record("read all columns", read(None))
    record(projection, read(PROJECTION))
    if isinstance(file_io, ArrowDataFileIO):
        with pre_buffered_parquet():
            record("read all columns", read(None), f"{path}+pre_buffer")
            record(projection, read(PROJECTION), f"{path}+pre_buffer")
    first = f"{root}/dt=2024-01-01/bucket-0/{metas[0].file_name}"
    with file_io.open_input(first) as handle:
        payload = handle.read()
    copies = [f"{root}/dt=2024-01-01/bucket-0/copy-{n}.parquet" for n in range(files)]
    record("upload bytes only", lambda: [file_io.write_bytes(copy, payload) for copy in copies])
    record("download bytes only", lambda: [_read_whole(file_io, copy) for copy in copies])


def _read_whole(file_io: FileIO, path: str) -> int:
    with file_io.open_input(path) as handle:
        return len(handle.read())


def summarize(results: Results) -> None:
    """Best round per measurement (the least disturbed by other load) and the ratio fsspec / arrow."""
    variants = ("fsspec", "fsspec-unsized", "arrow", "arrow+pre_buffer")
    print("\n| measurement | " + " | ".join(f"{v} (s)" for v in variants) + " | fsspec / best arrow |")
    print("| --- |" + " ---: |" * (len(variants) + 1))
    operations = dict.fromkeys(key.rsplit(" [", 1)[0] for key in results)
    for operation in operations:
        best = {variant: min(results.get(f"{operation} [{variant}]", [float("nan")])) for variant in variants}
        fastest_arrow = min(v for k, v in best.items() if k.startswith("arrow") and v == v)
        cells = " | ".join("-" if v != v else f"{v:.2f}" for v in best.values())
        print(f"| {operation} | {cells} | {best['fsspec'] / fastest_arrow:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,64", help="data file sizes in MB, comma-separated")
    parser.add_argument("--files", type=int, default=4, help="files per size and path")
    parser.add_argument("--latency-ms", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=1, help="repeat both paths (interleaved)")
    args = parser.parse_args()
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        os.environ.setdefault(name, value)

    import boto3  # the bench's own setup client; the paths under test build theirs

    with tempfile.TemporaryDirectory(prefix="bench-s3-files-") as workdir:
        store = Store(workdir, args.latency_ms)
        try:
            boto3.client("s3", endpoint_url=store.moto_url, region_name=REGION).create_bucket(Bucket=BUCKET)
            options = {"endpoint_url": store.endpoint_url, "client_kwargs": {"region_name": REGION}}
            results: Results = {}
            print(f"{os.cpu_count()} cores, latency {args.latency_ms:g} ms per request", flush=True)
            for size in [int(s) for s in args.sizes.split(",")]:
                data = rows_for(size)
                print(
                    f"{size} MB files ({data.num_rows:,} rows each), {args.files} files per path", flush=True
                )
                for _ in range(args.rounds):
                    run_path(store, "fsspec", FileIO("s3", options), data, size, args.files, results)
                    unsized = UnsizedFileIO("s3", options)
                    run_path(store, "fsspec-unsized", unsized, data, size, args.files, results)
                    arrow_io = ArrowDataFileIO("s3", options)
                    arrow_io.arrow = arrow_s3(store.endpoint_url)
                    run_path(store, "arrow", arrow_io, data, size, args.files, results)
            summarize(results)
        finally:
            store.stop()


if __name__ == "__main__":
    main()
