"""Every file of the repository stands on its own: code, comments, docs and the chart cite upstream
machine-controller-manager (or Kubernetes) by release, file and function, or the project's own
docs, never the design notes this project was written from, which a reader does not have."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOT_SHIPPED = re.compile(
    r"shared/|decisions\.md|\bseeds? 0\d\d|\bthe seeds\b|§|app-and-controller|machine-reconcile"
    r"|safety-class-secret|machineset-deployment\.md|apiserver-emulator\.md|\bruntime\.md"
    r"|\bspec (file|section)|design doc",
    re.IGNORECASE,
)
THIS_FILE = Path(__file__).resolve().relative_to(REPO).as_posix()
SKIPPED_DIRS = {".git", ".venv", "__pycache__", "build", "dist"}


def repository_files() -> list[str]:
    """The files of the checkout (``git ls-files``; a walk of the tree without git)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60
        ).stdout.decode()
        return sorted(name for name in listed.split("\0") if name and (REPO / name).is_file())
    except (OSError, subprocess.SubprocessError):
        return sorted(
            path.relative_to(REPO).as_posix()
            for path in REPO.rglob("*")
            if path.is_file()
            and not SKIPPED_DIRS & set(path.relative_to(REPO).parts)
            and not path.name.endswith(".egg-info")
        )


def citations_of(names: list[str]) -> list[str]:
    """``path:line: text`` of every line naming a file a reader does not have."""
    found = []
    for name in names:
        if name == THIS_FILE:
            continue
        try:
            text = (REPO / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary (images)
        found += [
            f"{name}:{number}: {line.strip()}"
            for number, line in enumerate(text.splitlines(), 1)
            if NOT_SHIPPED.search(line)
        ]
    return found


def test_no_file_cites_what_a_reader_does_not_have() -> None:
    names = repository_files()
    assert len(names) > 100  # the listing worked
    assert citations_of(names) == []


def test_the_check_sees_a_citation() -> None:
    section = "\N{SECTION SIGN}"  # spelled so that this file passes the grep it tests
    assert NOT_SHIPPED.search("see decisions" + ".md")
    assert NOT_SHIPPED.search(f"(spec {section}5.13 bug 6)")
    assert NOT_SHIPPED.search("the seeds" + " 000/002 say")
    assert not NOT_SHIPPED.search("upstream v0.47.0 pkg/util/provider/drain/drain.go, evictPodsWithoutPv")
