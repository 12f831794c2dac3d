"""requirements/ (hack/lock.sh) locks what pyproject.toml asks for: every dependency of each set
pinned exactly, with hashes, at a version its range allows, and one version of a package across
the four files. A dependency added to pyproject.toml without running hack/lock.sh fails here."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)(?: ; (.+?))? \\$")

# lock file -> (the extras it holds, whether it holds the runtime deps and the build tools)
SETS = {
    "bench.txt": ({"dev", "bench"}, True, True),
    "dev.txt": ({"dev"}, True, True),
    "runtime.txt": (set(), True, False),
    "build.txt": (set(), False, True),
}


def pins(name: str) -> dict[str, list[tuple[Version, str | None]]]:
    """Package -> its pinned versions, each with its environment marker (a universal lock may pin
    two versions of one package for different Pythons)."""
    found: dict[str, list[tuple[Version, str | None]]] = {}
    lines = (REPO / "requirements" / name).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        match = PIN.match(line)
        if match:
            assert lines[number + 1].lstrip().startswith("--hash=sha256:"), f"{name}: {line} has no hash"
            pinned = (Version(match[2]), match[3])
            found.setdefault(canonicalize_name(match[1]), []).append(pinned)
    return found


def expand(extras: set[str]) -> list[Requirement]:
    """The runtime deps' and ``extras``' requirements, following ``mcm[...]`` self-references."""
    optional = PYPROJECT["project"]["optional-dependencies"]
    result: list[Requirement] = []
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in optional[extra]:
            req = Requirement(text)
            if req.name == "mcm":
                todo.extend(req.extras)
            else:
                result.append(req)
    return result


def wanted(name: str) -> list[Requirement]:
    extras, runtime, build = SETS[name]
    reqs = expand(extras)
    if runtime:
        reqs += [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    if build:
        reqs += [Requirement(r) for r in ["pip", *PYPROJECT["build-system"]["requires"]]]
    return reqs


@pytest.mark.parametrize("name", sorted(SETS))
def test_every_dependency_is_pinned_within_its_range(name: str) -> None:
    locked = pins(name)
    problems = []
    for req in wanted(name):
        versions = locked.get(canonicalize_name(req.name))
        if not versions:
            problems.append(f"{req}: not in requirements/{name}")
            continue
        for version, marker in versions:
            applies = marker is None or Marker(marker).evaluate({"python_full_version": "3.11.0"})
            if version not in req.specifier and applies:
                problems.append(f"{req}: locked at {version}")
    assert problems == [], "pyproject.toml changed without hack/lock.sh? " + "; ".join(problems)


def test_a_package_has_the_same_versions_in_every_lock() -> None:
    superset = pins("bench.txt")
    for name in SETS:
        for package, versions in pins(name).items():
            assert versions == superset.get(package), f"{package} in {name} differs from bench.txt"


def test_the_locks_are_universal_with_hashes_and_name_their_command() -> None:
    for name in SETS:
        text = (REPO / "requirements" / name).read_text(encoding="utf-8")
        assert "#    hack/lock.sh\n" in text.splitlines(keepends=True)[1], name
        assert "--index-url" not in text, name
