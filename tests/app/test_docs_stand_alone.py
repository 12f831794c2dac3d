"""The README, docs/ and the chart stand on their own: they cite upstream machine-controller-manager
by release and file, never the design notes this project was written from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
USER_FACING = sorted(
    [REPO / "README.md", REPO / "examples" / "sample_controller" / "README.md"]
    + list((REPO / "docs").glob("*.md"))
    + [p for p in (REPO / "charts").rglob("*") if p.is_file() and "crds" not in p.parts]
)
NOT_SHIPPED = re.compile(
    r"shared/|decisions\.md|\bseeds? 0\d\d|\bthe seeds\b|§|app-and-controller|machine-reconcile"
    r"|safety-class-secret|apiserver-emulator\.md|spec (file|section)|design doc",
    re.IGNORECASE,
)


@pytest.mark.parametrize("path", USER_FACING, ids=lambda p: str(p.relative_to(REPO)))
def test_no_reference_to_files_a_user_does_not_have(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    found = [
        f"{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        if NOT_SHIPPED.search(line)
    ]
    assert found == []
