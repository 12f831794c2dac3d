"""Scrubber benchmark: ``.venv/bin/python benchmarks/scrub.py [--smoke] [--repeat N] [sizes in KiB]``.

:func:`mcm.driver.scrub.scrub_message` cleans every driver error of the request's secret data;
the first call with a Secret builds its matcher (cached), later calls only scrub. For Secrets of
1 KiB to 1 MiB (a cloud-init ``userData`` of that size: script lines, base64-encoded files, a
bootstrap token, beside a cloud key pair) it prints, best of ``--repeat`` runs each:

- the build, in ms (a Secret not seen before, scrubbing one short message), beside two C
  encoding passes over the same data (``base64.b64encode`` and ``bytes.hex``; target: at most
  100x), and in µs per KiB of secret data;
- the scrub, with the matcher built, of a 4 KiB message without secret data (a cloud API's
  errors), of a 4 KiB message with six secret forms in it (a script line, the token's secret,
  hex, URL, JSON and base64 at a byte offset), of 4 KiB of the words the script's lines start with
  (the costly case: many places where a line may start, each compared), and of a 3 MB message cut
  at the default 4096 characters;
- linearity: the build's µs per KiB and the scrub of the message with secret forms at the largest
  size beside those at the smallest size of 16 KiB or more (targets: at most 2x);
- with ``--memory`` (full runs only): the memory a matcher of the largest size holds (target:
  at most 24 MiB at 1 MiB; the cache keeps matchers of at most 4 MiB of secret data).
"""

from __future__ import annotations

import argparse
import base64
import functools
import gc
import json
import random
import sys
import time
import tracemalloc
import urllib.parse
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _report import Report, at_most, ratio_at_most

from mcm.driver.scrub import REDACTED, scrub_message

SIZES_KIB = (1, 4, 16, 64, 256, 1024)
SMOKE_SIZES_KIB = (1, 16, 1024)
REPEAT = 5
SCRUBS = 100
"""Scrub calls timed per run (their mean is the run's figure); 10 with ``--smoke``."""
TOKEN = "abcdef.0123456789abcdef"
DIRTY = "4 KiB with 6 secret forms"
WORDS = ("install", "config", "kubelet", "node", "systemctl", "restart", "enable", "--now", "/etc")


def user_data(size: int, rng: random.Random) -> bytes:
    """A cloud-init script of about ``size`` bytes: files as base64 lines, commands, a token."""
    lines = ["#cloud-config", "write_files:"]
    length = 0
    while length < size:
        block = [f"- path: /etc/mcm/file-{len(lines)}", "  encoding: b64", "  content: |"]
        block += [f"    {base64.b64encode(rng.randbytes(57)).decode()}" for _ in range(rng.randrange(1, 6))]
        block += [f"  - {' '.join(rng.choices(WORDS, k=rng.randrange(2, 8)))} {rng.getrandbits(64):x}"]
        lines += block
        length += sum(len(line) + 1 for line in block)
    lines.append(f"  - kubeadm join --token {TOKEN} --discovery-token-unsafe-skip-ca-verification")
    return "\n".join(lines).encode()[-size:]


def secret_of(size: int) -> dict[str, bytes]:
    rng = random.Random(size)
    return {
        "userData": user_data(size, rng),
        "accessKeyID": b"AKIA" + rng.randbytes(8).hex().upper().encode(),
        "secretAccessKey": base64.b64encode(rng.randbytes(30)),
    }


def messages(secret: dict[str, bytes]) -> dict[str, str]:
    """The messages scrubbed: clean, with secret forms, of the script's own words, and huge."""
    rng = random.Random(0)
    filler = cloud_error(rng, 4096)
    data = secret["userData"]
    line = data.decode().splitlines()[len(data.decode().splitlines()) // 2]
    forms = [
        line,
        TOKEN.split(".")[1],
        secret["accessKeyID"].hex(),
        urllib.parse.quote_plus(secret["secretAccessKey"]),
        json.dumps(data[:200].decode(errors="ignore"))[1:-1],
        base64.b64encode(b"{" + data[-100:]).decode(),
    ]
    dirty = filler[: 4096 - sum(map(len, forms)) - 60]
    for form in forms:
        at = rng.randrange(len(dirty))
        dirty = f"{dirty[:at]} {form} {dirty[at:]}"
    return {
        "clean 4 KiB": filler,
        DIRTY: dirty,
        "4 KiB of the script's words": " ".join(rng.choices(WORDS, k=700))[:4096],
        "3 MB, cut": "x" * 3_000_000,
    }


def cloud_error(rng: random.Random, size: int) -> str:
    """What a cloud API's error looks like: a code, a sentence, request ids, a JSON body."""
    parts: list[str] = []
    while sum(map(len, parts)) < size:
        body = {
            "code": "InvalidParameterValue",
            "message": "Value (m5.xlarge) for parameter instanceType is invalid.",
        }
        parts.append(f"RequestError: send request failed (RequestId: {uuid.UUID(int=rng.getrandbits(128))}) ")
        parts.append(f"status code: 400, body: {json.dumps(body)} ")
    return "".join(parts)[:size]


def best(measure: Callable[[], float], repeat: int) -> float:
    return min(measure() for _ in range(repeat))


def build_seconds(secret: dict[str, bytes], run: int) -> float:
    """One build: a Secret not seen before (a new nonce value), scrubbing one short message."""
    fresh = {**secret, "nonce": f"nonce-{run}-{time.perf_counter_ns()}".encode()}
    gc.collect()  # the garbage of the runs before is not this run's
    start = time.perf_counter()
    scrub_message("probe", fresh)
    return time.perf_counter() - start


def encode_seconds(secret: dict[str, bytes]) -> float:
    start = time.perf_counter()
    for value in secret.values():
        base64.b64encode(value)
        value.hex()
    return time.perf_counter() - start


def scrub_seconds(message: str, secret: dict[str, bytes], calls: int) -> float:
    """Mean seconds of one scrub of ``message`` with ``secret``'s matcher built."""
    scrub_message(message, secret)
    start = time.perf_counter()
    for _ in range(calls):
        scrub_message(message, secret)
    return (time.perf_counter() - start) / calls


def check_scrubbed(secret: dict[str, bytes], texts: dict[str, str]) -> None:
    """The benchmark measures real work: every secret form in the dirty message is replaced."""
    scrubbed = scrub_message(texts[DIRTY], secret, limit=10**6)
    if scrubbed.count(REDACTED) < 6 or TOKEN.split(".")[1] in scrubbed:
        raise SystemExit(f"the scrubber missed a secret form: {scrubbed!r}")


def measure_size(report: Report, kib: int, repeat: int, calls: int) -> tuple[float, float]:
    """Build and scrub figures for one size; returns the build's µs per KiB and the µs of a
    scrub of the message with secret forms."""
    secret = secret_of(kib * 1024)
    runs = iter(range(repeat * 2))
    build = best(lambda: build_seconds(secret, next(runs)), repeat)
    encode = report.yardstick(
        "base64 + hex of the data", best(lambda: encode_seconds(secret), repeat) * 1e3, "ms"
    )
    report.figure(
        f"build, {kib} KiB", build * 1e3, "ms", yardstick=encode, target=ratio_at_most(100, sized=True)
    )
    per_kib = build * 1e6 / kib
    report.figure(f"build per KiB, {kib} KiB", per_kib, "µs/KiB")
    texts = messages(secret)
    check_scrubbed(secret, texts)
    scrubs = {}
    for name, text in texts.items():
        scrubs[name] = best(functools.partial(scrub_seconds, text, secret, calls), repeat) * 1e6
        report.figure(f"scrub {name}, {kib} KiB", scrubs[name], "µs")
    return per_kib, scrubs[DIRTY]


def matcher_mib(kib: int) -> float:
    """The memory a matcher of a ``kib`` KiB Secret holds once built (traced allocations)."""
    secret = secret_of(kib * 1024)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    scrub_message("probe", {**secret, "nonce": b"memory"})
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return held / 2**20


def linear(report: Report, figures: dict[int, tuple[float, float]]) -> None:
    """The build per KiB, and the scrub, at the largest size beside the smallest of 16 KiB or more."""
    base = min((kib for kib in figures if kib >= 16), default=None)
    top = max(figures)
    if base is None or top <= base:
        return
    for i, (name, unit) in enumerate((("build per KiB", "µs/KiB"), (f"scrub {DIRTY}", "µs"))):
        small = report.yardstick(f"{name}, {base} KiB", figures[base][i], unit)
        report.figure(
            f"{name}, {top} KiB", figures[top][i], unit, yardstick=small, target=ratio_at_most(2, sized=True)
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="three sizes, fewer runs (targets not judged)")
    parser.add_argument("--repeat", type=int, default=0, help=f"runs per figure (default {REPEAT})")
    parser.add_argument("--memory", action="store_true", help="also trace a matcher's memory")
    parser.add_argument("sizes", nargs="*", type=int, help="secret sizes in KiB")
    args = parser.parse_args()
    sizes = tuple(args.sizes) or (SMOKE_SIZES_KIB if args.smoke else SIZES_KIB)
    repeat = args.repeat or (2 if args.smoke else REPEAT)
    calls = 10 if args.smoke else SCRUBS
    report = Report(f"scrubber benchmark, python {sys.version.split()[0]}", full_size=not args.smoke)
    if args.memory and not args.smoke:  # first, while no cached matcher can be dropped meanwhile
        top = max(sizes)
        report.figure(f"matcher memory, {top} KiB", matcher_mib(top), "MiB", target=at_most(24, sized=True))
    figures = {kib: measure_size(report, kib, repeat, calls) for kib in sorted(sizes)}
    linear(report, figures)
    return 1 if report.print() else 0


if __name__ == "__main__":
    sys.exit(main())
