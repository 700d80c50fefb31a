"""ListObjectsV2 for moto that costs a page, not a bucket: for the standalone benchmark process only.

Why: moto answers every listing page by scanning and sorting all keys of the bucket, so a page of
a 100,000-object table costs it as much as listing the whole table, and a job that splits its
listing into many `StartAfter` ranges (as it should on S3, where a page costs the same wherever it
starts) would be billed moto's quadratic cost, which no real store has. Installed in
`python -m tests.s3.proxy` (never in the tests' in-process moto, which stays moto as shipped), it
keeps each bucket's key names sorted and answers a page by bisection, with moto's own result shape,
continuation tokens and delete-marker rule.

The sorted names are rebuilt lazily after any change to the bucket: `changed(bucket)` bumps the
bucket's version (the proxy calls it after every forwarded write, the controls after theirs), and a
listing uses its cached names only when they were read at the current version.
"""

from __future__ import annotations

import hashlib
import threading
from bisect import bisect_left, bisect_right
from typing import Any

_lock = threading.Lock()
_versions: dict[str, int] = {}
_sorted: dict[str, tuple[int, list[str]]] = {}
pages_answered = 0  # pages this module answered (a test's proof that it is the one answering)


def changed(bucket: str) -> None:
    """The bucket's keys changed (or may have): the next listing reads them again."""
    with _lock:
        _versions[bucket] = _versions.get(bucket, 0) + 1


def _names(bucket: Any) -> list[str]:
    with _lock:
        version = _versions.get(bucket.name, 0)
        cached = _sorted.get(bucket.name)
    if cached is not None and cached[0] == version:
        return cached[1]
    names = sorted(bucket.keys.keys())  # read at `version`: a change meanwhile bumps it past
    with _lock:
        _sorted[bucket.name] = (version, names)
    return names


def list_objects_v2(
    backend: Any,
    bucket: Any,
    prefix: str | None,
    delimiter: str | None,
    continuation_token: str | None,
    start_after: str | None,
    max_keys: int,
) -> tuple[list[Any], bool, str | None]:
    """(keys and common prefixes in name order, truncated, next continuation token), as moto's own."""
    from moto.s3.models import FakeDeleteMarker  # moto: only where this is installed (its own process)

    global pages_answered
    pages_answered += 1
    if max_keys == 0:
        return [], False, None
    names = _names(bucket)
    prefix = prefix or ""
    after = backend._pagination_tokens.get(continuation_token) if continuation_token else start_after
    index = bisect_left(names, prefix)
    if after:
        index = max(index, bisect_right(names, after))
    items: list[Any] = []
    while index < len(names) and names[index].startswith(prefix):
        name = names[index]
        index += 1
        rest = name[len(prefix) :]
        if delimiter and delimiter in rest:
            folder = prefix + rest.split(delimiter)[0] + delimiter
            while index < len(names) and names[index].startswith(folder):
                index += 1  # the rest of this common prefix
            if after and folder <= after:
                continue
            item: Any = folder
        else:
            key = bucket.keys.get(name)
            if key is None or isinstance(key, FakeDeleteMarker):
                continue  # deleted since the names were read, or a delete marker
            item = key
        if len(items) == max_keys:
            last = items[-1]
            token_key = last.name if not isinstance(last, str) else last
            token = hashlib.md5(token_key.encode("utf-8")).hexdigest()
            backend._pagination_tokens[token] = token_key
            return items, True, token
        items.append(item)
    return items, False, None


def install(backend: Any) -> None:
    """Answer `backend`'s ListObjectsV2 with this module (this process only)."""
    backend.list_objects_v2 = lambda *args, **kwargs: list_objects_v2(backend, *args, **kwargs)
