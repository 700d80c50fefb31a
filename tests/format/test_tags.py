"""Tags: `tag/tag-<name>` files, names, retention fields, Java's and pypaimon's tags, branch tags."""

from __future__ import annotations

import json

import pytest

from paimon_format.errors import (
    InvalidTableStateError,
    SnapshotNotFoundError,
)
from paimon_format.snapshot import Snapshot
from paimon_format.tags import TagManager
from tests.format.metadata_samples import make_snapshot
from tests.support.samples import SAMPLES, needs_samples

# -- TagManager ------------------------------------------------------------------------------------


def test_tags(file_io, table_root):
    tags = TagManager(file_io, table_root)
    assert tags.tag_names() == [] and tags.tags() == {}
    first, second = make_snapshot(5), make_snapshot(2)
    assert tags.create_tag("release", first)
    assert tags.create_tag("nightly-2024-01-01", second)
    assert tags.tag_path("release") == file_io.join(table_root, "tag", "tag-release")
    assert tags.tag_names() == ["nightly-2024-01-01", "release"]
    assert tags.tag("release") == first
    assert list(tags.tags()) == ["nightly-2024-01-01", "release"]  # ordered by snapshot id
    assert json.loads(file_io.read_bytes(tags.tag_path("release"))) == json.loads(first.to_json())
    with pytest.raises(InvalidTableStateError, match="already exists"):
        tags.create_tag("release", second)
    assert tags.create_tag("release", second, ignore_if_exists=True) is False
    assert tags.tag("release") == first
    with pytest.raises(SnapshotNotFoundError, match="tag-missing"):
        tags.tag("missing")
    assert tags.delete_tag("release") is True and tags.tag_names() == ["nightly-2024-01-01"]


@pytest.mark.parametrize("name", ["", "  ", "123", "a/b"])
def test_bad_tag_names(file_io, table_root, name):
    with pytest.raises(ValueError):
        TagManager(file_io, table_root).create_tag(name, make_snapshot(1))


def test_tag_with_retention(file_io, table_root):
    tags = TagManager(file_io, table_root)
    tags.create_tag("kept", make_snapshot(3), time_retained_ms=86_400_000)
    tag = tags.tag("kept")
    assert tag.tag_time_retained_ms == 86_400_000 and tag.tag_create_time is not None
    text = file_io.read_bytes(tags.tag_path("kept")).decode()
    assert '"tagTimeRetained" : 86400.000000000' in text
    assert Snapshot.from_json(tag.to_json()) == tag


@needs_samples
def test_reads_pypaimon_compact_tag_and_java_tag_fields(file_io, table_root):
    tags = TagManager(file_io, table_root)
    file_io.write_bytes(tags.tag_path("t3"), (SAMPLES / "tag.append_parted.t3.json").read_bytes())
    java_tag = json.loads(make_snapshot(4).to_json())
    java_tag["tagCreateTime"] = [2024, 1, 2, 3, 4, 5, 6000000]
    java_tag["tagTimeRetained"] = 3600.5
    file_io.write_bytes(tags.tag_path("java"), json.dumps(java_tag, indent=2).encode())
    assert tags.tag("t3").id == 3
    java = tags.tag("java")
    assert java.tag_create_time.isoformat() == "2024-01-02T03:04:05.006000"
    assert java.tag_time_retained_ms == 3_600_500
    assert json.loads(java.to_json()) == java_tag
    assert list(tags.tags()) == ["t3", "java"]


def test_branch_tags_live_under_the_branch(file_io, table_root):
    TagManager(file_io, table_root, branch="dev").create_tag("t", make_snapshot(1))
    assert TagManager(file_io, table_root).tag_names() == []
    assert TagManager(file_io, table_root, branch="dev").tag_names() == ["t"]
