"""Streaming consumers: `consumer/consumer-<id>` = {"nextSnapshot": N} (spec §1).

A consumer pins the next snapshot a streaming reader needs: snapshot expiration must keep every
snapshot >= the smallest `nextSnapshot`, or a paused streaming job would find its next snapshot gone.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from paimon_format._listing import basename, list_or_empty, names_after_prefix
from paimon_format.branches import MAIN_BRANCH, branch_root
from paimon_format.errors import CorruptFileError, MissingFileError
from paimon_format.model.json import jackson_json, load_json_object

if TYPE_CHECKING:
    from paimon_format.storage.fileio import FileIO

CONSUMER_PREFIX = "consumer-"


class ConsumerManager:
    """Streaming consumers: `consumer/consumer-<id>` = {"nextSnapshot": N}.

    Snapshot expiration must keep every snapshot >= the smallest `nextSnapshot`, or a paused
    streaming job would find its next snapshot gone.
    """

    def __init__(self, file_io: FileIO, table_path: str, branch: str = MAIN_BRANCH) -> None:
        self.file_io = file_io
        self.table_path = table_path.rstrip("/")
        self.branch = branch or MAIN_BRANCH
        self.branch_root = branch_root(file_io, self.table_path, self.branch)

    def consumer_dir(self) -> str:
        return self.file_io.join(self.branch_root, "consumer")

    def consumer_path(self, consumer_id: str) -> str:
        return self.file_io.join(self.consumer_dir(), f"{CONSUMER_PREFIX}{consumer_id}")

    def consumer_ids(self) -> list[str]:
        return names_after_prefix(self.file_io, self.consumer_dir(), CONSUMER_PREFIX)

    def consumer(self, consumer_id: str) -> int | None:
        """The consumer's next snapshot id, None if there is no such consumer."""
        path = self.consumer_path(consumer_id)
        try:
            data = self.file_io.read_bytes(path)
        except MissingFileError:
            return None
        parsed = load_json_object(data, path)
        value = parsed.get("nextSnapshot")
        if not isinstance(value, int) or isinstance(value, bool):
            raise CorruptFileError(path, f"'nextSnapshot' must be an integer, found {value!r}")
        return value

    def consumers(self) -> dict[str, int]:
        """Consumer id -> next snapshot; a consumer removed while reading is skipped."""
        result = {}
        for consumer_id in self.consumer_ids():
            next_snapshot = self.consumer(consumer_id)
            if next_snapshot is not None:
                result[consumer_id] = next_snapshot
        return result

    def min_next_snapshot(self) -> int | None:
        values = self.consumers().values()
        return min(values) if values else None

    def reset_consumer(self, consumer_id: str, next_snapshot: int) -> None:
        self.file_io.write_bytes(
            self.consumer_path(consumer_id),
            jackson_json({"nextSnapshot": int(next_snapshot)}).encode("utf-8"),
        )

    def delete_consumer(self, consumer_id: str) -> bool:
        return self.file_io.delete(self.consumer_path(consumer_id))

    def modification_times(self) -> dict[str, int]:
        """Consumer id -> its file's modification time (epoch ms): a streaming reader rewrites its
        consumer at every checkpoint, so an old file is a reader that stopped."""
        result = {}
        for status in list_or_empty(self.file_io, self.consumer_dir()):
            base = basename(status.path)
            if base.startswith(CONSUMER_PREFIX) and len(base) > len(CONSUMER_PREFIX) and not status.is_dir:
                result[base[len(CONSUMER_PREFIX) :]] = status.modification_time_ms
        return result

    def stale_consumers(self, older_than_ms: int) -> list[str]:
        """The consumers whose file was last written before `older_than_ms` (Java's
        `ConsumerManager.expire`: `consumer.expiration-time` before now), sorted."""
        return sorted(i for i, mtime in self.modification_times().items() if mtime < older_than_ms)

    def matching_consumers(self, include: str, exclude: str | None = None) -> list[str]:
        """The consumers whose id fully matches the regex `include` and not `exclude` (Java's
        `clearConsumers`), sorted."""
        including = re.compile(include)
        excluding = re.compile(exclude) if exclude else None
        return [
            i
            for i in self.consumer_ids()
            if including.fullmatch(i) and not (excluding is not None and excluding.fullmatch(i))
        ]
