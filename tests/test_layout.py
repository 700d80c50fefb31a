"""The layout rules (tests/support/layout.py): each rule fires on a small tree written here, a clean
tree passes, and the real tree follows them all (its failure lists every violation grouped by rule)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from tests.support.layout import (
    FORMAT_IMPORTS_SPARK_OR_JOBS,
    FUNCTION_IMPORT_WITHOUT_REASON,
    FUNCTION_TOO_LONG,
    IMPORT_CIRCLE,
    MODULE_TOO_LONG,
    OPERATION_IMPORTS_OPERATION,
    REPO_ROOT,
    SHARED_IMPORTS_OPERATION,
    Violation,
    check_tree,
    format_report,
    main,
)

PACKAGES = {"paimon_format/__init__.py": "", "jobs/__init__.py": ""}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """The two packages (empty `__init__`s) plus `files`, dedented, under `root`."""
    for relpath, source in {**PACKAGES, **files}.items():
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        if not (path.parent / "__init__.py").exists():
            (path.parent / "__init__.py").write_text("")
        path.write_text(textwrap.dedent(source))
    return root


def function_of(lines: int, name: str = "f", docstring: str | None = None) -> str:
    """A module-level function of exactly `lines` lines from `def` to its last line."""
    body = f'    """{docstring}"""'.splitlines() if docstring else []
    body += ["    x = 0"] * (lines - 1 - len(body))
    return "\n".join([f"def {name}() -> None:", *body]) + "\n"


def rules_of(violations: list[Violation]) -> list[str]:
    return [violation.rule for violation in violations]


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    """Everything the rules allow at once: TYPE_CHECKING-only back imports, Spark imported inside a
    function with its reason, operations importing package modules and `jobs.read`, `__main__`
    importing operations, a 600-line module and an 80-line function."""
    root = write_tree(
        tmp_path,
        {
            "paimon_format/model/types.py": "from paimon_format.model import schema\n",
            "paimon_format/model/schema.py": """\
                from __future__ import annotations

                from typing import TYPE_CHECKING

                if TYPE_CHECKING:
                    from paimon_format.model.types import DataType
            """,
            "paimon_format/table.py": function_of(80) + "\n" * (600 - 80),
            "jobs/runtime/spark.py": """\
                def session():
                    # pyspark only where a session is asked for: the driver-only paths never load it
                    from pyspark.sql import SparkSession

                    import pyspark  # the version, for the log line
                    return SparkSession, pyspark
            """,
            "jobs/compaction/plan.py": "from jobs.runtime import spark\n",
            "jobs/read.py": "from jobs.compaction.plan import spark\n",
            "jobs/compact.py": (
                "from jobs.compaction import plan\nfrom jobs import read\nimport jobs.runtime.spark\n"
            ),
            "jobs/write.py": "from jobs.read import spark\n",
            "jobs/__main__.py": "from jobs import compact, write\n",
            "jobs/entry.py": "import jobs.__main__\n",
        },
    )
    assert (root / "paimon_format/table.py").read_text().count("\n") == 600
    violations = check_tree(root)
    assert violations == [], format_report(violations)


def test_a_module_level_circle_is_named_with_its_imports(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "paimon_format/a.py": "import os\nfrom paimon_format import b\n",
            "paimon_format/b.py": "from paimon_format.c import thing\n",
            "paimon_format/c.py": "from paimon_format.a import other\n",
            "paimon_format/d.py": "from paimon_format import a\n",
        },
    )
    violations = check_tree(root)
    assert rules_of(violations) == [IMPORT_CIRCLE]
    message = violations[0].message
    assert (
        "circle among 3 modules: paimon_format.a -> paimon_format.b -> paimon_format.c -> paimon_format.a"
        in message
    )
    assert "paimon_format/a.py:2 imports paimon_format.b" in message
    assert "paimon_format/c.py:1 imports paimon_format.a" in message
    assert "paimon_format.d" not in message
    assert (violations[0].path, violations[0].line) == ("paimon_format/a.py", 2)


def test_a_package_init_importing_a_module_that_imports_from_the_package_is_a_circle(tmp_path: Path) -> None:
    # `from paimon_format.storage import crash_points` runs storage/__init__ first, which imports faults
    root = write_tree(
        tmp_path,
        {
            "paimon_format/storage/__init__.py": "import paimon_format.storage.faults\n",
            "paimon_format/storage/faults.py": "from paimon_format.storage import crash_points\n",
            "paimon_format/storage/crash_points.py": "",
        },
    )
    violations = check_tree(root)
    assert rules_of(violations) == [IMPORT_CIRCLE]
    assert "paimon_format.storage -> paimon_format.storage.faults -> paimon_format.storage" in (
        violations[0].message
    )


def test_a_circle_kept_alive_by_a_function_level_import_counts(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "jobs/runtime/spark.py": "from jobs.runtime.archive import options\n",
            "jobs/runtime/archive.py": """\
                def build():
                    from jobs.runtime.spark import session  # not at the top: spark imports this module
                    return session
            """,
        },
    )
    violations = check_tree(root)
    assert rules_of(violations) == [IMPORT_CIRCLE]
    assert "jobs/runtime/archive.py:2 imports jobs.runtime.spark (inside a function)" in violations[0].message


def test_type_checking_imports_do_not_make_a_circle(tmp_path: Path) -> None:
    files = {
        "paimon_format/a.py": "from paimon_format.b import B\n",
        "paimon_format/b.py": """\
            import typing

            if typing.TYPE_CHECKING:
                from paimon_format.a import A
            else:
                A = None
        """,
    }
    assert check_tree(write_tree(tmp_path / "guarded", files)) == []
    unguarded = {**files, "paimon_format/b.py": "from paimon_format.a import A\n"}
    assert rules_of(check_tree(write_tree(tmp_path / "unguarded", unguarded))) == [IMPORT_CIRCLE]


def test_the_script_block_of_an_operation_makes_no_circle(tmp_path: Path) -> None:
    """`if __name__ == "__main__":` runs only in the file spark-submit starts (named `__main__`)."""
    files = {
        "jobs/compact.py": 'if __name__ == "__main__":\n    from jobs.entry import run_entry\n',
        "jobs/entry.py": "from jobs.__main__ import main\n",
        "jobs/__main__.py": "from jobs import compact\n",
    }
    assert check_tree(write_tree(tmp_path / "guarded", files)) == []
    unguarded = {**files, "jobs/compact.py": "from jobs.entry import run_entry\n"}
    assert rules_of(check_tree(write_tree(tmp_path / "unguarded", unguarded))) == [IMPORT_CIRCLE]


def test_relative_imports_are_resolved_into_the_graph(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "paimon_format/scan/__init__.py": "",
            "paimon_format/scan/splits.py": "from . import snapshot_scan\n",
            "paimon_format/scan/snapshot_scan.py": "from ..scan.splits import Split\n",
        },
    )
    violations = check_tree(root)
    assert rules_of(violations) == [IMPORT_CIRCLE]
    assert "paimon_format.scan.snapshot_scan -> paimon_format.scan.splits" in violations[0].message


@pytest.mark.parametrize(
    "source",
    [
        "import pyspark\n",
        "from pyspark.sql import DataFrame\n",
        "import py4j.java_gateway\n",
        "from jobs.runtime.errors import BadInputError\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from jobs import read\n",
        "def f():\n    from pyspark.sql import functions  # only on executors\n",
    ],
    ids=["pyspark", "pyspark-from", "py4j", "jobs", "jobs-type-checking", "pyspark-in-a-function"],
)
def test_the_format_package_never_imports_spark_or_jobs(tmp_path: Path, source: str) -> None:
    root = write_tree(tmp_path, {"paimon_format/data/reader.py": source, "jobs/read.py": ""})
    violations = check_tree(root)
    assert rules_of(violations) == [FORMAT_IMPORTS_SPARK_OR_JOBS]
    assert violations[0].path == "paimon_format/data/reader.py"
    assert "never imports" in violations[0].message


@pytest.mark.parametrize(
    "source",
    [
        "from jobs.compact import CompactConfig\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from jobs.compact import CompactConfig\n",
        "from jobs import compact\n",
    ],
    ids=["runtime", "type-checking", "from-package"],
)
def test_a_shared_room_never_imports_an_operation(tmp_path: Path, source: str) -> None:
    root = write_tree(
        tmp_path,
        {
            "jobs/compact.py": "from jobs.compaction import run\n",
            "jobs/compaction/__init__.py": "",
            "jobs/compaction/run.py": source,
        },
    )
    violations = [v for v in check_tree(root) if v.rule != IMPORT_CIRCLE]
    assert rules_of(violations) == [SHARED_IMPORTS_OPERATION]
    assert violations[0].path == "jobs/compaction/run.py"
    assert "jobs.compaction.run imports operation jobs.compact" in violations[0].message


@pytest.mark.parametrize(
    "source",
    [
        "from jobs import drop_partition\n",
        "from jobs.drop_partition import selection_tests\n",
        "import jobs.drop_partition\n",
        "from . import drop_partition\n",
        "def f():\n    from jobs.drop_partition import selection_tests  # avoids a circle\n",
    ],
    ids=["from-package", "from-module", "import", "relative", "in-a-function"],
)
def test_an_operation_never_imports_another(tmp_path: Path, source: str) -> None:
    root = write_tree(
        tmp_path,
        {
            "jobs/compact.py": source,
            "jobs/drop_partition.py": "from jobs.partitions import scan\n",
            "jobs/partitions/scan.py": "",
        },
    )
    violations = check_tree(root)
    assert rules_of(violations) == [OPERATION_IMPORTS_OPERATION]
    assert violations[0].path == "jobs/compact.py"
    assert "jobs.compact imports operation jobs.drop_partition" in violations[0].message


@pytest.mark.parametrize(
    ("body", "fires"),
    [
        ("    import pyarrow as pa\n", True),
        ("    import pyarrow as pa  # optional here\n", False),
        ("    # pyspark stays off the driver-only path\n    from pyspark import StorageLevel\n", False),
        ("    # a comment two lines above\n    x = 1\n    import pyarrow\n", True),
        ("    x = 1  # a comment at the end of the line above\n    import pyarrow\n", True),
        ("    import pyarrow as pa; s = '# not a comment'\n", True),
        ("    from pyspark.sql import (  # Spark only on this path\n        functions,\n    )\n", False),
        ("    from pyspark.sql import (\n        functions,  # Spark only on this path\n    )\n", False),
        ("    # Spark only here\n    import pyarrow as pa\n    from pyspark.sql import functions\n", False),
        ("    # Spark only here\n    import pyarrow as pa\n\n    from jobs.runtime import spark\n", False),
        (
            "    # Spark only here\n    import pyarrow as pa\n"
            "    x = 1\n    from pyspark import StorageLevel\n",
            True,
        ),
        ("    class Inner:\n        def method(self):\n            import pyarrow\n", True),
        (
            "    if True:\n        try:\n            import pyarrow\n"
            "        except ImportError:\n            pass\n",
            True,
        ),
    ],
    ids=[
        "bare",
        "same-line",
        "line-above",
        "two-lines-above",
        "code-line-above",
        "hash-in-a-string",
        "multi-line-first",
        "multi-line-inner",
        "block-under-comment",
        "block-with-blank-line",
        "block-broken-by-code",
        "method-of-a-nested-class",
        "nested-blocks",
    ],
)
def test_an_import_inside_a_function_says_why(tmp_path: Path, body: str, fires: bool) -> None:
    root = write_tree(tmp_path, {"jobs/runtime/spark.py": "import os\n\n\ndef f():\n" + body})
    violations = check_tree(root)
    assert rules_of(violations) == ([FUNCTION_IMPORT_WITHOUT_REASON] if fires else [])
    if fires:
        assert violations[0].path == "jobs/runtime/spark.py"
        assert "import" in violations[0].message


def test_module_level_and_type_checking_imports_need_no_reason(tmp_path: Path) -> None:
    source = """\
        from typing import TYPE_CHECKING

        try:
            import pyarrow
        except ImportError:
            pyarrow = None

        if TYPE_CHECKING:
            from pyspark.sql import DataFrame


        class Job:
            import json
    """
    assert check_tree(write_tree(tmp_path, {"jobs/runtime/spark.py": source})) == []


def test_a_module_over_600_lines_is_too_long(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {"jobs/write.py": "x = 1\n" * 601, "jobs/read.py": "x = 1\n" * 600})
    violations = check_tree(root)
    assert rules_of(violations) == [MODULE_TOO_LONG]
    assert violations[0].path == "jobs/write.py"
    assert "601 lines" in violations[0].message


def test_a_function_over_80_lines_is_too_long_unless_its_docstring_says_why(tmp_path: Path) -> None:
    nested = "class Job:\n" + textwrap.indent(function_of(81, "run"), "    ")
    root = write_tree(
        tmp_path,
        {
            "jobs/write.py": function_of(81, "write_dataframe"),
            "jobs/read.py": function_of(80, "read_table"),
            "jobs/compact.py": function_of(
                90, "compact", "Compact.\n\n    Long: one plan, one commit, in order"
            ),
            "jobs/rollback.py": nested,
            "jobs/maintain.py": function_of(81, "maintain").replace("def ", "async def "),
            "jobs/drop_partition.py": function_of(81, "drop", "Drop.\n\n    Too long: not a reason line"),
        },
    )
    violations = check_tree(root)
    assert rules_of(violations) == [FUNCTION_TOO_LONG] * 4
    assert [(v.path, v.line) for v in violations] == [
        ("jobs/drop_partition.py", 1),
        ("jobs/maintain.py", 1),
        ("jobs/rollback.py", 2),
        ("jobs/write.py", 1),
    ]
    assert "write_dataframe() has 81 lines" in violations[-1].message


def test_the_report_groups_violations_by_rule_with_counts(tmp_path: Path, capsys) -> None:
    root = write_tree(
        tmp_path,
        {
            "paimon_format/a.py": "import pyspark\n" + "x = 1\n" * 600,
            "jobs/compact.py": "from jobs import write\n",
            "jobs/write.py": "def f():\n    import pyarrow\n",
        },
    )
    violations = check_tree(root)
    report = format_report(violations)
    assert report.index("== format-imports-spark-or-jobs (1)") < report.index(
        "== operation-imports-operation (1)"
    )
    assert "== module-too-long (1)" in report and "== function-import-without-reason (1)" in report
    assert "  paimon_format/a.py:1: paimon_format.a imports pyspark" in report
    assert report.endswith(
        "counts: format-imports-spark-or-jobs 1, operation-imports-operation 1, "
        "function-import-without-reason 1, module-too-long 1"
    )
    assert main(["--root", str(root)]) == 1
    assert capsys.readouterr().out.strip() == report
    assert main(["--root", str(write_tree(tmp_path / "clean", {}))]) == 0
    assert capsys.readouterr().out.strip() == "layout: no violations"


def test_the_real_tree_follows_the_layout() -> None:
    """Every rule on paimon_format/ and jobs/ of this checkout; the failure lists each violation."""
    violations = check_tree(REPO_ROOT)
    report = format_report(violations)
    print(report)
    assert not violations, report


def test_no_test_module_imports_another() -> None:
    """What two test modules share lives in tests/support (pytest would also collect an imported
    module's tests and fixtures twice)."""
    offenders = []
    for path in sorted((REPO_ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or "", *(f"{node.module or ''}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if any(name.rpartition(".")[2].startswith("test_") for name in names):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert not offenders, "test modules imported by others: " + ", ".join(offenders)
