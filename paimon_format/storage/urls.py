"""Storage URLs: the fsspec protocol of a URL, joining paths, and what each backend needs.

Kept apart from `FileIO` because configuration checks (which package a URL's backend needs) and
path arithmetic must not build a filesystem.
"""

from __future__ import annotations

from typing import Any

# URL scheme -> fsspec protocol. Paths without a scheme are local.
_PROTOCOLS = {
    "file": "file",
    "local": "file",
    "memory": "memory",
    "s3": "s3",
    "s3a": "s3",
    "s3n": "s3",
    "gs": "gcs",
    "gcs": "gcs",
    "abfs": "abfs",
    "abfss": "abfs",
    "az": "abfs",
}

# What to install for each object store's fsspec backend (`pip install ...`).
_BACKEND_PACKAGES = {
    "s3": "paimon-jobs[s3] (s3fs)",
    "s3a": "paimon-jobs[s3] (s3fs)",
    "gs": "paimon-jobs[gcs] (gcsfs)",
    "gcs": "paimon-jobs[gcs] (gcsfs)",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "az": "adlfs",
}

# botocore's retries for S3: 503 SlowDown, 500s and dropped connections are retried with exponential
# back-off and jitter ("standard" mode) instead of failing a job that touches millions of objects.
S3_RETRIES = {"max_attempts": 10, "mode": "standard"}


def protocol_of(url: str) -> str:
    """The fsspec protocol for a URL: no scheme -> "file", s3a/s3n -> "s3", gs -> "gcs", ..."""
    scheme, sep, _ = url.partition("://")
    if not sep:
        return "file"
    scheme = scheme.lower()
    return _PROTOCOLS.get(scheme, scheme)


def fsspec_backend_install(protocol: str) -> str:
    """What `pip install` brings the fsspec backend of `protocol`, for a "install X" message."""
    return _BACKEND_PACKAGES.get(protocol, f"the fsspec backend for {protocol}://")


def join_path(*parts: str) -> str:
    """Join a root and relative parts with "/"; empty parts are skipped, a bare "memory://" is kept."""
    if not parts:
        raise ValueError("join_path needs at least a root")
    root = parts[0]
    stripped = root.rstrip("/")
    out = stripped + "//" if stripped.endswith(":") else stripped
    for part in parts[1:]:
        part = part.strip("/")
        if part:
            out = f"{out}{part}" if out.endswith("//") else f"{out}/{part}"
    return out or "/"


def with_backend_defaults(
    protocol: str, storage_options: dict[str, Any], io_parallelism: int | None = None
) -> dict[str, Any]:
    """Storage options plus our defaults; whatever the user set wins, key by key.

    S3: `config_kwargs.retries` (botocore's retry config, handed to the client by s3fs), and
    `config_kwargs.max_pool_connections` = `io_parallelism`: botocore keeps 10 connections by
    default, which would queue all but 10 of the requests a pool keeps in flight.
    """
    if protocol != "s3":
        return storage_options
    options = dict(storage_options)
    config_kwargs = dict(options.get("config_kwargs") or {})
    config_kwargs.setdefault("retries", dict(S3_RETRIES))
    if io_parallelism is not None:
        config_kwargs.setdefault("max_pool_connections", max(10, io_parallelism))
    options["config_kwargs"] = config_kwargs
    return options
