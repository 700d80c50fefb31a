"""Job configuration: YAML files validated by pydantic before Spark starts.

Errors name the file, the key path and what was expected, one line per problem, because a nightly
job that fails at 3 a.m. should say exactly which line of which file to fix, and say it in seconds,
not after a SparkSession has started.

Each operation module declares its own model as a subclass of `TableJobConfig`; this module only
knows the keys every job has, and how a document becomes a model:
YAML -> `${VAR}` interpolation -> `--set` overrides -> pydantic validation.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, TypeVar

import fsspec
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from jobs.runtime.errors import BadInputError
from jobs.runtime.table_lock import LockConfig
from paimon_format.errors import MissingDependencyError
from paimon_format.model.instants import instant_ms
from paimon_format.model.options import parse_duration_ms
from paimon_format.scan.partition_predicate import PredicateError, parse_predicate
from paimon_format.storage.urls import fsspec_backend_install, protocol_of

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
Model = TypeVar("Model", bound=BaseModel)


class ConfigError(BadInputError):
    """A configuration that cannot be used; the message says where and why, one line per problem."""


class _ScalarLoader(yaml.SafeLoader):
    """SafeLoader that keeps dates and timestamps as the text the user wrote.

    `dt: 2024-05-14` is a partition value, and `older_than: 2024-05-14 00:00:00` a timestamp the job
    parses in its own time zone rules; PyYAML would turn both into date objects.
    """


_ScalarLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class StrictModel(BaseModel):
    """Unknown keys are errors: a misspelt option must not be silently ignored."""

    model_config = ConfigDict(extra="forbid")


class TableJobConfig(StrictModel):
    """Keys every job's YAML has."""

    warehouse: str = Field(description="fsspec URL of the warehouse: /path, file://, s3://, memory://")
    table: str = Field(description="db.name")
    storage_options: dict[str, Any] = Field(default_factory=dict, description="handed to fsspec")
    spark: dict[str, Any] | None = Field(
        default=None, description="Spark settings; under spark-submit only those it was not given"
    )
    allow_unsafe_overwrite_commit: bool = Field(
        default=False,
        description="accept exists-check-then-write commits on stores without create-if-absent "
        "(safe only with a single writer)",
    )
    io_parallelism: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="storage requests each process keeps in flight (reads, checks, lists, deletes); "
        "default 64 on object stores, 4 on local disk",
    )
    lock: LockConfig = Field(
        default_factory=LockConfig,
        description="the table's maintenance lock, shared with maintain: a run whose table another run "
        "holds is refused (exit 3); write takes none",
    )

    @field_validator("table")
    @classmethod
    def _identifier(cls, value: str) -> str:
        parts = value.split(".")
        if len(parts) != 2 or not all(part.strip() for part in parts):
            raise ValueError(f"must look like 'db.name', got {value!r}")
        if any(char in value for char in "/\\"):
            raise ValueError(f"database and table names cannot contain '/' or '\\', got {value!r}")
        return value

    @field_validator("warehouse")
    @classmethod
    def _warehouse(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must be a path or URL")
        protocol, separator, rest = value.rpartition("://")
        if separator:  # keep "memory://" and "file:///" intact, drop only a trailing slash of a path
            return f"{protocol}://{rest.rstrip('/') or rest}"
        return value.rstrip("/") or "/"


def check_predicate_syntax(value: str | None) -> str | None:
    """A `where:` predicate on partition columns: malformed ones fail validation, before Spark starts."""
    if value is not None:
        try:
            parse_predicate(value)
        except PredicateError as error:
            raise ValueError(f"malformed predicate {value!r}: {error}") from None
    return value


def check_instant(value: str | None) -> str | None:
    """A `timestamp:` / `older_than:` key: a UTC time ('2024-05-14 00:00:00') or a duration meaning
    now minus it (1h, 7d); anything else fails validation, before Spark starts."""
    if value is not None:
        instant_ms(value, 0)
    return value


def check_positive_duration(value: str | None) -> str | None:
    """A duration key (`time_retained: 1d`) that must be longer than zero."""
    if value is not None and parse_duration_ms(value) <= 0:
        raise ValueError(f"must be a positive duration, got {value!r}")
    return value


def check_partition_specs(value: list[dict[str, Any]] | None, empty_spec: str) -> list[dict[str, Any]] | None:
    """A `partitions:` list of specs: not empty, and no spec empty (`empty_spec` says why not)."""
    if value is not None:
        if not value:
            raise ValueError("give at least one partition spec")
        for index, spec in enumerate(value):
            if not spec:
                raise ValueError(f"spec {index} is empty: {empty_spec}")
    return value


def interpolate(value: Any, source: str, path: str = "") -> Any:
    """Replace ${VAR} and ${VAR:-default} in every string of a loaded YAML document.

    Values stay text: typed keys convert "5" or "true" themselves, and a secret made of digits
    handed to fsspec stays a string. All unset variables are reported at once.
    """
    missing: list[str] = []
    result = _interpolate(value, source, path, missing)
    if missing:
        raise ConfigError("\n".join(missing))
    return result


def _interpolate(value: Any, source: str, path: str, missing: list[str]) -> Any:
    if isinstance(value, dict):
        return {
            key: _interpolate(item, source, f"{path}.{key}" if path else str(key), missing)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_interpolate(item, source, f"{path}[{i}]", missing) for i, item in enumerate(value)]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        missing.append(
            f"{source}: {path or '(top level)'}: environment variable {name} is not set "
            f"(set it, or write ${{{name}:-default}})"
        )
        return match.group(0)

    return _VARIABLE.sub(substitute, value)


def apply_override(document: dict[str, Any], override: str, source: str = "--set") -> None:
    """Apply one `a.b=c` override; the value is read as a YAML scalar (numbers, booleans, lists)."""
    key, separator, raw = override.partition("=")
    key = key.strip()
    if not separator or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"{source}: {override!r}: expected key=value, e.g. retain_min=5 or source.path=/x")
    try:
        value = yaml.load(raw, Loader=_ScalarLoader) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    target = document
    *parents, leaf = key.split(".")
    walked: list[str] = []
    for parent in parents:
        walked.append(parent)
        child = target.setdefault(parent, {})
        if child is None:  # `create:` written with no value
            child = target[parent] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"{source}: {key}: {'.'.join(walked)} is not a mapping")
        target = child
    target[leaf] = value


def load_document(path: str) -> dict[str, Any]:
    """The YAML mapping at `path` (a local path or an fsspec URL)."""
    try:
        with fsspec.open(path, "r", encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except ImportError as error:  # e.g. s3:// without s3fs: the environment's problem (exit 1)
        raise MissingDependencyError(
            f"reading the configuration {path}", fsspec_backend_install(protocol_of(path)), str(error)
        ) from None
    except (OSError, ValueError) as error:
        raise ConfigError(f"{path}: cannot read the configuration: {error}") from None
    try:
        document = yaml.load(text, Loader=_ScalarLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(f"{path}: {where}invalid YAML: {problem}") from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, got {type(document).__name__}")
    return document


def validate(document: dict[str, Any], model: type[Model], source: str) -> Model:
    """The model for `document`, or a ConfigError with one `<source>: <key.path>: <problem>` line each."""
    try:
        return model.model_validate(document)
    except ValidationError as error:
        lines: dict[str, list[str]] = {}
        for problem in error.errors():
            location = _key_path(problem["loc"], document, problem["type"]) or "(top level)"
            messages = lines.setdefault(location, [])
            message = _message(problem)
            if message not in messages:
                messages.append(message)
        report = [f"{source}: {location}: {'; or '.join(messages)}" for location, messages in lines.items()]
        raise ConfigError("\n".join(report)) from None


def _message(problem: dict[str, Any]) -> str:
    if problem["type"] == "extra_forbidden":
        return "unknown key"
    if problem["type"] == "missing":
        return "required key is missing"
    message = problem["msg"]
    given = problem.get("input")
    if problem["type"].startswith(("value_error", "assertion_error")) or isinstance(given, (dict, list)):
        return message  # validators name the input themselves; mappings are too long to repeat
    return f"{message}, got {given!r}"


def _key_path(location: tuple[Any, ...], document: Any, problem_type: str) -> str:
    """`a.b[0].c` from pydantic's location, without its tags for union members and validators,
    which are no keys of the user's file."""
    path = ""
    node = document
    for index, part in enumerate(location):
        last = index == len(location) - 1
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path += f"[{part}]"
            node = node[part]
            continue
        elif not (last and problem_type == "missing"):
            continue  # a tag such as 'function-after[...]' or 'int' in a union
        path = f"{path}.{part}" if path else str(part)
    return path


# storage_options keys (fsspec backends, botocore) whose values are credentials.
SECRET_OPTION_KEYS = frozenset(
    {
        "key",
        "secret",
        "token",
        "password",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "account_key",
        "sas_token",
        "client_secret",
        "connection_string",
    }
)


def refuse_clear_text_secrets(document: dict[str, Any], overrides: list[str], source: str) -> None:
    """Credentials must not sit in a YAML file (or a command line) in clear text.

    Config files end up in repositories, tickets and run logs. Credentials come from the usual AWS
    chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws files, instance roles);
    a value that must be given is written as `${VAR}` and taken from the environment.
    """
    problems: list[str] = []
    hint = (
        "a credential in clear text; remove it and use the AWS environment (AWS_ACCESS_KEY_ID / "
        "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, an instance role) or write ${VAR}"
    )

    def walk(node: Any, path: str) -> None:
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            where = f"{path}.{key}"
            if str(key).lower() in SECRET_OPTION_KEYS and value not in (None, ""):
                if not (isinstance(value, str) and _VARIABLE.search(value)):
                    problems.append(f"{source}: {where}: {hint}")
            walk(value, where)

    walk(document.get("storage_options"), "storage_options")
    for override in overrides:
        key = override.partition("=")[0].strip()
        if key.startswith("storage_options.") and key.rsplit(".", 1)[-1].lower() in SECRET_OPTION_KEYS:
            problems.append(f"--set {key}: {hint}")
    if problems:
        raise ConfigError("\n".join(problems))


def load_config(path: str | Path, overrides: list[str] | None, model: type[Model]) -> Model:
    """Read, interpolate, override and validate a job configuration."""
    source = str(path)
    raw = load_document(source)
    refuse_clear_text_secrets(raw, overrides or [], source)
    document = interpolate(raw, source)
    for override in overrides or []:
        apply_override(document, override)
    return validate(document, model, source)
