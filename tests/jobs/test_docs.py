"""The reference in docs/: option tables equal to the models, one page per operation, links that resolve.

No Spark: the models and the markdown are plain Python.
"""

from __future__ import annotations

import re
import shutil
import types
from pathlib import Path

import pytest
from pydantic import Field, create_model

import jobs.runtime.docs as docs
from jobs.__main__ import main
from jobs.runtime.docs import BEGIN, END, check_pages, operation_markdown, render_page, write_pages
from jobs.runtime.registry import OPERATIONS, load

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "docs" / "operations"
REGENERATE = "regenerate with: python -m jobs docs --write docs/operations"


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_every_operation_has_a_page_whose_option_table_is_its_model(operation):
    page = PAGES / f"{operation}.md"
    assert page.exists(), f"{page.relative_to(ROOT)} is missing; {REGENERATE}"
    text = page.read_text(encoding="utf-8")
    stale = f"{page.relative_to(ROOT)}: the option table is stale; {REGENERATE}"
    assert render_page(operation, text) == text, stale


def test_a_stale_or_missing_page_is_found_and_rewritten(tmp_path):
    shutil.copytree(PAGES, tmp_path, dirs_exist_ok=True)
    compact = tmp_path / "compact.md"
    compact.write_text(compact.read_text().replace("| `strategy` |", "| `stratgy` |"), encoding="utf-8")
    (tmp_path / "rollback.md").unlink()
    states = {status.operation: status.state for status in check_pages(tmp_path)}
    assert states["compact"] == "stale" and states["rollback"] == "missing"
    assert {state for op, state in states.items() if op not in ("compact", "rollback")} == {"current"}

    assert main(["docs", "--check", str(tmp_path)]) == 1
    prose = compact.read_text().split(BEGIN)[0]
    assert main(["docs", "--write", str(tmp_path)]) == 0
    assert main(["docs", "--check", str(tmp_path)]) == 0
    assert compact.read_text().split(BEGIN)[0] == prose  # the prose around the table is kept
    assert (tmp_path / "rollback.md").read_text().startswith("# rollback\n")


def test_a_model_that_gained_a_key_makes_its_page_stale(tmp_path, monkeypatch):
    shutil.copytree(PAGES, tmp_path, dirs_exist_ok=True)
    base = load("drop-partition").CONFIG_MODEL
    grown = create_model(
        "GrownConfig", __base__=base, max_partitions=(int, Field(default=7, ge=1, description="new key"))
    )
    real_load = docs.load

    def load_grown(name: str):
        return types.SimpleNamespace(CONFIG_MODEL=grown) if name == "drop-partition" else real_load(name)

    monkeypatch.setattr(docs, "load", load_grown)
    assert "| `max_partitions` | integer (>= 1) | `7` | new key |" in operation_markdown("drop-partition")
    states = {status.operation: status.state for status in check_pages(tmp_path)}
    assert states["drop-partition"] == "stale"
    write_pages(tmp_path)
    assert "`max_partitions`" in (tmp_path / "drop-partition.md").read_text()


def test_a_page_without_markers_is_reported_not_overwritten(tmp_path):
    (tmp_path / "write.md").write_text("# write\n\nprose only\n", encoding="utf-8")
    assert main(["docs", "--write", str(tmp_path)]) == 1
    assert (tmp_path / "write.md").read_text() == "# write\n\nprose only\n"


def test_schema_markdown_prints_the_table_the_page_holds(capsys):
    assert main(["schema", "expire-snapshots", "--markdown"]) == 0
    table = capsys.readouterr().out
    assert table == operation_markdown("expire-snapshots")
    assert "| `retain_min` | integer (>= 1) | unset | default: snapshot.num-retained.min |" in table
    assert "| `warehouse` | string | required |" in table
    page = (PAGES / "expire-snapshots.md").read_text()
    assert table in page.split(BEGIN)[1].split(END)[0]


def test_the_option_table_shows_types_defaults_and_nested_keys():
    write = operation_markdown("write")
    assert "| `mode` | `append` \\| `overwrite` | `append` |" in write
    assert "| `source.format` | string | `parquet` |" in write
    maintain = operation_markdown("maintain")
    assert "| `lock.ttl` | string | `6h` |" in maintain
    assert "[expire-snapshots](expire-snapshots.md)" in maintain
    assert "| `overrides[].match` | string | required |" in maintain


# Links: every relative link of README and docs/ names a file that exists (and a heading, with #).

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as dashes."""
    anchors = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    return [target for target in _LINK.findall(text) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("page", markdown_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target in _links(page):
        file_part, _, anchor = target.partition("#")
        resolved = (page.parent / file_part).resolve() if file_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading #{anchor}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_link_checker_catches_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [gone](missing.md) [bad](#nope)\n", encoding="utf-8")
    assert _links(page) == ["#title", "missing.md", "#nope"]
    assert "nope" not in _anchors(page) and "title" in _anchors(page)


# Paths the pages name in backticks (conf/write.yaml, scripts/bench_expire.py, jobs/runtime/...) exist.

_PATH = re.compile(r"`((?:conf|scripts|jobs|paimon_format|tests|docs)/[\w./-]+)`")


@pytest.mark.parametrize("page", markdown_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_repository_paths_named_in_the_docs_exist(page):
    text = page.read_text(encoding="utf-8")
    missing = sorted({path for path in _PATH.findall(text) if not (ROOT / path.rstrip("/")).exists()})
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_readme_gives_the_command_ci_runs():
    """.ci/run runs `bash scripts/test`, "exactly the test command README.md gives"."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "bash scripts/test" in readme
    assert "bash scripts/test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    operations = set(re.findall(r"python -m jobs ([a-z-]+) --config", readme))
    assert operations and operations <= set(OPERATIONS) | {"<operation>", "report"}  # report: a command
