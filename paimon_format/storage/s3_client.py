"""Talking to S3 through s3fs's botocore client: direct calls, the throttle hook, keys and answers.

Kept apart from `FileIO` because these are S3's own rules (a conditional put's status codes, the
DeleteObjects answer, the retry events of botocore), not the storage-neutral contract FileIO gives
the rest of the format layer.
"""

from __future__ import annotations

from typing import Any

from fsspec.asyn import sync

from paimon_format.storage.in_flight import note_throttled

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
