"""client-go ``util/workqueue/parallelizer_test.go`` plus the stop and crash guarantees."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from mcm.runtime import errors
from mcm.runtime.workqueue import parallelize_until

CASES = [
    (1000, 10, 1),
    (1000, 10, 10),
    (1000, 10, 100),
    (999, 10, 13),
]


@pytest.mark.parametrize(("pieces", "workers", "chunk_size"), CASES)
def test_every_piece_runs_exactly_once(pieces: int, workers: int, chunk_size: int) -> None:
    seen: Counter[int] = Counter()
    lock = threading.Lock()

    def piece(p: int) -> None:
        with lock:
            seen[p] += 1

    parallelize_until(None, workers, pieces, piece, chunk_size=chunk_size)

    wrong = [p for p in range(pieces) if seen[p] != 1]
    assert wrong == []
    assert set(seen) == set(range(pieces))


def test_zero_pieces_and_zero_workers_do_nothing() -> None:
    calls: list[int] = []
    parallelize_until(None, 4, 0, calls.append)
    parallelize_until(None, 0, 5, calls.append)
    assert calls == []


def test_concurrency_is_bounded_by_workers() -> None:
    running = 0
    peak = 0
    lock = threading.Lock()
    barrier = threading.Barrier(3, timeout=10)

    def piece(p: int) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        if p < 3:
            barrier.wait()  # the first three pieces must be able to run together
        with lock:
            running -= 1

    parallelize_until(None, 3, 30, piece)
    assert peak == 3


def test_stop_prevents_new_pieces() -> None:
    stop = threading.Event()
    done: list[int] = []
    lock = threading.Lock()

    def piece(p: int) -> None:
        with lock:
            done.append(p)
        if p == 4:
            stop.set()

    parallelize_until(stop, 1, 100, piece)
    assert done == [0, 1, 2, 3, 4]


def test_already_stopped_runs_nothing() -> None:
    stop = threading.Event()
    stop.set()
    calls: list[int] = []
    parallelize_until(stop, 4, 10, calls.append)
    assert calls == []


def test_raising_piece_ends_only_its_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "REALLY_CRASH", False)
    done: set[int] = set()
    lock = threading.Lock()

    def piece(p: int) -> None:
        if p == 0:
            raise RuntimeError("boom")
        with lock:
            done.add(p)

    parallelize_until(None, 2, 50, piece)
    # Worker that hit piece 0 stops; the other one finishes everything left.
    assert done == set(range(1, 50))
