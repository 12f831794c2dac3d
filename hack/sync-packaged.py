#!/usr/bin/env python3
"""Copy the files the mcm package ships (its canonical copies) to where else they must live.

The package's copy is the one to edit (docs/architecture.md, "Packaged files"); this script makes
each mirror below byte-equal to it: it writes every packaged file into the mirror and removes the
mirror's files of the same kind that the package no longer has.

Usage: hack/sync-packaged.py           copy package -> mirrors
       hack/sync-packaged.py --check   change nothing; list the differences, exit 1 if any
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# (directory inside the package, its mirror in the repository, the files that belong to it)
MIRRORS: list[tuple[str, str, str]] = [
    ("mcm/apis/machine/crds", "charts/machine-controller/crds", "*.yaml"),
    ("mcm/machineconfig/crds", "charts/machine-config-controller/crds", "*.yaml"),
    ("mcm/app/manifests/control", "examples/manifests/control", "*.yaml"),
    ("mcm/app/manifests/target", "examples/manifests/target", "*.yaml"),
]


def differences(source: Path, mirror: Path, pattern: str) -> list[str]:
    """What differs between ``source`` and ``mirror`` for the files matching ``pattern``."""
    wanted = {p.name: p.read_bytes() for p in sorted(source.glob(pattern))}
    present = {p.name: p.read_bytes() for p in sorted(mirror.glob(pattern))} if mirror.is_dir() else {}
    found = [f"{mirror / name}: missing" for name in wanted if name not in present]
    found += [
        f"{mirror / name}: differs from {source / name}"
        for name in wanted
        if present.get(name, wanted[name]) != wanted[name]
    ]
    found += [f"{mirror / name}: not in {source}" for name in present if name not in wanted]
    return found


def sync(source: Path, mirror: Path, pattern: str) -> None:
    """Make ``mirror``'s files matching ``pattern`` byte-equal to ``source``'s."""
    mirror.mkdir(parents=True, exist_ok=True)
    wanted = {p.name for p in source.glob(pattern)}
    for stale in mirror.glob(pattern):
        if stale.name not in wanted:
            stale.unlink()
    for name in sorted(wanted):
        (mirror / name).write_bytes((source / name).read_bytes())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="list differences, change nothing")
    args = parser.parse_args()
    problems: list[str] = []
    for source, mirror, pattern in MIRRORS:
        if not any((REPO / source).glob(pattern)):
            problems.append(f"{REPO / source}: no {pattern} files (is this an mcm checkout?)")
        elif args.check:
            problems += differences(REPO / source, REPO / mirror, pattern)
        else:
            sync(REPO / source, REPO / mirror, pattern)
            print(f"{source} -> {mirror}")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems and args.check:
        print("run hack/sync-packaged.py to copy the package's files to their mirrors", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
