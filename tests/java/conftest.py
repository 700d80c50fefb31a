"""Java-written fixture tables, built once per session (tests/java/tables.py) and copied per test."""

from __future__ import annotations

import pytest

from tests.java import tables


@pytest.fixture(scope="session")
def java_templates(java_paimon, tmp_path_factory) -> tuple[str, dict[str, tables.JavaTable]]:
    """(template warehouse, fixture tables by name); never modify the template, copy it."""
    warehouse = str(tmp_path_factory.mktemp("java-templates") / "wh")
    return warehouse, tables.build_all(java_paimon, warehouse)


@pytest.fixture
def java_warehouse(java_templates, tmp_path) -> str:
    """A private copy of the template warehouse (every fixture table)."""
    return tables.copy_warehouse(java_templates[0], str(tmp_path / "wh"))
