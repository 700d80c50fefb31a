"""Tags of a table branch: `tag/tag-<name>`, each a snapshot JSON (spec §1, §3).

A tag keeps a snapshot (and every file it reads) alive after the snapshot itself expired. Tags may
carry a retention (`tagCreateTime`, `tagTimeRetained`) that expire-tags honours. A tag being
deleted together with its files is first parked in `tag-deletion/`, so an interrupted deletion
can still find what the tag used.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import uuid
from decimal import Decimal
from typing import TYPE_CHECKING

from paimon_format._listing import names_after_prefix
from paimon_format.branches import MAIN_BRANCH, branch_root
from paimon_format.errors import InvalidTableStateError, SnapshotNotFoundError
from paimon_format.snapshot import Snapshot, read_snapshot_file
from paimon_format.storage.in_flight import map_in_flight

if TYPE_CHECKING:
    from paimon_format.snapshot import SnapshotManager
    from paimon_format.storage.fileio import FileIO

log = logging.getLogger(__name__)

TAG_PREFIX = "tag-"
PENDING_TAG_DELETION_DIR = "tag-deletion"
_NO_WATERMARK = -(2**63)  # Java's Long.MIN_VALUE: a commit that saw no watermark


def validate_tag_name(name: str) -> None:
    """ValueError naming the problem: blank, numeric (ambiguous with snapshot ids) or with a slash."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"tag name must not be blank, got {name!r}")
    if name.isdigit():
        # Java refuses numeric tag names: they would be ambiguous with snapshot ids in time travel.
        raise ValueError(f"tag name must not be a number, got {name!r}")
    if "/" in name:
        raise ValueError(f"tag name must not contain '/', got {name!r}")


def _tag_of(snapshot: Snapshot, time_retained_ms: int | None = None) -> Snapshot:
    """The tag file's content for `snapshot`: its JSON without any earlier tag's retention fields,
    plus, with a retention, `tagCreateTime` (now, as a Java LocalDateTime array) and
    `tagTimeRetained` (a Java Duration: decimal seconds with nanosecond digits)."""
    extra = {k: v for k, v in snapshot.extra.items() if k not in ("tagCreateTime", "tagTimeRetained")}
    tagged = dataclasses.replace(snapshot, extra=extra)
    if time_retained_ms is not None:
        now = dt.datetime.now()
        tagged.extra["tagCreateTime"] = [
            now.year,
            now.month,
            now.day,
            now.hour,
            now.minute,
            now.second,
            now.microsecond * 1000,
        ]
        tagged.extra["tagTimeRetained"] = Decimal(int(time_retained_ms)).scaleb(-3).quantize(Decimal("1E-9"))
    return tagged


class TagManager:
    """Tags of one branch: `tag/tag-<name>`, each a snapshot JSON (plus optional retention fields).

    Java writes tags pretty-printed, pypaimon compact on one line; both read the same.
    """

    def __init__(self, file_io: FileIO, table_path: str, branch: str = MAIN_BRANCH) -> None:
        self.file_io = file_io
        self.table_path = table_path.rstrip("/")
        self.branch = branch or MAIN_BRANCH
        self.branch_root = branch_root(file_io, self.table_path, self.branch)

    def __repr__(self) -> str:
        return f"TagManager({self.table_path!r}, branch={self.branch!r})"

    def tag_dir(self) -> str:
        return self.file_io.join(self.branch_root, "tag")

    def tag_path(self, name: str) -> str:
        return self.file_io.join(self.tag_dir(), f"{TAG_PREFIX}{name}")

    def tag_names(self) -> list[str]:
        """Names of all tags, sorted; [] when the tag directory does not exist."""
        return names_after_prefix(self.file_io, self.tag_dir(), TAG_PREFIX)

    def tag_exists(self, name: str) -> bool:
        return self.file_io.file_exists(self.tag_path(name))

    def tag(self, name: str) -> Snapshot:
        """The tagged snapshot; `SnapshotNotFoundError` naming the path if there is no such tag."""
        return read_snapshot_file(self.file_io, self.tag_path(name), f"tag {name!r} does not exist")

    def tags(self) -> dict[str, Snapshot]:
        """Every tag, ordered by snapshot id then name (Java's order); a tag deleted meanwhile is skipped.

        Read with `FileIO.io_parallelism` reads in flight: each tag is a small file whose read waits
        a full request latency on an object store."""

        def read_one(name: str) -> tuple[str, Snapshot | None]:
            try:
                return name, self.tag(name)
            except SnapshotNotFoundError:
                log.info("%s: tag %r deleted while reading", self.tag_dir(), name)
                return name, None

        read = map_in_flight(read_one, self.tag_names(), self.file_io.io_parallelism)
        found = [(name, tag) for name, tag in read if tag is not None]
        found.sort(key=lambda item: (item[1].id, item[0]))
        return dict(found)

    def create_tag(
        self,
        name: str,
        snapshot: Snapshot,
        time_retained_ms: int | None = None,
        ignore_if_exists: bool = False,
        replace: bool = False,
    ) -> bool:
        """Tag `snapshot` as `name`; True if created, False if it existed and `ignore_if_exists`.

        Without a retention the file is the plain snapshot JSON (as Java writes it, readable by old
        readers); with one, `tagCreateTime` (LocalDateTime array) and `tagTimeRetained` (seconds)
        are added. An existing tag is never overwritten (`InvalidTableStateError` unless
        `ignore_if_exists`), except with `replace`: then the file is replaced atomically (a reader
        sees the old or the new tag), as Paimon's replaceTag overwrites it.
        """
        validate_tag_name(name)
        tagged = _tag_of(snapshot, time_retained_ms)
        if replace:
            self.file_io.write_bytes(self.tag_path(name), tagged.to_json().encode("utf-8"))
            return True
        if self.file_io.create_if_absent(self.tag_path(name), tagged.to_json().encode("utf-8")):
            return True
        if ignore_if_exists:
            return False
        raise InvalidTableStateError(f"{self.tag_path(name)}: tag {name!r} already exists")

    def delete_tag(self, name: str) -> bool:
        """Delete the tag file only (data cleanup is the expiry/orphan jobs' business); False if absent."""
        return self.file_io.delete(self.tag_path(name))

    # A tag being deleted with its files: its JSON is parked in `tag-deletion/tag-<name>` right before
    # the tag file goes, so a run interrupted after that can still find what the tag used. Readers
    # (Java, pypaimon) never look there; the deleting job removes the copy once the files are gone.

    def pending_deletion_dir(self) -> str:
        return self.file_io.join(self.branch_root, PENDING_TAG_DELETION_DIR)

    def pending_deletion_path(self, name: str) -> str:
        return self.file_io.join(self.pending_deletion_dir(), f"{TAG_PREFIX}{name}")

    def pending_deletion_names(self) -> list[str]:
        """Keys of the tags whose deletion an interrupted run left unfinished, sorted; [] when none."""
        return names_after_prefix(self.file_io, self.pending_deletion_dir(), TAG_PREFIX)

    def pending_deletion(self, key: str) -> Snapshot:
        path = self.pending_deletion_path(key)
        return read_snapshot_file(self.file_io, path, f"no pending tag deletion {key!r}")

    def park_for_deletion(self, name: str, data: bytes | None = None) -> str:
        """Copy the tag file to `tag-deletion/tag-<name>.<random>` (a key of its own, so an older
        unfinished deletion of the same name is never overwritten); returns the key. `data`: the
        tag file's bytes when the caller has just read them (no second read)."""
        key = f"{name}.{uuid.uuid4().hex[:12]}"
        if data is None:
            data = self.file_io.read_bytes(self.tag_path(name))
        self.file_io.write_bytes(self.pending_deletion_path(key), data)
        return key

    def finish_deletion(self, key: str) -> bool:
        return self.file_io.delete(self.pending_deletion_path(key))


def latest_snapshot_at_or_before(
    manager: SnapshotManager, *, time_ms: int | None = None, watermark: int | None = None
) -> Snapshot | None:
    """The newest retained snapshot committed at or before `time_ms`, or whose watermark is at or
    before `watermark` (exactly one is given); None when every retained snapshot is newer.

    Used to pick what create-tag tags and what rollback rolls back to. Commit times grow with the
    id, so the time is found by binary search (log2(n) snapshot reads). Watermarks grow too, but a
    snapshot may carry none (a commit without event time), so those are searched newest first,
    skipping snapshots without one (absent or Long.MIN_VALUE), as Paimon's earlierOrEqualWatermark does."""
    if (time_ms is None) == (watermark is None):
        raise ValueError("give exactly one of time_ms and watermark")
    ids = manager.snapshot_ids()
    if watermark is not None:
        for snapshot_id in reversed(ids):
            snapshot = manager.snapshot(snapshot_id)
            if snapshot.watermark not in (None, _NO_WATERMARK) and snapshot.watermark <= watermark:
                return snapshot
        return None
    low, high, found = 0, len(ids) - 1, None
    while low <= high:
        middle = (low + high) // 2
        snapshot = manager.snapshot(ids[middle])
        if snapshot.time_millis <= time_ms:  # type: ignore[operator]
            found, low = snapshot, middle + 1
        else:
            high = middle - 1
    return found
