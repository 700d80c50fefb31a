"""The read memo's stamps: what a later listing makes it read again, and what it never keeps."""

from __future__ import annotations

from paimon_format.maintenance import read_memo
from paimon_format.maintenance.read_memo import _MemoState


def test_a_tag_read_before_it_was_listed_is_read_again_after_the_listing() -> None:
    state = _MemoState()
    state.keep("t/tag/tag-a", b"old")  # read first: no stamp tells when
    state.mark_known("t/tag/tag-a", (3, 1000))  # replace-tag may have rewritten it in between
    assert "t/tag/tag-a" not in state.contents and state.is_known("t/tag/tag-a")
    state.keep("t/tag/tag-a", b"new")
    state.mark_known("t/tag/tag-a", (3, 1000))  # the same stamp again: the bytes stay
    assert state.contents["t/tag/tag-a"] == b"new"
    state.mark_known("t/tag/tag-a", (3, 2000))  # rewritten since: read again
    assert "t/tag/tag-a" not in state.contents


def test_a_snapshot_read_before_it_was_listed_keeps_its_bytes() -> None:
    state = _MemoState()
    state.keep("t/snapshot/snapshot-5", b"{}")  # the hinted latest, read before the listing
    state.mark_known("t/snapshot/snapshot-5", (2, 1000))
    assert state.contents["t/snapshot/snapshot-5"] == b"{}"


def test_nothing_is_kept_once_no_stamp_can_be_remembered(monkeypatch) -> None:
    monkeypatch.setattr(read_memo, "MAX_KNOWN", 0)
    state = _MemoState()
    state.keep("t/tag/tag-b", b"x")
    assert "t/tag/tag-b" not in state.contents
