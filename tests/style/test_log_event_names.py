"""One log style: every structlog event name in the shipped code is a snake_case literal.

The scan reads the source (no import): a call ``<logger>.<level>(first, ...)`` on a name ending in
``log`` or ``logger`` must pass a ``snake_case`` string literal as the event. The only other form
allowed is a parameter named ``event`` (a helper whose callers pass the literal). Anything
else (prose, an f-string, a message constant) fails with its file and line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("mcm", "examples", "cmd")
LEVELS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "msg"})
SNAKE_CASE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*\Z")
LOGGER = re.compile(r"(?:^|[._])log(?:ger)?\Z")


def _sources() -> list[Path]:
    files = [path for root in SCANNED if (REPO / root).is_dir() for path in (REPO / root).rglob("*.py")]
    return sorted(path for path in files if "proto" not in path.parts)


def offenders(source: str, where: str) -> list[str]:
    """``file:line: event`` for every log call in ``source`` whose event name breaks the style."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
            continue
        if node.func.attr not in LEVELS or not LOGGER.search(ast.unparse(node.func.value)):
            continue
        event = node.args[0]
        if isinstance(event, ast.Constant) and isinstance(event.value, str) and SNAKE_CASE.match(event.value):
            continue
        if isinstance(event, ast.Name) and event.id == "event":
            continue
        found.append(f"{where}:{node.lineno}: {ast.unparse(event)}")
    return found


def test_every_log_event_name_is_a_snake_case_literal() -> None:
    sources = _sources()
    assert len(sources) > 100  # the scan really reads the package
    bad = [line for path in sources for line in offenders(path.read_text(), str(path.relative_to(REPO)))]
    assert bad == [], "log event names must be snake_case literals:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "call",
    [
        'log.info("Machine drain started", node=n)',
        'self.log.warning(f"--{what}-kubeconfig not set")',
        "logger.error(DETACH_TIMEOUT_TEXT)",
        'log.debug("drain started")',
    ],
)
def test_the_scan_catches_prose_fstrings_and_constants(call: str) -> None:
    assert offenders(call, "x.py") == [f"x.py:1: {ast.unparse(ast.parse(call).body[0].value.args[0])}"]  # type: ignore[attr-defined]


def test_the_scan_accepts_snake_case_and_an_event_parameter() -> None:
    source = 'log.info("drain_started", node=n)\nlog.error(event)\nlogging.info("Prose is not structlog")\n'
    assert offenders(source, "x.py") == []
