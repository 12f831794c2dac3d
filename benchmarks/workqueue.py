"""Work-queue benchmark: ``.venv/bin/python benchmarks/workqueue.py``.

Prints, in one run (best of several repetitions each):

- Add+Get+Done per item on one thread, stdlib ``queue.Queue`` put+get as the yardstick, and
  their ratio (target ≤ 0.6);
- AddRateLimited+Forget per key over 100,000 keys (target ≤ 3.5 µs);
- time until 100,000 ``add_after(key, 0.001)`` items are all delivered (target ≤ 0.6 s);
- queue calls per second (add + get + done) with 1, 2 and 8 worker threads.
"""

from __future__ import annotations

import queue as stdlib_queue
import statistics
import threading
import time
from collections.abc import Callable

from mcm.runtime.workqueue import DelayingQueue, Queue, RateLimitingQueue, default_controller_rate_limiter

CYCLES = 200_000
KEYS = 100_000
REPEAT = 5


def best_of(measure: Callable[[], float], repeat: int = REPEAT) -> tuple[float, float]:
    """(best, median) of ``repeat`` runs."""
    runs = [measure() for _ in range(repeat)]
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


def calls_per_second(workers: int, items: int = 100_000) -> float:
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


def main() -> None:
    stdlib_best, stdlib_median = best_of(stdlib_put_get)
    cycle_best, cycle_median = best_of(add_get_done)
    print(f"queue.Queue put+get            {stdlib_best * 1e6:7.3f} µs/op (median {stdlib_median * 1e6:.3f})")
    print(f"Queue add+get+done             {cycle_best * 1e6:7.3f} µs/op (median {cycle_median * 1e6:.3f})")
    ratio_best, ratio_median = cycle_best / stdlib_best, cycle_median / stdlib_median
    print(f"  ratio (target <= 0.6)        {ratio_best:7.3f}   (medians {ratio_median:.3f})")
    limited_best, limited_median = best_of(add_rate_limited_forget)
    print(
        f"add_rate_limited+forget        {limited_best * 1e6:7.3f} µs/op (median {limited_median * 1e6:.3f};"
        f" {KEYS:,} keys, target <= 3.5)"
    )
    after_best, after_median = best_of(add_after_delivery)
    print(
        f"{KEYS:,} add_after(0.001) delivered {after_best:6.3f} s"
        f"   (median {after_median:.3f}; target <= 0.6)"
    )
    for workers in (1, 2, 8):
        best = max(calls_per_second(workers) for _ in range(3))
        print(f"calls/s with {workers} worker thread(s)  {best:12,.0f}")


if __name__ == "__main__":
    main()
