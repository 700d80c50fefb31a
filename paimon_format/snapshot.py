"""Snapshots, their hint files, tags, branches and consumers (spec §1, §3).

A snapshot file `snapshot/snapshot-<id>` is the unit of a commit: it names the manifest lists that
make up one version of the table. Ids start at 1 and are contiguous; `snapshot-N` is created once
(create-if-absent) and never rewritten. `LATEST`/`EARLIEST` are only hints that spare a directory
listing: a stale or garbage hint must never make us lose a snapshot, so we verify them the way
Java's `HintFileUtils` does and fall back to listing. A listing that *fails* is an error, never an
empty table. Tags (`tag/tag-<name>`) and long-lived changelogs (`changelog/changelog-<id>`) are
snapshot JSON too; branches (`branch/branch-<name>`) repeat the layout; consumers
(`consumer/consumer-<id>`) pin the next snapshot a streaming reader needs. Tags, branches and
consumers have managers of their own (`tags`, `branches`, `consumers`); the JSON writer is
`model.json`.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar

from paimon_format._listing import basename, numbered_ids
from paimon_format.branches import MAIN_BRANCH, branch_root
from paimon_format.errors import CorruptFileError, MissingFileError, SnapshotNotFoundError, StorageError
from paimon_format.model.json import jackson_json, load_json_object
from paimon_format.storage.in_flight import both, map_in_flight

R = TypeVar("R")

if TYPE_CHECKING:
    from paimon_format.storage.fileio import FileIO

log = logging.getLogger(__name__)

CURRENT_VERSION = 3

SNAPSHOT_PREFIX = "snapshot-"
CHANGELOG_PREFIX = "changelog-"
LATEST = "LATEST"
EARLIEST = "EARLIEST"

_SNAPSHOT_FILE_RE = re.compile(r"^snapshot-(\d+)$")
_CHANGELOG_FILE_RE = re.compile(r"^changelog-(\d+)$")
_HINT_READ_ATTEMPTS = 3
_HINT_RETRY_SECONDS = 0.001

# (attribute, JSON key, kind, required). Order = the order Java's Jackson writes (spec §3 table).
_INT, _STR, _DICT = "int", "str", "dict"
_SNAPSHOT_KEYS: tuple[tuple[str, str, str, bool], ...] = (
    ("version", "version", _INT, False),
    ("uuid", "uuid", _STR, False),
    ("id", "id", _INT, True),
    ("schema_id", "schemaId", _INT, True),
    ("base_manifest_list", "baseManifestList", _STR, True),
    ("base_manifest_list_size", "baseManifestListSize", _INT, False),
    ("delta_manifest_list", "deltaManifestList", _STR, True),
    ("delta_manifest_list_size", "deltaManifestListSize", _INT, False),
    ("changelog_manifest_list", "changelogManifestList", _STR, False),
    ("changelog_manifest_list_size", "changelogManifestListSize", _INT, False),
    ("index_manifest", "indexManifest", _STR, False),
    ("commit_user", "commitUser", _STR, True),
    ("writer_version", "writerVersion", _STR, False),
    ("commit_identifier", "commitIdentifier", _INT, True),
    ("commit_kind", "commitKind", _STR, True),
    ("time_millis", "timeMillis", _INT, True),
    ("total_record_count", "totalRecordCount", _INT, False),
    ("delta_record_count", "deltaRecordCount", _INT, False),
    ("changelog_record_count", "changelogRecordCount", _INT, False),
    ("watermark", "watermark", _INT, False),
    ("statistics", "statistics", _STR, False),
    ("properties", "properties", _DICT, False),
    ("next_row_id", "nextRowId", _INT, False),
    ("operation", "operation", _STR, False),
)
_KNOWN_JSON_KEYS = frozenset(key for _, key, _, _ in _SNAPSHOT_KEYS)
# Keys we do not model but whose position Java fixes; kept in `extra` and written back in place.
_EXTRA_KEY_POSITIONS = {"logOffsets": "timeMillis"}


@dataclass
class Snapshot:
    """One snapshot (also the payload of a tag or a long-lived changelog file).

    Optional attributes that are None are left out of the JSON, as Java does. Keys this class does
    not model (`logOffsets` of Paimon <= 1.3, `tagCreateTime`/`tagTimeRetained` of tags, keys of
    future versions) are kept in `extra` and written back, so rewriting a file loses nothing.
    """

    id: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str
    commit_user: str
    commit_identifier: int
    commit_kind: str
    time_millis: int
    total_record_count: int
    delta_record_count: int
    version: int = CURRENT_VERSION
    uuid: str | None = None
    base_manifest_list_size: int | None = None
    delta_manifest_list_size: int | None = None
    changelog_manifest_list: str | None = None
    changelog_manifest_list_size: int | None = None
    index_manifest: str | None = None
    writer_version: str | None = None
    changelog_record_count: int | None = None
    watermark: int | None = None
    statistics: str | None = None
    properties: dict[str, str] | None = None
    next_row_id: int | None = None
    operation: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    # -- JSON --------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON object in Java's key order; None values (and empty `properties`) omitted."""
        result: dict[str, Any] = {}
        extras_after: dict[str, list[str]] = {}
        trailing: list[str] = []
        for key in self.extra:
            anchor = _EXTRA_KEY_POSITIONS.get(key)
            if anchor is not None:
                extras_after.setdefault(anchor, []).append(key)
            else:
                trailing.append(key)
        for attribute, key, _, _ in _SNAPSHOT_KEYS:
            value = getattr(self, attribute)
            if value is not None and not (attribute == "properties" and not value):
                result[key] = dict(value) if attribute == "properties" else value
            for extra_key in extras_after.get(key, ()):
                result[extra_key] = self.extra[extra_key]
        for extra_key in trailing:
            result[extra_key] = self.extra[extra_key]
        return result

    def to_json(self) -> str:
        """Pretty-printed like Java's Jackson writer (see `jackson_json`)."""
        return jackson_json(self.to_dict())

    @staticmethod
    def from_json(text: str | bytes, path: str = "?") -> Snapshot:
        """Parse a snapshot, tag or changelog file.

        Required: id, schemaId, baseManifestList, deltaManifestList, commitUser, commitIdentifier,
        commitKind, timeMillis (what every reader needs). As in Java, a missing `version` means 1
        and missing record counts mean 0. When `path` names a `snapshot-N` or `changelog-N` file,
        `id` must equal N (paimon-rust rejects a mismatch too; it means a mis-copied file).
        Anything else wrong -> `CorruptFileError(path, ...)`.
        """
        return Snapshot.from_dict(load_json_object(text, path), path)

    @staticmethod
    def from_dict(data: Mapping[str, Any], path: str = "?") -> Snapshot:
        values: dict[str, Any] = {}
        for attribute, key, kind, required in _SNAPSHOT_KEYS:
            value = data.get(key)
            if value is None:
                if required:
                    raise CorruptFileError(path, f"missing required key '{key}'")
                continue
            if kind == _INT and (not isinstance(value, int) or isinstance(value, bool)):
                raise CorruptFileError(path, f"'{key}' must be an integer, found {value!r}")
            if kind == _STR and not isinstance(value, str):
                raise CorruptFileError(path, f"'{key}' must be a string, found {value!r}")
            if kind == _DICT:
                if not isinstance(value, dict):
                    raise CorruptFileError(path, f"'{key}' must be a JSON object, found {value!r}")
                value = dict(value)
            values[attribute] = value
        values.setdefault("version", 1)
        values.setdefault("total_record_count", 0)
        values.setdefault("delta_record_count", 0)
        extra = {key: value for key, value in data.items() if key not in _KNOWN_JSON_KEYS}
        snapshot = Snapshot(**values, extra=extra)
        name = basename(path)
        match = _SNAPSHOT_FILE_RE.match(name) or _CHANGELOG_FILE_RE.match(name)
        if match and int(match.group(1)) != snapshot.id:
            raise CorruptFileError(path, f"snapshot id {snapshot.id} does not match the file name")
        return snapshot

    # -- tag extras --------------------------------------------------------------------------------

    @property
    def tag_create_time(self) -> dt.datetime | None:
        """A tag's creation time (Java LocalDateTime array `[y, mo, d, h, mi, s, ns]`), if recorded."""
        raw = self.extra.get("tagCreateTime")
        if not isinstance(raw, list) or len(raw) < 3:
            return None
        parts = [int(p) for p in raw] + [0] * (7 - len(raw))
        year, month, day, hour, minute, second, nanos = parts[:7]
        return dt.datetime(year, month, day, hour, minute, second, nanos // 1000)

    @property
    def tag_time_retained_ms(self) -> int | None:
        """A tag's retention (Java Duration written as decimal seconds), if recorded."""
        raw = self.extra.get("tagTimeRetained")
        if raw is None or isinstance(raw, bool) or not isinstance(raw, (int, float, Decimal)):
            return None
        return int(Decimal(str(raw)) * 1000)


def read_snapshot_file(file_io: FileIO, path: str, missing: str) -> Snapshot:
    """The snapshot JSON at `path` (a snapshot, changelog or tag file); `SnapshotNotFoundError`
    saying "<path>: <missing>" when the file is absent, `CorruptFileError` when it is bad."""
    try:
        data = file_io.read_bytes(path)
    except MissingFileError:
        raise SnapshotNotFoundError(f"{path}: {missing}") from None
    return Snapshot.from_json(data, path)


def _outcome(read: Callable[[], R]) -> tuple[R | None, Exception | None]:
    """(what `read` returned, None) or (None, what it raised): a read sent beside another whose
    answer decides whether this one's failure matters at all."""
    try:
        return read(), None
    except Exception as failure:  # noqa: BLE001 - handed back, raised by the caller when it counts
        return None, failure


# -- SnapshotManager -------------------------------------------------------------------------------


class SnapshotManager:
    """Snapshots of one branch of one table: reading, hints, and the atomic creation of new ones."""

    def __init__(self, file_io: FileIO, table_path: str, branch: str = MAIN_BRANCH) -> None:
        self.file_io = file_io
        self.table_path = table_path.rstrip("/")
        self.branch = branch or MAIN_BRANCH
        self.branch_root = branch_root(file_io, self.table_path, self.branch)
        self._handed_over: tuple[Snapshot | None] | None = None  # see `hand_over_latest`

    def __repr__(self) -> str:
        return f"SnapshotManager({self.table_path!r}, branch={self.branch!r})"

    # -- paths -------------------------------------------------------------------------------------

    def snapshot_dir(self) -> str:
        return self.file_io.join(self.branch_root, "snapshot")

    def snapshot_path(self, snapshot_id: int) -> str:
        return self.file_io.join(self.snapshot_dir(), f"{SNAPSHOT_PREFIX}{snapshot_id}")

    def changelog_dir(self) -> str:
        return self.file_io.join(self.branch_root, "changelog")

    def changelog_path(self, changelog_id: int) -> str:
        return self.file_io.join(self.changelog_dir(), f"{CHANGELOG_PREFIX}{changelog_id}")

    def latest_hint_path(self) -> str:
        return self.file_io.join(self.snapshot_dir(), LATEST)

    def earliest_hint_path(self) -> str:
        return self.file_io.join(self.snapshot_dir(), EARLIEST)

    # -- ids ---------------------------------------------------------------------------------------

    def snapshot_ids(self) -> list[int]:
        """Ids of all `snapshot-N` files, sorted; [] for a table without a snapshot directory."""
        self._handed_over = None
        return numbered_ids(self.file_io, self.snapshot_dir(), _SNAPSHOT_FILE_RE)

    def snapshot_exists(self, snapshot_id: int) -> bool:
        return self.file_io.file_exists(self.snapshot_path(snapshot_id))

    def latest_id(self) -> int | None:
        """Id of the newest snapshot, None for a table without snapshots.

        Java's `HintFileUtils.findLatest`: trust `LATEST` = N when N > 0 and `snapshot-(N+1)` does
        not exist (the committer writes the hint after the snapshot, so it may lag but not lead).
        We additionally require `snapshot-N` to exist, so a hint from a rolled-back or hand-edited
        table cannot send readers to a snapshot that is gone. Otherwise: max id by listing.
        """
        self._handed_over = None
        hint = self._read_hint(self.latest_hint_path())
        if hint is not None and hint > 0:
            next_exists, hinted = self._next_beside(hint, lambda: self.snapshot_exists(hint))
            if not next_exists:
                hinted_exists, failure = hinted
                if failure is not None:
                    raise failure
                if hinted_exists:
                    return hint
            log.debug("%s: LATEST hint %d is stale, listing snapshots", self.snapshot_dir(), hint)
        ids = self.snapshot_ids()
        return ids[-1] if ids else None

    def earliest_id(self) -> int | None:
        """Id of the oldest snapshot present: `EARLIEST` if that snapshot exists, else min by listing."""
        hint = self._read_hint(self.earliest_hint_path())
        if hint is not None and self.snapshot_exists(hint):
            return hint
        ids = self.snapshot_ids()
        return ids[0] if ids else None

    def _next_beside(
        self, hint: int, look: Callable[[], R]
    ) -> tuple[bool, tuple[R | None, Exception | None]]:
        """Whether `snapshot-(hint+1)` exists, and what `look` (at the hinted snapshot) gave or
        raised, both asked at once: on an object store each waits a round trip and neither needs
        the other. The look's outcome counts only when the next id is absent (the hint is current),
        so a stale hint naming a snapshot that is gone or broken sends the caller to the listing."""
        return both(
            lambda: self.snapshot_exists(hint + 1), lambda: _outcome(look), self.file_io.io_parallelism
        )

    def _read_hint(self, path: str) -> int | None:
        """The id in a hint file, or None when it is absent or unusable (then callers list).

        Retried briefly like Java (a concurrent overwrite may be caught half-written); a hint that
        stays garbage or unreadable is logged and ignored, never trusted.
        """
        problem = ""
        for attempt in range(_HINT_READ_ATTEMPTS):
            try:
                raw = self.file_io.read_bytes(path)
            except MissingFileError:
                return None
            except (StorageError, OSError) as error:
                problem = f"unreadable ({error})"
            else:
                text = raw.decode("utf-8", errors="replace").strip()
                if text.isascii() and text.isdigit():
                    return int(text)
                problem = f"not a snapshot id: {raw[:40]!r}"
            if attempt + 1 < _HINT_READ_ATTEMPTS:
                time.sleep(_HINT_RETRY_SECONDS)
        log.warning("%s: ignoring hint file, %s; falling back to listing", path, problem)
        return None

    def write_latest_hint(self, snapshot_id: int) -> None:
        """Overwrite `LATEST` with the bare decimal id (no newline: Java parses it with Long.parseLong)."""
        self.file_io.write_bytes(self.latest_hint_path(), str(int(snapshot_id)).encode("ascii"))

    def write_earliest_hint(self, snapshot_id: int) -> None:
        self.file_io.write_bytes(self.earliest_hint_path(), str(int(snapshot_id)).encode("ascii"))

    # -- snapshots ---------------------------------------------------------------------------------

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """Snapshot `snapshot_id`; `SnapshotNotFoundError` (naming the path) or `CorruptFileError`."""
        path = self.snapshot_path(snapshot_id)
        return read_snapshot_file(self.file_io, path, f"snapshot {snapshot_id} does not exist")

    def latest(self, *, reuse_read: bool = False) -> Snapshot | None:
        """The newest snapshot, found as `latest_id` finds it; the hinted snapshot is read instead of
        checked (one request fewer on an object store), beside the check of the next id (one round
        trip, not two), and one found missing sends us to the listing as a failed check would. Any
        other read failure propagates when the hint is current.

        `reuse_read`: a plan asks, and the table's open check handed its read over
        (`hand_over_latest`) with no other look at this manager's snapshots since: that read is the
        answer, no request sent (the check and the plan are one look at the table). A commit never
        passes it: it must build on what is there now.
        """
        if reuse_read and self._handed_over is not None:
            return self._handed_over[0]
        self._handed_over = None
        hint = self._read_hint(self.latest_hint_path())
        if hint is not None and hint > 0:
            next_exists, hinted = self._next_beside(hint, lambda: self.snapshot(hint))
            if not next_exists:
                snapshot, failure = hinted
                if failure is None:
                    return snapshot
                if not isinstance(failure, SnapshotNotFoundError):
                    raise failure
                log.debug("%s: LATEST hint %d names no snapshot, listing", self.snapshot_dir(), hint)
        ids = self.snapshot_ids()
        return self.snapshot(ids[-1]) if ids else None

    def hand_over_latest(self, snapshot: Snapshot | None) -> None:
        """Let `latest(reuse_read=True)` answer `snapshot` (what `latest()` just returned) without
        reading again. Any other look at this manager's snapshots (`latest` without it, `latest_id`,
        `snapshot_ids`, `try_commit`) drops it, so a job that does more than open and plan (a
        commit, a maintenance run's next operation) reads the table again."""
        self._handed_over = (snapshot,)

    def handed_over(self) -> tuple[Snapshot | None] | None:
        """What `hand_over_latest` left for the plan, without taking it: (snapshot,), or None when
        nothing is handed over. For a look that only estimates (sizing a run), which may use the
        open check's read and must leave it for the plan."""
        return self._handed_over

    def take_latest_handed_over(self) -> Snapshot | None:
        """The latest the open check handed over, taken (a later plan reads afresh), or read now
        when nothing is handed over: for a job whose first step only estimates from it and whose
        later steps must see what landed meanwhile (remove-orphan-files sizes its listing so)."""
        handed, self._handed_over = self._handed_over, None
        return handed[0] if handed is not None else self.latest()

    def earliest(self) -> Snapshot | None:
        snapshot_id = self.earliest_id()
        return None if snapshot_id is None else self.snapshot(snapshot_id)

    def snapshots_in_range(self, first: int, last: int) -> list[Snapshot]:
        """Snapshots with first <= id <= last that exist, ascending.

        Ids come from a listing; a snapshot expired between listing and reading is skipped (it is
        legitimately gone), any other read failure propagates.
        """
        ids = [i for i in self.snapshot_ids() if first <= i <= last]
        return [snapshot for _, snapshot in self.snapshots_present(ids) if snapshot is not None]

    def snapshots_present(self, ids: Iterable[int]) -> Iterator[tuple[int, Snapshot | None]]:
        """(id, snapshot) per listed id in the given order, None for one expired since the listing.

        Read with `FileIO.io_parallelism` reads in flight: each snapshot is a small file whose read
        waits a full request latency on an object store, so reading a table's snapshots one after
        another is bound by latency. Ids are taken lazily; any failure other than the file being
        gone is raised at its id's turn, as a plain loop would.
        """

        def read_one(snapshot_id: int) -> tuple[int, Snapshot | None]:
            try:
                return snapshot_id, self.snapshot(snapshot_id)
            except SnapshotNotFoundError:
                log.info("%s: snapshot %d expired while reading", self.snapshot_dir(), snapshot_id)
                return snapshot_id, None

        return map_in_flight(read_one, ids, self.file_io.io_parallelism)

    def try_commit(self, snapshot: Snapshot) -> bool:
        """Create `snapshot-<id>` atomically; False if it already exists (another writer won the id).

        Does not touch `LATEST`: the committer writes the hint after a win, best-effort.
        """
        self._handed_over = None
        return self.file_io.create_if_absent(
            self.snapshot_path(snapshot.id), snapshot.to_json().encode("utf-8")
        )

    # -- long-lived changelogs ---------------------------------------------------------------------

    def changelog_ids(self) -> list[int]:
        """Ids of `changelog/changelog-N` files (changelogs outliving their snapshots), sorted."""
        return numbered_ids(self.file_io, self.changelog_dir(), _CHANGELOG_FILE_RE)

    def write_changelog_latest_hint(self, changelog_id: int) -> None:
        """`changelog/LATEST`, as Paimon's ChangelogManager writes it after each long-lived changelog."""
        self.file_io.write_bytes(
            self.file_io.join(self.changelog_dir(), LATEST), str(int(changelog_id)).encode()
        )

    def changelog_earliest_hint_path(self) -> str:
        return self.file_io.join(self.changelog_dir(), EARLIEST)

    def write_changelog_earliest_hint(self, changelog_id: int) -> None:
        """`changelog/EARLIEST`, written after a changelog expiry (Java verifies it, then lists;
        pypaimon trusts it and has no other way to find the earliest changelog)."""
        self.file_io.write_bytes(self.changelog_earliest_hint_path(), str(int(changelog_id)).encode())

    def changelog(self, changelog_id: int) -> Snapshot:
        path = self.changelog_path(changelog_id)
        return read_snapshot_file(self.file_io, path, f"changelog {changelog_id} does not exist")
