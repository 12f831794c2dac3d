"""A small mutation tester: one-line logic changes to the controller, drain, client, leader
election and MachineConfigController code, each run against the tests that should notice it.
On demand, not in CI (``hack/mutants.sh``).

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
retry periods, not logic) are never mutated. Every mutant is written into a copy of the
repository (``git ls-files``), imported from there (``PYTHONPATH``) and tested with the target's
test files (``[targets]`` in ``hack/mutants.toml``), stopping at the first failure.

What counts as a kill: a test fails in its body (pytest's ``call`` phase, not a fixture's
set-up or tear-down) for a reason other than pytest-timeout, fails again when run alone on the
mutant, AND passes when run alone on the unmutated copy. The report names that test, the line
of the test where it failed and the message. Everything else has its own category, none of
them killed:

- ``timeout``: the run passed ``--timeout`` before any test body failed (a hang), or a test
  passed ``--test-timeout`` (pytest-timeout); that test is left out and the run tried again, so
  another test may still kill the mutant. (pytest's process ends as soon as its tests are done:
  a thread the mutant left running does not hold the run.)
- ``error``: an import or collection error, a fixture that failed, no test run at all;
- ``flaky``: every failure seen was unconfirmed. A test that also fails alone on the unmutated
  copy is a flaky test: left out from then on (listed in the report). A test that passes alone
  on the mutant is left out for that mutant. Either way the set runs again without it.
- ``survived``: every test that ran passed.

Before the mutants, every test set is run once on the unmutated copy (the baseline); a test that
fails there is left out of its set and listed. Equivalent mutants (a change with no observable
effect) are listed with the reason in ``hack/mutants.toml``: they are reported with that
reason, not run and not counted. The score is killed / (mutants - equivalent): a survivor, a
timeout, an error and a flaky mutant all count against it.

Usage: ``hack/mutants.sh [--sample N] [--seed S] [--jobs J] [--only PATH] [--list] [--rerun REPORT]
[--stop-after SECONDS]``. The sample is tested in a seeded random order, so that with
``--stop-after`` (no mutant starts after that time; those left are reported as not run and not
counted) the mutants tested are a random part of the sample.
The report (``--report``, default ``mutants-report.txt``, not committed) gives the score, every
kill with the test that failed and the line of the test where it failed, and the survivors,
timeouts, errors and flaky mutants with their file, line and change.
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
CONFIG_FILE = ROOT / "hack" / "mutants.toml"
EquivalenceKey = tuple[str, str, str, str, int]
"""File, function, source line (stripped), change, occurrence."""
T = TypeVar("T")
R = TypeVar("R")

# --- what is mutated, and the tests that should notice -----------------------------------------------


@functools.cache
def _load_config(path: Path = CONFIG_FILE) -> tuple[dict[str, list[str]], dict[EquivalenceKey, str]]:
    """``hack/mutants.toml``: each target file (or glob of files, ``__init__.py`` left out; a file
    named on its own wins over a glob) with its test files, and the mutants judged equivalent."""
    config = tomllib.loads(path.read_text())
    table: dict[str, list[str]] = config["targets"]
    targets: dict[str, list[str]] = {}
    for pattern, tests in table.items():
        if "*" not in pattern:
            targets[pattern] = tests
            continue
        for found in sorted(ROOT.glob(pattern)):
            name = str(found.relative_to(ROOT))
            if found.name != "__init__.py" and name not in table:
                targets.setdefault(name, tests)
    equivalent = {
        (e["file"], e["function"], e["line"], e["change"], int(e.get("occurrence", 1))): " ".join(
            e["why"].split()
        )
        for e in config.get("equivalent", [])
    }
    return targets, equivalent


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
    source_line: str
    """The text of ``line``, stripped (what ``hack/mutants.toml`` names it by, with ``function``)."""
    function: str
    """The dotted name of the enclosing function (and classes), "" at module level."""
    occurrence: int
    """1 for the first mutant with this function, source text and change (in source order), 2 for
    the next ...: the equivalence key names one mutant, and names are unique."""

    @property
    def name(self) -> str:
        suffix = f" (#{self.occurrence})" if self.occurrence > 1 else ""
        return f"{self.path}:{self.line} {self.change}{suffix}"


def tests_for(path: str) -> list[str]:
    return _load_config()[0][path]


def target_files() -> list[str]:
    return list(_load_config()[0])


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
    lines = source.splitlines()
    found = []
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in docstrings or id(node) in constants or _skipped(node, parents):
            continue
        line = getattr(node, "lineno", 0)
        for kind, detail, change in _sites(node, parents):
            text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
            where = _enclosing_function(node, parents)
            found.append((index, kind, detail, line, getattr(node, "col_offset", 0), change, text, where))
    # occurrence: the same change of the same source text in the same function, in source order
    # (so that file, function, text, change and occurrence name one mutant)
    occurrence: dict[tuple[int, int], int] = {}
    seen: Counter[tuple[str, str, str]] = Counter()
    for index, _, detail, _line, _column, change, text, where in sorted(
        found, key=lambda f: (f[3], f[4], f[0], f[2])
    ):
        seen[where, text, change] += 1
        occurrence[index, detail] = seen[where, text, change]
    return [
        Mutant(path, index, kind, detail, line, change, text, where, occurrence[index, detail])
        for index, kind, detail, line, _, change, text, where in found
    ]


def _enclosing_function(node: ast.AST, parents: dict[int, ast.AST]) -> str:
    """The dotted name of the function (and classes) around ``node``, "" at module level."""
    names = []
    current = parents.get(id(node))
    while current is not None:
        if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(current.name)
        current = parents.get(id(current))
    return ".".join(reversed(names))


def equivalence_key(mutant: Mutant) -> EquivalenceKey:
    """What ``hack/mutants.toml`` names a mutant by: file, function, source line (stripped),
    change and occurrence (so a listed mutant stays listed when lines above it move)."""
    return mutant.path, mutant.function, mutant.source_line, mutant.change, mutant.occurrence


def load_equivalent() -> dict[EquivalenceKey, str]:
    """The mutants judged equivalent, and why."""
    return _load_config()[1]


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

PLUGIN = '''"""Written by hack/mutants.py into its repository copies: one JSON line per failed report;
the process ends as soon as pytest is done (a thread a mutant left running cannot hold it)."""
import json
import os
import sys

import pytest

_EXIT = {}


def _write(entry):
    with open(os.environ["MCM_MUTANTS_FAILURES"], "a", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\\n")


def _test_line(longrepr):
    """path:line of the last traceback entry in tests/ (where the test's check failed)."""
    found = ""
    for entry in getattr(getattr(longrepr, "reprtraceback", None), "reprentries", None) or []:
        where = getattr(entry, "reprfileloc", None)
        if where is not None and where.path.replace(os.sep, "/").startswith("tests/"):
            found = f"{where.path}:{where.lineno}"
    return found


def pytest_runtest_logreport(report):
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if crash is not None else str(report.longrepr)
        _write({"test": report.nodeid, "when": report.when, "at": _test_line(report.longrepr),
                "message": message.strip().splitlines()[0][:160] if message.strip() else ""})


def pytest_collectreport(report):
    if report.failed:
        _write({"test": report.nodeid, "when": "collect", "at": "",
                "message": str(report.longrepr).strip().splitlines()[-1][:160]})


def pytest_sessionfinish(session, exitstatus):
    _EXIT["code"] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    if "code" in _EXIT:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT["code"])
'''
PLUGIN_MODULE = "mcm_mutants_plugin"
PYTEST_OPTIONS = ("-q", "--tb=short", "-p", "no:cacheprovider", "-p", PLUGIN_MODULE)


@dataclass(frozen=True)
class Failure:
    test: str
    when: str
    at: str
    message: str

    @property
    def timed_out(self) -> bool:
        return "from pytest-timeout" in self.message or self.message.startswith("Failed: Timeout")


@dataclass(frozen=True)
class Run:
    """One pytest run: its exit code (``None`` when it passed ``--timeout``) and failures."""

    code: int | None
    failures: tuple[Failure, ...]
    last_line: str
    took: float


@dataclass
class Outcome:
    category: str
    """``killed``, ``survived``, ``timeout``, ``error``, ``flaky``, ``equivalent`` or ``not run``."""
    detail: str = ""


@dataclass
class Settings:
    timeout: float
    test_timeout: float
    left_out: dict[tuple[str, ...], set[str]] = field(default_factory=dict)
    """Per test set: the tests that failed on the unmutated copy (baseline)."""
    flaky: set[str] = field(default_factory=set)
    """Tests that failed on a mutant and again on the unmutated copy."""
    lock: threading.Lock = field(default_factory=threading.Lock)


def make_copy() -> Path:
    """A copy of the tracked files (plus the working tree's versions) to mutate in."""
    target = Path(tempfile.mkdtemp(prefix="mcm-mutants-"))
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True)
    for name in filter(None, listed.stdout.split(b"\0")):
        source = ROOT / name.decode()
        if source.is_file():
            dest = target / name.decode()
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest)
    (target / f"{PLUGIN_MODULE}.py").write_text(PLUGIN)
    _check_imports_from(target)
    return target


def _check_imports_from(copy: Path) -> None:
    """Stop unless ``mcm`` imports from ``copy`` there (not from an installed or editable copy:
    then no mutant would be tested)."""
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    found = subprocess.run(
        [sys.executable, "-c", "import mcm; print(mcm.__file__)"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if not Path(found).resolve().is_relative_to(copy.resolve()):
        raise SystemExit(f"mcm imports from {found or 'nowhere'}, not from the copy {copy}")


def run_pytest(
    copy: Path,
    tests: Iterable[str],
    settings: Settings,
    *,
    deselect: Iterable[str] = (),
    first_failure_only: bool = True,
) -> Run:
    """pytest on ``tests`` in ``copy``; its own process group, killed whole on ``--timeout``."""
    failures_file = copy / ".mutants-failures.jsonl"
    failures_file.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    env["MCM_MUTANTS_FAILURES"] = str(failures_file)
    command = [
        sys.executable,
        "-m",
        "pytest",
        *PYTEST_OPTIONS,
        f"--timeout={settings.test_timeout:.0f}",
        *tests,
    ]
    command += [f"--deselect={test}" for test in sorted(deselect)]
    if first_failure_only:
        command.append("-x")
    started = time.monotonic()
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(
            command, cwd=copy, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code: int | None = process.wait(timeout=settings.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
        output.seek(0)
        lines = [line.strip() for line in output.read().decode(errors="replace").splitlines() if line.strip()]
    failures = (
        tuple(Failure(**json.loads(line)) for line in failures_file.read_text().splitlines())
        if failures_file.exists()
        else ()
    )
    return Run(code, failures, lines[-1] if lines else "no output", time.monotonic() - started)


def baseline(copy: Path, tests: tuple[str, ...], settings: Settings) -> tuple[float, list[Failure]]:
    """Run a test set on the unmutated copy: its duration and the tests that fail there (left
    out of the set from then on). A collection error or a timeout stops the whole run."""
    run = run_pytest(copy, tests, settings, first_failure_only=False)
    if run.code is None or any(f.when == "collect" for f in run.failures) or run.code not in (0, 1):
        raise SystemExit(f"the unmutated tests {' '.join(tests)} do not run: {run.last_line}")
    failing = [f for f in run.failures if f.when != "collect"]
    with settings.lock:
        settings.left_out[tests] = {f.test for f in failing}
    return run.took, failing


def _judge(run: Run) -> tuple[str, Failure | None]:
    """What a run on a mutant says before the failure is confirmed: ``candidate`` (a test body
    failed, even if the run then hung), ``survived``, ``timeout`` (the whole run, no test body
    failed), ``test_timeout`` (pytest-timeout stopped a test, in whatever phase) or ``error``
    (anything else: collection, a fixture, no report)."""
    if run.code is None and not any(f.when == "call" and not f.timed_out for f in run.failures):
        return "timeout", None
    if run.code == 0:
        return "survived", None
    if run.failures and run.failures[0].timed_out:
        return "test_timeout", run.failures[0]
    in_body = [f for f in run.failures if f.when == "call"]
    if not in_body:
        return "error", run.failures[0] if run.failures else None
    return ("test_timeout" if in_body[0].timed_out else "candidate"), in_body[0]


ATTEMPTS = 6
"""Runs of one mutant's test set at most (each left-out test costs one)."""


def check(mutant: Mutant, copy: Path, settings: Settings) -> Outcome:
    """Run the mutant's tests and confirm the first test that fails in its body: it must fail
    again when run alone on the mutant and pass alone on the unmutated copy (then the mutant is
    killed, by that test). A test that fails alone on the unmutated copy too is flaky: left out
    from then on, everywhere. A test that passes alone on the mutant (a failure that does not
    repeat) and a test that passed ``--test-timeout`` are left out for this mutant. After each
    left-out test the set runs again: a mutant whose only failures were not confirmed is
    ``flaky``, one on which a test timed out (and none killed) is a ``timeout``."""
    target = copy / mutant.path
    original = target.read_text()
    mutated = mutated_source(mutant, original)
    tests = tuple(tests_for(mutant.path))
    timed_out: list[str] = []
    unconfirmed: list[str] = []

    def run_mutated(selected: Iterable[str], deselect: Iterable[str] = ()) -> Run:
        target.write_text(mutated)
        try:
            return run_pytest(copy, selected, settings, deselect=deselect)
        finally:
            target.write_text(original)

    for _ in range(ATTEMPTS):
        with settings.lock:
            deselect = settings.left_out.get(tests, set()) | settings.flaky
        run = run_mutated(tests, deselect | set(timed_out) | set(unconfirmed))
        verdict, failure = _judge(run)
        if verdict == "timeout":
            return Outcome("timeout", f"no result within {settings.timeout:.0f}s")
        if verdict == "error":
            where = f"{failure.test} ({failure.when}): {failure.message}" if failure else run.last_line
            return Outcome("error", where)
        if verdict == "survived":
            break
        assert failure is not None
        if verdict == "test_timeout":
            timed_out.append(failure.test)
            continue
        if _judge(run_mutated([failure.test]))[0] != "candidate":
            unconfirmed.append(failure.test)  # does not fail again on the mutant alone
            continue
        if run_pytest(copy, [failure.test], settings).code == 0:
            return Outcome("killed", f"{failure.test} at {failure.at or '?'}: {failure.message}")
        unconfirmed.append(failure.test)  # fails on the unmutated copy too
        with settings.lock:
            settings.flaky.add(failure.test)
    else:
        if not timed_out:
            return Outcome("flaky", f"no confirmed failure after {ATTEMPTS} runs: {', '.join(unconfirmed)}")
    if timed_out:
        return Outcome("timeout", f"{', '.join(timed_out)} passed --test-timeout")
    if unconfirmed:
        return Outcome("flaky", f"the rest passed without the unconfirmed {', '.join(unconfirmed)}")
    return Outcome("survived")


# --- the run and its report ------------------------------------------------------------------------


class Copies:
    """One repository copy per job; :meth:`map` runs ``work(copy, item)`` in a free one."""

    def __init__(self, jobs: int) -> None:
        self.copies = [make_copy() for _ in range(jobs)]
        self.free: queue.SimpleQueue[Path] = queue.SimpleQueue()
        for copy in self.copies:
            self.free.put(copy)

    def map(self, work: Callable[[Path, T], R], items: Iterable[T]) -> Iterator[R]:
        def in_a_free_copy(item: T) -> R:
            copy = self.free.get()
            try:
                return work(copy, item)
            finally:
                self.free.put(copy)

        with ThreadPoolExecutor(len(self.copies)) as pool:
            yield from pool.map(in_a_free_copy, items)

    def remove(self) -> None:
        for copy in self.copies:
            shutil.rmtree(copy, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    mutants = select_mutants(args)
    if args.list:
        print("\n".join([*(m.name for m in mutants), f"{len(mutants)} mutants"]))
        return 0
    equivalent = {m: load_equivalent().get(equivalence_key(m)) for m in mutants}
    to_test = [m for m in mutants if equivalent[m] is None]
    # tested in a seeded random order: the first results of a run cut short are a random part
    # of the sample, not the first files in it (the report is sorted again)
    random.Random(f"order-{args.seed}").shuffle(to_test)
    for mutant in to_test:
        mutated_source(mutant)  # every mutant applies and unparses before any test runs
    settings = Settings(args.timeout, args.test_timeout)
    started = time.monotonic()
    code_at = _code_at()  # what the copies hold, taken before they are made
    copies = Copies(max(1, min(args.jobs, 2)))
    try:
        sets = sorted({tuple(tests_for(m.path)) for m in to_test})
        baselines = dict(
            zip(sets, copies.map(lambda copy, tests: baseline(copy, tests, settings), sets), strict=True)
        )
        for tests, (took, failing) in baselines.items():
            print(f"baseline {took:4.0f}s, {len(failing)} failing: {' '.join(tests)}", flush=True)
        results: list[tuple[Mutant, Outcome]] = []
        stop_at = started + args.stop_after if args.stop_after else float("inf")

        def check_in_time(copy: Path, mutant: Mutant) -> Outcome:
            if time.monotonic() > stop_at:
                return Outcome("not run", f"--stop-after {args.stop_after:.0f}s had passed")
            return check(mutant, copy, settings)

        for mutant, outcome in zip(to_test, copies.map(check_in_time, to_test), strict=True):
            results.append((mutant, outcome))
            detail = f"  {outcome.detail}" if outcome.detail else ""
            print(f"[{len(results)}/{len(to_test)}] {outcome.category:9} {mutant.name}{detail}", flush=True)
    finally:
        copies.remove()
    results += [(m, Outcome("equivalent", why)) for m, why in equivalent.items() if why is not None]
    results.sort(key=lambda item: (item[0].path, item[0].index, item[0].detail))
    lines = report_lines(results, args, time.monotonic() - started, baselines, settings, code_at=code_at)
    Path(args.report).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    counted = [o for _, o in results if o.category not in ("equivalent", "not run")]
    return 0 if sum(o.category == "killed" for o in counted) >= 0.9 * len(counted) else 1


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sample", type=int, default=0, help="test this many mutants (0: all)")
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (at most 2)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per pytest run (a hang)")
    parser.add_argument("--test-timeout", type=float, default=60.0, help="seconds per test (pytest-timeout)")
    parser.add_argument("--only", action="append", default=[], help="mutate only this file (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--rerun", metavar="REPORT", help="test again what a report did not count as killed")
    parser.add_argument("--report", default="mutants-report.txt")
    parser.add_argument(
        "--stop-after",
        type=float,
        default=0.0,
        help="seconds after which no further mutant starts (0: no limit); those left are 'not run'",
    )
    return parser.parse_args(argv)


def select_mutants(args: argparse.Namespace) -> list[Mutant]:
    """The mutants of ``--only`` (or every target file): those a report did not count as killed
    with ``--rerun``, else a seeded ``--sample`` of them, else all."""
    files = args.only or target_files()
    mutants = [m for path in files for m in find_mutants(path)]
    if args.rerun:
        wanted = not_killed(Path(args.rerun))
        return [m for m in mutants if m.name in wanted]
    if args.sample and args.sample < len(mutants):
        picked = random.Random(args.seed).sample(mutants, args.sample)
        return sorted(picked, key=lambda m: (m.path, m.index, m.detail))
    return mutants


RERUN_SECTIONS = ("survivors:", "timeouts:", "errors:", "flaky mutants:", "not run:")


def not_killed(report: Path) -> set[str]:
    """The names a report lists under survivors, timeouts and errors."""
    names: set[str] = set()
    section = ""
    for line in report.read_text().splitlines():
        if not line.startswith(" "):
            section = line
        elif section in RERUN_SECTIONS and line.startswith("  "):
            names.add(line.strip().split("  ->", 1)[0])
    return names


def report_lines(
    results: list[tuple[Mutant, Outcome]],
    args: argparse.Namespace,
    took: float,
    baselines: dict[tuple[str, ...], tuple[float, list[Failure]]],
    settings: Settings,
    *,
    code_at: str = "",
) -> list[str]:
    by_category: dict[str, list[tuple[Mutant, Outcome]]] = {}
    for mutant, outcome in results:
        by_category.setdefault(outcome.category, []).append((mutant, outcome))
    count = Counter({category: len(items) for category, items in by_category.items()})
    counted = len(results) - count["equivalent"] - count["not run"]
    lines = [
        f"mutants: {len(results)} (seed {args.seed}, sample {args.sample or 'all'}, code at "
        f"{code_at or _code_at()}), took {took:.0f}s",
        f"score: {count['killed']}/{counted} killed ({100.0 * count['killed'] / max(1, counted):.1f}%); "
        f"equivalent, not counted: {count['equivalent']}"
        + (f"; not run (--stop-after), not counted: {count['not run']}" if count["not run"] else ""),
        f"survived: {count['survived']}; timeouts (not killed): {count['timeout']}; "
        f"errors (not killed): {count['error']}; flaky (not killed): {count['flaky']}",
        "baseline (each test set on the unmutated code; tests failing there are left out):",
        *(
            f"  {took_s:.0f}s {' '.join(tests)}"
            + (f"; left out: {', '.join(f.test for f in failing)}" if failing else "")
            for tests, (took_s, failing) in sorted(baselines.items())
        ),
        "flaky tests (failed on a mutant and again alone on the unmutated code; left out afterwards):",
        *(f"  {test}" for test in sorted(settings.flaky)),
        "killed (the test that failed, where in the test, and how):",
        *(f"- {m.name}: {o.detail}" for m, o in by_category.get("killed", [])),
    ]
    for category, header in (
        ("equivalent", "equivalent:"),
        ("timeout", "timeouts:"),
        ("error", "errors:"),
        ("flaky", "flaky mutants:"),
        ("not run", "not run:"),
    ):
        lines += [header, *(f"  {m.name}  -> {o.detail}" for m, o in by_category.get(category, []))]
    lines += ["survivors:", *(f"  {m.name}" for m, _ in by_category.get("survived", []))]
    return lines


def _code_at() -> str:
    """HEAD's short hash, and whether the tracked files differ from it."""
    head, dirty = _git("rev-parse", "--short", "HEAD"), _git("status", "--porcelain", "--untracked-files=no")
    return f"{head}{' with uncommitted changes' if dirty else ''}"


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], check=False, cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main())
