"""A job run through the CLI in-process (`python -m jobs <op> --config F` as `jobs.__main__.main`), on
the shared SparkSession: its exit code and the run record it printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from jobs.__main__ import main


def run_job(
    tmp_path: Path, operation: str, config: dict, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, dict]:
    """Write `config` as `<operation>.yaml` under `tmp_path`, run the operation with it and `extra`
    arguments, and return (exit code, run record)."""
    path = tmp_path / f"{operation}.yaml"
    path.write_text(yaml.safe_dump(config))
    code = main([operation, "--config", str(path), *extra])
    out = capsys.readouterr().out
    return code, json.loads(out)
