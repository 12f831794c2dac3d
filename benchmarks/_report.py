"""The table every benchmark prints: each figure beside its yardstick and its target.

A *figure* is what the benchmark measures; its *yardstick* is a comparable measurement taken in
the same run on the same machine (stdlib ``queue.Queue``, a stdlib HTTP server, a plain
``json.loads``, ...), so the ratio between them means something on any machine. A *target* is the
project's performance goal (docs/performance.md), on the figure itself or on the ratio, and the
table says whether it is met.

Usage::

    report = Report("workqueue benchmark", full_size=not args.smoke)
    stdlib = report.yardstick("stdlib queue.Queue put+get", 0.21, "µs/op")
    report.figure("Queue add+get+done", 0.11, "µs/op", yardstick=stdlib, target=ratio_at_most(0.6))
    report.figure("add_rate_limited+forget", 2.9, "µs/op", yardstick=stdlib, target=at_most(3.5))
    report.print()          # markdown table; returns the number of unmet targets

Targets marked ``sized=True`` are stated for the full sizes; in a smaller run (``--smoke``) the
table shows them as not judged instead of claiming they are met.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "Report",
    "Target",
    "Yardstick",
    "at_least",
    "at_most",
    "equals",
    "fmt",
    "ratio_at_least",
    "ratio_at_most",
]


@dataclass(frozen=True)
class Yardstick:
    """A reference measurement of the same run."""

    name: str
    value: float
    unit: str


@dataclass(frozen=True)
class Target:
    """``op`` is ``<=``, ``>=`` or ``==``; ``on_ratio`` compares figure / yardstick instead."""

    op: str
    bound: float
    unit: str = ""
    on_ratio: bool = False
    sized: bool = False

    def met(self, value: float, ratio: float | None) -> bool | None:
        """Whether the target holds; None when it cannot be judged (no ratio)."""
        subject = ratio if self.on_ratio else value
        if subject is None or math.isnan(subject):
            return None
        if self.op == "<=":
            return subject <= self.bound
        if self.op == ">=":
            return subject >= self.bound
        return subject == self.bound

    def __str__(self) -> str:
        suffix = "x yardstick" if self.on_ratio else (f" {self.unit}" if self.unit else "")
        text = f"{self.op} {fmt(self.bound)}{suffix}"
        return f"{text} (full size)" if self.sized else text


def at_most(bound: float, unit: str = "", *, sized: bool = False) -> Target:
    """The figure must be at most ``bound``."""
    return Target("<=", bound, unit, sized=sized)


def at_least(bound: float, unit: str = "", *, sized: bool = False) -> Target:
    """The figure must be at least ``bound``."""
    return Target(">=", bound, unit, sized=sized)


def equals(bound: float, unit: str = "") -> Target:
    """The figure must equal ``bound`` (counts, booleans as 0/1)."""
    return Target("==", bound, unit)


def ratio_at_most(bound: float, *, sized: bool = False) -> Target:
    """figure / yardstick must be at most ``bound``."""
    return Target("<=", bound, on_ratio=True, sized=sized)


def ratio_at_least(bound: float, *, sized: bool = False) -> Target:
    """figure / yardstick must be at least ``bound``."""
    return Target(">=", bound, on_ratio=True, sized=sized)


def fmt(value: float, unit: str = "") -> str:
    """A number for humans: thousands separators from 100 up, three significant digits below."""
    if math.isnan(value):
        text = "-"
    elif abs(value) >= 100:
        text = f"{value:,.0f}"
    elif abs(value) >= 1 or value == 0:
        text = f"{value:.2f}".rstrip("0").rstrip(".")
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".rstrip()


@dataclass(frozen=True)
class _Row:
    name: str
    value: float
    unit: str
    yardstick: Yardstick | None
    target: Target | None


class Report:
    """Collects figures and prints them as one markdown table."""

    def __init__(self, title: str, *, full_size: bool = True) -> None:
        self.title = title
        self.full_size = full_size
        self.rows: list[_Row] = []

    def yardstick(self, name: str, value: float, unit: str) -> Yardstick:
        """Name a reference measurement; it is printed beside every figure that uses it."""
        return Yardstick(name, value, unit)

    def figure(
        self,
        name: str,
        value: float,
        unit: str,
        *,
        yardstick: Yardstick | None = None,
        target: Target | None = None,
    ) -> None:
        """Record one figure, printed at once (so long runs show progress) and in the table."""
        row = _Row(name, value, unit, yardstick, target)
        self.rows.append(row)
        print(f"  {name}: {fmt(value, unit)}", flush=True)

    def unmet(self) -> int:
        """How many judged targets are not met."""
        return sum(1 for row in self.rows if self._met(row) is False)

    def _met(self, row: _Row) -> bool | None:
        if row.target is None or (row.target.sized and not self.full_size):
            return None
        ratio = _ratio(row)
        return row.target.met(row.value, ratio)

    def print(self) -> int:
        """Print the table; return the number of unmet targets."""
        print(f"\n{self.title}{'' if self.full_size else ' (reduced sizes)'}\n")
        print("| figure | value | yardstick (same run) | ratio | target | met |")
        print("|---|---|---|---|---|---|")
        for row in self.rows:
            yardstick = (
                f"{row.yardstick.name}: {fmt(row.yardstick.value, row.yardstick.unit)}"
                if row.yardstick
                else "-"
            )
            ratio = _ratio(row)
            ratio_text = "-" if ratio is None else f"{ratio:.3g}x"
            target = "-" if row.target is None else str(row.target)
            met = self._met(row)
            if row.target is None:
                met_text = "-"
            elif met is None:
                met_text = "not judged"
            else:
                met_text = "yes" if met else "**no**"
            cells = [row.name, fmt(row.value, row.unit), yardstick, ratio_text, target, met_text]
            print("| " + " | ".join(cells) + " |")
        judged = [r for r in self.rows if self._met(r) is not None]
        unmet = self.unmet()
        print(f"\ntargets met: {len(judged) - unmet} of {len(judged)} judged")
        return unmet


def _ratio(row: _Row) -> float | None:
    if row.yardstick is None or row.yardstick.value == 0:
        return None
    return row.value / row.yardstick.value
