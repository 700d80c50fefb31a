"""Space-filling curves that order an append bin's rows over several columns (`order_strategy`).

A plain sort by (a, b) clusters only `a`: each output file spans few values of `a` but nearly every
value of `b`, so a filter on `b` prunes nothing. A curve over both keeps rows that are close in
every column close in the file order, so each file covers a small box of (a, b) and min/max
statistics prune filters on either column. `zorder` interleaves the columns' bits (cheap, but the
curve jumps across the space at every power of two); `hilbert` is the Hilbert curve, whose
consecutive cells are always neighbours, so a file's box is tighter. Paimon offers both for its
sort compaction (Paimon's Hilbert index needs at least two columns, as here).

Paimon maps each column's raw value to a 64-bit number (a string by its first 8 bytes); here each
column is normalised to its dense rank among the bin's rows (nulls rank last) and spread over the
bits a column gets, so columns of any orderable type and of very different ranges weigh alike. The
curve index is computed for all rows at once with numpy: the loops run over bits and columns, never
over rows, so a bin of millions of rows costs a few hundred vector operations.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# a float64 holds integers exactly up to 2^53: a column's scaled rank stays exact and monotonic
MAX_BITS_PER_COLUMN = 52


def bits_per_column(columns: int) -> int:
    """How many bits of each column a 64-bit curve index holds."""
    return max(min(64 // columns, MAX_BITS_PER_COLUMN), 1)


def scaled_ranks(rows: pa.Table, column: str, bits: int) -> np.ndarray:
    """The column's dense rank (nulls last), spread evenly over [0, 2^bits - 1] as uint64."""
    ranks = pc.rank(rows.column(column), sort_keys="ascending", null_placement="at_end", tiebreaker="dense")
    values = ranks.to_numpy().astype(np.float64) - 1.0
    top = max(values.max(), 1.0) if len(values) else 1.0
    limit = float((1 << bits) - 1)
    return np.floor(values / top * limit).astype(np.uint64)


def interleave(coordinates: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """One uint64 per row: the coordinates' bits interleaved, most significant first, the first
    coordinate's bit leading each group."""
    one = np.uint64(1)
    result = np.zeros(len(coordinates[0]), dtype=np.uint64)
    for bit in range(bits - 1, -1, -1):
        shift = np.uint64(bit)
        for values in coordinates:
            result = (result << one) | ((values >> shift) & one)
    return result


def zorder_values(rows: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """One uint64 per row: the Z-order (Morton) value of the columns' scaled ranks."""
    bits = bits_per_column(len(columns))
    return interleave([scaled_ranks(rows, column, bits) for column in columns], bits)


def hilbert_values(rows: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """One uint64 per row: the row's position on the Hilbert curve over the columns' scaled ranks."""
    bits = bits_per_column(len(columns))
    return hilbert_index([scaled_ranks(rows, column, bits) for column in columns], bits)


def hilbert_index(coordinates: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """The Hilbert curve index of each point (one array per dimension, values below 2^bits).

    Skilling's method ("Programming the Hilbert curve", AIP Conf. Proc. 707, 2004): the axes are
    turned into the curve's transposed index by undoing, from the top bit down, the reflections and
    exchanges the curve applies in each sub-cube, then Gray-decoding; interleaving the transposed
    bits gives the index. Every branch of the per-point method is a mask here, so one pass over the
    bits handles all points. Needs `len(coordinates) * bits <= 64`.
    """
    dimensions = len(coordinates)
    if dimensions * bits > 64:
        raise ValueError(f"a {dimensions}-dimensional Hilbert index of {bits} bits exceeds 64 bits")
    x = [np.asarray(values, dtype=np.uint64).copy() for values in coordinates]
    zero = np.uint64(0)
    q = 1 << (bits - 1)
    while q > 1:
        top, low = np.uint64(q), np.uint64(q - 1)
        for i in range(dimensions):
            high = (x[i] & top) != zero
            x[0] = np.where(high, x[0] ^ low, x[0])  # reflect: invert the low bits of the first axis
            swap = np.where(high, zero, (x[0] ^ x[i]) & low)  # else exchange the low bits with axis i
            x[0] ^= swap
            if i:
                x[i] ^= swap
        q >>= 1
    for i in range(1, dimensions):
        x[i] ^= x[i - 1]
    flips = np.zeros_like(x[0])
    q = 1 << (bits - 1)
    while q > 1:
        flips = np.where((x[-1] & np.uint64(q)) != zero, flips ^ np.uint64(q - 1), flips)
        q >>= 1
    return interleave([axis ^ flips for axis in x], bits)
