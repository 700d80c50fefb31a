"""The curves `order_strategy` sorts append bins along: the Hilbert index is a Hilbert curve (a
bijection whose consecutive cells are neighbours), ranks normalise any column type, and a bin sorted
along the curve clusters both columns into files where a plain sort clusters only the first."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest

from paimon_format.compaction.curves import hilbert_index, hilbert_values, interleave, zorder_values
from paimon_format.compaction.rewrite import sort_rows


def grid(side: int, dimensions: int) -> list[np.ndarray]:
    """Every cell of a side^dimensions grid, one coordinate array per dimension."""
    cells = np.array(list(itertools.product(range(side), repeat=dimensions)), dtype=np.uint64)
    return [cells[:, d] for d in range(dimensions)]


def walk(coordinates: list[np.ndarray], index: np.ndarray) -> np.ndarray:
    """The cells in curve order (rows of coordinates)."""
    return np.stack(coordinates, axis=1).astype(np.int64)[np.argsort(index)]


@pytest.mark.parametrize(("side", "dimensions"), [(2, 2), (8, 2), (32, 2), (4, 3), (8, 3), (4, 4)])
def test_hilbert_index_visits_every_cell_once_stepping_to_a_neighbour(side, dimensions):
    bits = side.bit_length() - 1
    coordinates = grid(side, dimensions)
    index = hilbert_index(coordinates, bits)
    assert sorted(index.tolist()) == list(range(side**dimensions))  # a bijection onto 0..n-1
    steps = np.abs(np.diff(walk(coordinates, index), axis=0)).sum(axis=1)
    assert set(steps.tolist()) == {1}  # consecutive cells are adjacent: Manhattan distance 1
    assert walk(coordinates, index)[0].tolist() == [0] * dimensions  # the curve starts at the origin


def test_zorder_is_not_a_hilbert_curve():
    """The adjacency check above tells the curves apart: Z-order jumps."""
    coordinates = grid(8, 2)
    steps = np.abs(np.diff(walk(coordinates, interleave(coordinates, 3)), axis=0)).sum(axis=1)
    assert steps.max() > 1


def test_hilbert_index_refuses_more_than_64_bits():
    with pytest.raises(ValueError, match="exceeds 64 bits"):
        hilbert_index(grid(2, 3), 22)


def test_hilbert_values_rank_any_type_and_put_nulls_last():
    """Strings and floats of 8 distinct values each, shuffled: sorted along the curve, consecutive
    rows are neighbours in rank space (the normalised ranks keep the curve's shape)."""
    rng = np.random.default_rng(3)
    cells = grid(8, 2)
    order = rng.permutation(64)
    names = [f"name-{chr(ord('a') + int(v))}" for v in cells[0][order]]
    weights = [float(v) * 2.5 - 7 for v in cells[1][order]]
    rows = pa.table({"name": names, "weight": weights, "row": order})
    ranked = sort_rows(rows, ["name", "weight"], "hilbert")
    x = np.array([ord(n[-1]) - ord("a") for n in ranked.column("name").to_pylist()])
    y = (np.array(ranked.column("weight").to_pylist()) + 7) / 2.5
    assert set((np.abs(np.diff(x)) + np.abs(np.diff(y))).tolist()) == {1.0}

    with_nulls = pa.table({"a": [None, 1, 2, 1, None], "b": [1, None, 2, 1, 2]})
    values = hilbert_values(with_nulls, ["a", "b"])
    assert len(set(values.tolist())) == 5
    assert values[0] > values[3] and values[4] > values[3]  # a null ranks after every value


def test_zorder_of_one_column_orders_by_it():
    """One column gets all the bits: the largest value must not wrap around to the front."""
    rows = pa.table({"a": [3, 1, 2, 5, 4]})
    assert sort_rows(rows, ["a"], "zorder").column("a").to_pylist() == [1, 2, 3, 4, 5]
    assert np.all(np.diff(zorder_values(rows.sort_by("a"), ["a"]).astype(np.float64)) > 0)


def files_read_per_lookup(rows: pa.Table, column: str, files: int) -> float:
    """Cut the rows into equal files; the mean number of files whose [min, max] on `column` holds
    a value of it (what a point filter on the column reads)."""
    values = np.array(rows.column(column).to_pylist())
    ranges = [(chunk.min(), chunk.max()) for chunk in np.array_split(values, files)]
    return float(np.mean([sum(low <= v <= high for low, high in ranges) for v in np.unique(values)]))


@pytest.mark.parametrize("strategy", ["hilbert", "zorder"])
def test_a_curve_clusters_both_columns_where_a_sort_clusters_one(strategy):
    """4,096 rows over a 64 x 64 grid, cut into 16 files: sorted by (a, b), a filter on `b` reads
    every file; along a curve each file holds a 16 x 16 box, so a filter on either column reads 4."""
    rng = np.random.default_rng(11)
    cells = grid(64, 2)
    order = rng.permutation(len(cells[0]))
    rows = pa.table({"a": cells[0][order].astype(np.int64), "b": cells[1][order].astype(np.int64)})

    plain = sort_rows(rows, ["a", "b"], "order")
    curve = sort_rows(rows, ["a", "b"], strategy)
    assert sorted(curve.to_pylist(), key=lambda r: (r["a"], r["b"])) == plain.to_pylist()
    plain_cost = [files_read_per_lookup(plain, c, 16) for c in ("a", "b")]
    curve_cost = [files_read_per_lookup(curve, c, 16) for c in ("a", "b")]
    assert plain_cost[1] == 16  # the sort leaves b unclustered
    assert curve_cost[1] <= 4.5 and curve_cost[0] <= 4.5
    assert sum(curve_cost) < sum(plain_cost) / 2


def test_hilbert_files_cover_tighter_boxes_than_zorder_on_unaligned_cuts():
    """Files that do not fall on the curves' power-of-two blocks: a Z-order file may straddle a jump
    and span the whole grid; a Hilbert file stays a connected, compact region."""
    rng = np.random.default_rng(5)
    cells = grid(64, 2)
    rows = pa.table({"a": cells[0].astype(np.int64), "b": cells[1].astype(np.int64)}).take(
        rng.permutation(len(cells[0]))
    )

    def area(sorted_rows: pa.Table) -> float:
        a = np.array(sorted_rows.column("a").to_pylist())
        b = np.array(sorted_rows.column("b").to_pylist())
        boxes = [
            (ca.max() - ca.min() + 1) * (cb.max() - cb.min() + 1)
            for ca, cb in zip(np.array_split(a, 13), np.array_split(b, 13), strict=True)
        ]
        return float(np.mean(boxes))

    assert area(sort_rows(rows, ["a", "b"], "hilbert")) < area(sort_rows(rows, ["a", "b"], "zorder"))
