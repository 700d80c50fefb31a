"""Talking to S3 through s3fs's botocore client: direct calls, the throttle hook, keys and answers.

Kept apart from `FileIO` because these are S3's own rules (a conditional put's status codes, the
DeleteObjects answer, the retry events of botocore), not the storage-neutral contract FileIO gives
the rest of the format layer.
"""

from __future__ import annotations

from typing import Any

from fsspec.asyn import sync

from paimon_format.errors import MissingFileError, StorageError
from paimon_format.storage.file_status import FileStatus, mtime_ms
from paimon_format.storage.in_flight import note_throttled
from paimon_format.storage.urls import join_path

_THROTTLING_CODES = frozenset({"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded"})
_THROTTLE_HOOK_ID = "paimon-jobs-count-throttles"


def call(fs: Any, method: str, **kwargs: Any) -> Any:
    """Call the s3fs session's botocore client directly, so ClientError keeps its HTTP status.

    The client carries the storage options' credentials, endpoint and `s3_additional_kwargs`
    (e.g. server-side encryption); our own kwargs always win over those.
    """

    async def run() -> Any:
        await fs.set_session()
        client = await fs.get_s3(kwargs.get("Bucket"))
        count_throttles(client)  # a per-bucket or refreshed client is a new one: hook it too (once)
        bound = getattr(client, method)
        merged = {**fs._get_s3_method_kwargs(bound, **kwargs), **kwargs}
        return await bound(**merged)

    return sync(fs.loop, run)


def count_throttles(client: Any) -> None:
    """Tell `in_flight` about every throttled answer this botocore client gets, before it retries.

    botocore retries a 503 SlowDown itself, so the caller never sees it; this hook on the client's
    retry decision narrows the process's pools and counts it. It only observes (returns None).
    """

    def on_retry_decision(response: Any = None, **_: Any) -> None:
        if not response:
            return
        http_response, parsed = response
        code = (parsed or {}).get("Error", {}).get("Code")
        if getattr(http_response, "status_code", None) == 503 or code in _THROTTLING_CODES:
            note_throttled()

    # fsspec hands every FileIO with the same options the same cached filesystem and client: register
    # once per client, or each throttle would be counted once per FileIO ever made
    client.meta.events.register("needs-retry.s3", on_retry_decision, unique_id=_THROTTLE_HOOK_ID)


def split_bucket_key(fs_path: str, path: str, key_required: bool = True) -> tuple[str, str]:
    """(bucket, key) of an s3fs path ("bucket/key"); ValueError naming `path` when a part is missing."""
    bucket, _, key = fs_path.partition("/")
    if not bucket or (key_required and not key):
        raise ValueError(f"{path}: an S3 path needs a bucket and a key")
    return bucket, key.strip("/")


def delete_outcome(response: dict[str, Any], path_of: dict[str, str]) -> tuple[list[str], list[str]]:
    """(paths deleted, failure messages) of a DeleteObjects answer; `path_of` maps keys to our paths.
    S3 answers a key per object, also for one that was already absent (it counts as deleted)."""
    deleted = [path_of[item["Key"]] for item in response.get("Deleted", []) if item["Key"] in path_of]
    failures = [
        f"{path_of.get(err.get('Key'), err.get('Key'))}: {err.get('Code')} {err.get('Message')}"
        for err in response.get("Errors", [])
    ]
    return deleted, failures


def list_one_level(fs: Any, bucket: str, key: str, path: str) -> list[FileStatus]:
    """One level of the S3 "directory" `key` (files and subdirectories) in one ListObjectsV2
    (Delimiter "/") per 1,000 keys; `path` is how the caller names it (the statuses' paths).

    Why not s3fs's `ls`: it answers an empty prefix by listing the parent too (to tell a file at
    that path), so every absent directory a job looks at (branch/, changelog/, consumer/ of most
    tables) cost a second LIST, of the table root. On S3 a key and a prefix of the same name can
    both exist and a "directory" is only a prefix: one without keys is absent (MissingFileError),
    whether or not a file has the same name. A failed page raises StorageError, never an empty
    result. A "dir/" marker key is skipped (a marker alone is an empty directory).
    """
    request: dict[str, Any] = {"Bucket": bucket, "Prefix": f"{key}/" if key else "", "Delimiter": "/"}
    start = len(request["Prefix"])
    statuses: list[FileStatus] = []
    marker = False
    while True:
        try:
            page = call(fs, "list_objects_v2", **request)
        except Exception as error:  # noqa: BLE001 - every failure of a listing is a storage failure
            raise StorageError(f"list {path}: {type(error).__name__}: {error}") from error
        for prefix in page.get("CommonPrefixes", []):
            statuses.append(FileStatus(join_path(path, prefix["Prefix"][start:].rstrip("/")), 0, 0, True))
        for obj in page.get("Contents", []):
            name = obj["Key"][start:]
            if not name:
                marker = True
                continue
            child = join_path(path, name)
            statuses.append(FileStatus(child, int(obj["Size"]), mtime_ms(obj, child, False), False))
        if not page.get("IsTruncated"):
            break
        request["ContinuationToken"] = page["NextContinuationToken"]
    if not statuses and not marker:
        raise MissingFileError(path)
    return statuses
