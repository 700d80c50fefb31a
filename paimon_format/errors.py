"""Errors raised by the format layer.

Every error names what is wrong and where (a path, a key, a snapshot id), because our users read
them in the logs of a nightly batch job. The jobs layer maps them to exit codes: bad input or bad
table state -> 2, refused by a safety check or a lost commit race -> 3.
"""

from __future__ import annotations

import re


class PaimonFormatError(Exception):
    """Base class of every error the format layer raises on purpose."""


class CorruptFileError(PaimonFormatError):
    """A metadata or data file exists but cannot be decoded (truncated Avro, bad JSON, ...)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class MissingFileError(PaimonFormatError):
    """A file that metadata refers to does not exist (e.g. a manifest named by a manifest list)."""

    def __init__(self, path: str, referenced_by: str | None = None) -> None:
        where = f" (referenced by {referenced_by})" if referenced_by else ""
        super().__init__(f"{path}: file does not exist{where}")
        self.path = path
        self.referenced_by = referenced_by


class TableNotFoundError(PaimonFormatError):
    """The table directory has no schema: it is not a Paimon table (yet)."""


class SnapshotNotFoundError(PaimonFormatError):
    """A snapshot, tag or branch that was asked for does not exist."""


class InvalidTableStateError(PaimonFormatError):
    """The table's metadata is inconsistent: a DELETE without its ADD, a duplicate ADD, ..."""


class StorageError(PaimonFormatError):
    """A storage operation failed (listing, reading, writing, deleting)."""


class UnsupportedOperationError(PaimonFormatError):
    """The operation is not supported here, e.g. an atomic create on a backend that cannot do it."""


class DataWriteError(PaimonFormatError, ValueError):
    """Input data that cannot become a data file of this table (wrong types, null keys, ...)."""


class MissingDependencyError(PaimonFormatError):
    """A library this operation needs is not installed: the environment's problem, not the input's.

    Kept apart from CorruptFileError and UnsupportedOperationError on purpose: schedulers retry or
    page a human on exit 1 and ask the user for a config fix on exit 2, and a missing codec library
    must never read as corrupt data. The message always says what to install.
    """

    def __init__(self, what: str, install: str, detail: str = "") -> None:
        suffix = f" ({detail})" if detail else ""
        super().__init__(f"{what} needs a library that is not installed: install {install}{suffix}")
        self.install = install


# fastavro's words for a codec whose library is missing (a ValueError, raised on read and on write):
# "zstandard codec is supported but you need to install one of the following libraries: (...)".
_MISSING_CODEC = re.compile(
    r"(\w+) codec is supported but you need to install (?:one of the following libraries: )?(.+)$"
)


def missing_codec_library(error: BaseException, what: str) -> MissingDependencyError | None:
    """A MissingDependencyError for fastavro's "codec library missing" error, else None."""
    match = _MISSING_CODEC.search(str(error))
    if match is None:
        return None
    libraries = match.group(2).strip().strip("()").replace("'", "").rstrip(",").strip()
    return MissingDependencyError(
        f"{what} (Avro codec {match.group(1)})", libraries or match.group(2), "or reinstall paimon-jobs"
    )


class CommitConflictError(PaimonFormatError):
    """A commit cannot be applied on top of the current latest snapshot (no retry helps)."""


class CommitRetriesExhaustedError(PaimonFormatError):
    """A commit lost the race for the next snapshot id more often than allowed."""
