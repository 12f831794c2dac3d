"""Concurrent writers: compare-and-swap commits lose no update, RVs stay strictly ordered and
watchers see every change exactly once, in order."""

from __future__ import annotations

import json
import threading

from mcm.emulator import Emulator
from tests.emulator.raw import Raw, WatchReader

NS = "/api/v1/namespaces/default"


def test_concurrent_patches_lose_nothing_and_watch_sees_every_change_in_order(emulator: Emulator) -> None:
    raw = Raw(emulator.url)
    _, _, obj = raw.post(f"{NS}/configmaps", {"metadata": {"name": "hot"}, "data": {}})
    start_rv = obj["metadata"]["resourceVersion"]
    reader = WatchReader(emulator.url, f"{NS}/configmaps?watch=true&resourceVersion={start_rv}")
    writers, per_writer = 4, 40
    codes: list[int] = []
    lock = threading.Lock()

    def writer(k: int) -> None:
        client = Raw(emulator.url)
        for i in range(per_writer):
            code, _, _ = client.patch(f"{NS}/configmaps/hot", {"data": {f"w{k}-{i}": "x"}})
            with lock:
                codes.append(code)
        client.close()

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(codes) == {200}
    final = emulator.get("configmaps", "default", "hot")
    assert final is not None and len(final["data"]) == writers * per_writer
    rvs = []
    for _ in range(writers * per_writer):
        event = reader.next_event()
        assert event["type"] == "MODIFIED"
        rvs.append(int(event["object"]["metadata"]["resourceVersion"]))
    reader.close()
    assert rvs == sorted(set(rvs))
    assert rvs[-1] == int(final["metadata"]["resourceVersion"])


def test_concurrent_creates_with_same_name_one_wins(emulator: Emulator) -> None:
    barrier = threading.Barrier(6)
    codes: list[int] = []

    def create() -> None:
        client = Raw(emulator.url)
        barrier.wait()
        codes.append(client.post(f"{NS}/secrets", {"metadata": {"name": "race"}})[0])
        client.close()

    threads = [threading.Thread(target=create) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(codes) == [201, 409, 409, 409, 409, 409]
    assert len([c for c in emulator.history("secrets") if c.key == ("default", "race")]) == 1
    json.dumps(emulator.get("secrets", "default", "race"))
