"""Reading many manifests with the next ones already in flight while this one is decoded.

Why: on an object store each manifest read waits 20-100 ms for its first byte, while decoding it
takes about as long; read one after another, a scan pays both in turn. Here the reads run on
`map_in_flight`'s threads (the I/O releases the GIL) and the caller decodes in its own thread, in
manifest order, so the results and errors are exactly those of a plain loop (a read that fails is
raised at its manifest's turn).

Memory: every manifest in flight is held as bytes until its turn, so the window is the storage's
`io_parallelism`, narrowed so that the largest manifest times the window stays within
`READ_AHEAD_BYTES` (8 MiB manifests, the default target size, give 8; small ones the full limit).
Only bytes are held ahead, never decoded entries.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from paimon_format.manifest.codec import check_file_size
from paimon_format.storage.fileio import FileIO
from paimon_format.storage.in_flight import map_in_flight

READ_AHEAD_BYTES = 64 << 20


def read_ahead_window(file_io: FileIO, sizes: Iterable[int | None]) -> int:
    """Manifests of these sizes in flight at once: `io_parallelism`, fewer for large manifests."""
    largest = max((size for size in sizes if size), default=0)
    if largest <= 0:
        return file_io.io_parallelism
    return max(1, min(file_io.io_parallelism, READ_AHEAD_BYTES // largest))


def manifest_bytes(
    file_io: FileIO, files: Iterable[tuple[str, int | None]], window: int | None = None
) -> Iterator[bytes]:
    """The bytes of each (path, expected size or None) in order, checked against the size (a
    truncated file is `CorruptFileError`), up to `window` reads in flight (default `io_parallelism`)."""

    def read(item: tuple[str, int | None]) -> bytes:
        path, size = item
        data = file_io.read_bytes(path)
        check_file_size(data, path, size)
        return data

    return map_in_flight(read, files, file_io.io_parallelism if window is None else window)


def sized_bytes(file_io: FileIO, files: list[tuple[str, int | None]]) -> Iterator[bytes]:
    """`manifest_bytes` of a known list, its window from the sizes (`read_ahead_window`)."""
    return manifest_bytes(file_io, files, read_ahead_window(file_io, (size for _path, size in files)))
