"""Fixtures for job tests: YAML files on disk, and fake operations registered for one test.

Fake operations let the frame (CLI, config, exit codes, run record, Spark session) be tested
without any real operation; they are removed again after each test.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobs.runtime.config import TableJobConfig
from jobs.runtime.registry import OPERATIONS, Operation


@pytest.fixture
def config_file(tmp_path: Path) -> Callable[..., str]:
    """Write YAML text to a file under tmp_path and return its path."""

    def write(text: str, name: str = "job.yaml") -> str:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return str(path)

    return write


@pytest.fixture
def fake_operation(monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """Register an operation for this test only: `fake_operation("fake-x", run, config_model)`."""

    def register(
        name: str, run: Callable[[Any, Any], None], config_model: type[TableJobConfig] = TableJobConfig
    ) -> str:
        module_name = f"tests_fake_operation_{name.replace('-', '_')}"
        module = types.ModuleType(module_name)
        module.CONFIG_MODEL = config_model
        module.run = run
        monkeypatch.setitem(sys.modules, module_name, module)
        monkeypatch.setitem(OPERATIONS, name, Operation(name, module_name, f"test-only {name}"))
        return name

    return register
