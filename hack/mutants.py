"""A small mutation tester: one-line changes to the creation, deletion, health and drain logic,
each run against the tests that should notice it. On demand, not in CI (``hack/mutants.sh``).

Why not mutmut: it mutates every string and log message (hundreds of survivors nobody can
judge one by one) and runs the suite in-process, where this project's threads and emulators
get in the way. This runner makes only changes of logic, each a single AST node:

- a comparison turned into its opposite (``==``/``!=``, ``<``/``>=``, ``in``/``not in``, ...);
- one operand dropped from an ``and``/``or`` (the ``and not provider_id`` kind), or the
  operator swapped;
- a ``not`` removed; ``True``/``False`` swapped; a number changed by one;
- ``min``/``max`` swapped; ``+``/``-`` swapped on numbers;
- a call statement removed (a write, a cordon, an enqueue ...);
- a ``return <value>`` turned into ``return None``.

Log calls, docstrings, strings, annotations and module-level constants (tuning values such as
retry periods, not logic) are never mutated. Every mutant is written into a
copy of the repository (``git ls-files``), imported from there (``PYTHONPATH``) and tested with
the target's test files (``TESTS``); a survivor is tried once more against the whole of
``tests/controller`` and ``tests/drain``. A mutant that hangs past ``--timeout`` counts as killed.

Usage: ``hack/mutants.sh [--sample N] [--seed S] [--jobs J] [--only PATH] [--list] [--rerun REPORT]``.
The report (``--report``, default ``mutants-report.txt``) lists killed/total, the test that
killed each mutant (a kill by a test with nothing to do with the change points at a flaky test),
and every survivor with its file, line and change.
"""

from __future__ import annotations

import argparse
import ast
import os
import queue
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CONTROLLER_TESTS = [
    "tests/controller/test_fault_tolerance.py",
    "tests/controller/test_events_and_conflicts.py",
]
TARGETS: dict[str, list[str]] = {
    "mcm/controller/creation.py": [
        "tests/controller/test_creation_table.py",
        "tests/controller/test_driver_calls_and_metrics.py",
        *CONTROLLER_TESTS,
    ],
    "mcm/controller/deletion.py": ["tests/controller/test_deletion_table.py", *CONTROLLER_TESTS],
    "mcm/controller/nodedrain.py": [
        "tests/controller/test_deletion_table.py",
        "tests/controller/test_conflict_retries.py",
        *CONTROLLER_TESTS,
    ],
    "mcm/controller/steps.py": ["tests/controller/test_deletion_table.py", *CONTROLLER_TESTS],
    "mcm/controller/health.py": [
        "tests/controller/test_health_table.py",
        "tests/controller/test_sync_tables.py",
        *CONTROLLER_TESTS,
    ],
}
DRAIN_TESTS = ["tests/drain"]
BROAD_TESTS = ["tests/controller", "tests/drain"]

_NEGATED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_LOGGERS = frozenset({"log", "logger", "logging", "structlog"})


@dataclass(frozen=True)
class Mutant:
    path: str
    index: int
    """Position of the node in ``ast.walk`` order (stable for an unchanged file)."""
    kind: str
    detail: int
    """Which variant of ``kind`` (e.g. which operand of a BoolOp is dropped)."""
    line: int
    change: str

    @property
    def name(self) -> str:
        return f"{self.path}:{self.line} {self.change}"


def tests_for(path: str) -> list[str]:
    return TARGETS.get(path, DRAIN_TESTS)


def target_files() -> list[str]:
    drain = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "mcm" / "drain").glob("*.py"))
    return [*TARGETS, *(p for p in drain if not p.endswith("__init__.py"))]


# --- finding sites ------------------------------------------------------------------------------


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


def _is_log_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    while isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Name) and func.value.id in _LOGGERS:
            return True
        func = func.value
    return False


def _skipped(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """Inside a log call, an annotation, a docstring-like string, or ``__all__``."""
    if isinstance(node, ast.Expr) and _is_log_call(node.value):
        return True
    current: ast.AST | None = node
    while current is not None:
        parent = parents.get(id(current))
        if _is_log_call(current):
            return True
        if isinstance(parent, ast.AnnAssign) and current is parent.annotation:
            return True
        if isinstance(parent, ast.arg) and current is parent.annotation:
            return True
        if isinstance(parent, ast.FunctionDef) and current is parent.returns:
            return True
        if isinstance(current, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in current.targets
        ):
            return True
        current = parent
    return False


def _numeric(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _sites(node: ast.AST, parents: dict[int, ast.AST]) -> Iterator[tuple[str, int, str]]:
    """``(kind, detail, change)`` for every mutation of ``node``."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _NEGATED:
        yield "compare", 0, f"{type(node.ops[0]).__name__} -> {_NEGATED[type(node.ops[0])].__name__}"
    elif isinstance(node, ast.BoolOp):
        op = "and" if isinstance(node.op, ast.And) else "or"
        for i, value in enumerate(node.values):
            yield "drop_operand", i, f"drop operand {i + 1} of '{op}': {ast.unparse(value)[:50]}"
        yield "swap_boolop", 0, f"'{op}' -> '{'or' if op == 'and' else 'and'}'"
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "drop_not", 0, f"remove 'not' before {ast.unparse(node.operand)[:50]}"
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield "flip_bool", 0, f"{node.value} -> {not node.value}"
    elif _numeric(node) and not isinstance(parents.get(id(node)), ast.UnaryOp):
        yield "bump_number", 0, f"{node.value!r} -> {node.value + 1!r}"  # type: ignore[attr-defined]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
        yield "swap_minmax", 0, f"{node.func.id} -> {'max' if node.func.id == 'min' else 'min'}"
    elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        if not any(
            isinstance(side, (ast.JoinedStr, ast.Constant)) and not _numeric(side)
            for side in (node.left, node.right)
        ):
            yield "swap_addsub", 0, "'+' -> '-'" if isinstance(node.op, ast.Add) else "'-' -> '+'"
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        yield "drop_call", 0, f"remove call {ast.unparse(node.value)[:60]}"
    elif (
        isinstance(node, ast.Return)
        and node.value is not None
        and not (isinstance(node.value, ast.Constant) and node.value.value is None)
    ):
        yield "return_none", 0, f"return {ast.unparse(node.value)[:50]} -> return None"


def find_mutants(path: str) -> list[Mutant]:
    source = (ROOT / path).read_text()
    tree = ast.parse(source)
    parents = _parents(tree)
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    constants = {
        id(sub)
        for statement in tree.body
        if isinstance(statement, (ast.Assign, ast.AnnAssign))
        for sub in ast.walk(statement)
    }
    mutants = []
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in docstrings or id(node) in constants or _skipped(node, parents):
            continue
        for kind, detail, change in _sites(node, parents):
            mutants.append(Mutant(path, index, kind, detail, getattr(node, "lineno", 0), change))
    return mutants


# --- applying one ---------------------------------------------------------------------------------


class _Apply(ast.NodeTransformer):
    def __init__(self, mutant: Mutant, order: dict[int, int]) -> None:
        self.mutant = mutant
        self.order = order
        self.applied = False

    def visit(self, node: ast.AST) -> ast.AST | None:
        if self.order.get(id(node)) == self.mutant.index:
            self.applied = True
            return _mutate(node, self.mutant)
        visited: ast.AST | None = super().visit(node)
        return visited


def _mutate(node: ast.AST, mutant: Mutant) -> ast.AST | None:
    kind = mutant.kind
    if kind == "compare" and isinstance(node, ast.Compare):
        node.ops = [_NEGATED[type(node.ops[0])]()]
        return node
    if kind == "drop_operand" and isinstance(node, ast.BoolOp):
        values = [v for i, v in enumerate(node.values) if i != mutant.detail]
        return values[0] if len(values) == 1 else ast.BoolOp(op=node.op, values=values)
    if kind == "swap_boolop" and isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return node
    if kind == "drop_not" and isinstance(node, ast.UnaryOp):
        return node.operand
    if kind == "flip_bool" and isinstance(node, ast.Constant):
        return ast.Constant(not node.value)
    if kind == "bump_number" and isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return ast.Constant(value + 1)
    if kind == "swap_minmax" and isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        node.func = ast.Name(id="max" if node.func.id == "min" else "min", ctx=ast.Load())
        return node
    if kind == "swap_addsub" and isinstance(node, ast.BinOp):
        node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
        return node
    if kind == "drop_call":
        return ast.Pass()
    if kind == "return_none" and isinstance(node, ast.Return):
        return ast.Return(value=ast.Constant(None))
    raise ValueError(f"cannot apply {mutant}")


def mutated_source(mutant: Mutant, source: str | None = None) -> str:
    """The file with the mutation applied (``source``: the file's text, else read from the repo)."""
    tree = ast.parse((ROOT / mutant.path).read_text() if source is None else source)
    order = {id(node): i for i, node in enumerate(ast.walk(tree))}
    applier = _Apply(mutant, order)
    mutated = applier.visit(tree)
    if not applier.applied or mutated is None:
        raise ValueError(f"mutant not applied: {mutant.name}")
    return ast.unparse(ast.fix_missing_locations(mutated))


# --- running ---------------------------------------------------------------------------------------


def make_copy() -> Path:
    """A copy of the tracked files (plus the working tree's versions) to mutate in."""
    target = Path(tempfile.mkdtemp(prefix="mcm-mutants-"))
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout.split(
        b"\0"
    )
    for name in filter(None, files):
        source = ROOT / name.decode()
        if source.is_file():
            dest = target / name.decode()
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest)
    return target


def run_tests(copy: Path, tests: list[str], timeout: float) -> tuple[str, str]:
    """``killed``, ``survived`` or ``timeout``, and for a kill the first test pytest reports as
    failed (or the last line of its output), so a kill by a test that flakes shows as such."""
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    try:
        done = subprocess.run(command, cwd=copy, env=env, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return "timeout", f"no result within {timeout:.0f}s"
    if done.returncode == 0:
        return "survived", ""
    return "killed", first_failure(done.stdout.decode(errors="replace"))


def first_failure(output: str) -> str:
    """The test id of pytest's first ``FAILED``/``ERROR`` summary line, else its last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" ", 1)[1].split(" - ", 1)[0]
    return lines[-1] if lines else "no output"


def check(mutant: Mutant, copy: Path, timeout: float) -> tuple[Mutant, str, str]:
    """Run the mutant's own tests, then (if it survived them) the broad set; the outcome and
    what killed it."""
    target = copy / mutant.path
    original = target.read_text()
    target.write_text(mutated_source(mutant, original))
    try:
        outcome, by = run_tests(copy, tests_for(mutant.path), timeout)
        if outcome == "survived":
            outcome, by = run_tests(copy, BROAD_TESTS, timeout * 4)
            by = f"{by} (broad run)" if by else by
    finally:
        target.write_text(original)
    return mutant, outcome, by


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sample", type=int, default=0, help="test this many mutants (0: all)")
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (one repo copy each)")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per test run")
    parser.add_argument("--only", action="append", default=[], help="mutate only this file (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--rerun", metavar="REPORT", help="test again only the survivors a report lists")
    parser.add_argument("--report", default="mutants-report.txt")
    args = parser.parse_args(argv)

    mutants = select_mutants(args)
    if args.list:
        for mutant in mutants:
            print(mutant.name)
        print(f"{len(mutants)} mutants")
        return 0
    for mutant in mutants:
        mutated_source(mutant)  # every mutant applies and unparses before any test runs
    copies = [make_copy() for _ in range(max(1, args.jobs))]
    free: queue.SimpleQueue[Path] = queue.SimpleQueue()
    for copy in copies:
        free.put(copy)

    def check_in_a_free_copy(mutant: Mutant) -> tuple[Mutant, str, str]:
        copy = free.get()
        try:
            return check(mutant, copy, args.timeout)
        finally:
            free.put(copy)

    started = time.monotonic()
    results: list[tuple[Mutant, str, str]] = []
    try:
        with ThreadPoolExecutor(len(copies)) as pool:
            for mutant, outcome, by in pool.map(check_in_a_free_copy, mutants):
                results.append((mutant, outcome, by))
                detail = f"  by {by}" if by else ""
                print(f"[{len(results)}/{len(mutants)}] {outcome:8} {mutant.name}{detail}", flush=True)
    finally:
        for copy in copies:
            shutil.rmtree(copy, ignore_errors=True)
    return _report(results, args, time.monotonic() - started)


def select_mutants(args: argparse.Namespace) -> list[Mutant]:
    """The mutants of ``--only`` (or every target file): a report's survivors with ``--rerun``,
    else a seeded ``--sample`` of them, else all."""
    files = args.only or target_files()
    mutants = [m for path in files for m in find_mutants(path)]
    if args.rerun:
        wanted = _survivors(Path(args.rerun))
        return [m for m in mutants if m.name in wanted]
    if args.sample and args.sample < len(mutants):
        picked = random.Random(args.seed).sample(mutants, args.sample)
        return sorted(picked, key=lambda m: (m.path, m.index))
    return mutants


def _survivors(report: Path) -> set[str]:
    lines = report.read_text().splitlines()
    start = lines.index("survivors:") + 1 if "survivors:" in lines else len(lines)
    return {line.strip() for line in lines[start:] if line.startswith("  ")}


def _report(results: list[tuple[Mutant, str, str]], args: argparse.Namespace, took: float) -> int:
    killed = sum(outcome != "survived" for _, outcome, _ in results)
    survivors = [m for m, outcome, _ in results if outcome == "survived"]
    lines = [
        f"mutants: {len(results)} (seed {args.seed}, sample {args.sample or 'all'}), took {took:.0f}s",
        f"killed: {killed}/{len(results)} ({100.0 * killed / max(1, len(results)):.1f}%)",
        f"timeouts (counted as killed): {sum(o == 'timeout' for _, o, _ in results)}",
        "killed by:",
        *(f"- {m.name}: {by}" for m, outcome, by in results if outcome != "survived"),
        "survivors:",
        *(f"  {m.name}" for m in survivors),
    ]
    Path(args.report).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if killed >= 0.9 * len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
