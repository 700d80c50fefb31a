"""What a snapshot looks like without the manifests storage lost: the files left, their rows, and the
kept manifests that must be rewritten.

Dropping a lost manifest from a snapshot is not enough on its own, for two reasons:

* the snapshot's `totalRecordCount` still counts the rows of the files only the lost manifest
  added. The repaired snapshot's total is recounted from the files left (the row counts of the
  live ADD entries of the kept manifests: Paimon's counts are per data file, see the spec), as
  Paimon's `RemoveUnexistingManifestsAction` recounts it from the kept entries. Paimon sums every
  kept entry, DELETE ones too; we count what a reader reads, which is what the total means.
* a kept manifest may DELETE a file whose ADD was in the lost manifest (a compaction or an
  overwrite after it). Left alone, that DELETE has no ADD any more: our reader (and every full
  merge of the table's entries here) refuses such a snapshot as broken metadata; Java's reader
  skips it. Java's repair leaves them; we rewrite each kept manifest holding one into new
  manifests without those entries (same position in the base list, so ADD still comes before
  DELETE for every other file).

The job writes the replacement manifests before its commit: a crash after them leaves unreferenced
manifests (remove-orphan-files deletes them), never a snapshot naming a missing file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from paimon_format.manifest.codec import decode_manifest
from paimon_format.manifest.entries import ADD, DELETE, ManifestEntry, ManifestFileMeta
from paimon_format.manifest.files import rolling_write_manifests
from paimon_format.manifest.read_ahead import sized_bytes
from paimon_format.model.options import CoreOptions
from paimon_format.scan.snapshot_scan import EntryMerger
from paimon_format.table import Table


@dataclass
class KeptState:
    """The kept manifests' merged state: rows and files a reader reads, and the rewrites needed."""

    total_rows: int
    live_files: int
    dangling_deletes: int
    # kept manifest name -> its entries without the DELETEs whose ADD was lost (in manifest order)
    rewrites: dict[str, list[ManifestEntry]] = field(default_factory=dict)


def _read_each(table: Table, manifests: list[ManifestFileMeta]) -> Iterator[tuple[ManifestFileMeta, list]]:
    """Each manifest with its entries, in order (the next ones read ahead while one is decoded)."""
    files = [(table.manifest_path(meta.file_name), meta.file_size) for meta in manifests]
    for meta, (path, _size), data in zip(manifests, files, sized_bytes(table.file_io, files), strict=True):
        yield meta, decode_manifest(data, path)


def recount_kept(table: Table, kept: list[ManifestFileMeta], source: str) -> KeptState:
    """Merge the kept manifests' entries in order (one pass; memory: the live entries, as any full
    scan) and find the DELETEs left without their ADD; a second read of only the manifests holding
    one gives their entries without them."""
    merger = EntryMerger(source)
    deletes_in: dict[str, set[tuple]] = {}
    for meta, entries in _read_each(table, kept):
        merger.add_all(entries)
        deleted = {entry.identifier() for entry in entries if entry.kind == DELETE}
        if deleted:
            deletes_in[meta.file_name] = deleted
    merged = merger.merged()
    dangling = {entry.identifier() for entry in merged if entry.kind == DELETE}
    live = [entry for entry in merged if entry.kind == ADD]
    state = KeptState(
        total_rows=sum(entry.file.row_count for entry in live),
        live_files=len(live),
        dangling_deletes=len(dangling),
    )
    to_rewrite = [meta for meta in kept if deletes_in.get(meta.file_name, set()) & dangling]
    for meta, entries in _read_each(table, to_rewrite):
        state.rewrites[meta.file_name] = [
            entry for entry in entries if not (entry.kind == DELETE and entry.identifier() in dangling)
        ]
    return state


def write_rewrites(
    table: Table, kept: list[ManifestFileMeta], rewrites: dict[str, list[ManifestEntry]], prefix: str
) -> dict[str, list[ManifestFileMeta]]:
    """Write the replacement of each rewritten manifest (none when nothing of it is left); the new
    manifests' names start with `manifest-<prefix>-` (unique per run). Written before the commit:
    see the module docstring for the crash ordering."""
    options = CoreOptions(table.schema.options)
    counter = iter(range(1 << 30))
    replacements: dict[str, list[ManifestFileMeta]] = {}
    for meta in kept:
        if meta.file_name not in rewrites:
            continue
        replacements[meta.file_name] = rolling_write_manifests(
            table.file_io,
            table.file_io.join(table.path, "manifest"),
            lambda: f"manifest-{prefix}-{next(counter)}",
            rewrites[meta.file_name],
            options.manifest_target_file_size,
            options.manifest_compression,
            table.schema.partition_types(),
            meta.schema_id,
        )
    return replacements


def with_replacements(
    manifests: list[ManifestFileMeta], missing: set[str], replacements: dict[str, list[ManifestFileMeta]]
) -> list[ManifestFileMeta]:
    """`manifests` without the missing ones, each rewritten one replaced in place by its replacement."""
    base: list[ManifestFileMeta] = []
    for meta in manifests:
        if meta.file_name in missing:
            continue
        base.extend(replacements.get(meta.file_name, [meta]))
    return base
