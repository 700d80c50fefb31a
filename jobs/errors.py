"""Job errors and the exit codes they map to (0 done, 2 bad input, 3 refused, 1 unexpected)."""

from __future__ import annotations

from paimon_format.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CorruptFileError,
    InvalidTableStateError,
    MissingFileError,
    PaimonFormatError,
    SnapshotNotFoundError,
    TableNotFoundError,
)

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_BAD_INPUT = 2
EXIT_REFUSED = 3


class JobError(Exception):
    """Base of the errors a job raises on purpose."""

    exit_code = EXIT_UNEXPECTED


class BadInputError(JobError):
    """Configuration, arguments, source data or table state the job cannot work with."""

    exit_code = EXIT_BAD_INPUT


class SafetyRefusal(JobError):
    """A safety check refused to go on (e.g. a circuit breaker); nothing was changed."""

    exit_code = EXIT_REFUSED


class CommitRaceLost(JobError):
    """Concurrent writers kept winning; the job's changes were not committed."""

    exit_code = EXIT_REFUSED


def exit_code_for(error: BaseException) -> int:
    """The process exit code for an error that ended a job."""
    if isinstance(error, JobError):
        return error.exit_code
    if isinstance(error, (CommitConflictError, CommitRetriesExhaustedError)):
        return EXIT_REFUSED
    if isinstance(
        error,
        (
            CorruptFileError,
            MissingFileError,
            TableNotFoundError,
            SnapshotNotFoundError,
            InvalidTableStateError,
        ),
    ):
        return EXIT_BAD_INPUT
    if isinstance(error, PaimonFormatError) and isinstance(error, ValueError):
        return EXIT_BAD_INPUT  # invalid options, schemas, values: the user's input
    return EXIT_UNEXPECTED
