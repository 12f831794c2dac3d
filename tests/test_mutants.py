"""hack/mutants.py counts a mutant as killed only when a named test fails in its body for the
mutated code: it fails again alone on the mutant and passes alone on the unmutated copy. A hang,
a failing fixture, a test that times out and a test that fails without the mutant are not kills,
and the score counts them against the code."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
MODULE = """def bigger(x):
    return x > 1
"""
TESTS = ["tests/test_a.py"]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mcm_hack_mutants", REPO / "hack" / "mutants.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


mutants = _load()
Script = Callable[[bool, list[str], set[str]], object]


def failed(test: str, when: str = "call", message: str = "AssertionError: assert 2 == 1") -> object:
    return mutants.Failure(test=test, when=when, at=f"{test.partition('::')[0]}:7", message=message)


def run(code: int | None, *failures: object) -> object:
    return mutants.Run(code=code, failures=tuple(failures), last_line="", took=0.1)


class Harness:
    """A repository copy holding one module, and ``run_pytest`` answering from a script that
    sees whether the module is mutated, which tests were asked for and which were left out."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: Script) -> None:
        (tmp_path / "m.py").write_text(MODULE)
        monkeypatch.setattr(mutants, "ROOT", tmp_path)
        monkeypatch.setattr(mutants, "tests_for", lambda path: TESTS)
        self.copy = tmp_path
        self.calls: list[tuple[bool, list[str], set[str]]] = []
        self.settings = mutants.Settings(timeout=300, test_timeout=60)
        (self.mutant,) = [m for m in mutants.find_mutants("m.py") if m.kind == "compare"]

        def fake_run(copy: Path, tests: Iterable[str], settings: object, **kw: object) -> object:
            mutated = (copy / "m.py").read_text() != MODULE
            call = (mutated, list(tests), set(kw.get("deselect", ())))  # type: ignore[call-overload]
            self.calls.append(call)
            return script(*call)

        monkeypatch.setattr(mutants, "run_pytest", fake_run)

    def check(self) -> object:
        outcome = mutants.check(self.mutant, self.copy, self.settings)
        assert (self.copy / "m.py").read_text() == MODULE, "the copy is restored after the mutant"
        return outcome


def test_a_test_failing_on_the_mutant_alone_and_passing_without_it_kills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    test = "tests/test_a.py::test_bigger"

    def script(mutated: bool, tests: list[str], deselect: set[str]) -> object:
        return run(1, failed(test)) if mutated else run(0)

    h = Harness(tmp_path, monkeypatch, script)
    outcome = h.check()
    assert outcome.category == "killed"
    assert outcome.detail == f"{test} at tests/test_a.py:7: AssertionError: assert 2 == 1"
    assert h.calls == [(True, TESTS, set()), (True, [test], set()), (False, [test], set())]


def test_a_failing_fixture_or_collection_is_an_error_not_a_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for when in ("setup", "teardown", "collect"):
        h = Harness(tmp_path, monkeypatch, lambda m, t, d, w=when: run(1, failed("tests/test_a.py::t", w)))
        assert h.check().category == "error"
    h = Harness(tmp_path, monkeypatch, lambda m, t, d: run(4))  # pytest ran nothing
    assert h.check().category == "error"


def test_a_hang_is_a_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(tmp_path, monkeypatch, lambda m, t, d: run(None))
    assert h.check().category == "timeout"


def test_a_test_timeout_is_left_out_and_does_not_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow, other = "tests/test_a.py::test_slow", "tests/test_a.py::test_other"
    timeout = "Failed: Timeout (>60.0s) from pytest-timeout."

    def only_slow(mutated: bool, tests: list[str], deselect: set[str]) -> object:
        return run(0) if slow in deselect else run(1, failed(slow, message=timeout))

    h = Harness(tmp_path, monkeypatch, only_slow)
    assert h.check().category == "timeout"
    assert h.calls[-1] == (True, TESTS, {slow})

    def then_other(mutated: bool, tests: list[str], deselect: set[str]) -> object:
        if not mutated:
            return run(0)
        return (
            run(1, failed(other))
            if slow in deselect or tests == [other]
            else run(1, failed(slow, message=timeout))
        )

    outcome = Harness(tmp_path, monkeypatch, then_other).check()
    assert (outcome.category, outcome.detail.split(" at ")[0]) == ("killed", other)
    in_setup = Harness(tmp_path, monkeypatch, lambda m, t, d: run(1, failed(slow, "setup", timeout)))
    assert in_setup.check().category == "timeout"


def test_a_test_failing_without_the_mutant_is_flaky_and_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flaky, good = "tests/test_a.py::test_flaky", "tests/test_a.py::test_good"

    def script(mutated: bool, tests: list[str], deselect: set[str]) -> object:
        return run(0) if flaky in deselect else run(1, failed(flaky))

    h = Harness(tmp_path, monkeypatch, script)
    outcome = h.check()
    assert outcome.category == "flaky" and flaky in outcome.detail
    assert h.settings.flaky == {flaky}
    assert (False, [flaky], set()) in h.calls

    def kills_after(mutated: bool, tests: list[str], deselect: set[str]) -> object:
        if tests == [flaky]:
            return run(1, failed(flaky))
        if tests == [good]:
            return run(1, failed(good)) if mutated else run(0)
        return run(1, failed(good)) if flaky in deselect else run(1, failed(flaky))

    outcome = Harness(tmp_path, monkeypatch, kills_after).check()
    assert outcome.category == "killed" and outcome.detail.startswith(good)


def test_a_failure_that_does_not_repeat_on_the_mutant_is_not_a_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    once = "tests/test_a.py::test_once"

    def script(mutated: bool, tests: list[str], deselect: set[str]) -> object:
        return run(0) if tests == [once] or once in deselect else run(1, failed(once))

    h = Harness(tmp_path, monkeypatch, script)
    assert h.check().category == "flaky"
    assert h.settings.flaky == set(), "only left out for this mutant"

    always = Harness(tmp_path, monkeypatch, lambda m, t, d: run(1, failed(once)) if t == TESTS else run(0))
    assert always.check().category == "flaky"


def test_a_passing_run_survives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(tmp_path, monkeypatch, lambda m, t, d: run(0))
    assert h.check().category == "survived"
    assert h.calls == [(True, TESTS, set())]


def test_the_score_counts_everything_but_equivalent_mutants_against_the_killed(tmp_path: Path) -> None:
    outcomes = ["killed"] * 6 + [
        "survived",
        "timeout",
        "error",
        "flaky",
        "not run",
        "equivalent",
        "equivalent",
    ]
    base = mutants.Mutant("m.py", 0, "compare", 0, 2, "Gt -> LtE", "return x > 1", "bigger", 1)
    results = [
        (dataclasses.replace(base, occurrence=i + 1), mutants.Outcome(c, "why"))
        for i, c in enumerate(outcomes)
    ]
    args = argparse.Namespace(seed=7, sample=12)
    lines = mutants.report_lines(results, args, 1.0, {}, mutants.Settings(timeout=1, test_timeout=1))
    assert lines[1] == (
        "score: 6/10 killed (60.0%); equivalent, not counted: 2; not run (--stop-after), not counted: 1"
    )
    assert lines[2] == "survived: 1; timeouts (not killed): 1; errors (not killed): 1; flaky (not killed): 1"
    report = tmp_path / "report.txt"
    report.write_text("\n".join(lines) + "\n")
    again = mutants.not_killed(report)
    assert again == {results[i][0].name for i in range(6, 11)}, "a rerun takes all that were not killed"


def test_the_plugin_records_the_phase_the_line_and_a_pytest_timeout(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_p.py").write_text(
        textwrap.dedent(
            """\
            import time
            import pytest

            @pytest.fixture
            def broken():
                raise RuntimeError("fixture")

            def test_body():
                assert 1 + 1 == 3

            def test_fixture(broken):
                pass

            def test_hang():
                time.sleep(30)

            def test_fine():
                pass
            """
        )
    )
    (tmp_path / f"{mutants.PLUGIN_MODULE}.py").write_text(mutants.PLUGIN)
    settings = mutants.Settings(timeout=60, test_timeout=1)
    result = mutants.run_pytest(tmp_path, ["tests/test_p.py"], settings, first_failure_only=False)
    assert result.code == 1
    got = {f.test.split("::")[1]: f for f in result.failures}
    assert sorted(got) == ["test_body", "test_fixture", "test_hang"]
    assert (got["test_body"].when, got["test_body"].at) == ("call", "tests/test_p.py:9")
    assert got["test_fixture"].when == "setup" and not got["test_fixture"].timed_out
    assert got["test_hang"].timed_out and not got["test_body"].timed_out
    assert mutants._judge(result)[0] == "candidate"


def test_mutants_apply_and_skip_logs_and_docstrings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = textwrap.dedent(
        '''\
        """Doc."""
        import logging
        log = logging.getLogger(__name__)
        LIMIT = 3

        def f(a, b):
            """Doc."""
            log.info("x", extra=a > 1)
            if a and not b:
                g(a + 1)
                return min(a, b) == LIMIT
            return True
        '''
    )
    (tmp_path / "m.py").write_text(source)
    monkeypatch.setattr(mutants, "ROOT", tmp_path)
    found = mutants.find_mutants("m.py")
    assert {m.line for m in found} == {9, 10, 11, 12}, "no log call, docstring or module constant"
    kinds = {m.kind for m in found}
    assert kinds == {
        "compare", "drop_operand", "swap_boolop", "drop_not", "flip_bool", "bump_number",
        "swap_minmax", "swap_addsub", "drop_call", "return_none",
    }  # fmt: skip
    for m in found:
        changed = mutants.mutated_source(m)
        compile(changed, "m.py", "exec")
        assert changed != mutants.ast.unparse(mutants.ast.parse(source)), m.name
    assert len({m.name for m in found}) == len(found)


def test_the_runner_refuses_a_copy_that_does_not_import_its_own_mcm(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="not from the copy"):
        mutants._check_imports_from(tmp_path)
    (tmp_path / "mcm").mkdir()
    (tmp_path / "mcm" / "__init__.py").write_text("")
    mutants._check_imports_from(tmp_path)


def test_each_equivalent_mutant_listed_names_exactly_one_mutant_of_the_code() -> None:
    """hack/mutants.toml names an equivalent mutant by file, function, source text, change and
    occurrence: that key must be unique in the scope (else one entry would hide another mutant)
    and every entry must still name a mutant (else the code moved under it)."""
    everything = [m for path in mutants.target_files() for m in mutants.find_mutants(path)]
    keys = [mutants.equivalence_key(m) for m in everything]
    assert len(set(keys)) == len(keys)
    assert len({m.name for m in everything}) == len(everything)
    stale = sorted(set(mutants.load_equivalent()) - set(keys))
    assert stale == []


def test_a_thread_left_running_does_not_hold_the_run(tmp_path: Path) -> None:
    """A mutant that leaves a non-daemon thread spinning: pytest's results stand and the process
    ends when pytest is done, instead of waiting for the thread until the run's timeout."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_t.py").write_text(
        textwrap.dedent(
            """\
            import threading

            def test_leaves_a_thread():
                threading.Thread(target=threading.Event().wait).start()
                assert False, "the drain never parked"
            """
        )
    )
    (tmp_path / f"{mutants.PLUGIN_MODULE}.py").write_text(mutants.PLUGIN)
    result = mutants.run_pytest(tmp_path, ["tests/test_t.py"], mutants.Settings(timeout=60, test_timeout=30))
    assert result.code == 1 and result.took < 30
    assert [(f.when, f.at) for f in result.failures] == [("call", "tests/test_t.py:5")]


def test_a_test_body_that_failed_before_the_run_hung_is_a_candidate_kill() -> None:
    hung_after_failure = run(None, failed("tests/test_a.py::t"))
    assert mutants._judge(hung_after_failure)[0] == "candidate"
    hung = run(None, failed("tests/test_a.py::t", message="Failed: Timeout (>60.0s) from pytest-timeout."))
    assert mutants._judge(hung)[0] == "timeout"
    assert mutants._judge(run(None))[0] == "timeout"
