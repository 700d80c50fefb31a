"""What the rolling manifest writers (`files`) and block concatenation (`concat`) share.

A block of datums that are already Avro-encoded (written into a new file as they are), and the
order of partition values that the partition stats of what they write follow.
"""

from __future__ import annotations

import datetime as dt
import io
import math
from typing import Any


class EncodedBlock:
    """What fastavro's `Writer.write_block` takes: a block's uncompressed datums and their count."""

    def __init__(self, data: bytes, num_records: int) -> None:
        self.bytes_ = io.BytesIO(data)
        self.num_records = num_records


def partition_order_key(value: Any) -> Any:
    """Sort key matching Java's comparison of partition values where Python's differs.

    Floats: Java's Double.compare puts NaN above everything and -0.0 below 0.0. Timestamps with
    nanoseconds (binary_row.PreciseDatetime) compare on the nanos too.
    """
    if isinstance(value, float):
        return (1, 0.0, 0.0) if math.isnan(value) else (0, value, math.copysign(1.0, value))
    if isinstance(value, dt.datetime):
        return (value, getattr(value, "nanosecond", 0) or 0)
    return value
