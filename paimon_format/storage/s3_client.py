"""Talking to S3 through s3fs's botocore client: direct calls, retries, keys and answers.

Kept apart from `FileIO` because these are S3's own rules (a conditional put's status codes and its
ambiguous failures, the DeleteObjects answer, the retry events of botocore), not the
storage-neutral contract FileIO gives the rest of the format layer.

Retries (`hook_retries`). botocore's "standard" mode retries timeouts, dropped connections and 503s
with back-off, but under a retry quota per client: 500 tokens, a retry costs 5 (10 after a timeout)
and only a success gives any back (1 token, or what its own retries took). A process that keeps 64
requests in flight at a store that stalls gets ~50 timeouts at once, spends the quota, and the next
timeout is raised at once, unretried: the 1,000,000-object orphan run failed so
(docs/object-storage.md). So this module decides those retries itself, ahead of botocore's
handler: the same attempts (`config_kwargs.retries`), exponential back-off with full jitter, no
quota; each such answer also narrows the process's pools (`in_flight`), which is what spares the
store, and is counted.
"""

from __future__ import annotations

import random
import time
from typing import Any

from fsspec.asyn import sync

from paimon_format.errors import MissingFileError, StorageError
from paimon_format.storage.file_status import FileStatus, mtime_ms
from paimon_format.storage.in_flight import THROTTLED, TIMED_OUT, note_throttled, note_timed_out
from paimon_format.storage.urls import join_path

_THROTTLING_CODES = frozenset({"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded"})
_RETRY_HOOK_ID = "paimon-jobs-retries"
_DEFAULT_ATTEMPTS = 3  # botocore's own default of total attempts, when a client's config names none
_BACKOFF_BASE_S = 1.0  # botocore's standard back-off: up to base * 2^(retry - 1), capped, fully jittered
_BACKOFF_CAP_S = 20.0
_PUT_ROUNDS = 3  # rounds of a create-if-absent that ended without a definite answer (each: all attempts)


def call(fs: Any, method: str, **kwargs: Any) -> Any:
    """Call the s3fs session's botocore client directly, so ClientError keeps its HTTP status.

    The client carries the storage options' credentials, endpoint and `s3_additional_kwargs`
    (e.g. server-side encryption); our own kwargs always win over those.
    """

    async def run() -> Any:
        await fs.set_session()
        client = await fs.get_s3(kwargs.get("Bucket"))
        hook_retries(client)  # a per-bucket or refreshed client is a new one: hook it too (once)
        bound = getattr(client, method)
        merged = {**fs._get_s3_method_kwargs(bound, **kwargs), **kwargs}
        return await bound(**merged)

    return sync(fs.loop, run)


def hook_retries(client: Any) -> None:
    """Decide this botocore client's retries of throttles (503 SlowDown), timeouts and dropped
    connections, and tell `in_flight` of each before it is retried (module docstring: why not
    botocore's quota).

    Registered first on the client's `needs-retry` event: for those answers it returns the back-off
    (botocore then sleeps and sends the request again) until the client's total attempts are spent;
    then, and for every other answer (success, 4xx, 500), it returns None and botocore's own
    handler decides as before. Which operations are retried does not change (botocore retries every
    one): GET, HEAD, LIST, DELETE and DeleteObjects are idempotent; a plain PUT overwrites with the
    same bytes; a create-if-absent PUT is made safe by `put_if_absent`.
    """
    # botocore: only an S3 client (the s3 extra installed) is ever hooked
    from botocore.exceptions import ConnectionError as ConnectionFailure
    from botocore.exceptions import HTTPClientError

    unanswered = (ConnectionFailure, HTTPClientError)  # timeouts and dropped connections among them
    retries = getattr(client.meta.config, "retries", None) or {}
    attempts_allowed = int(retries.get("total_max_attempts") or _DEFAULT_ATTEMPTS)

    def on_retry_decision(
        response: Any = None, caught_exception: BaseException | None = None, attempts: int = 1, **_: Any
    ) -> float | None:
        kind = _transient_kind(response, caught_exception, unanswered)
        if kind is None:
            return None
        if kind == TIMED_OUT:
            note_timed_out()
        else:
            note_throttled()
        return backoff_s(attempts) if attempts < attempts_allowed else None

    # fsspec hands every FileIO with the same options the same cached filesystem and client: register
    # once per client, or each answer would be counted once per FileIO ever made
    client.meta.events.register_first("needs-retry.s3", on_retry_decision, unique_id=_RETRY_HOOK_ID)


def _transient_kind(
    response: Any, caught_exception: BaseException | None, unanswered: tuple[type[BaseException], ...]
) -> str | None:
    """TIMED_OUT for a request that got no answer, THROTTLED for a throttling answer, else None."""
    if caught_exception is not None:
        return TIMED_OUT if isinstance(caught_exception, unanswered) else None
    if not response:
        return None
    http_response, parsed = response
    code = (parsed or {}).get("Error", {}).get("Code")
    if getattr(http_response, "status_code", None) == 503 or code in _THROTTLING_CODES:
        return THROTTLED
    return None


def backoff_s(attempts: int) -> float:
    """The wait before attempt `attempts + 1`: exponential, capped, fully jittered (many requests
    timed out by one stall must not all come back at the same instant)."""
    return random.uniform(0.0, min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** max(0, attempts - 1)))


def put_if_absent(fs: Any, bucket: str, key: str, data: bytes, path: str) -> bool:
    """PutObject with If-None-Match: * : True when `data` is now at the key by our request, False when
    another writer's object is there (a lost race). `path` names it in errors.

    A create-if-absent is not idempotent, and its failures can be ambiguous: a put whose answer was
    lost (a timeout, a dropped connection) may have been applied. botocore retries it, and the retry
    then finds our own object (412); a commit reading that as "someone else won" would commit again
    as the next id while its snapshot already sits there: a doubled commit. So after a 412, or after
    the attempts ended without an answer, the object is read back: our bytes -> ours (as Java's
    "target exists and equals our snapshot"); another writer's -> lost; absent after a 412 -> lost
    (it was there, and deleted since: not ours); absent after no answer -> the put is sent again
    (a later arrival of the lost one would meet a 412 and be read back). A 409 (S3: a conditional
    write to this key is in progress, possibly our own lost attempt) is waited out and sent again.
    Bounded: `_PUT_ROUNDS` rounds, each all of botocore's attempts; then StorageError.
    """
    # botocore: only S3 commits get here (the s3 extra installed)
    from botocore.exceptions import ClientError, HTTPClientError
    from botocore.exceptions import ConnectionError as ConnectionFailure

    failure: BaseException | None = None
    for round_number in range(1, _PUT_ROUNDS + 1):
        try:
            call(fs, "put_object", Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            return True
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            code = exc.response.get("Error", {}).get("Code")
            if status == 412 or code == "PreconditionFailed":
                return read_back(fs, bucket, key, data) is True
            if not (status == 409 or code == "ConditionalRequestConflict"):
                raise
            failure = exc
        except (ConnectionFailure, HTTPClientError) as exc:  # no answer: applied or not, unknown
            failure = exc
            held = read_back(fs, bucket, key, data)
            if held is not None:
                return held
        time.sleep(backoff_s(round_number))  # back-off before sending it again, not synchronisation
    raise StorageError(
        f"create {path}: no definite answer after {_PUT_ROUNDS} rounds of attempts, and the object is "
        f"absent (last: {type(failure).__name__}: {failure})"
    )


def read_back(fs: Any, bucket: str, key: str, data: bytes) -> bool | None:
    """Whether the object at the key holds exactly `data` (True) or other bytes (False); None when
    it is absent. A failed read raises (StorageError from the caller's wrapper), never guesses."""
    fs.invalidate_cache(f"{bucket}/{key}")
    try:
        return bool(fs.cat_file(f"{bucket}/{key}") == data)
    except FileNotFoundError:
        return None


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
