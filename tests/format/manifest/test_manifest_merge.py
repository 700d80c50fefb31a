"""The manifest merge rules (seed 003) and the ADD/DELETE merge they rely on, on in-memory manifests."""

from __future__ import annotations

import itertools

import pytest

from paimon_format.errors import InvalidTableStateError
from paimon_format.manifest.entries import ADD, DELETE, ManifestEntry, ManifestFileMeta, SimpleStats
from paimon_format.manifest.merge import (
    Canceller,
    Deletes,
    merge_manifests,
    minor_compaction,
    try_full_compaction,
)
from paimon_format.model.binary_row import serialize_row
from paimon_format.model.type_parsing import parse_type
from paimon_format.scan.snapshot_scan import EntryMerger, merge_entries
from tests.support.factories import data_file

STRING = [parse_type("STRING")]


def entry(kind: int, name: str, partition: str = "a", level: int = 0) -> ManifestEntry:
    return ManifestEntry(kind, serialize_row([partition], STRING), 0, -1, data_file(name, level=level))


class FakeStore:
    """Manifests kept in memory: name -> entries; sizes chosen by the test."""

    def __init__(self) -> None:
        self.entries: dict[str, list[ManifestEntry]] = {}
        self.reads: list[str] = []
        self.delete_reads: list[str] = []
        self._names = (f"new-{i}" for i in itertools.count())

    def manifest(self, entries: list[ManifestEntry], size: int, name: str | None = None) -> ManifestFileMeta:
        name = name or next(self._names)
        self.entries[name] = entries
        partitions = [e.partition for e in entries] or [serialize_row(["a"], STRING)]
        return ManifestFileMeta(
            file_name=name,
            file_size=size,
            num_added_files=sum(e.kind == ADD for e in entries),
            num_deleted_files=sum(e.kind == DELETE for e in entries),
            partition_stats=SimpleStats(min(partitions), max(partitions), [0]),
            schema_id=0,
        )

    def read(self, meta: ManifestFileMeta) -> list[ManifestEntry]:
        self.reads.append(meta.file_name)
        return self.entries[meta.file_name]

    def write(self, entries: list[ManifestEntry]) -> list[ManifestFileMeta]:
        return [self.manifest(list(entries), size=sum(10 for _ in entries))]

    # manifest_merge.MergeOps, entry by entry in memory
    def read_deletes(self, metas: list[ManifestFileMeta]) -> Deletes:
        deletes = Deletes()
        for meta in metas:
            if meta.num_deleted_files:
                self.delete_reads.append(meta.file_name)
                for e in self.entries[meta.file_name]:
                    if e.kind == DELETE:
                        deletes.counts[e.identifier()] = deletes.counts.get(e.identifier(), 0) + 1
                        deletes.partitions.add(e.partition)
        return deletes

    def merge(self, metas: list[ManifestFileMeta], deletes: Deletes) -> list[ManifestFileMeta]:
        canceller = Canceller(deletes.counts, "fake")
        survivors = [e for meta in metas for e in self.read(meta) if canceller.keeps(e)]
        return self.write(survivors) if survivors else []

    def live(self, metas: list[ManifestFileMeta]) -> set[str]:
        merger = EntryMerger()
        for meta in metas:
            merger.add_all(self.entries[meta.file_name])
        return {e.file.file_name for e in merger.live()}


def test_merger_cancels_add_and_delete_and_keeps_order():
    merged = merge_entries([entry(ADD, "f1"), entry(ADD, "f2"), entry(DELETE, "f1"), entry(ADD, "f3")])
    assert [e.file.file_name for e in merged] == ["f2", "f3"]


def test_merger_rejects_a_duplicate_add():
    with pytest.raises(InvalidTableStateError, match="already added"):
        merge_entries([entry(ADD, "f1"), entry(ADD, "f1")])


def test_full_scan_rejects_a_delete_without_its_add_but_a_partial_merge_keeps_it():
    with pytest.raises(InvalidTableStateError, match="not previously added"):
        merge_entries([entry(DELETE, "f1")])
    kept = merge_entries([entry(DELETE, "f1")], keep_unmatched_deletes=True)
    assert [(e.kind, e.file.file_name) for e in kept] == [(DELETE, "f1")]


def test_same_file_name_at_another_level_is_another_file():
    merged = merge_entries(
        [entry(ADD, "f1", level=0), entry(DELETE, "f1", level=0), entry(ADD, "f1", level=1)]
    )
    assert [(e.file.file_name, e.file.level) for e in merged] == [("f1", 1)]


def test_minor_compaction_merges_a_tail_of_at_least_min_count_files():
    store = FakeStore()
    metas = [store.manifest([entry(ADD, f"f{i}")], size=10) for i in range(5)]
    result = minor_compaction(metas, store, target_size=1000, merge_min_count=5)
    assert len(result.manifests) == 1 and result.written == result.manifests
    assert store.live(result.manifests) == {f"f{i}" for i in range(5)}


def test_minor_compaction_leaves_a_short_tail_alone():
    store = FakeStore()
    metas = [store.manifest([entry(ADD, f"f{i}")], size=10) for i in range(4)]
    result = minor_compaction(metas, store, target_size=1000, merge_min_count=5)
    assert result.manifests == metas and result.written == [] and store.reads == []


def test_minor_compaction_merges_runs_reaching_the_target_and_keeps_big_files():
    store = FakeStore()
    big = store.manifest([entry(ADD, "big")], size=500)
    smalls = [store.manifest([entry(ADD, f"s{i}")], size=200) for i in range(3)]
    result = minor_compaction([big] + smalls, store, target_size=400, merge_min_count=30)
    assert result.manifests[0] is big  # a run of one large file is kept as it is
    assert len(result.manifests) == 3  # s0+s1 merged (400 bytes), s2 left as tail
    assert store.live(result.manifests) == {"big", "s0", "s1", "s2"}


def test_minor_compaction_keeps_deletes_whose_add_is_outside_the_group():
    store = FakeStore()
    first = store.manifest([entry(ADD, "f1")], size=500)
    rest = [
        store.manifest([entry(DELETE, "f1"), entry(ADD, "f2")], size=10),
        store.manifest([entry(ADD, "f3")], size=10),
    ]
    result = minor_compaction([first] + rest, store, target_size=400, merge_min_count=2)
    assert store.live(result.manifests) == {"f2", "f3"}


def test_full_compaction_below_threshold_does_nothing():
    store = FakeStore()
    metas = [store.manifest([entry(ADD, f"f{i}")], size=10) for i in range(3)]
    assert try_full_compaction(metas, store, STRING, target_size=100, threshold=31) is None


def test_full_compaction_drops_cancelled_pairs_and_rewrites_the_base_file_holding_the_add():
    store = FakeStore()
    base_a = store.manifest([entry(ADD, "f1", "a"), entry(ADD, "f2", "a")], size=1000)
    base_z = store.manifest([entry(ADD, "z1", "z")], size=1000)
    delta = [store.manifest([entry(DELETE, "f1", "a"), entry(ADD, "f3", "a")], size=50)]
    result = try_full_compaction([base_a, base_z] + delta, store, STRING, target_size=500, threshold=10)
    assert result is not None
    assert base_z in result.manifests and base_a not in result.manifests  # z cannot hold the deleted file
    assert all(m.num_deleted_files == 0 for m in result.manifests)
    assert store.live(result.manifests) == {"f2", "f3", "z1"}


def test_merge_manifests_prefers_full_then_minor():
    store = FakeStore()
    metas = [store.manifest([entry(ADD, f"f{i}")], size=10) for i in range(3)]
    result = merge_manifests(
        metas,
        store,
        STRING,
        target_size=1000,
        merge_min_count=3,
        full_compaction_threshold=10_000,
    )
    assert len(result.manifests) == 1 and result.differs_from(metas)
    assert store.live(result.manifests) == {"f0", "f1", "f2"}


def _random_history(rng, files: int) -> list[ManifestEntry]:
    """A consistent ADD/DELETE history: files added, some deleted, some re-added; plus DELETEs whose
    ADD lives in a manifest outside the merge (a partial merge keeps those)."""
    history: list[ManifestEntry] = []
    live: set[str] = set()
    for step in range(files * 3):
        name = f"f{rng.randrange(files)}"
        if name in live and rng.random() < 0.6:
            history.append(entry(DELETE, name, partition="ab"[step % 2 and 0]))
            live.discard(name)
        elif name not in live:
            history.append(entry(ADD, name, partition="ab"[step % 2 and 0]))
            live.add(name)
    position = rng.randrange(len(history) + 1)
    history[position:position] = [entry(DELETE, f"outside{i}") for i in range(2)]
    return history


@pytest.mark.parametrize("seed", range(20))
def test_the_canceller_keeps_what_the_entry_merger_keeps(seed):
    import random

    rng = random.Random(seed)
    history = _random_history(rng, 30)
    deletes: dict[tuple, int] = {}
    for e in history:
        if e.kind == DELETE:
            deletes[e.identifier()] = deletes.get(e.identifier(), 0) + 1
    canceller = Canceller(deletes, "test")
    assert [e for e in history if canceller.keeps(e)] == EntryMerger().add_all(history).merged()
    assert [e.file.file_name for e in canceller.dangling] == ["outside0", "outside1"]


def test_the_canceller_refuses_a_live_file_added_again():
    twice = [entry(ADD, "f1"), entry(ADD, "f1"), entry(DELETE, "f1")]
    canceller = Canceller({twice[2].identifier(): 1}, "t")
    with pytest.raises(InvalidTableStateError, match="f1.*already added"):
        [canceller.keeps(e) for e in twice]
    after_delete = [entry(DELETE, "f2"), entry(ADD, "f2")]
    canceller = Canceller({after_delete[0].identifier(): 1}, "t")
    with pytest.raises(InvalidTableStateError, match="f2.*already added"):
        [canceller.keeps(e) for e in after_delete]


def test_full_compaction_reads_deletes_only_from_manifests_that_count_any():
    store = FakeStore()
    metas = [store.manifest([entry(ADD, f"f{m}-{i}") for i in range(3)], size=10) for m in range(4)]
    metas.append(store.manifest([entry(DELETE, "f0-0"), entry(ADD, "g")], size=10))
    result = try_full_compaction(metas, store, STRING, target_size=100, threshold=1)
    assert store.delete_reads == [metas[4].file_name]
    assert store.live(result.manifests) == {f"f{m}-{i}" for m in range(4) for i in range(3)} - {"f0-0"} | {
        "g"
    }
