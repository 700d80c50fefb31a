"""Shared room of the repair jobs (remove-unexisting-files, remove-unexisting-manifests)."""
