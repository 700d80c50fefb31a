"""What the tag jobs (create-tag, replace-tag, rename-tag) and rollback share: which snapshot a time,
a watermark or an id names, a tag's retention, a tag file's bytes."""
