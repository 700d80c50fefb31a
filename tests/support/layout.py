"""The layout rules of the two packages, checked over `ast` (no third-party tool, nothing imported).

Rules (docs in /work/shared/DESIGN.md, "The layout"):

- ``import-circle``: no import circle among the modules of ``paimon_format`` and ``jobs``. An import
  inside a function counts (it only postpones the circle to the first call); an import under
  ``if TYPE_CHECKING:`` does not (it never runs), nor one under ``if __name__ == "__main__":`` (it
  runs only in the file spark-submit starts, which Python names ``__main__``, not the module).
- ``format-imports-spark-or-jobs``: ``paimon_format`` never imports ``jobs``, ``pyspark`` or ``py4j``,
  anywhere in a module (inside functions and under ``TYPE_CHECKING`` too).
- ``operation-imports-operation``: one operation module (a ``.py`` file directly in ``jobs/`` other
  than ``__init__``, ``__main__``, ``entry`` and ``read``) never imports another; what two share moves
  down into a package. Importing a module of a package (``jobs.compaction.plan``) is fine.
- ``shared-imports-operation``: a module of a package under ``jobs/`` (the shared rooms: runtime,
  deletion, partitions, compaction, writing) never imports an operation module, not even under
  ``TYPE_CHECKING``: the rooms lie below the operations that use them.
- ``function-import-without-reason``: an import inside a function keeps Spark or an optional library
  off a path that must not load it, and says so in a ``#`` comment on one of its own lines or on the
  line just above. A block of imports right under such a comment shares it (blank lines may part
  them, any other statement ends the block).
- ``module-too-long``: a module has at most 600 lines.
- ``function-too-long``: a function has at most 80 lines from its ``def`` line to its last line,
  unless its docstring has a line starting with ``Long:`` that gives the reason.

Run ``python -m tests.support.layout [--root DIR]`` to print every violation grouped by rule; the
exit code is 1 when there is any. ``tests/test_layout.py`` runs the same check on the real tree.
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

IMPORT_CIRCLE = "import-circle"
FORMAT_IMPORTS_SPARK_OR_JOBS = "format-imports-spark-or-jobs"
OPERATION_IMPORTS_OPERATION = "operation-imports-operation"
SHARED_IMPORTS_OPERATION = "shared-imports-operation"
FUNCTION_IMPORT_WITHOUT_REASON = "function-import-without-reason"
MODULE_TOO_LONG = "module-too-long"
FUNCTION_TOO_LONG = "function-too-long"

RULES: dict[str, str] = {
    IMPORT_CIRCLE: "no import circle (function-level imports count, TYPE_CHECKING ones do not)",
    FORMAT_IMPORTS_SPARK_OR_JOBS: "paimon_format never imports jobs, pyspark or py4j",
    OPERATION_IMPORTS_OPERATION: "one operation module (jobs/<op>.py) never imports another",
    SHARED_IMPORTS_OPERATION: "a shared room (jobs/<package>/) never imports an operation module",
    FUNCTION_IMPORT_WITHOUT_REASON: "an import inside a function carries a # comment saying why",
    MODULE_TOO_LONG: "a module has at most {max_module_lines} lines",
    FUNCTION_TOO_LONG: "a function has at most {max_function_lines} lines unless its docstring says `Long:`",
}


@dataclass(frozen=True)
class LayoutRules:
    """What the checker enforces; the defaults are the house rules, tests shrink them for small trees."""

    packages: tuple[str, ...] = ("paimon_format", "jobs")
    format_package: str = "paimon_format"
    forbidden_in_format: frozenset[str] = frozenset({"jobs", "pyspark", "py4j"})
    operations_package: str = "jobs"
    not_operations: frozenset[str] = frozenset({"__init__", "__main__", "entry", "read"})
    max_module_lines: int = 600
    max_function_lines: int = 80


@dataclass(frozen=True, order=True)
class Violation:
    """One broken rule at one place: `path` is relative to the checked root."""

    rule: str
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True)
class ImportStatement:
    """One `import` / `from ... import` statement of a module, with the absolute names it imports."""

    line: int
    end_line: int
    names: tuple[str, ...]
    in_function: bool
    only_when: str | None  # "type checking" or "script": never runs when the module is imported
    has_reason: bool


@dataclass
class Module:
    """A parsed module of one of the checked packages."""

    name: str
    path: Path
    relpath: str
    source: str
    tree: ast.Module
    is_package: bool
    imports: list[ImportStatement] = field(default_factory=list)

    @property
    def package(self) -> str:
        """The package relative imports start from."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


@dataclass(frozen=True)
class Edge:
    """A runtime import of one checked module by another."""

    source: str
    target: str
    line: int
    in_function: bool


# -- reading the tree ------------------------------------------------------------------------------


def find_modules(root: Path, packages: Iterable[str]) -> dict[str, Module]:
    """Every module of `packages` under `root`, parsed, by dotted name."""
    modules: dict[str, Module] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            source = path.read_text(encoding="utf-8")
            relpath = path.relative_to(root).as_posix()
            tree = ast.parse(source, filename=relpath)
            modules[".".join(parts)] = Module(".".join(parts), path, relpath, source, tree, is_package)
    for module in modules.values():
        module.imports = list(collect_imports(module, set(modules)))
    return modules


def comment_lines(source: str) -> tuple[set[int], set[int]]:
    """(lines holding a `#` comment, lines holding nothing but one), found by the tokenizer so that a
    `#` inside a string does not count."""
    with_comment: set[int] = set()
    only_comment: set[int] = set()
    lines = source.splitlines()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row = token.start[0]
            with_comment.add(row)
            if lines[row - 1].lstrip().startswith("#"):
                only_comment.add(row)
    return with_comment, only_comment


def guarded_block(test: ast.expr) -> str | None:
    """What an `if` test says about its block: "type checking" for `if TYPE_CHECKING:` (or
    `typing.TYPE_CHECKING`), "script" for `if __name__ == "__main__":`, else None."""
    if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
        return "type checking"
    if isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING":
        return "type checking"
    if (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    ):
        return "script"
    return None


def resolve_names(node: ast.Import | ast.ImportFrom, module: Module, known: set[str]) -> tuple[str, ...]:
    """The absolute dotted names a statement imports: `from a import b` names `a` (whose
    `__init__` runs first, even when `b` is a module of it) and `a.b` when that is a module;
    relative imports are resolved against the module's package."""
    if isinstance(node, ast.Import):
        return tuple(alias.name for alias in node.names)
    base = node.module or ""
    if node.level:
        anchor = module.package.split(".")
        anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
        base = ".".join([*anchor, base] if base else anchor)
    names = [base]
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        if candidate in known:
            names.append(candidate)
    return tuple(dict.fromkeys(names))


def child_bodies(statement: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement lists nested directly in a compound statement."""
    for name in ("body", "orelse", "finalbody"):
        body = getattr(statement, name, None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            yield body
    for handler in getattr(statement, "handlers", []):
        yield handler.body
    for case in getattr(statement, "cases", []):
        yield case.body


@dataclass(frozen=True)
class _Place:
    in_function: bool = False
    only_when: str | None = None


def collect_imports(module: Module, known: set[str]) -> Iterator[ImportStatement]:
    """Every import statement of `module`, with where it sits (function, TYPE_CHECKING block) and
    whether a comment gives its reason."""
    with_comment, only_comment = comment_lines(module.source)
    blank = {row for row, text in enumerate(module.source.splitlines(), 1) if not text.strip()}

    def follows(previous: ImportStatement | None, line: int) -> bool:
        """Whether `line` continues the block of a reasoned import (blank lines may part them)."""
        if previous is None or not previous.has_reason:
            return False
        return all(row in blank or row in only_comment for row in range(previous.end_line + 1, line))

    def walk(body: list[ast.stmt], place: _Place) -> Iterator[ImportStatement]:
        previous: ImportStatement | None = None
        for statement in body:
            current = None
            if isinstance(statement, ast.Import | ast.ImportFrom):
                line, end = statement.lineno, statement.end_lineno or statement.lineno
                has_reason = (
                    any(row in with_comment for row in range(line, end + 1))
                    or (line - 1) in only_comment
                    or follows(previous, line)
                )
                names = resolve_names(statement, module, known)
                current = ImportStatement(line, end, names, place.in_function, place.only_when, has_reason)
                yield current
            elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from walk(statement.body, _Place(True, place.only_when))
            elif isinstance(statement, ast.If) and guarded_block(statement.test):
                yield from walk(statement.body, _Place(place.in_function, guarded_block(statement.test)))
                yield from walk(statement.orelse, place)
            else:
                for nested in child_bodies(statement):
                    yield from walk(nested, place)
            previous = current

    yield from walk(module.tree.body, _Place())


def checked_target(name: str, known: set[str]) -> str | None:
    """The checked module an imported name loads: itself, or its longest known parent package."""
    parts = name.split(".")
    for size in range(len(parts), 0, -1):
        candidate = ".".join(parts[:size])
        if candidate in known:
            return candidate
    return None


def import_edges(modules: dict[str, Module]) -> list[Edge]:
    """Every runtime import between checked modules (TYPE_CHECKING and script-only ones left out)."""
    known = set(modules)
    edges = []
    for module in modules.values():
        for statement in module.imports:
            if statement.only_when is not None:
                continue
            for name in statement.names:
                target = checked_target(name, known)
                if target is not None and target != module.name:
                    edges.append(Edge(module.name, target, statement.line, statement.in_function))
    return edges


# -- the rules -------------------------------------------------------------------------------------


def strongly_connected(nodes: Iterable[str], successors: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of the graph, each sorted."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = lowlink[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in successors.get(node, []):
            if successor not in index:
                visit(successor)
                lowlink[node] = min(lowlink[node], lowlink[successor])
            elif successor in on_stack:
                lowlink[node] = min(lowlink[node], index[successor])
        if lowlink[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(nodes):
        if node not in index:
            visit(node)
    return components


def shortest_cycle(start: str, members: set[str], successors: dict[str, list[str]]) -> list[str]:
    """The shortest path start -> ... -> start inside one strongly connected component."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for successor in successors.get(node, []):
            if successor not in members:
                continue
            if successor == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if successor not in came_from:
                came_from[successor] = node
                queue.append(successor)
    return [start]


def check_circles(modules: dict[str, Module]) -> Iterator[Violation]:
    """One violation per circle (strongly connected component), naming a shortest cycle and every
    import that keeps the component together."""
    edges = import_edges(modules)
    successors: dict[str, list[str]] = defaultdict(list)
    for edge in edges:
        if edge.target not in successors[edge.source]:
            successors[edge.source].append(edge.target)
    for component in strongly_connected(modules, successors):
        if len(component) < 2:
            continue
        members = set(component)
        cycle = shortest_cycle(component[0], members, successors)
        inside = sorted(
            (e for e in edges if e.source in members and e.target in members),
            key=lambda e: (e.source, e.line),
        )
        lines = [f"circle among {len(component)} modules: {' -> '.join(cycle)}"]
        for edge in inside:
            where = " (inside a function)" if edge.in_function else ""
            lines.append(f"    {modules[edge.source].relpath}:{edge.line} imports {edge.target}{where}")
        first = modules[component[0]]
        line = min((e.line for e in inside if e.source == first.name), default=1)
        yield Violation(IMPORT_CIRCLE, first.relpath, line, "\n".join(lines))


def check_format_imports(modules: dict[str, Module], rules: LayoutRules) -> Iterator[Violation]:
    """paimon_format importing jobs, pyspark or py4j, wherever the import sits."""
    prefix = rules.format_package + "."
    for module in modules.values():
        if module.name != rules.format_package and not module.name.startswith(prefix):
            continue
        for statement in module.imports:
            forbidden = [name for name in statement.names if name.split(".")[0] in rules.forbidden_in_format]
            if forbidden:
                name = forbidden[-1]  # the most specific: `from jobs import read` names jobs and jobs.read
                top = name.split(".")[0]
                message = f"{module.name} imports {name} ({rules.format_package} never imports {top})"
                yield Violation(FORMAT_IMPORTS_SPARK_OR_JOBS, module.relpath, statement.line, message)


def operation_modules(modules: dict[str, Module], rules: LayoutRules) -> set[str]:
    """The operation modules: files directly in the operations package, minus the non-operations."""
    prefix = rules.operations_package + "."
    return {
        name
        for name, module in modules.items()
        if name.startswith(prefix)
        and not module.is_package
        and name.count(".") == 1
        and name.removeprefix(prefix) not in rules.not_operations
    }


def check_operation_imports(modules: dict[str, Module], rules: LayoutRules) -> Iterator[Violation]:
    """One operation module importing another (in any form, anywhere in the module)."""
    operations = operation_modules(modules, rules)
    known = set(modules)
    for name in sorted(operations):
        module = modules[name]
        for statement in module.imports:
            for imported in statement.names:
                target = checked_target(imported, known)
                if target in operations and target != name:
                    message = f"operation {name} imports operation {target}: move what they share down"
                    yield Violation(OPERATION_IMPORTS_OPERATION, module.relpath, statement.line, message)


def check_shared_imports(modules: dict[str, Module], rules: LayoutRules) -> Iterator[Violation]:
    """A module of a package under the operations package importing an operation (in any form)."""
    operations = operation_modules(modules, rules)
    known = set(modules)
    prefix = rules.operations_package + "."
    for name in sorted(modules):
        if not name.startswith(prefix) or name.count(".") < 2 and not modules[name].is_package:
            continue
        module = modules[name]
        for statement in module.imports:
            for imported in statement.names:
                target = checked_target(imported, known)
                if target in operations:
                    message = f"{name} imports operation {target}: a shared room lies below the operations"
                    yield Violation(SHARED_IMPORTS_OPERATION, module.relpath, statement.line, message)


def check_function_imports(modules: dict[str, Module]) -> Iterator[Violation]:
    """Imports inside a function without a comment giving the reason."""
    for module in modules.values():
        for statement in module.imports:
            if statement.in_function and not statement.has_reason:
                text = module.source.splitlines()[statement.line - 1].strip()
                message = f"import inside a function without a # comment saying why: {text}"
                yield Violation(FUNCTION_IMPORT_WITHOUT_REASON, module.relpath, statement.line, message)


def has_long_reason(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the docstring has a line starting with `Long:`."""
    docstring = ast.get_docstring(function) or ""
    return any(line.strip().startswith("Long:") for line in docstring.splitlines())


def check_lengths(modules: dict[str, Module], rules: LayoutRules) -> Iterator[Violation]:
    """Modules and functions over their line limits."""
    for module in modules.values():
        lines = len(module.source.splitlines())
        if lines > rules.max_module_lines:
            message = f"{module.name} has {lines} lines (at most {rules.max_module_lines})"
            yield Violation(MODULE_TOO_LONG, module.relpath, 1, message)
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > rules.max_function_lines and not has_long_reason(node):
                message = (
                    f"{node.name}() has {length} lines (at most {rules.max_function_lines}, "
                    "or a docstring line `Long: <reason>`)"
                )
                yield Violation(FUNCTION_TOO_LONG, module.relpath, node.lineno, message)


def check_tree(root: Path = REPO_ROOT, rules: LayoutRules = LayoutRules()) -> list[Violation]:
    """Every layout violation under `root`, sorted by rule, path and line."""
    modules = find_modules(root, rules.packages)
    violations = [
        *check_circles(modules),
        *check_format_imports(modules, rules),
        *check_operation_imports(modules, rules),
        *check_shared_imports(modules, rules),
        *check_function_imports(modules),
        *check_lengths(modules, rules),
    ]
    order = list(RULES)
    return sorted(violations, key=lambda v: (order.index(v.rule), v.path, v.line, v.message))


def format_report(violations: Sequence[Violation], rules: LayoutRules = LayoutRules()) -> str:
    """The violations grouped by rule, with a count per rule and a total."""
    if not violations:
        return "layout: no violations"
    by_rule: dict[str, list[Violation]] = defaultdict(list)
    for violation in violations:
        by_rule[violation.rule].append(violation)
    out = [f"layout: {len(violations)} violation(s)"]
    for rule, description in RULES.items():
        if rule not in by_rule:
            continue
        limits = {"max_module_lines": rules.max_module_lines, "max_function_lines": rules.max_function_lines}
        out.append(f"\n== {rule} ({len(by_rule[rule])}): {description.format(**limits)}")
        out.extend(f"  {violation}" for violation in by_rule[rule])
    counts = ", ".join(f"{rule} {len(by_rule[rule])}" for rule in RULES if rule in by_rule)
    out.append(f"\ncounts: {counts}")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the violations of the tree at --root (default: this checkout); 1 if there is any."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.layout", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="the checkout to check")
    arguments = parser.parse_args(argv)
    violations = check_tree(arguments.root)
    print(format_report(violations))
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
