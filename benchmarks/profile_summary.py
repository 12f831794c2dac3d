"""Summarise py-spy collapsed stacks: ``benchmarks/profile_summary.py PROFILE [--top 25]``.

Prints the share of samples per function, inclusive (anywhere on the stack) and exclusive (on
top), and per module family, so a profile taken by ``benchmarks/scale.py --profile`` reads as a
table in docs/performance.md.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]*?)(?::\d+)?\)$")


def frames(stack: str) -> list[tuple[str, str]]:
    """(function, file) of each frame, outermost first."""
    result = []
    for frame in stack.split(";"):
        match = _FRAME.match(frame.strip())
        if match:
            result.append((match["func"], match["file"]))
    return result


def family(path: str) -> str:
    """``mcm/runtime/cache`` → ``mcm.runtime``; site-packages → the distribution's top module."""
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if "/mcm/" in path:
        parts = path.split("/mcm/", 1)[1].split("/")
        return "mcm." + parts[0].removesuffix(".py")
    if "/lib/python3" in path:
        return "stdlib " + path.rsplit("/", 1)[-1].removesuffix(".py")
    return path.rsplit("/", 1)[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    inclusive: Counter[str] = Counter()
    exclusive: Counter[str] = Counter()
    families: Counter[str] = Counter()
    total = 0
    for line in args.profile.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        stack_frames = frames(stack)
        if not stack_frames:
            continue
        total += count
        for name in {f"{func} ({path.rsplit('/', 1)[-1]})" for func, path in stack_frames}:
            inclusive[name] += count
        top_func, top_path = stack_frames[-1]
        exclusive[f"{top_func} ({top_path.rsplit('/', 1)[-1]})"] += count
        families[family(top_path)] += count
    if not total:
        print("no samples")
        return 1
    print(f"{total} samples\n\n| where the CPU goes (exclusive, by package) | share |\n|---|---|")
    for name, count in families.most_common(args.top):
        print(f"| {name} | {100 * count / total:.1f} % |")
    print("\n| function (exclusive: on top of the stack) | share |\n|---|---|")
    for name, count in exclusive.most_common(args.top):
        print(f"| {name} | {100 * count / total:.1f} % |")
    print("\n| function (inclusive: anywhere on the stack) | share |\n|---|---|")
    for name, count in inclusive.most_common(args.top):
        print(f"| {name} | {100 * count / total:.1f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
