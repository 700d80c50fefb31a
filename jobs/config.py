"""Job configuration: YAML files validated by pydantic before Spark starts.

Errors name the file, the key path and what was expected, one line per problem, because a nightly
job that fails at 3 a.m. should say exactly which line of which file to fix.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, TypeVar

import fsspec
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from jobs.errors import BadInputError

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
Model = TypeVar("Model", bound=BaseModel)


class ConfigError(BadInputError):
    """A configuration that cannot be used; the message says where and why."""


class StrictModel(BaseModel):
    """Unknown keys are errors: a misspelt option must not be silently ignored."""

    model_config = ConfigDict(extra="forbid")


class TableJobConfig(StrictModel):
    """Keys every job's YAML has."""

    warehouse: str = Field(description="fsspec URL of the warehouse: /path, file://, s3://, memory://")
    table: str = Field(description="db.name")
    storage_options: dict[str, Any] = Field(default_factory=dict, description="handed to fsspec")
    spark: dict[str, Any] | None = Field(default=None, description="Spark settings for local runs only")
    allow_unsafe_overwrite_commit: bool = False

    @field_validator("table")
    @classmethod
    def _identifier(cls, value: str) -> str:
        parts = value.split(".")
        if len(parts) != 2 or not all(parts):
            raise ValueError("must look like 'db.name'")
        return value

    @field_validator("warehouse")
    @classmethod
    def _warehouse(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must be a path or URL")
        return value.rstrip("/") or "/"


def interpolate(value: Any, source: str, path: str = "") -> Any:
    """Replace ${VAR} and ${VAR:-default} in every string of a loaded YAML document."""
    if isinstance(value, dict):
        return {k: interpolate(v, source, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, source, f"{path}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise ConfigError(
            f"{source}: {path}: environment variable {name} is not set (use ${{{name}:-default}})"
        )

    return _VARIABLE.sub(substitute, value)


def apply_override(document: dict[str, Any], override: str, source: str = "--set") -> None:
    """Apply one `a.b=c` override; the value is read as a YAML scalar (numbers, booleans, lists)."""
    key, sep, raw = override.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"{source}: {override!r}: expected key=value, e.g. retain_min=5")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    target = document
    *parents, leaf = key.strip().split(".")
    for parent in parents:
        child = target.setdefault(parent, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{source}: {key}: {parent} is not a mapping")
        target = child
    target[leaf] = value


def load_document(path: str) -> dict[str, Any]:
    try:
        with fsspec.open(path, "r", encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the configuration: {error}") from None
    try:
        document = yaml.safe_load(text)
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
    try:
        return model.model_validate(document)
    except ValidationError as error:
        lines = []
        for problem in error.errors():
            location = ".".join(str(part) for part in problem["loc"]) or "(top level)"
            message = problem["msg"]
            if problem["type"] == "extra_forbidden":
                message = "unknown key"
            elif problem["type"] == "missing":
                message = "required key is missing"
            lines.append(f"{source}: {location}: {message}")
        raise ConfigError("\n".join(lines)) from None


def load_config(path: str | Path, overrides: list[str] | None, model: type[Model]) -> Model:
    """Read, interpolate, override and validate a job configuration."""
    source = str(path)
    document = interpolate(load_document(source), source)
    for override in overrides or []:
        apply_override(document, override)
    return validate(document, model, source)
