"""Streaming consumers: `consumer/consumer-<id>` files and the smallest next snapshot."""

from __future__ import annotations

import pytest

from paimon_format.consumers import ConsumerManager
from paimon_format.errors import (
    CorruptFileError,
)

# -- ConsumerManager -------------------------------------------------------------------------------


def test_consumers(file_io, table_root):
    consumers = ConsumerManager(file_io, table_root)
    assert consumers.consumers() == {} and consumers.min_next_snapshot() is None
    consumers.reset_consumer("job-a", 7)
    assert file_io.read_bytes(consumers.consumer_path("job-a")) == b'{\n  "nextSnapshot" : 7\n}'
    file_io.write_bytes(consumers.consumer_path("job-b"), b'{"nextSnapshot": 3}')
    assert consumers.consumers() == {"job-a": 7, "job-b": 3}
    assert consumers.consumer("job-b") == 3 and consumers.consumer("nope") is None
    assert consumers.min_next_snapshot() == 3
    file_io.write_bytes(consumers.consumer_path("job-c"), b'{"next": 1}')
    with pytest.raises(CorruptFileError, match="nextSnapshot"):
        consumers.consumers()
    assert consumers.delete_consumer("job-c") is True
    assert consumers.consumer_ids() == ["job-a", "job-b"]
