"""A handle on one Paimon table: its storage, its schema, and where each of its files lives.

Jobs pass a `Table` to the functions that ship to Spark executors, so it holds only small picklable
state (a FileIO, a path, a branch name) and the schemas the driver already read: a handle is opened
once per run, and an executor task that unpickles it finds the schema there instead of listing
`schema/` and reading the schema file again (on an object store every task paid two requests).
Files that never change once written (`schema-N`, manifest lists, whose names are unique) are read
once per handle; what a commit's safety depends on (the latest schema id, the LATEST hint, the
latest snapshot) is read fresh by whoever asks for it (`latest_schema`, `SnapshotManager.latest`).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from paimon_format.branches import MAIN_BRANCH, BranchManager
from paimon_format.errors import TableNotFoundError
from paimon_format.manifest.codec import read_manifest_list
from paimon_format.manifest.entries import DataFileMeta, ManifestEntry, ManifestFileMeta
from paimon_format.model.binary_row import deserialize_row
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import SchemaManager, TableSchema
from paimon_format.model.types import DataType
from paimon_format.snapshot import SnapshotManager
from paimon_format.storage.fileio import FileIO
from paimon_format.storage.in_flight import both
from paimon_format.storage.paths import bucket_dir, partition_dir, table_path
from paimon_format.tags import TagManager

_BUCKET_RELPATH_CACHE_LIMIT = 100_000  # (partition, bucket) directories remembered per handle
_MANIFEST_LIST_CACHE_METAS = 200_000  # manifest metas of the lists remembered per handle (a few MiB)


@dataclass
class Table:
    """One table (or one branch of it) at `path`, read and written through `file_io`.

    `path` is the table root (`<warehouse>/<db>.db/<name>`); for a branch other than main the
    metadata lives under `<path>/branch/branch-<name>` while data files stay under the root.
    """

    file_io: FileIO
    path: str
    branch: str = MAIN_BRANCH
    _schema_override: TableSchema | None = field(default=None, repr=False)

    @staticmethod
    def open(
        warehouse: str,
        identifier: str,
        storage_options: dict[str, Any] | None = None,
        allow_unsafe_overwrite_commit: bool = False,
        io_parallelism: int | None = None,
    ) -> Table:
        """Open `db.name` under a filesystem-catalog warehouse (the table may not exist yet).

        `io_parallelism`: requests kept in flight on its storage (`FileIO.io_parallelism`)."""
        database, _, name = identifier.partition(".")
        if not database or not name or "." in name:
            raise ValueError(f"table identifier must look like 'db.name', got {identifier!r}")
        root = table_path(warehouse, database, name)
        file_io = FileIO.for_path(
            root,
            storage_options,
            allow_unsafe_overwrite_commit=allow_unsafe_overwrite_commit,
            io_parallelism=io_parallelism,
        )
        return Table(file_io, root)

    def __getstate__(self) -> dict[str, Any]:
        """The handle's small state plus the schemas this process already read.

        Shipping the latest schema and the schemas by id (immutable files) spares every executor
        task a listing of `schema/` and a read per schema; the task then works with the schema the
        driver planned with. Managers and the other caches are re-derived on the executor.
        """
        state = {
            "file_io": self.file_io,
            "path": self.path,
            "branch": self.branch,
            "_schema_override": self._schema_override,
        }
        for name in ("schema", "_schemas_by_id"):
            if name in self.__dict__:
                state[name] = self.__dict__[name]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # -- metadata managers -------------------------------------------------------------------

    @property
    def metadata_root(self) -> str:
        """Where schema/, snapshot/, tag/ live for this branch."""
        if self.branch == MAIN_BRANCH:
            return self.path
        return self.file_io.join(self.path, "branch", f"branch-{self.branch}")

    @cached_property
    def schema_manager(self) -> SchemaManager:
        return SchemaManager(self.file_io, self.path, self.branch)

    @cached_property
    def snapshot_manager(self) -> SnapshotManager:
        return SnapshotManager(self.file_io, self.path, self.branch)

    @cached_property
    def tag_manager(self) -> TagManager:
        return TagManager(self.file_io, self.path, self.branch)

    @cached_property
    def branch_manager(self) -> BranchManager:
        return BranchManager(self.file_io, self.path)

    def for_branch(self, branch: str) -> Table:
        return Table(self.file_io, self.path, branch)

    def exists(self) -> bool:
        return self.latest_schema() is not None

    @cached_property
    def schema(self) -> TableSchema:
        """The latest schema as of the first use on this handle (or as shipped with it); a table
        without one is not a table."""
        if self._schema_override is not None:
            return self._schema_override
        latest = self.latest_schema()
        if latest is None:
            raise TableNotFoundError(f"{self.path}: not a Paimon table (no schema/schema-N file)")
        return latest

    def latest_schema(self) -> TableSchema | None:
        """The schema with the highest id now, None when there is none: `schema/` is listed on every
        call (a commit must name the latest schema, and another writer may have added one), the
        file itself is read once per handle (`schema_by_id`). The first answer also becomes the
        handle's `schema`, so a job that asked here first does not list again. A failed listing raises."""
        ids = self.schema_manager.list_ids()
        if not ids:
            return None
        latest = self.schema_by_id(ids[-1])
        if self._schema_override is None:
            self.__dict__.setdefault("schema", latest)
        return latest

    def adopt_created_schema(self, schema: TableSchema) -> None:
        """After this process created the table (`SchemaManager.create_table` returned `schema`):
        forget what the handle knew, and take `schema` as the latest without reading it back."""
        self.refresh()
        self.__dict__.setdefault("_schemas_by_id", {})[schema.id] = schema
        self.__dict__["schema"] = schema

    def schema_by_id(self, schema_id: int) -> TableSchema:
        """Schema `schema_id` of this branch; schema files never change, so each is read once per handle."""
        cache: dict[int, TableSchema] = self.__dict__.setdefault("_schemas_by_id", {})
        if schema_id not in cache:
            if self._schema_override is not None and self._schema_override.id == schema_id:
                cache[schema_id] = self._schema_override
            else:
                cache[schema_id] = self.schema_manager.schema(schema_id)
        return cache[schema_id]

    def check_metadata(self) -> None:
        """Refuse a table whose own metadata contradicts itself, before a job plans anything on it.

        The table must have a schema, its latest snapshot must parse, and the schema that snapshot
        names must exist: a job that never reads the snapshot's schema (dropping partitions, cleaning
        orphans) would otherwise work on a table readers cannot read, and readers need that schema.
        Raises `TableNotFoundError` / `CorruptFileError` naming the file (exit 2 in `jobs`). The
        latest snapshot read here is handed to the job's plan (`SnapshotManager.hand_over_latest`),
        which then reads no second time.
        """
        manager = self.snapshot_manager
        # the schema and the latest snapshot at once (each a chain of round trips on an object
        # store); a table without a schema is not a table, and that error comes first
        # (the latest's own read sends two at once: three may be in flight, or one by one)
        parallelism = self.file_io.io_parallelism
        _, latest = both(lambda: self.schema, manager.latest, parallelism if parallelism >= 3 else 1)
        self.snapshot_manager.hand_over_latest(latest)  # the job's plan reads no second time
        if latest is None:
            return
        try:
            self.schema_by_id(latest.schema_id)
        except TableNotFoundError:
            raise TableNotFoundError(
                f"{self.snapshot_manager.snapshot_path(latest.id)}: names schema {latest.schema_id}, "
                f"but {self.schema_manager.schema_path(latest.schema_id)} does not exist"
            ) from None

    def refresh(self) -> None:
        """Forget cached metadata (after this process created or altered the table)."""
        for name in ("schema", "options", "partition_types", "_bucket_relpaths", "_schemas_by_id"):
            self.__dict__.pop(name, None)

    def manifest_list(self, name: str) -> list[ManifestFileMeta]:
        """The manifest metas of manifest list `name`, read once per handle.

        A list's name is unique (a UUID) and the file is never rewritten, so a plan and the commit
        after it (which builds the next base list from the same latest snapshot) share one read.
        Remembered up to a bound of metas; a failed read raises and is not remembered.
        """
        cache: dict[str, list[ManifestFileMeta]] = self.__dict__.setdefault("_manifest_lists", {})
        found = cache.get(name)
        if found is None:
            found = read_manifest_list(self.file_io, self.manifest_path(name))
            # tuple(): threads of one map_in_flight read lists at once and may add to the cache
            held = sum(len(metas) for metas in tuple(cache.values()))
            if held + len(found) > _MANIFEST_LIST_CACHE_METAS:
                cache.clear()
            if len(found) <= _MANIFEST_LIST_CACHE_METAS:
                cache[name] = found
        return list(found)

    @cached_property
    def options(self) -> CoreOptions:
        return CoreOptions(self.schema.options)

    @cached_property
    def partition_types(self) -> list[DataType]:
        return self.schema.partition_types()

    # -- where files live --------------------------------------------------------------------

    def manifest_path(self, name: str) -> str:
        return self.file_io.join(self.path, "manifest", name)

    def index_path(self, name: str) -> str:
        return self.file_io.join(self.path, "index", name)

    def partition_values(self, partition: bytes) -> list[Any]:
        return deserialize_row(partition, self.partition_types)

    def partition_spec(self, partition: bytes) -> dict[str, Any]:
        """The partition as {key: python value}, in partition-key order."""
        return dict(zip(self.schema.partition_keys, self.partition_values(partition), strict=True))

    def partition_dir(self, partition: bytes) -> str:
        """Relative partition directory, e.g. 'dt=2024-01-01/hr=01' ('' when unpartitioned)."""
        if not self.schema.partition_keys:
            return ""
        return partition_dir(
            self.partition_values(partition),
            self.schema.partition_keys,
            self.partition_types,
            default_name=self.options.partition_default_name,
            legacy=self.options.partition_legacy_name,
        )

    def bucket_relpath(self, partition: bytes, bucket: int) -> str:
        """Relative bucket directory, honouring `data-file.path-directory`.

        Remembered per handle (bounded): every manifest entry asks for its directory, and rendering
        partition values is most of the cost of turning an entry into a path; a table has far fewer
        buckets than entries. Not pickled, so each executor task keeps its own.
        """
        cache: dict[tuple[bytes, int], str] = self.__dict__.setdefault("_bucket_relpaths", {})
        key = (partition, bucket)
        found = cache.get(key)
        if found is None:
            if len(cache) >= _BUCKET_RELPATH_CACHE_LIMIT:
                cache.clear()
            relative = bucket_dir(self.partition_dir(partition), bucket)
            prefix = self.options.data_file_path_directory
            found = cache[key] = posixpath.join(prefix, relative) if prefix else relative
        return found

    def data_file_relpaths(self, partition: bytes, bucket: int, meta: DataFileMeta) -> list[str]:
        """Table-relative paths of a data file and its extra files; external files are excluded."""
        directory = self.bucket_relpath(partition, bucket)
        paths = [] if meta.external_path else [f"{directory}/{meta.file_name}"]
        paths.extend(f"{directory}/{extra}" for extra in meta.extra_files)
        return paths

    def entry_relpaths(self, entry: ManifestEntry) -> list[str]:
        return self.data_file_relpaths(entry.partition, entry.bucket, entry.file)

    def data_file_path(self, entry: ManifestEntry) -> str:
        """Full path of an entry's data file (its external path when it has one)."""
        if entry.file.external_path:
            return entry.file.external_path
        return self.file_io.join(
            self.path, self.bucket_relpath(entry.partition, entry.bucket), entry.file.file_name
        )

    def full_path(self, relative: str) -> str:
        return self.file_io.join(self.path, relative)
