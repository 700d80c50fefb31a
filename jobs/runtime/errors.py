"""Job errors and the exit codes they map to: 0 done, 2 bad input, 3 refused, 1 unexpected.

A scheduler decides on the exit code alone whether to page someone (1), ask for a config fix (2) or
simply retry tomorrow (3), so every error a job can foresee has a class with a fixed code.
"""

from __future__ import annotations

import importlib
import re

from paimon_format.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CorruptFileError,
    InvalidTableStateError,
    MissingDependencyError,
    MissingFileError,
    PaimonFormatError,
    SnapshotNotFoundError,
    TableNotFoundError,
    UnsupportedOperationError,
)

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_BAD_INPUT = 2
EXIT_REFUSED = 3

# Format-layer errors whose cause is the input (config, table state, a backend the table cannot use).
# UnsupportedOperationError is here because every raise of it asks the user to change something: a
# table option, an fsspec backend to install, or allow_unsafe_overwrite_commit.
_FORMAT_BAD_INPUT = (
    CorruptFileError,
    MissingFileError,
    TableNotFoundError,
    SnapshotNotFoundError,
    InvalidTableStateError,
    UnsupportedOperationError,
)
_FORMAT_REFUSED = (CommitConflictError, CommitRetriesExhaustedError)

# The last line of a Python traceback that Spark carries back from an executor, e.g.
# "paimon_format.errors.CorruptFileError: s3://b/t/manifest/m-1: truncated Avro block".
_EXECUTOR_ERROR_LINE = re.compile(r"^((?:jobs|paimon_format)(?:\.\w+)+)\.([A-Z]\w*): ?(.*)$", re.MULTILINE)


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


# PySpark's words for a missing library: "[PACKAGE_NOT_INSTALLED] Pandas >= 2.2.0 must be installed; ..."
_PYSPARK_MISSING_PACKAGE = re.compile(r"\[PACKAGE_NOT_INSTALLED\] (.+?) must be installed")


def missing_library(error: BaseException) -> str | None:
    """What to install when `error` says a library is missing (driver-side ImportError or PySpark's
    PACKAGE_NOT_INSTALLED, also carried back from an executor), else None.

    A missing library is the environment's problem: exit 1 with "install X", never bad input (2).
    """
    if isinstance(error, MissingDependencyError):
        return error.install
    match = _PYSPARK_MISSING_PACKAGE.search(str(error))
    if match:
        return match.group(1).replace(" ", "")  # "Pandas >= 2.2.0" -> "Pandas>=2.2.0"
    if isinstance(error, ModuleNotFoundError) and error.name:
        return error.name.split(".")[0]
    return None


def exit_code_for(error: BaseException) -> int:
    """The process exit code for an error that ended a job, also when it was raised on an executor."""
    remote = executor_error(error)
    return _exit_code_for_class(remote[0] if remote else type(error))


def describe(error: BaseException) -> str:
    """A short message for the run record: not the kilobytes of JVM stack trace Spark wraps around
    an executor's Python error, but that error's own line."""
    remote = executor_error(error)
    if remote:
        error_class, message = remote
        return f"{error_class.__name__} in a Spark task: {message}"
    text = str(error).strip() or type(error).__name__
    install = None if isinstance(error, MissingDependencyError) else missing_library(error)
    if install:
        first_line = text.splitlines()[0]
        return f"a library is missing: {first_line} (install {install}, e.g. pip install '{install}')"
    return text


def executor_error(error: BaseException) -> tuple[type[BaseException], str] | None:
    """(class, message) of a `jobs`/`paimon_format` error raised in a Spark task, if `error` is the
    wrapper (PythonException, Py4JJavaError) that Spark raises on the driver for it.

    Spark re-raises an executor's exception as text, so a CorruptFileError read by an executor
    would otherwise end the job with exit code 1 instead of 2.
    """
    if not type(error).__module__.startswith(("pyspark", "py4j")):
        return None
    matches = _EXECUTOR_ERROR_LINE.findall(str(error))
    if not matches:
        return None
    module_name, class_name, message = matches[-1]
    try:
        error_class = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError):
        return None
    if not (isinstance(error_class, type) and issubclass(error_class, BaseException)):
        return None
    return error_class, message.strip()


def _exit_code_for_class(error_class: type[BaseException]) -> int:
    if issubclass(error_class, (MissingDependencyError, ImportError)):
        return EXIT_UNEXPECTED  # the environment, not the input: never exit 2
    if issubclass(error_class, JobError):
        return error_class.exit_code
    if issubclass(error_class, _FORMAT_REFUSED):
        return EXIT_REFUSED
    if issubclass(error_class, _FORMAT_BAD_INPUT):
        return EXIT_BAD_INPUT
    if issubclass(error_class, PaimonFormatError) and issubclass(error_class, ValueError):
        return EXIT_BAD_INPUT  # invalid options, schemas, types, partition values: the user's input
    return EXIT_UNEXPECTED
