"""The Dockerfile installs only what requirements/ locks: every pip install takes a lock file with
--require-hashes, or mcm itself with --no-deps; the lock files it copies are in the build context;
its base image is pinned by digest or the Dockerfile says why not. tests/app/test_wheel.py runs
the same install steps outside Docker."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "Dockerfile").read_text(encoding="utf-8")


def _commands() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    lines = [line for line in DOCKERFILE.splitlines() if not line.lstrip().startswith("#")]
    return [c.strip() for c in re.sub(r"\\\n", " ", "\n".join(lines)).splitlines() if c.strip()]


def test_every_pip_install_takes_a_lock_with_hashes_or_mcm_without_dependencies() -> None:
    installs = [
        part.strip()
        for command in _commands()
        if command.startswith("RUN ")
        for part in command[4:].split("&&")
        if re.search(r"\bpip (install|wheel)\b", part)
    ]
    assert len(installs) == 4, installs
    for install in installs:
        locked = "--require-hashes" in install and re.search(r"-r \S*requirements\S*\.txt", install)
        assert locked or "--no-deps" in install, install
        assert "--no-deps" not in install or "--no-build-isolation" in install or ".whl" in install, install


def test_the_lock_files_it_copies_exist_and_are_in_the_build_context() -> None:
    copied = [m for c in _commands() for m in re.findall(r"^COPY (requirements/\S+)", c)]
    assert sorted(copied) == ["requirements/build.txt", "requirements/runtime.txt"]
    context = (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
    for path in copied:
        assert (REPO / path).is_file(), path
        assert f"!{path}" in context, path
    for name in ("LICENSE", "NOTICE"):  # pyproject.toml's license-files: the wheel build needs them
        assert f"!{name}" in context and (REPO / name).is_file()


def test_the_base_image_is_pinned_by_digest_or_the_dockerfile_says_why_not() -> None:
    bases = re.findall(r"^FROM (\S+)", DOCKERFILE, re.M)
    assert len(bases) == 2 and len(set(bases)) == 1, bases
    if "@sha256:" not in bases[0]:
        assert "not yet by digest" in DOCKERFILE and "docker buildx imagetools inspect" in DOCKERFILE
    else:
        assert re.fullmatch(r"python:3\.11-slim@sha256:[0-9a-f]{64}", bases[0]), bases[0]
