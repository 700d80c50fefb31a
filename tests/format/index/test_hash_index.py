"""The HASH index of dynamic-bucket tables: the file layout, bucket assignment rules and index updates.
(Java reading what the write job assigns: tests/java/test_write_dynamic_bucket.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from paimon_format.errors import CorruptFileError, UnsupportedOperationError
from paimon_format.index.hash_index import (
    PartitionAssigner,
    decode_hash_index,
    encode_hash_index,
    read_hash_index,
    updated_bucket_index,
    write_hash_index,
)
from tests.support.factories import make_table, partition_of


@pytest.fixture
def table(tmp_path):
    return make_table(str(tmp_path / "db.db" / "t"), primary_keys=("id", "dt"), options={"bucket": "-1"})


def test_hash_index_file_is_big_endian_int32s():
    assert encode_hash_index(np.array([1, -1, 2**31 - 1])) == bytes.fromhex("00000001ffffffff7fffffff")
    assert decode_hash_index(bytes.fromhex("00000001ffffffff"), "f").tolist() == [1, -1]
    with pytest.raises(CorruptFileError, match="not a whole number"):
        decode_hash_index(b"\x00\x00\x01", "f")


def test_written_index_reads_back_and_a_wrong_row_count_is_corrupt(table):
    partition = partition_of(table, "a")
    entry = write_hash_index(table, partition, 3, np.array([5, -7, 5, 9]))
    assert (entry.index_type, entry.bucket, entry.row_count) == ("HASH", 3, 3)  # distinct hashes
    assert sorted(read_hash_index(table, entry).tolist()) == [-7, 5, 9]
    entry.row_count = 4
    with pytest.raises(CorruptFileError, match="says 4"):
        read_hash_index(table, entry)


def test_known_hashes_keep_their_bucket_new_ones_fill_buckets_to_the_target(table):
    partition = partition_of(table, "a")
    entries = [
        write_hash_index(table, partition, 0, np.array([10, 11, 12])),  # one free slot
        write_hash_index(table, partition, 2, np.array([20, 21, 22, 23])),  # full
    ]
    assigner = PartitionAssigner.load(table, entries, target_row_num=4)
    # known keys keep theirs; new keys in arrival order: 99 fills bucket 0, then bucket 1 (unused)
    # takes four, then bucket 3; a key twice in the input gets one bucket
    buckets = assigner.assign(np.array([21, 99, 10, 1, 2, 99, 3, 4, 5, 6], dtype=np.int32))
    assert buckets.tolist() == [2, 0, 0, 1, 1, 0, 1, 1, 3, 3]
    # remembered for the rest of the write
    assert assigner.assign(np.array([6, 1, 7], dtype=np.int32)).tolist() == [3, 1, 3]


def test_several_assigners_share_a_partition_without_sharing_buckets(table):
    partition = partition_of(table, "a")
    entries = [
        write_hash_index(table, partition, 0, np.array([2, 4])),
        write_hash_index(table, partition, 1, np.array([3])),
    ]
    odd = PartitionAssigner.load(table, entries, target_row_num=2, num_assigners=2, assigner_id=1)
    # assigner 1 knows the odd hashes; it fills bucket 1, then opens 3, 5 (never an even bucket)
    assert odd.assign(np.array([3, 5, 7, 9, -11], dtype=np.int32)).tolist() == [1, 1, 3, 3, 5]
    even = PartitionAssigner.load(table, entries, target_row_num=2, num_assigners=2, assigner_id=0)
    assert even.assign(np.array([4, 6, 8], dtype=np.int32)).tolist() == [0, 2, 2]


def test_many_new_keys_are_remembered_across_merges(table):
    assigner = PartitionAssigner.load(table, [], target_row_num=1000)
    hashes = np.random.default_rng(7).permutation(np.arange(-100_000, 100_000, dtype=np.int32))
    first = np.concatenate([assigner.assign(chunk) for chunk in np.array_split(hashes, 20)])
    assert np.bincount(first).tolist() == [1000] * 200
    again = assigner.assign(hashes[::-1].copy())
    assert again.tolist() == first[::-1].tolist()


def test_target_row_num_must_be_positive(table):
    with pytest.raises(UnsupportedOperationError, match="target-row-num"):
        PartitionAssigner.load(table, [], target_row_num=0)


def test_a_bucket_index_is_rewritten_only_when_a_new_key_came(table):
    partition = partition_of(table, "a")
    old = write_hash_index(table, partition, 1, np.array([1, 2]))
    assert updated_bucket_index(table, partition, 1, old, np.array([2, 1, 2])) is None
    new = updated_bucket_index(table, partition, 1, old, np.array([2, 3]))
    assert new is not None and new.file_name != old.file_name and new.bucket == 1
    assert sorted(read_hash_index(table, new).tolist()) == [1, 2, 3]
    fresh = updated_bucket_index(table, partition, 4, None, np.array([8, 8]))
    assert read_hash_index(table, fresh).tolist() == [8]
