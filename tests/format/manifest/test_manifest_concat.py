"""Merging manifests by blocks (paimon_format/manifest/concat.py): the same entries, in the same order,
as the entry-level merge, with exact list records; untouched manifests copied without decoding."""

from __future__ import annotations

import copy
import io
import itertools
import random
from typing import Any

import fastavro
import pytest

from paimon_format.errors import InvalidTableStateError
from paimon_format.manifest.codec import decode_manifest, encode_manifest, entry_to_record
from paimon_format.manifest.concat import merge_by_blocks, read_deletes
from paimon_format.manifest.entries import ADD, DELETE, ManifestEntry, ManifestFileMeta
from paimon_format.manifest.files import manifest_file_meta
from paimon_format.manifest.schemas import MANIFEST_ENTRY_SCHEMA
from paimon_format.model.binary_row import serialize_row
from paimon_format.model.type_parsing import parse_type
from paimon_format.scan.snapshot_scan import EntryMerger
from paimon_format.storage.fileio import FileIO
from tests.support.factories import data_file

TYPES = [parse_type("STRING"), parse_type("INT")]


def _entry(kind: int, name: str, partition: tuple[str, int], bucket: int = 0) -> ManifestEntry:
    return ManifestEntry(
        kind, serialize_row(list(partition), TYPES), bucket, 2, data_file(name, level=bucket % 3)
    )


class Store:
    """Manifests on local disk, written in our layout or an older one (Paimon 1.0's: fewer fields)."""

    def __init__(self, root: Any) -> None:
        self.root = str(root)
        self.file_io = FileIO.for_path(self.root)
        self._names = (f"manifest-in-{i}" for i in itertools.count())

    def path(self, name: str) -> str:
        return self.file_io.join(self.root, name)

    def manifest(self, entries: list[ManifestEntry], older_layout: bool = False) -> ManifestFileMeta:
        name = next(self._names)
        if older_layout:
            schema = copy.deepcopy(MANIFEST_ENTRY_SCHEMA)
            schema["fields"][-1]["type"]["fields"] = schema["fields"][-1]["type"]["fields"][:-5]
            buffer = io.BytesIO()
            fastavro.writer(buffer, fastavro.parse_schema(schema), [entry_to_record(e) for e in entries])
            data = buffer.getvalue()
        else:
            data = encode_manifest(entries)
        self.file_io.write_bytes(self.path(name), data)
        return manifest_file_meta(name, len(data), entries, 0, TYPES)

    def merge(self, metas: list[ManifestFileMeta], target: int = 1 << 20, strict: bool = False):
        deletes = read_deletes(self.file_io, self.path, metas)
        names = (f"manifest-out-{i}" for i in itertools.count())
        return merge_by_blocks(
            self.file_io,
            self.path,
            metas,
            deletes,
            self.root,
            lambda: next(names),
            target,
            "zstd",
            TYPES,
            0,
            strict=strict,
            prefetch=3,
        )

    def entries(self, meta: ManifestFileMeta) -> list[ManifestEntry]:
        return decode_manifest(self.file_io.read_bytes(self.path(meta.file_name)))


def _history(rng: random.Random, files: int) -> list[ManifestEntry]:
    """A consistent history: files added, some deleted, some re-added, over a few partitions."""
    partitions = [("a", 1), ("b", 2), ("c", 3), ("d", None)]
    history, live = [], set()
    for _ in range(files * 3):
        number = rng.randrange(files)
        name, partition = f"f{number}", partitions[number % len(partitions)]
        if name in live and rng.random() < 0.5:
            history.append(_entry(DELETE, name, partition, number % 2))
            live.discard(name)
        elif name not in live:
            history.append(_entry(ADD, name, partition, number % 2))
            live.add(name)
    return history


@pytest.mark.parametrize("seed", range(12))
def test_block_merge_equals_the_entry_merge_with_exact_list_records(tmp_path, seed):
    rng = random.Random(seed)
    store = Store(tmp_path)
    # untouched manifests first (ADDs of partition "e" only: never deleted), then a mixed history
    untouched = [store.manifest([_entry(ADD, f"e{m}-{i}", ("e", 5)) for i in range(50)]) for m in range(3)]
    history = _history(rng, 40)
    cuts = sorted(rng.sample(range(1, len(history)), 5))
    mixed = [
        store.manifest(history[a:b], older_layout=rng.random() < 0.3)
        for a, b in zip([0, *cuts], [*cuts, len(history)], strict=True)
    ]
    metas = untouched + mixed
    expected = EntryMerger().add_all(e for m in metas for e in store.entries(m)).merged()

    out = store.merge(metas, target=rng.choice([1, 2_000, 1 << 20]))
    merged = [e for m in out for e in store.entries(m)]
    assert merged == expected
    for meta in out:
        entries = store.entries(meta)
        assert meta == manifest_file_meta(meta.file_name, meta.file_size, entries, 0, TYPES)


def test_untouched_manifests_are_copied_without_decoding(tmp_path, monkeypatch):
    import paimon_format.manifest.concat as concat

    decoded: list[str] = []
    real = concat.iter_source_entries

    def counting(data: bytes, path: str):
        decoded.append(path.rsplit("/", 1)[-1])
        return real(data, path)

    monkeypatch.setattr(concat, "iter_source_entries", counting)
    store = Store(tmp_path)
    keep = store.manifest([_entry(ADD, f"k{i}", ("a", 1)) for i in range(20)])
    touched = store.manifest([_entry(ADD, "x", ("b", 2)), _entry(ADD, "y", ("b", 2))])
    deleting = store.manifest([_entry(DELETE, "x", ("b", 2))])
    out = store.merge([keep, touched, deleting])
    assert decoded == [touched.file_name, deleting.file_name]
    assert [e.file.file_name for m in out for e in store.entries(m)] == [f"k{i}" for i in range(20)] + ["y"]


def test_older_and_our_layouts_go_to_separate_files_each_declaring_its_schema(tmp_path):
    store = Store(tmp_path)
    older = store.manifest([_entry(ADD, "o1", ("a", 1))], older_layout=True)
    ours = store.manifest([_entry(ADD, "n1", ("a", 1))])
    older_again = store.manifest([_entry(ADD, "o2", ("a", 1))], older_layout=True)
    out = store.merge([older, ours, older_again])
    assert [[e.file.file_name for e in store.entries(m)] for m in out] == [["o1"], ["n1"], ["o2"]]
    widths = [
        len(
            fastavro.reader(open(store.path(m.file_name), "rb")).writer_schema["fields"][-1]["type"]["fields"]
        )
        for m in out
    ]
    assert widths[0] == widths[2] == widths[1] - 5


def test_strict_merge_refuses_a_delete_without_its_add_and_leaves_nothing(tmp_path):
    store = Store(tmp_path)
    metas = [
        store.manifest([_entry(ADD, f"a{i}", ("a", 1)) for i in range(10)]),
        store.manifest([_entry(DELETE, "gone", ("a", 1))]),
    ]
    before = set(tmp_path.iterdir())
    with pytest.raises(InvalidTableStateError, match="gone.*not previously added"):
        store.merge(metas, target=1, strict=True)
    assert set(tmp_path.iterdir()) == before
    kept = store.merge(metas)  # a partial merge keeps it: its ADD may be in another manifest
    assert [e.kind for m in kept for e in store.entries(m)][-1] == DELETE


def test_a_file_added_twice_is_refused(tmp_path):
    store = Store(tmp_path)
    twice = [_entry(ADD, "f", ("a", 1)), _entry(ADD, "f", ("a", 1)), _entry(DELETE, "f", ("a", 1))]
    with pytest.raises(InvalidTableStateError, match="already added"):
        store.merge([store.manifest(twice)])


def test_a_list_record_that_disagrees_with_its_manifest_is_refused(tmp_path):
    store = Store(tmp_path)
    meta = store.manifest([_entry(ADD, f"a{i}", ("a", 1)) for i in range(3)])
    meta.num_added_files = 2
    with pytest.raises(InvalidTableStateError, match="holds 3 entries.*counts 2"):
        store.merge([meta])


def test_a_dry_run_merges_alike_and_writes_nothing(tmp_path):
    store = Store(tmp_path)
    metas = [store.manifest([_entry(ADD, f"m{m}-{i}", ("a", m)) for i in range(5)]) for m in range(3)]
    metas.append(store.manifest([_entry(DELETE, "m0-0", ("a", 0))]))
    before = set(tmp_path.iterdir())
    deletes = read_deletes(store.file_io, store.path, metas)
    dry = merge_by_blocks(
        store.file_io,
        store.path,
        metas,
        deletes,
        store.root,
        lambda: "never",
        1 << 20,
        "zstd",
        TYPES,
        0,
        write=False,
    )
    assert set(tmp_path.iterdir()) == before
    real = store.merge(metas)
    assert [(m.num_added_files, m.num_deleted_files, m.partition_stats) for m in dry] == [
        (m.num_added_files, m.num_deleted_files, m.partition_stats) for m in real
    ]
    assert sum(m.num_added_files for m in dry) == 14


def test_an_unpartitioned_manifest_of_other_buckets_or_levels_is_copied(tmp_path, monkeypatch):
    """Without partitions the bucket and level ranges decide: a DELETE of bucket 1, level 0 cannot
    cancel anything in a manifest of bucket 0 or of levels 1-2."""
    import paimon_format.manifest.concat as concat

    decoded: list[str] = []
    real = concat.iter_source_entries
    monkeypatch.setattr(
        concat,
        "iter_source_entries",
        lambda data, path: decoded.append(path.rsplit("/", 1)[-1]) or real(data, path),
    )
    store = Store(tmp_path)
    file_io = store.file_io
    counter = itertools.count()

    def plain(kind: int, name: str, bucket: int, level: int) -> ManifestEntry:
        return ManifestEntry(kind, serialize_row([], []), bucket, 2, data_file(name, level=level))

    def manifest(entries: list[ManifestEntry]) -> ManifestFileMeta:
        name = f"manifest-plain-{next(counter)}"
        data = encode_manifest(entries)
        file_io.write_bytes(store.path(name), data)
        return manifest_file_meta(name, len(data), entries, 0, [])

    other_bucket = manifest([plain(ADD, "b0", 0, 0)])
    other_levels = manifest([plain(ADD, "l1", 1, 1), plain(ADD, "l2", 1, 2)])
    same_place = manifest([plain(ADD, "x", 1, 0), plain(ADD, "y", 1, 0)])
    deleting = manifest([plain(DELETE, "x", 1, 0)])
    metas = [other_bucket, other_levels, same_place, deleting]
    names = (f"manifest-out-{i}" for i in itertools.count())
    out = merge_by_blocks(
        file_io,
        store.path,
        metas,
        read_deletes(file_io, store.path, metas),
        store.root,
        lambda: next(names),
        1 << 20,
        "zstd",
        [],
        0,
    )
    assert decoded == [same_place.file_name, deleting.file_name]
    assert [e.file.file_name for m in out for e in store.entries(m)] == ["b0", "l1", "l2", "y"]
