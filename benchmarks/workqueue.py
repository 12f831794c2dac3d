"""Work-queue benchmark: ``.venv/bin/python benchmarks/workqueue.py [--smoke] [sizes]``.

Prints, in one run (best of ``--repeat`` repetitions each), every figure beside a yardstick
measured in the same run:

- Add+Get+Done per item on one thread, beside stdlib ``queue.Queue`` put+get (target: ratio
  ≤ 0.6);
- AddRateLimited+Forget per key over ``--keys`` keys, beside the same stdlib put+get (target
  ≤ 3.5 µs);
- time until ``--keys`` ``add_after(key, 0.001)`` items are all delivered, beside a plain
  ``heapq`` push and pop of as many timers (target ≤ 0.6 s at 100,000 keys);
- queue calls per second (add + get + done) with 1, 2 and 8 worker threads, beside stdlib
  ``queue.Queue`` put + get + task_done with as many threads.
"""

from __future__ import annotations

import argparse
import heapq
import queue as stdlib_queue
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _report import Report, at_most, ratio_at_most

from mcm.runtime.workqueue import (
    DelayingQueue,
    Queue,
    RateLimitingQueue,
    default_controller_rate_limiter,
)

CYCLES = 200_000
KEYS = 100_000
REPEAT = 5
ITEMS = 100_000


def best_of(measure: Callable[[], float], repeat: int | None = None) -> tuple[float, float]:
    """(best, median) of ``repeat`` (default ``REPEAT``) runs."""
    runs = [measure() for _ in range(repeat or REPEAT)]
    return min(runs), statistics.median(runs)


def stdlib_put_get() -> float:
    q: stdlib_queue.Queue[int] = stdlib_queue.Queue()
    put, get = q.put, q.get
    start = time.perf_counter()
    for i in range(CYCLES):
        put(i)
        get()
    return (time.perf_counter() - start) / CYCLES


def add_get_done() -> float:
    q: Queue[int] = Queue()
    add, get, done = q.add, q.get, q.done
    start = time.perf_counter()
    for i in range(CYCLES):
        add(i)
        item, _ = get()
        done(item)  # type: ignore[arg-type]
    return (time.perf_counter() - start) / CYCLES


def add_rate_limited_forget() -> float:
    q: RateLimitingQueue[str] = RateLimitingQueue(default_controller_rate_limiter())
    keys = [f"namespace/machine-{i}" for i in range(KEYS)]
    add_rate_limited, forget = q.add_rate_limited, q.forget
    start = time.perf_counter()
    for key in keys:
        add_rate_limited(key)
        forget(key)
    elapsed = time.perf_counter() - start
    q.shut_down()
    return elapsed / KEYS


def add_after_delivery() -> float:
    q: DelayingQueue[str] = DelayingQueue()
    keys = [f"namespace/machine-{i}" for i in range(KEYS)]
    add_after = q.add_after
    start = time.perf_counter()
    for key in keys:
        add_after(key, 0.001)
    while len(q) < KEYS:
        time.sleep(0.0005)
    elapsed = time.perf_counter() - start
    q.shut_down()
    return elapsed


def heapq_timers() -> float:
    """Push ``KEYS`` (deadline, key) timers on a heap and pop them all: a delaying queue's core."""
    keys = [f"namespace/machine-{i}" for i in range(KEYS)]
    heap: list[tuple[float, str]] = []
    push, pop = heapq.heappush, heapq.heappop
    start = time.perf_counter()
    now = time.monotonic()
    for key in keys:
        push(heap, (now + 0.001, key))
    while heap:
        pop(heap)
    return time.perf_counter() - start


def stdlib_calls_per_second(workers: int) -> float:
    """put + get + task_done per item through ``queue.Queue`` with ``workers`` consumer threads."""
    items = ITEMS
    q: stdlib_queue.Queue[int | None] = stdlib_queue.Queue()

    def work() -> None:
        while True:
            item = q.get()
            q.task_done()
            if item is None:
                return

    threads = [threading.Thread(target=work, daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    start = time.perf_counter()
    for i in range(items):
        q.put(i)
    for _ in threads:
        q.put(None)
    for thread in threads:
        thread.join()
    return 3 * items / (time.perf_counter() - start)


def calls_per_second(workers: int) -> float:
    items = ITEMS
    q: Queue[int] = Queue()
    finished = threading.Barrier(workers + 1)

    def work() -> None:
        while True:
            item, shutdown = q.get()
            if shutdown:
                break
            q.done(item)  # type: ignore[arg-type]
        finished.wait()

    threads = [threading.Thread(target=work, daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    start = time.perf_counter()
    for i in range(items):
        q.add(i)
    q.shut_down()  # workers still drain what is queued, then see the shutdown
    finished.wait()
    elapsed = time.perf_counter() - start
    return 3 * items / elapsed


def main() -> int:
    global CYCLES, KEYS, REPEAT, ITEMS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small sizes for CI (targets not judged)")
    parser.add_argument("--cycles", type=int, help=f"add+get+done cycles per run (default {CYCLES:,})")
    parser.add_argument(
        "--keys", type=int, help=f"keys for the rate-limited and delayed runs (default {KEYS:,})"
    )
    parser.add_argument("--items", type=int, help=f"items per threaded run (default {ITEMS:,})")
    parser.add_argument("--repeat", type=int, help=f"repetitions; the best counts (default {REPEAT})")
    args = parser.parse_args()
    scale = 0.05 if args.smoke else 1.0
    CYCLES = args.cycles or int(CYCLES * scale)
    KEYS = args.keys or int(KEYS * scale)
    ITEMS = args.items or int(ITEMS * scale)
    REPEAT = args.repeat or (2 if args.smoke else REPEAT)
    full = (CYCLES, KEYS, ITEMS) == (200_000, 100_000, 100_000)
    report = Report(f"workqueue benchmark, python {sys.version.split()[0]}", full_size=full)

    stdlib_best, _ = best_of(stdlib_put_get)
    stdlib = report.yardstick("stdlib queue.Queue put+get", stdlib_best * 1e6, "µs/op")
    cycle_best, _ = best_of(add_get_done)
    report.figure(
        "Queue add+get+done", cycle_best * 1e6, "µs/op", yardstick=stdlib, target=ratio_at_most(0.6)
    )
    limited_best, _ = best_of(add_rate_limited_forget)
    report.figure(
        f"add_rate_limited+forget over {KEYS:,} keys",
        limited_best * 1e6,
        "µs/op",
        yardstick=stdlib,
        target=at_most(3.5, "µs/op"),
    )
    heap_best, _ = best_of(heapq_timers)
    heap = report.yardstick(f"heapq push+pop of {KEYS:,} timers", heap_best, "s")
    after_best, _ = best_of(add_after_delivery)
    report.figure(
        f"{KEYS:,} add_after(0.001) delivered",
        after_best,
        "s",
        yardstick=heap,
        target=at_most(0.6, "s", sized=True),
    )
    for workers in (1, 2, 8):
        baseline = max(stdlib_calls_per_second(workers) for _ in range(min(REPEAT, 3)))
        ours = max(calls_per_second(workers) for _ in range(min(REPEAT, 3)))
        report.figure(
            f"Queue calls/s with {workers} worker thread(s)",
            ours,
            "/s",
            yardstick=report.yardstick(f"stdlib queue.Queue, {workers} thread(s)", baseline, "/s"),
        )
    report.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
