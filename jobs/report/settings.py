"""The `report:` block of the maintain YAML, which `python -m jobs report` reads as well."""

from __future__ import annotations

from pydantic import Field, field_validator

from jobs.runtime.config import StrictModel


class ReportSettings(StrictModel):
    """Where the health page goes, where run records are read from, and how much each table shows."""

    out: str | None = Field(
        default=None,
        description="where the HTML page is written (path or fsspec URL); maintain writes it after each "
        "run, `python -m jobs report` takes it unless --out is given",
    )
    records: list[str] = Field(
        default_factory=list,
        description="run records to show as the last maintenance runs: files, globs or directories "
        "(their *.json), e.g. what a scheduler passes to --output",
    )
    runs_per_table: int = Field(default=5, ge=1, le=100, description="maintenance runs shown per table")
    top_partitions: int = Field(
        default=10, ge=1, le=1000, description="partitions shown per table (those with the most files)"
    )
    parallelism: int = Field(default=4, ge=1, le=64, description="tables read at the same time")

    @field_validator("out")
    @classmethod
    def _out(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must be a path or URL")
        return value
