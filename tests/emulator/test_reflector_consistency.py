"""A minimal list/watch reflector over raw HTTP stays consistent with the store through random
writes, dropped watches and compactions (relist on 410, resume from the last RV otherwise)."""

from __future__ import annotations

import http.client
import json
import random
import threading
from typing import Any

from mcm.emulator import Emulator
from tests.emulator.raw import Raw

NS = "/api/v1/namespaces/default"


class Reflector:
    def __init__(self, port: int) -> None:
        self.port = port
        self.cache: dict[str, dict[str, Any]] = {}
        self.rv = ""
        self.relists = 0
        self.stop = threading.Event()

    def relist(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request("GET", f"{NS}/configmaps?labelSelector=app%3Dx")
        body = json.loads(conn.getresponse().read())
        conn.close()
        # Built-in list items carry no kind/apiVersion; watch event objects do.
        self.cache = {
            i["metadata"]["name"]: {"kind": "ConfigMap", "apiVersion": "v1", **i} for i in body["items"]
        }
        self.rv = body["metadata"]["resourceVersion"]
        self.relists += 1

    def watch_once(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        query = f"watch=true&labelSelector=app%3Dx&resourceVersion={self.rv}&allowWatchBookmarks=true"
        conn.request("GET", f"{NS}/configmaps?{query}")
        resp = conn.getresponse()
        try:
            while not self.stop.is_set():
                line = resp.readline()
                if not line:
                    return
                event = json.loads(line)
                obj = event["object"]
                if event["type"] == "ERROR":
                    self.relist()
                    return
                if event["type"] != "BOOKMARK":
                    name = obj["metadata"]["name"]
                    if event["type"] == "DELETED":
                        self.cache.pop(name, None)
                    else:
                        self.cache[name] = obj
                self.rv = obj["metadata"]["resourceVersion"]
        except (OSError, http.client.HTTPException):
            return
        finally:
            conn.close()

    def run(self) -> None:
        self.relist()
        while not self.stop.is_set():
            self.watch_once()


def test_reflector_matches_store_after_random_writes_drops_and_compactions(emulator: Emulator) -> None:
    rng = random.Random(11)
    reflector = Reflector(emulator.port)
    thread = threading.Thread(target=reflector.run, daemon=True)
    thread.start()
    raw = Raw(emulator.url)
    names = [f"c{i}" for i in range(12)]
    for step in range(300):
        name = rng.choice(names)
        action = rng.random()
        if action < 0.4:
            raw.post(f"{NS}/configmaps", {"metadata": {"name": name, "labels": {"app": rng.choice("xy")}}})
        elif action < 0.8:
            raw.patch(
                f"{NS}/configmaps/{name}",
                {"metadata": {"labels": {"app": rng.choice("xy")}}, "data": {"s": str(step)}},
            )
        else:
            raw.delete(f"{NS}/configmaps/{name}")
        if step % 60 == 30:
            emulator.watches.drop("close")
        if step % 90 == 45:
            emulator.watches.drop("reset")
        if step % 100 == 70:
            emulator.compact()
            emulator.watches.drop("expire")
    final_rv = emulator.store.rv
    expected = {
        o["metadata"]["name"]: o
        for o in emulator.list("configmaps", "default")
        if o["metadata"]["labels"].get("app") == "x"
    }
    emulator.watches.bookmark_now()
    assert emulator.wait_for(lambda: int(reflector.rv or 0) >= final_rv or reflector.cache == expected, 10)
    assert emulator.wait_for(lambda: reflector.cache == expected, 10)
    reflector.stop.set()
    emulator.watches.drop("close")
    thread.join(5)
    assert reflector.relists >= 2
